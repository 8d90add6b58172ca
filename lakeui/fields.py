"""JSON columns encoded and decoded with orjson, as the standard library would encode and decode them.

A diff of 10,000 tables decodes some 50,000 JSON documents (object states, operation details, file statistics)
and a merge of them encodes as many: with `json` they cost 0.5-0.8 s of each, with orjson a fifth of that.
Where orjson would read or write a value otherwise than `json` does, the value goes through `json`:
- an integer beyond 64 bits (orjson reads it as a float, and cannot write it);
- a type orjson does not know (the field's encoder handles it, as it would for `json`); datetimes and dataclasses
  too, so that an encoder's format of them holds.
One difference is kept: orjson writes NaN and infinities as `null`, where `json` wrote tokens no PostgreSQL JSON
column accepts (the write failed).
"""

import json
import re

import orjson
from django.db import models
from psycopg.types.json import Jsonb

_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_LONG_DIGITS = re.compile(r"\d{19}")  # an integer this long may be beyond 64 bits, which orjson reads as a float


def json_dumps(value, encoder: type[json.JSONEncoder] | None = None) -> str:
    """`json.dumps(value, cls=encoder)`, faster."""
    try:
        return orjson.dumps(value, default=encoder().default if encoder else None, option=_OPTIONS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, cls=encoder)


def json_loads(text: str):
    """`json.loads(text)`, faster."""
    if _LONG_DIGITS.search(text):
        return json.loads(text)
    return orjson.loads(text)


class JSONField(models.JSONField):
    """A JSONField whose values go to and from PostgreSQL through `json_dumps` and `json_loads` (a field with a
    decoder of its own, and other databases, as Django does it)."""

    def from_db_value(self, value, expression, connection):
        if self.decoder is not None or not isinstance(value, str):
            return super().from_db_value(value, expression, connection)
        try:
            return json_loads(value)
        except json.JSONDecodeError:  # as Django: text that is not JSON is returned as it is
            return value

    def get_db_prep_value(self, value, connection, prepared=False):
        if connection.vendor != "postgresql":
            return super().get_db_prep_value(value, connection, prepared)
        if not prepared:
            value = self.get_prep_value(value)
        return Jsonb(value, dumps=self._dumps)

    def _dumps(self, value) -> str:
        return json_dumps(value, self.encoder)

    def deconstruct(self):
        # The column is Django's JSONField's: migrations record it as one, so that none alters a table for this
        # (a subclass with a column of its own keeps its own path).
        name, path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField" if type(self) is JSONField else path, args, kwargs
