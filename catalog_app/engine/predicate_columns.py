"""Parsed expressions (`predicate_parser`) as Spark Columns, built only with pyspark.sql.functions: user text
never reaches Spark as SQL."""

import operator
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial, reduce

from pyspark.sql import Column
from pyspark.sql import functions as F

from catalog_app.engine.predicate_parser import (
    Arithmetic,
    Between,
    Call,
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

_ARITHMETIC: dict[str, Callable[[Column, Column], Column]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "%": operator.mod,
}
_COMPARE: dict[str, Callable[[Column, Column], Column]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
# The Spark function of each function of the language (`predicate_parser.FUNCTIONS` holds their signatures).
_FUNCTIONS: dict[str, Callable[..., Column]] = {
    "lower": F.lower,
    "upper": F.upper,
    "trim": F.trim,
    "length": F.length,
    "abs": F.abs,
    "round": F.round,
    "coalesce": F.coalesce,
    "concat": F.concat,
    "substring": F.substring,
    "year": F.year,
    "month": F.month,
    "day": F.dayofmonth,
    "to_date": F.to_date,
}


def to_column(expr: Expr, column: Callable[[str], Column] = F.col) -> Column:
    """The Spark column computing `expr`; `column` maps each column name to the Spark column it reads."""
    build = partial(to_column, column=column)  # not a closure: a deep expression costs one frame a level
    match expr:
        case Literal():
            if isinstance(expr.value, datetime) and expr.value.tzinfo is None:
                # F.lit reads a naive datetime in this Python process's time zone; Spark SQL reads it in the session's.
                return F.to_utc_timestamp(F.lit(expr.value.replace(tzinfo=UTC)), F.current_timezone())
            return F.lit(expr.value)
        case ColumnRef():
            return column(expr.name)
        case Negate():
            return -build(expr.operand)
        case Arithmetic():
            return reduce(lambda left, step: _ARITHMETIC[step[0]](left, build(step[1])), expr.rest, build(expr.first))
        case Comparison():
            return _COMPARE[expr.op](build(expr.left), build(expr.right))
        case Logical():
            combine = operator.and_ if expr.op == "AND" else operator.or_
            return balanced(combine, [build(operand) for operand in expr.operands])
        case Not():
            return ~build(expr.operand)
        case IsNull():
            built = build(expr.operand)
            return built.isNotNull() if expr.negated else built.isNull()
        case In():
            return _negated(build(expr.operand).isin(*(build(item) for item in expr.items)), expr.negated)
        case Between():
            return _negated(build(expr.operand).between(build(expr.low), build(expr.high)), expr.negated)
        case Like():
            return _negated(build(expr.operand).like(expr.pattern), expr.negated)
        case Call():
            return _FUNCTIONS[expr.name](*(build(arg) for arg in expr.args))
    raise TypeError(f"not an expression of the predicate language: {expr!r}")


def balanced(combine: Callable[[Column, Column], Column], built: list[Column]) -> Column:
    """`built` joined by AND or OR (`combine`, associative with NULL too) as a balanced tree: a long chain stays
    shallow for Spark's analyser, which a left-nested one would overflow."""
    while len(built) > 1:
        built = [combine(*built[i : i + 2]) if i + 1 < len(built) else built[i] for i in range(0, len(built), 2)]
    return built[0]


def _negated(built: Column, negated: bool) -> Column:
    return ~built if negated else built
