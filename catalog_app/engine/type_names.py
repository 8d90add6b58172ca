"""Column type names, plain Python (no pyspark, no pyarrow, no Django): the allow-list and its canonical spelling
(`parse_type`), the decimal parameters, and the widening rules of docs/README.md#operations (int -> long, float ->
double, int -> decimal wide enough, decimal precision up). The merge plan decides by these facts without loading
Spark; `types.py` adds each type's Spark and Arrow type and its values, and re-exports these names.
"""

import base64
import datetime
import decimal
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from lakeui.errors import ApplicationError

SIMPLE_TYPES = ("boolean", "int", "long", "float", "double", "string", "binary", "date", "timestamp")
DECIMAL_TYPE = "decimal"  # the family name of decimal(p,s)
ALIASES = {"integer": "int", "bigint": "long", "bool": "boolean", "real": "float"}
DECIMAL = re.compile(r"decimal\(\s*(\d{1,2})\s*,\s*(\d{1,2})\s*\)")
MAX_DECIMAL_PRECISION = 38
# Digits an integer type needs left of the decimal point.
INTEGER_DIGITS = {"int": 10, "long": 19}


@dataclass(frozen=True)
class ColumnType:
    name: str
    precision: int = 0
    scale: int = 0

    def __str__(self) -> str:
        return f"decimal({self.precision},{self.scale})" if self.name == DECIMAL_TYPE else self.name


def parse_type(text: object) -> ColumnType:
    """A type as a user writes it (any case, aliases, spaces in `decimal( 10, 2 )`), checked against the
    allow-list; `unknown_type` otherwise."""
    if not isinstance(text, str):
        raise ApplicationError("unknown_type", f"Column type {text!r} is not a type name.")
    spelled = ALIASES.get(text.strip().lower(), text.strip().lower())
    if spelled in SIMPLE_TYPES:
        return ColumnType(spelled)
    match = DECIMAL.fullmatch(spelled)
    if match:
        precision, scale = int(match[1]), int(match[2])
        if 1 <= precision <= MAX_DECIMAL_PRECISION and scale <= precision:
            return ColumnType(DECIMAL_TYPE, precision, scale)
    allowed = ", ".join((*SIMPLE_TYPES, "decimal(p,s)"))
    raise ApplicationError("unknown_type", f"Unknown column type {text!r}; use one of {allowed}.")


def is_decimal(type_name: str) -> bool:
    return DECIMAL.fullmatch(type_name) is not None


def type_family(type_name: str) -> str:
    """The type's name without its parameters: `decimal` for every decimal(p,s), else the name itself."""
    return DECIMAL_TYPE if is_decimal(type_name) else type_name


def decimal_digits(type_name: str) -> tuple[int, int]:
    """Precision and scale of a decimal(p,s) type name."""
    match = DECIMAL.fullmatch(type_name)
    if match is None:
        raise ValueError(f"not a column type: {type_name}")
    return int(match[1]), int(match[2])


def is_widening(old: ColumnType, new: ColumnType) -> bool:
    """True when every value of `old` is exactly a value of `new` and the types differ."""
    if old == new:
        return False
    if (old.name, new.name) in {("int", "long"), ("float", "double"), ("int", "double")}:
        return True
    if old.name in INTEGER_DIGITS and new.name == DECIMAL_TYPE:
        return new.precision - new.scale >= INTEGER_DIGITS[old.name]
    if old.name == new.name == DECIMAL_TYPE:
        return new.scale == old.scale and new.precision > old.precision
    return False


NUMBERS = ("int", "long", "float", "double", DECIMAL_TYPE)
# The types a column of a type on the left may be given when every value it holds is checked to fit (a narrowing
# or a change of kind: `is_castable`), beside the widenings, which always fit. Spark and Arrow cast these the same
# way for the values that survive the round trip (a float or a timestamp as text they spell differently: left out).
CASTS = {
    **{number: (*NUMBERS, "string") for number in ("int", "long", DECIMAL_TYPE)},
    "float": NUMBERS,
    "double": NUMBERS,
    "string": (*NUMBERS, "boolean", "date"),
    "boolean": ("string",),
    "date": ("string",),
}


def is_castable(old: ColumnType, new: ColumnType) -> bool:
    """Whether a column of type `old` may become `new` once each of its values is checked to fit: cast to `new` and
    back, it is the value it was (`catalog_app.engine.reads.first_misfit`). True for every widening."""
    return is_widening(old, new) or (old != new and new.name in CASTS.get(old.name, ()))


def utc_naive(value: Any) -> Any:
    """Timestamps come tz-aware (UTC) from footers and Arrow; the catalog keeps them naive, in UTC, as Spark gives
    them."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.UTC).replace(tzinfo=None)
    return value


def stat_json(value: Any) -> Any:
    """A statistic (min or max) or partition value as the catalog keeps it in JSON: dates and naive UTC timestamps
    in ISO 8601, decimals as strings, NaN and infinities named. The inverse of `stat_value`."""
    if isinstance(value, datetime.date | datetime.datetime):
        return utc_naive(value).isoformat()  # an instant from Arrow or a footer: in UTC, without the offset
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):  # JSON has no NaN or infinities: named as Spark does
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def json_value(value: Any) -> Any:
    """A value as JSON: dates and times in ISO 8601, decimals as strings, bytes as base64 (the rest as `stat_json`
    gives it)."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    return stat_json(value)


def key_id(key: tuple) -> str:
    """A primary key's values as one id, a compact JSON list: how merge reports, resolutions, cell picks and blame
    name a key."""
    return json.dumps([json_value(v) for v in key], separators=(",", ":"))


def stat_value(value: Any, type_name: str) -> Any:
    """A catalog statistic or partition value (JSON) as the Python value of its column type: dates, naive UTC
    timestamps and decimals parsed, the rest as it is. The inverse of `stat_json`."""
    if value is None:
        return None
    if type_name == "date":
        return datetime.date.fromisoformat(value)
    if type_name == "timestamp":
        return datetime.datetime.fromisoformat(value)
    if is_decimal(type_name):
        return decimal.Decimal(str(value))
    return value
