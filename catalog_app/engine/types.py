"""Column types, the one place that knows them: the allow-list and its canonical spelling (`parse_type`), the
widening rules of docs/README.md#operations (int -> long, float -> double, int -> decimal wide enough, decimal precision
up), each type's Spark and Arrow type, and its values in JSON (defaults, incoming rows, the catalog's statistics
and partition values, rows given back).

A type is stored in the catalog by its canonical name (`str(ColumnType)`): `int`, `decimal(10,2)`, ... The
engine's other modules take these names; the web process parses what users write with `parse_type`. The names and
the widening rules are plain Python in `type_names.py` (which the merge plan uses without loading Spark), re-exported
here; this module adds pyspark's and pyarrow's type objects. No Django. `ApplicationError` is the project's one
plain exception class (`lakeui.errors` imports nothing), raised here as it was before this module moved into the
engine.
"""

import base64
import datetime
import decimal
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T

from catalog_app.engine.type_names import (  # noqa: F401 (the names, plain Python, re-exported from here)
    ALIASES,
    DECIMAL,
    DECIMAL_TYPE,
    INTEGER_DIGITS,
    MAX_DECIMAL_PRECISION,
    SIMPLE_TYPES,
    ColumnType,
    decimal_digits,
    is_castable,
    is_decimal,
    is_widening,
    json_value,
    parse_type,
    stat_json,
    stat_value,
    type_family,
    utc_naive,
)
from lakeui.errors import ApplicationError

DECIMAL_DIGITS = 80  # more than any decimal(38, s) value has, with room for the digits a quantize adds

SPARK_TYPES = {
    "boolean": T.BooleanType(),
    "int": T.IntegerType(),
    "long": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "string": T.StringType(),
    "binary": T.BinaryType(),
    "date": T.DateType(),
    "timestamp": T.TimestampType(),
}
ARROW_TYPES = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),  # Spark's TIMESTAMP: an instant, shown in the session's zone (UTC)
}


# --- Spark and Arrow --------------------------------------------------------------------------------------


def spark_type(type_name: str) -> T.DataType:
    return SPARK_TYPES[type_name] if type_name in SPARK_TYPES else T.DecimalType(*decimal_digits(type_name))


def arrow_type(type_name: str) -> pa.DataType:
    return ARROW_TYPES[type_name] if type_name in ARROW_TYPES else pa.decimal128(*decimal_digits(type_name))


INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
NUMERIC = (*INTEGRAL, T.FloatType, T.DoubleType, T.DecimalType)
# The typed source columns (Parquet, or JSON lines as Spark infers them) each column type takes, as strictly as
# JSON rows are checked (`python_value`): no number or struct into a string, no fraction or boolean into an
# integer. Text (CSV, or a JSON string) is parsed by the cast and checked value by value; an all-null column always
# fits.
FITTING_SOURCES = {
    "boolean": (T.BooleanType,),
    "int": INTEGRAL,
    "long": INTEGRAL,
    "float": NUMERIC,
    "double": NUMERIC,
    DECIMAL_TYPE: NUMERIC,
    "string": (),
    "binary": (T.BinaryType,),
    "date": (T.DateType,),
    "timestamp": (T.DateType, T.TimestampType, T.TimestampNTZType),
}


def type_fits(source: T.DataType, column_type: str) -> bool:
    """Whether values of Spark type `source` may be loaded into a column of `column_type` (see FITTING_SOURCES)."""
    if isinstance(source, T.StringType | T.NullType):
        return True
    fitting = FITTING_SOURCES.get(type_family(column_type))
    return fitting is None or isinstance(source, fitting)


# --- values in JSON ---------------------------------------------------------------------------------------


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


def _parses(parse: Callable[[str], Any], value: str) -> bool:
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


def _integer(value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
        raise TypeError
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError
    return float(value)


def _timestamp(value: Any) -> datetime.datetime:
    moment = datetime.datetime.fromisoformat(value)  # with an offset: that instant; without: UTC
    try:
        return moment.astimezone(datetime.UTC) if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)
    except OverflowError:  # the instant falls before year 1 or after 9999 in UTC
        raise ValueError(f"{value!r} is outside the years 1 to 9999 in UTC") from None


def _decimal(value: Any, column_type: str) -> decimal.Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError
    number = decimal.Decimal(str(value))
    precision, scale = decimal_digits(column_type)
    with decimal.localcontext(prec=DECIMAL_DIGITS):  # the default context keeps 28 digits; decimal(38) needs more
        if not number.is_finite():
            raise TypeError
        scaled = number.quantize(decimal.Decimal(1).scaleb(-scale))
    if number != scaled:
        raise TypeError
    integer_digits = len(str(int(abs(number)))) if abs(number) >= 1 else 0
    if integer_digits > precision - scale:
        raise TypeError
    return scaled


def _exactly(kind: type) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        if type(value) is not kind:
            raise TypeError
        return value

    return convert


CONVERT: dict[str, Callable[[Any], Any]] = {
    "boolean": _exactly(bool),
    "int": lambda v: _integer(v, -(2**31), 2**31),
    "long": lambda v: _integer(v, -(2**63), 2**63),
    "float": _number,
    "double": _number,
    "string": _exactly(str),
    "binary": lambda v: base64.b64decode(v, validate=True),
    "date": lambda v: datetime.date.fromisoformat(v),
    "timestamp": _timestamp,
}


def python_value(value: Any, type_name: str) -> Any:
    """A (non-null) JSON value of an incoming row as the Python value of the column type: bytes from base64,
    dates and timestamps from ISO 8601 (an instant in UTC), decimals at the type's scale. Raises TypeError,
    ValueError or decimal.InvalidOperation if it is not a value of the type."""
    if is_decimal(type_name):
        return _decimal(value, type_name)
    return CONVERT[type_name](value)


# The types whose per-file min, max and NULL count the catalog keeps (and decimals): binary is not worth it.
STATISTICS_TYPES = ("int", "long", "float", "double", "string", "date", "timestamp", "boolean")
# The types whose statistics rule segments out (and decimals): not float and double (NaN and -0.0 do not order
# there as Spark compares them), nor boolean and binary (not worth it).
PRUNED_TYPES = ("int", "long", "string", "date", "timestamp")


def has_statistics(type_name: str) -> bool:
    return type_name in STATISTICS_TYPES or is_decimal(type_name)


def is_pruned(type_name: str) -> bool:
    return type_name in PRUNED_TYPES or is_decimal(type_name)
