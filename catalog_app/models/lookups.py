"""`field__any=values`: membership in a long list of values, as one array parameter (`= ANY(%s::type[])`): `__in`
with thousands of values sends thousands of placeholders, which psycopg splits and PostgreSQL parses anew each time
(a tenth of a 10,000-table diff).

Ids and numbers go as the array's text (`{"v1","v2"}`), one string the server parses: as a list, psycopg's
client-side binding quotes the array element by element in Python, which cost a merge of 10,000 tables, whose reads
name 10,000 ids each, about a tenth of its time again."""

import re
import uuid

from django.db.models import Field, ForeignObject, Lookup
from django.db.models.lookups import In

AS_TEXT = (str, int, uuid.UUID)  # values whose text is their array element's (no float: its text may round)
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
UUID_TEXT = re.compile(_UUID, re.IGNORECASE)
UUID_LIST = re.compile(rf"{_UUID}(?:,{_UUID})*", re.IGNORECASE)  # ids as text, joined by commas


class AnyOf(Lookup):
    lookup_name = "any"
    prepare_rhs = False

    def as_sql(self, compiler, connection):
        values = list(self.rhs)
        if not values:
            return In(self.lhs, values).as_sql(compiler, connection)
        lhs, lhs_params = self.process_lhs(compiler, connection)
        field = self.lhs.output_field
        if field.db_type(connection) == "uuid":  # ids (a merge's reads name tens of thousands): not parsed here
            texts = ",".join(values) if all(type(value) is str for value in values) else None
            # ids as text, checked at once: as many ids as values (a value holding two, comma-joined, is no id)
            if texts is None or len(texts) != 37 * len(values) - 1 or not UUID_LIST.fullmatch(texts):
                texts = ",".join(_uuid_text(field, value, connection) for value in values)
            return f"{lhs} = ANY(%s::uuid[])", [*lhs_params, "{" + texts + "}"]
        array = [field.get_db_prep_value(value, connection, prepared=False) for value in values]
        if all(type(value) in AS_TEXT for value in array):  # bool is an int, but not of these types: left out
            array = array_text(array)
        return f"{lhs} = ANY(%s::{field.db_type(connection)}[])", [*lhs_params, array]


def array_text(values: list[str | int | uuid.UUID]) -> str:
    """PostgreSQL's text form of a one-dimensional array. Strings are quoted (so commas, braces, spaces and the word
    NULL in a value stay the value's); the text of an id or a number holds none of these."""
    return "{" + ",".join(_quoted(v) if type(v) is str else str(v) for v in values) + "}"


def _uuid_text(field: Field, value: object, connection) -> str:
    """A uuid's text as an array element: a UUID's hex, a string in the canonical form as it is (the server parses
    it), anything else as the field prepares it (which refuses what is no uuid, as `__in` does)."""
    if type(value) is uuid.UUID:
        return value.hex
    if type(value) is str and UUID_TEXT.fullmatch(value):
        return value
    prepared = field.get_db_prep_value(value, connection, prepared=False)
    return "NULL" if prepared is None else prepared.hex


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


Field.register_lookup(AnyOf)
ForeignObject.register_lookup(AnyOf)  # related fields keep lookups of their own
