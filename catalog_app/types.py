"""Column types: the allow-list, their canonical spelling, literal defaults, and the widening rules of
DESIGN.md section 3 (int -> long, float -> double, int -> decimal wide enough, decimal precision up)."""

import datetime
import decimal
import re
from dataclasses import dataclass

from lakeui.errors import ApplicationError

SIMPLE_TYPES = ("boolean", "int", "long", "float", "double", "string", "binary", "date", "timestamp")
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
        return f"decimal({self.precision},{self.scale})" if self.name == "decimal" else self.name


def parse_type(text: object) -> ColumnType:
    if not isinstance(text, str):
        raise ApplicationError("unknown_type", f"Column type {text!r} is not a type name.")
    spelled = ALIASES.get(text.strip().lower(), text.strip().lower())
    if spelled in SIMPLE_TYPES:
        return ColumnType(spelled)
    match = DECIMAL.fullmatch(spelled)
    if match:
        precision, scale = int(match[1]), int(match[2])
        if 1 <= precision <= MAX_DECIMAL_PRECISION and scale <= precision:
            return ColumnType("decimal", precision, scale)
    allowed = ", ".join((*SIMPLE_TYPES, "decimal(p,s)"))
    raise ApplicationError("unknown_type", f"Unknown column type {text!r}; use one of {allowed}.")


def is_widening(old: ColumnType, new: ColumnType) -> bool:
    """True when every value of `old` is exactly a value of `new` and the types differ."""
    if old == new:
        return False
    if (old.name, new.name) in {("int", "long"), ("float", "double"), ("int", "double")}:
        return True
    if old.name in INTEGER_DIGITS and new.name == "decimal":
        return new.precision - new.scale >= INTEGER_DIGITS[old.name]
    if old.name == new.name == "decimal":
        return new.scale == old.scale and new.precision > old.precision
    return False


def check_default(value: object, column_type: ColumnType, column: str) -> object:
    """A default is a JSON literal of the column's type (dates and timestamps as ISO strings)."""
    if value is None:
        return None
    name = column_type.name
    valid = {
        "boolean": lambda v: isinstance(v, bool),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool) and -(2**31) <= v < 2**31,
        "long": lambda v: isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63,
        "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "double": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "string": lambda v: isinstance(v, str),
        "binary": lambda v: False,
        "date": lambda v: isinstance(v, str) and _parses(datetime.date.fromisoformat, v),
        "timestamp": lambda v: isinstance(v, str) and _parses(datetime.datetime.fromisoformat, v),
        "decimal": lambda v: isinstance(v, int | float | str) and _fits_decimal(v, column_type),
    }[name]
    if not valid(value):
        raise ApplicationError(
            "invalid_default", f"Default {value!r} of column {column!r} is not a {column_type} literal."
        )
    return value


def _parses(parse, value: str) -> bool:
    try:
        parse(value)
    except ValueError:
        return False
    return True


def _fits_decimal(value: object, column_type: ColumnType) -> bool:
    try:
        number = decimal.Decimal(str(value))
    except decimal.InvalidOperation:
        return False
    if not number.is_finite():
        return False
    digits, exponent = number.as_tuple().digits, number.as_tuple().exponent
    scale = max(0, -exponent)
    integer_digits = max(0, len(digits) + exponent)
    return scale <= column_type.scale and integer_digits <= column_type.precision - column_type.scale
