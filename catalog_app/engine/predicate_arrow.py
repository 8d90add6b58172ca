"""Parsed expressions (`predicate_parser`) evaluated with pyarrow over rows held in this process, for what Arrow
computes exactly as Spark does (`predicate_columns`); anything else raises `Unsupported`, and the caller leaves the
work to Spark. Used by small updates and deletes (`engine.dml_arrow`): no Spark job for a few rows.

Evaluated here:
- column references, and literals (a TIMESTAMP without an offset only when the session's time zone is UTC: it is a
  wall-clock time in that zone);
- `=`, `!=`, `<`, `<=`, `>`, `>=`, IN and BETWEEN between values of one kind: integers (int and long), decimals of
  one scale, floats and doubles, strings, binary, booleans, dates, timestamps, where each literal is exactly a value
  of the other side's column type (`amount = 3`, `price = 9.99` on a decimal(10,2));
- AND, OR, NOT, IS [NOT] NULL, three-valued as in SQL (a row whose predicate is NULL does not match);
- LIKE with a pattern that has no `\\` (no escapes);
- `+`, `-`, `*` and unary minus of integers, typed as Spark types them (int op int is an int).

Left to Spark (`Unsupported`):
- functions (`lower`, `substring`, `to_date`, ...), `/` and `%`, decimal and floating-point arithmetic;
- comparisons across kinds (a date with a timestamp, an integer column with a fraction or a double literal, a
  decimal with a double) and literals that are not exactly a value of the column's type;
- a NaN among compared float or double values (Spark orders NaN above every number and equal to itself, IEEE
  does not);
- an integer overflow (Spark's ANSI mode fails the job, which is Spark's to report);
- assignments that Spark would convert (a long into an int column, a value with more decimals than the column
  keeps, a date into a timestamp column) or refuse (NULL into a NOT NULL column).
"""

import datetime
import decimal
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from catalog_app.engine.predicate_parser import (
    Arithmetic,
    Between,
    ColumnRef,
    Comparison,
    Expr,
    In,
    IsNull,
    Like,
    Literal,
    Logical,
    Negate,
    Not,
)
from catalog_app.engine.segments import Column
from catalog_app.engine.types import arrow_type, decimal_digits, is_decimal

UTC_ZONES = frozenset({"UTC", "Etc/UTC", "Z", "+00:00", "GMT", "Etc/GMT"})
_INTEGER_RANGES = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
_COMPARE: dict[str, Callable] = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}
_ARITHMETIC: dict[str, tuple[Callable, Callable[[int, int], int]]] = {
    "+": (pc.add_checked, operator.add),
    "-": (pc.subtract_checked, operator.sub),
    "*": (pc.multiply_checked, operator.mul),
}


class Unsupported(Exception):
    """The expression (or these rows) needs Spark to be computed exactly as Spark computes it."""


@dataclass(frozen=True)
class _Value:
    """An evaluated expression: values per row (`array`, of column type `kind`), or one literal (`array` None,
    `kind` the Spark kind of the literal: int, long, decimal, double, string, boolean, date, timestamp, null)."""

    kind: str
    array: pa.Array | None = None
    literal: Any = None


def matching(expr: Expr, rows: pa.Table, types: Mapping[str, str], *, time_zone: str) -> np.ndarray:
    """Which of `rows` (columns named as in `types`: name -> column type) the predicate matches, as a boolean mask;
    NULL does not match."""
    value = _Evaluation(rows, types, time_zone).run(expr)
    if value.array is None:
        if value.kind not in ("boolean", "null"):
            raise Unsupported(f"a predicate of kind {value.kind}")
        return np.full(rows.num_rows, bool(value.literal), dtype=bool)
    if value.kind != "boolean":
        raise Unsupported(f"a predicate of kind {value.kind}")
    return pc.fill_null(value.array, False).to_numpy(zero_copy_only=False).astype(bool)


def assigned(expr: Expr, rows: pa.Table, types: Mapping[str, str], column: Column, *, time_zone: str) -> pa.Array:
    """The value `expr` gives `column` in each of `rows`, in the column's Arrow type, when it is the value Spark's
    update writes: no conversion that could round, truncate or fail (`incoming.checked_frame` casts with
    `try_cast` and refuses what becomes NULL), no NULL into a NOT NULL column."""
    value = _Evaluation(rows, types, time_zone).run(expr)
    target = arrow_type(column.type)
    if value.array is None:
        if value.kind == "null":
            array = pa.nulls(rows.num_rows, target)
        else:
            array = pa.array([_exact(value.literal, column.type)] * rows.num_rows, target)
    else:
        array = _converted(value, column.type)
    if not column.nullable and array.null_count:
        raise Unsupported("NULL into a NOT NULL column (Spark refuses it)")
    return array


def computed(expr: Expr, rows: pa.Table, types: Mapping[str, str], type_name: str, *, time_zone: str) -> pa.Array:
    """The value `expr` gives in each of `rows`, in `type_name`'s Arrow type, cast as Spark casts a value the cast
    does not change: a merge's fill, whose values were checked on Spark to be exactly the column's
    (`reads.fill_problem`). Unsupported where the expression needs Spark (a function, arithmetic on other than
    integers)."""
    value = _Evaluation(rows, types, time_zone).run(expr)
    target = arrow_type(type_name)
    if value.array is None:
        if value.kind == "null":
            return pa.nulls(rows.num_rows, target)
        return pa.array([_exact(value.literal, type_name)] * rows.num_rows, target)
    return value.array.cast(target, safe=False)


def _converted(value: _Value, type_name: str) -> pa.Array:
    if value.kind == type_name:
        return value.array
    exact_casts = value.kind in _INTEGER_RANGES and (type_name in _INTEGER_RANGES or is_decimal(type_name))
    exact_casts |= is_decimal(value.kind) and (is_decimal(type_name) or type_name in _INTEGER_RANGES)
    if exact_casts:  # a safe cast raises where a value would not fit or would lose digits
        array = value.array
        if value.kind in _INTEGER_RANGES and is_decimal(type_name):  # Arrow casts an integer to a decimal of 19+
            scale = decimal_digits(type_name)[1]  # digits only, then that decimal to a narrower one value by value
            array = array.cast(pa.decimal128(min(19 + scale, 38), scale))
        try:
            return array.cast(arrow_type(type_name), safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise Unsupported(f"{value.kind} values into a {type_name} column: {exc}") from None
    if (value.kind, type_name) == ("float", "double"):
        return value.array.cast(pa.float64())
    raise Unsupported(f"{value.kind} values into a {type_name} column")


def _literal_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        low, high = _INTEGER_RANGES["int"]
        return "int" if low <= value <= high else "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, decimal.Decimal):
        return "decimal"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime.datetime):
        return "timestamp"
    if isinstance(value, datetime.date):
        return "date"
    raise Unsupported(f"a literal {value!r}")


def _exact(value: Any, type_name: str) -> Any:
    """`value` (a literal) as a value of column type `type_name` when it is exactly one, else Unsupported."""
    kind = _literal_kind(value)
    if type_name in _INTEGER_RANGES:
        if kind == "decimal" and value == value.to_integral_value():
            value, kind = int(value), "long"
        low, high = _INTEGER_RANGES[type_name]
        if kind in ("int", "long") and low <= value <= high:
            return value
    elif type_name in ("float", "double"):
        if kind in ("int", "long", "decimal", "double"):
            number = float(np.float32(value)) if type_name == "float" else float(value)
            if decimal.Decimal(number) == decimal.Decimal(value):
                return number
    elif is_decimal(type_name):
        if kind in ("int", "long", "decimal"):
            precision, scale = decimal_digits(type_name)
            with decimal.localcontext(prec=80):
                scaled = decimal.Decimal(value).quantize(decimal.Decimal(1).scaleb(-scale))
            if scaled == value and len(scaled.as_tuple().digits) <= precision:
                return scaled
    elif type_name == kind and kind in ("string", "boolean", "date", "timestamp"):
        return value
    raise Unsupported(f"{value!r} as a {type_name} value")


class _Evaluation:
    def __init__(self, rows: pa.Table, types: Mapping[str, str], time_zone: str) -> None:
        self.rows, self.types, self.time_zone = rows, types, time_zone

    def run(self, expr: Expr) -> _Value:
        match expr:
            case Literal():
                return self._literal(expr.value)
            case ColumnRef():
                return _Value(self.types[expr.name], array=self.rows.column(expr.name).combine_chunks())
            case Comparison():
                return self._compare(expr.op, self.run(expr.left), self.run(expr.right))
            case Logical():
                combine = pc.and_kleene if expr.op == "AND" else pc.or_kleene
                return _Value("boolean", reduce(combine, [self._boolean(operand) for operand in expr.operands]))
            case Not():
                return _Value("boolean", pc.invert(self._boolean(expr.operand)))
            case IsNull():
                operand = self.run(expr.operand)
                if operand.array is None:
                    return _Value("boolean", literal=(operand.kind == "null") != expr.negated)
                test = pc.is_valid if expr.negated else pc.is_null
                return _Value("boolean", test(operand.array))
            case In():
                operand = self.run(expr.operand)
                equal = [self._compare("=", operand, self.run(item)) for item in expr.items]
                found = reduce(pc.or_kleene, [self._as_array(value) for value in equal])
                return _Value("boolean", pc.invert(found) if expr.negated else found)
            case Between():
                operand = self.run(expr.operand)
                low = self._as_array(self._compare(">=", operand, self.run(expr.low)))
                inside = pc.and_kleene(low, self._as_array(self._compare("<=", operand, self.run(expr.high))))
                return _Value("boolean", pc.invert(inside) if expr.negated else inside)
            case Like():
                return self._like(expr)
            case Arithmetic():
                return reduce(lambda left, step: self._arithmetic(step[0], left, self.run(step[1])), expr.rest,
                              self.run(expr.first))  # fmt: skip
            case Negate():
                return self._arithmetic("-", _Value("int", literal=0), self.run(expr.operand))
        raise Unsupported(f"{type(expr).__name__} expressions")

    def _literal(self, value: Any) -> _Value:
        if isinstance(value, datetime.datetime):
            if value.tzinfo is None:
                if self.time_zone not in UTC_ZONES:
                    raise Unsupported("a TIMESTAMP literal without an offset outside UTC")
                value = value.replace(tzinfo=datetime.UTC)
            value = value.astimezone(datetime.UTC)
        return _Value(_literal_kind(value), literal=value)

    def _as_array(self, value: _Value) -> pa.Array:
        """A boolean value as an array of one value per row."""
        if value.array is not None:
            return value.array
        if value.kind not in ("boolean", "null"):
            raise Unsupported(f"a {value.kind} value where a condition is expected")
        return pa.array([value.literal] * self.rows.num_rows, pa.bool_())

    def _boolean(self, expr: Expr) -> pa.Array:
        value = self.run(expr)
        if value.kind not in ("boolean", "null"):
            raise Unsupported(f"a {value.kind} value where a condition is expected")
        return self._as_array(value)

    def _compare(self, op: str, left: _Value, right: _Value) -> _Value:
        if "null" in (left.kind, right.kind):  # a comparison with NULL is NULL
            return _Value("boolean", literal=None)
        if left.array is None and right.array is None:
            raise Unsupported("a comparison of two literals")
        left_side, right_side = _comparable(left, right)
        try:
            return _Value("boolean", _COMPARE[op](left_side, right_side))
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as exc:
            raise Unsupported(f"comparing {left.kind} with {right.kind}: {exc}") from None

    def _like(self, expr: Like) -> _Value:
        operand = self.run(expr.operand)
        if operand.kind == "null":
            return _Value("boolean", literal=None)
        if operand.array is None or operand.kind != "string" or "\\" in expr.pattern:
            raise Unsupported("LIKE of a literal or with escapes")
        found = pc.match_like(operand.array, expr.pattern)
        return _Value("boolean", pc.invert(found) if expr.negated else found)

    def _arithmetic(self, op: str, left: _Value, right: _Value) -> _Value:
        """Integers only: int op int is an int, with a long a long (as Spark types them); an overflow of that type
        is Spark's to report."""
        if op not in _ARITHMETIC or not {left.kind, right.kind} <= {"int", "long", "null"}:
            raise Unsupported(f"{left.kind} {op} {right.kind}")
        if "null" in (left.kind, right.kind):
            raise Unsupported("arithmetic with NULL")  # its type is Spark's to settle
        kind = "long" if "long" in (left.kind, right.kind) else "int"
        low, high = _INTEGER_RANGES[kind]
        on_arrays, on_values = _ARITHMETIC[op]
        if left.array is None and right.array is None:
            result = on_values(left.literal, right.literal)
            if not low <= result <= high:
                raise Unsupported("an integer overflow")
            return _Value(kind, literal=result)
        sides = [side.array.cast(pa.int64()) if side.array is not None else pa.scalar(side.literal, pa.int64())
                 for side in (left, right)]  # fmt: skip
        try:
            result = on_arrays(*sides)
        except pa.ArrowInvalid:
            raise Unsupported("an integer overflow") from None
        lowest, highest = pc.min_max(result).values()
        if (lowest.is_valid and lowest.as_py() < low) or (highest.is_valid and highest.as_py() > high):
            raise Unsupported("an integer overflow")
        return _Value(kind, result.cast(arrow_type(kind)))


def _family(kind: str) -> str:
    if kind in _INTEGER_RANGES:
        return "integer"
    if kind in ("float", "double"):
        return "floating"
    return "decimal" if is_decimal(kind) else kind


def _comparable(left: _Value, right: _Value) -> tuple[Any, Any]:
    """Both sides in one Arrow type in which comparing them is what Spark's comparison gives."""
    if left.array is None or right.array is None:
        array, literal = (left, right) if left.array is not None else (right, left)
        value = _exact(literal.literal, array.kind)
        widened = _widened(array, array.kind)
        scalar = pa.scalar(value, widened.type)
        return (widened, scalar) if left.array is not None else (scalar, widened)
    if left.kind == right.kind:
        return _widened(left, left.kind), _widened(right, right.kind)
    family = _family(left.kind)
    if family != _family(right.kind) or family not in ("integer", "floating", "decimal"):
        raise Unsupported(f"comparing {left.kind} with {right.kind}")
    if family == "decimal" and decimal_digits(left.kind)[1] != decimal_digits(right.kind)[1]:
        raise Unsupported(f"comparing {left.kind} with {right.kind}")
    return _widened(left, left.kind), _widened(right, right.kind)


def _widened(value: _Value, kind: str) -> pa.Array:
    """An array in the type its kind compares in: integers as long, floats as double (refused with a NaN among them),
    decimals at the widest precision of their scale."""
    family = _family(kind)
    if family == "integer":
        return value.array.cast(pa.int64())
    if family == "floating":
        if pc.any(pc.is_nan(value.array)).as_py():
            raise Unsupported("NaN among compared values")
        return value.array.cast(pa.float64())
    if family == "decimal":
        return value.array.cast(pa.decimal128(38, decimal_digits(kind)[1]))
    return value.array
