"""Which segments a DELETE or UPDATE predicate may match, from the catalog's per-segment column statistics.

`may_match` answers False only when no row of the segment can make the predicate true: a comparison of a column
with a literal outside the segment's min/max, an IN list with no item inside it, IS NULL on a column without NULLs,
and these combined with AND and OR. Anything else (arithmetic, functions, NOT, LIKE, float columns, a column
without statistics) may match. The statistics cover rows a delta file has deleted too, so they only widen the
answer. Spark still evaluates the predicate on every row of the segments kept.
"""

import datetime
import decimal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from catalog_app.engine.predicate_parser import Between, ColumnRef, Comparison, Expr, In, IsNull, Literal, Logical
from catalog_app.engine.segments import Column
from catalog_app.engine.types import is_pruned, is_widening, parse_type, stat_value

_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True)
class Bounds:
    """A column's statistics in one segment: min and max of its non-NULL values (None when all are NULL) and
    the number of NULLs (None if unknown)."""

    low: Any
    high: Any
    nulls: int | None


def bounds(stats: Mapping[str, Any], type_name: str) -> Bounds | None:
    """A catalog statistic (JSON values) as Python values comparable with the predicate's literals, or None
    for a type that is not pruned on (`types.is_pruned`). Timestamps are naive, in UTC."""
    if not is_pruned(type_name):
        return None
    low, high = (stat_value(stats[side], type_name) for side in ("min", "max"))
    return Bounds(low, high, stats.get("nulls"))


def segment_bounds(
    stats: Mapping[str, Any], columns: Sequence[Column], *, written: Sequence[Column] | None
) -> dict[str, Bounds]:
    """A segment's statistics (JSON, by column id) as the `Bounds` of those of `columns` it has and that are
    pruned on, by column name. `written`: the columns the segment was written with (None: the same types, as for a
    key column, which only widens). A column it wrote in a type of which the current one is not a widening (a merge
    gave the column another type, `types.is_castable`) has statistics in the old type, which may not order as the
    new type's values do ("9" after "10"): unknown here."""
    kept = {c.id: c.type for c in columns}
    if written is not None:
        kept = {c.id: c.type for c in written if _same_order(c.type, kept.get(c.id))}
    found = {
        c.name: bounds(stats[str(c.id)], c.type) for c in columns if c.id in kept and stats.get(str(c.id)) is not None
    }
    return {name: found_bounds for name, found_bounds in found.items() if found_bounds is not None}


def _same_order(written: str, current: str | None) -> bool:
    return current is not None and (written == current or is_widening(parse_type(written), parse_type(current)))


def may_match(expr: Expr, columns: Mapping[str, Bounds], *, time_zone: str = "UTC") -> bool:
    """Whether some row of a segment whose columns have `columns` (by name; a column left out is unknown) may
    make `expr` true. `time_zone` is the Spark session's: the zone of a TIMESTAMP literal without an offset."""
    if isinstance(expr, Logical):
        answers = (may_match(operand, columns, time_zone=time_zone) for operand in expr.operands)
        return all(answers) if expr.op == "AND" else any(answers)
    if isinstance(expr, IsNull) and isinstance(expr.operand, ColumnRef) and expr.operand.name in columns:
        known = columns[expr.operand.name]
        return known.low is not None if expr.negated else known.nulls != 0
    if isinstance(expr, Comparison):
        if isinstance(expr.right, ColumnRef) and isinstance(expr.left, Literal):
            return _compare(columns, expr.right.name, _FLIPPED[expr.op], expr.left, time_zone)
        if isinstance(expr.left, ColumnRef):
            return _compare(columns, expr.left.name, expr.op, expr.right, time_zone)
    if isinstance(expr, In) and not expr.negated and isinstance(expr.operand, ColumnRef):
        return any(_compare(columns, expr.operand.name, "=", item, time_zone) for item in expr.items)
    if isinstance(expr, Between) and not expr.negated and isinstance(expr.operand, ColumnRef):
        name, zone = expr.operand.name, time_zone
        return _compare(columns, name, ">=", expr.low, zone) and _compare(columns, name, "<=", expr.high, zone)
    return True


def _compare(columns: Mapping[str, Bounds], name: str, op: str, item: Expr, time_zone: str) -> bool:
    """Whether `name op item` may be true for some row (`item` a literal, else it may)."""
    known = columns.get(name)
    if known is None or not isinstance(item, Literal):
        return True
    if known.low is None:  # every value NULL: no comparison is true
        return False
    value = _comparable(item.value, known.low, time_zone)
    if value is None:
        return True
    low, high = known.low, known.high
    return {
        "=": low <= value <= high,
        "!=": not (low == high == value),
        "<": low < value,
        "<=": low <= value,
        ">": high > value,
        ">=": high >= value,
    }[op]


def _comparable(value: Any, like: Any, time_zone: str) -> Any:
    """The literal as a value of the statistic's Python type, or None when they do not compare exactly as
    Spark compares them (a DATE column against a TIMESTAMP literal, say)."""
    if isinstance(like, datetime.datetime):
        if not isinstance(value, datetime.datetime):
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=ZoneInfo(time_zone))
        return value.astimezone(datetime.UTC).replace(tzinfo=None)
    if isinstance(like, datetime.date):
        return value if type(value) is datetime.date else None
    if isinstance(like, str):
        return value if isinstance(value, str) else None
    # Exact numbers only: Spark compares a long with a DOUBLE literal (1e3) as doubles, inexactly.
    return value if isinstance(value, int | decimal.Decimal) and not isinstance(value, bool) else None
