"""A table's data as the catalog hands it to the engine and the engine hands back: the columns (with their stable
ids), the segments to read with their live delta files, the files a job wrote; and the columns that locate a row in
its segment. Plain values."""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SEGMENT_ID, POSITION, ORDER = "_segment", "_pos", "_order"
# Kept in a small file's catalog row (at most INLINE_ROWS rows), so that a reader asking after a few keys or rows
# reads the catalog, not a thousand small files (engine.writes): a delta file's positions (its stats: {"pos":
# {"min": ..., "max": ..., "nulls": 0}, "positions": [...]}), and the values of a segment's key columns in file order
# ({"<column id>": {"min": ..., "max": ..., "nulls": 0, "values": [...]}}; integers and strings).
DELTA_POSITIONS, INLINE, INLINE_VALUES, INLINE_ROWS = "pos", "positions", "values", 64
INLINE_TYPES = ("byte", "short", "int", "long", "string")
INLINE_BYTES = 2_048  # a key of long strings: its values are not kept beyond these many characters in all


@dataclass(frozen=True)
class Column:
    id: int
    name: str
    type: str
    nullable: bool = True
    default: Any = None
    # a merge's fill by an expression (docs/merge-semantics.md#schema-conflicts-in-a-resolution): what a segment
    # written without the column reads in it, computed from the row's other columns
    fill: "Fill | None" = None

    @classmethod
    def from_dict(cls, data: dict) -> "Column":
        fill = data.get("fill")
        if fill is not None:
            fill = Fill(fill["expression"], tuple(cls.from_dict(c) for c in fill["columns"]))
        return cls(data["id"], data["name"], data["type"], data["nullable"], data.get("default"), fill)


@dataclass(frozen=True)
class Fill:
    """A merge's fill by an expression: its text, and the columns it reads as the merged table had them. A segment it
    fills is projected onto those columns by id (as onto the current schema), so that a later rename, drop or
    widening of one of them changes no filled value: the inputs are the segment's own values."""

    expression: str
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class SegmentRead:
    """A live segment to read: its path, the columns it was written with, and its live delta files."""

    id: str
    path: str
    columns: tuple[Column, ...]
    deltas: tuple[str, ...] = ()
    order: int = 0


@dataclass(frozen=True)
class WrittenFile:
    path: str
    row_count: int
    size_bytes: int
    stats: dict[str, dict] = field(default_factory=dict)
    partition_values: dict[str, Any] = field(default_factory=dict)
    segment_id: str | None = None  # delta files: the segment they delete from
    group: str | None = None  # segments written with `group_column`: the group's value


def in_schema(segments: Sequence[SegmentRead], current: Sequence[Column]) -> bool:
    """Whether the segments were written in the `current` schema: then their files are read, or copied, as they
    are (no projection of an older schema)."""
    return all(segment.columns == tuple(current) for segment in segments)


def partitioned_by(values: Mapping[str, Any], columns: Collection[int | str]) -> bool:
    """Whether a segment whose partition values are `values` (by column id) was written partitioned by each of
    `columns` (column ids). One without a value of some of them was written before the table was partitioned by it
    and may hold rows of several partitions (compaction splits them)."""
    return all(str(column) in values for column in columns)


def file_in_partitions(values: Mapping[str, Any], partitions: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a segment whose partition values are `values` (by column id) is in one of `partitions` (values
    by column id, as the catalog keeps them). NULL is only NULL; a segment without a value for a column (written
    before the table was partitioned by it) is in no partition of it."""

    def same(key: str, value: Any) -> bool:
        if key not in values or (values[key] is None) != (value is None):
            return False
        return value is None or str(values[key]) == str(value)

    return any(all(same(key, value) for key, value in partition.items()) for partition in partitions)
