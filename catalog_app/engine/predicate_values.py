"""Parsed expressions (`predicate_parser`) evaluated on one row of Python values: a merge's column expressions
(docs/merge-semantics.md#column-expressions), computed by the plan once, so that the dry run's preview and the
merge write the same values. Spark never sees them.

Values are as `merge_app.plan.semantics.cell_value` gives a cell: int, float, Decimal, str, bytes, bool, date,
datetime (naive, in UTC), None for NULL. The semantics are SQL's, as Spark's ANSI mode has them:
- NULL: arithmetic, comparisons, LIKE and functions of a NULL are NULL (but COALESCE, GREATEST, LEAST, which skip
  NULLs, and IS NULL); AND and OR are three-valued; a CASE branch whose condition is NULL is not taken.
- Numbers: integers stay integers (a result outside a long fails); with a decimal, decimal arithmetic (38 digits);
  with a float or double, floating point. `/` gives a decimal of integers and decimals (not a double as Spark's
  does: exact), and a division or `%` by zero fails. NaN orders above every number and equals itself, as in Spark.
- A date compared with a timestamp is its midnight; a TIMESTAMP literal without an offset is UTC.
- Functions: those of `predicate_parser.ROW_FUNCTIONS`, as Spark computes them (`round` half up, `substring`
  1-based, `concat` NULL if any argument is, `trim` of spaces); `to_date` of a string that is no date fails.

A failure raises `EvaluationError` with what failed; the caller names the row.
"""

import datetime
import decimal
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from catalog_app.engine.predicate_parser import (
    Arithmetic,
    Between,
    Call,
    Case,
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

_MAX_LONG = 2**63 - 1
_CONTEXT = decimal.Context(prec=38, rounding=decimal.ROUND_HALF_UP, traps=[decimal.InvalidOperation])


_FLOAT_OPERATIONS = {"+": float.__add__, "-": float.__sub__, "*": float.__mul__, "/": float.__truediv__, "%": math.fmod}


class EvaluationError(ValueError):
    """An expression failed on a row: a division by zero, an overflow, a cast."""


def evaluate(expr: Expr, row: Mapping[str, Any]) -> Any:
    """The value of `expr` on `row` (column name as the expression names it -> value)."""
    match expr:
        case Literal():
            return _literal(expr.value)
        case ColumnRef():
            return row[expr.name]
        case Negate():
            value = evaluate(expr.operand, row)
            return None if value is None else _number(_arithmetic("-", 0, value))
        case Arithmetic():
            value = evaluate(expr.first, row)
            for op, operand in expr.rest:
                right = evaluate(operand, row)
                value = None if value is None or right is None else _arithmetic(op, value, right)
            return value
        case Comparison():
            return _compare(expr.op, evaluate(expr.left, row), evaluate(expr.right, row))
        case Logical():
            return _logical(expr.op, [lambda operand=operand: evaluate(operand, row) for operand in expr.operands])
        case Not():
            value = evaluate(expr.operand, row)
            return None if value is None else not value
        case IsNull():
            return (evaluate(expr.operand, row) is None) != expr.negated
        case In():
            operand = evaluate(expr.operand, row)
            equal = [lambda item=item: _compare("=", operand, evaluate(item, row)) for item in expr.items]
            found = _logical("OR", equal)
            return None if found is None else found != expr.negated
        case Between():
            operand = evaluate(expr.operand, row)
            low = _compare(">=", operand, evaluate(expr.low, row))
            inside = _logical("AND", [lambda: low, lambda: _compare("<=", operand, evaluate(expr.high, row))])
            return None if inside is None else inside != expr.negated
        case Like():
            value = evaluate(expr.operand, row)
            return None if value is None else (_like(expr.pattern).fullmatch(value) is not None) != expr.negated
        case Case():
            for condition, value in expr.branches:
                if evaluate(condition, row) is True:
                    return evaluate(value, row)
            return None if expr.otherwise is None else evaluate(expr.otherwise, row)
        case Call():
            return _call(expr.name, [evaluate(arg, row) for arg in expr.args])
    raise EvaluationError(f"{type(expr).__name__} expressions are not evaluated here")


def _literal(value: Any) -> Any:
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.UTC).replace(tzinfo=None)
    return value


def _logical(op: str, operands: list[Callable[[], Any]]) -> bool | None:
    """AND / OR, three-valued, stopping at the first operand that decides."""
    deciding = op == "OR"
    unknown = False
    for operand in operands:
        value = operand()
        if value is None:
            unknown = True
        elif value is deciding:
            return deciding
    return None if unknown else not deciding


def _number(value: Any) -> Any:
    """An integer result checked against a long's range (Spark's ANSI mode fails past it)."""
    if type(value) is int and not -_MAX_LONG - 1 <= value <= _MAX_LONG:
        raise EvaluationError(f"integer overflow: {value} is outside a long")
    return value


def _arithmetic(op: str, left: Any, right: Any) -> Any:
    if isinstance(left, float) or isinstance(right, float):
        left, right = float(left), float(right)
        if op in "/%" and right == 0:
            raise EvaluationError("division by zero")
        return _FLOAT_OPERATIONS[op](left, right)
    if op in "/%" and right == 0:
        raise EvaluationError("division by zero")
    if type(left) is int and type(right) is int and op != "/":
        if op == "%":  # SQL's remainder takes the dividend's sign
            return int(math.copysign(abs(left) % abs(right), left)) if left else 0
        return _number({"+": left + right, "-": left - right, "*": left * right}[op])
    left, right = decimal.Decimal(left), decimal.Decimal(right)
    try:
        if op == "+":
            return _CONTEXT.add(left, right)
        if op == "-":
            return _CONTEXT.subtract(left, right)
        if op == "*":
            return _CONTEXT.multiply(left, right)
        if op == "/":
            return _CONTEXT.divide(left, right)
        return _CONTEXT.remainder(left, right)
    except decimal.DecimalException as exc:
        raise EvaluationError(f"decimal arithmetic failed: {exc!r}") from None


def _ordered(value: Any) -> Any:
    """A value in an order in which comparing is Spark's: dates as their midnight, NaN above every number."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return (0, datetime.datetime.combine(value, datetime.time()))
    if isinstance(value, float) and math.isnan(value):
        return (1, 0)
    return (0, value)


def _compare(op: str, left: Any, right: Any) -> bool | None:
    if left is None or right is None:
        return None
    left, right = _ordered(left), _ordered(right)
    try:
        return {"=": left == right, "!=": left != right, "<": left < right, "<=": left <= right, ">": left > right,
                ">=": left >= right}[op]  # fmt: skip
    except TypeError:
        raise EvaluationError(f"cannot compare {left[1]!r} with {right[1]!r}") from None


def _like(pattern: str) -> re.Pattern:
    """Spark's LIKE pattern as a regular expression: `%` any run, `_` one character, `\\` escapes."""
    parts, index = [], 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            parts.append(re.escape(pattern[index + 1]))
            index += 2
            continue
        parts.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
        index += 1
    return re.compile("".join(parts), re.DOTALL)


def _round(value: Any, digits: int = 0) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            return value
        return float(decimal.Decimal(repr(value)).quantize(decimal.Decimal(1).scaleb(-digits), decimal.ROUND_HALF_UP))
    rounded = decimal.Decimal(value).quantize(decimal.Decimal(1).scaleb(-digits), decimal.ROUND_HALF_UP)
    return _number(int(rounded)) if type(value) is int else rounded


def _substring(text: str, position: int, length: int) -> str:
    start = position - 1 if position > 0 else len(text) + position if position < 0 else 0
    end = start + length
    start = max(start, 0)
    return "" if length <= 0 or start >= end else text[start:end]


def _to_date(value: Any) -> datetime.date:
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    try:
        return datetime.date.fromisoformat(value.strip()[:10])
    except ValueError:
        raise EvaluationError(f"cannot cast {value[:100]!r} to a date") from None


def _extreme(pick: Callable, values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    if not present:
        return None
    try:
        return pick(present, key=_ordered)
    except TypeError:
        raise EvaluationError(f"cannot compare {present!r}") from None


_NULL_SKIPPING = {
    "coalesce": lambda values: next((v for v in values if v is not None), None),
    "greatest": lambda values: _extreme(max, values),
    "least": lambda values: _extreme(min, values),
}
_STRICT: dict[str, Callable[..., Any]] = {  # NULL if any argument is NULL
    "lower": str.lower,
    "upper": str.upper,
    "trim": lambda text: text.strip(" "),
    "length": len,
    "abs": lambda number: _number(abs(number)),
    "round": _round,
    "concat": lambda *texts: "".join(texts),
    "substring": _substring,
    "year": lambda value: value.year,
    "month": lambda value: value.month,
    "day": lambda value: value.day,
    "to_date": _to_date,
}


def _call(name: str, args: list[Any]) -> Any:
    if name in _NULL_SKIPPING:
        return _NULL_SKIPPING[name](args)
    if any(arg is None for arg in args):
        return None
    return _STRICT[name](*args)
