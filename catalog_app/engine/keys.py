"""Key-level changes of primary-key tables (docs/merge-semantics.md#primary-key-tables) on Spark.

`changes_by_key` compares a side's rows before and after its changes (only the rows of the segments it touched
and the ones it wrote) and gives one row per key it inserted, updated or deleted, with the row before and after,
as struct columns `before` and `after`. `both_changed` and `only_changed` split the two sides' changes by key.

A merge by key (merge_app/services/keys.py) runs on these through two steps on plain inputs: `key_changes` reads
both sides' changes and returns the keys both changed as Python values (the merge decides each with
merge_app.plan.semantics.row_merge), and `key_merge_write` writes the merged keys on the target. The frames both cache
are released at the end of the caller's `frames.cache_scope` (a merge, a pick, a comparison job).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from catalog_app.engine.dml import rows_in_partitions
from catalog_app.engine.frames import cached
from catalog_app.engine.segment_writes import write_deltas
from catalog_app.engine.segments import POSITION, SEGMENT_ID, Column, SegmentRead, WrittenFile
from catalog_app.engine.table_data import TableData

CHANGE, BEFORE, AFTER = "_change", "_before", "_after"
INSERT, UPDATE, DELETE = "insert", "update", "delete"


def _quoted(name: str) -> SparkColumn:
    return F.col(f"`{name}`")


def changes_by_key(before: DataFrame, after: DataFrame, keys: Sequence[str], columns: Sequence[str]) -> DataFrame:
    """Keys and `_change`, `_before`, `_after` (structs of all columns, null where the row does not exist)."""
    values = [c for c in columns if c not in keys]
    old = before.select(*[_quoted(k) for k in keys], F.struct(*[_quoted(c) for c in columns]).alias(BEFORE))
    new = after.select(*[_quoted(k) for k in keys], F.struct(*[_quoted(c) for c in columns]).alias(AFTER))
    joined = old.join(new, list(keys), "full_outer")
    differs = F.lit(False)
    for column in values:
        differs = differs | ~F.col(f"{BEFORE}.`{column}`").eqNullSafe(F.col(f"{AFTER}.`{column}`"))
    change = (
        F.when(F.col(BEFORE).isNull(), F.lit(INSERT))
        .when(F.col(AFTER).isNull(), F.lit(DELETE))
        .when(differs, F.lit(UPDATE))
    )
    return joined.select(*[_quoted(k) for k in keys], change.alias(CHANGE), BEFORE, AFTER).filter(
        F.col(CHANGE).isNotNull()
    )


def both_changed(src: DataFrame, dest: DataFrame, keys: Sequence[str]) -> DataFrame:
    """Keys changed on both sides: keys, `src_change`, `dest_change`, `base` (the row before), `src`, `dest`."""
    left = src.select(
        *[_quoted(k) for k in keys], F.col(CHANGE).alias("src_change"), F.col(BEFORE).alias("base"),
        F.col(AFTER).alias("src"),
    )  # fmt: skip
    right = dest.select(
        *[_quoted(k) for k in keys], F.col(CHANGE).alias("dest_change"), F.col(BEFORE).alias("dest_base"),
        F.col(AFTER).alias("dest"),
    )  # fmt: skip
    return left.join(right, list(keys), "inner").withColumn("base", F.coalesce("base", "dest_base")).drop("dest_base")


def only_changed(src: DataFrame, dest: DataFrame, keys: Sequence[str]) -> DataFrame:
    """The source's changes of keys the target did not change."""
    return src.join(dest.select(*[_quoted(k) for k in keys]), list(keys), "left_anti")


def rows_with_keys(rows: DataFrame, keys_frame: DataFrame, keys: Sequence[str]) -> DataFrame:
    """The rows (with their positions) whose key is in `keys_frame`."""
    return rows.join(F.broadcast(keys_frame.select(*[_quoted(k) for k in keys]).distinct()), list(keys), "left_semi")


def rows_diff(before: DataFrame, after: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Rows only `after` has and rows only `before` has, as multisets (a table without a primary key)."""
    return after.exceptAll(before), before.exceptAll(after)


# --- a primary-key table merged by key: the comparison and the writing, on plain inputs ----------------------


@dataclass(frozen=True)
class KeyTable:
    """A primary-key table as the key merge reads and writes it: its data (in the merged schema, with the
    partition spec the rows the merge writes follow) and its key columns."""

    data: TableData
    keys: tuple[str, ...]


@dataclass(frozen=True)
class SideReads:
    """A side's changes since the ancestor, as segments to read: the ancestor's segments it changed (`before`, as
    the ancestor has them) and what it has of those now with the segments it wrote (`after`)."""

    before: tuple[SegmentRead, ...]
    after: tuple[SegmentRead, ...]


@dataclass(frozen=True)
class BothChanged:
    """One key both sides changed: its values, each side's change and the rows (None where there is none)."""

    key: tuple
    source_change: str
    target_change: str
    base: dict | None
    source: dict | None
    target: dict | None


@dataclass(frozen=True)
class KeyChanges:
    both: list[BothChanged]
    counts: dict[str, dict[str, int]]  # per side, the keys it inserted, updated and deleted
    discarded: int  # source changes of rows a target overwrite replaced
    only: DataFrame  # the source's changes of keys the target did not change: keys, `_after`


def key_changes(
    spark, table: KeyTable, source: SideReads, target: SideReads, *, target_overwrites: list[list[dict] | None]
) -> KeyChanges:
    """Each side's changes by key, split into keys both changed and keys only the source changed. A source change
    of a row that existed at the ancestor in what a target overwrite replaced (`target_overwrites`: the partitions
    of each, values by column id, or None for the whole table) is discarded."""
    names = [c.name for c in table.data.columns]

    def changes(side: SideReads) -> DataFrame:
        before, after = (table.data.read(spark, reads) for reads in (side.before, side.after))
        return cached(changes_by_key(before, after, table.keys, names))

    src, dest = changes(source), changes(target)
    discarded = 0
    if target_overwrites:
        kept = cached(src.filter((F.col(CHANGE) == INSERT) | ~_replaced(target_overwrites, table.data.columns)))
        discarded = src.count() - kept.count()
        src = kept
    both = [
        BothChanged(
            key=tuple(row[k] for k in table.keys), source_change=row["src_change"], target_change=row["dest_change"],
            **{side: None if row[n] is None else row[n].asDict() for side, n in
               (("base", "base"), ("source", "src"), ("target", "dest"))},
        )
        for row in both_changed(src, dest, table.keys).collect()
    ]  # fmt: skip
    counts = {}
    for name, frame in (("source", src), ("target", dest)):
        by_change = dict(frame.groupBy(CHANGE).count().collect())
        counts[name] = {change: by_change.get(change, 0) for change in (INSERT, UPDATE, DELETE)}
    only = only_changed(src, dest, table.keys).select(*table.keys, AFTER)
    return KeyChanges(both=both, counts=counts, discarded=discarded, only=only)


def _replaced(overwrites: list[list[dict] | None], columns: Sequence[Column]) -> SparkColumn:
    """Whether the ancestor's row (`_before`) is one the target's overwrites replaced: any row for a whole-table
    overwrite (None), else a row of one of their partitions (a partition column dropped since matches any)."""
    if any(partitions is None for partitions in overwrites):
        return F.lit(True)
    return rows_in_partitions([p for partitions in overwrites for p in partitions], columns, struct=BEFORE)


class DoubledKeyError(Exception):
    """A key merge whose result would hold a key more than once (docs/merge-semantics.md#primary-key-tables): the
    merge must fail before it writes anything. By construction it never happens; this is the loud failure if it
    ever does."""

    def __init__(self, keys: list[dict]):
        super().__init__(f"the merge would write these keys twice: {keys}")
        self.keys = keys


@dataclass(frozen=True)
class KeyedSegment:
    """A target segment the key merge does not scan (shared with the base, untouched by either side), with the
    bounds of its first key column from its statistics (None where unknown): the doubled-key guard reads it only
    if the merged keys fall inside them."""

    read: SegmentRead
    low: Any = None
    high: Any = None


def key_merge_write(
    spark, table: KeyTable, only: DataFrame, rows: list[tuple[tuple, tuple | None]], scanned: list[SegmentRead],
    *, tag: str, others: Sequence[KeyedSegment] = (),
) -> tuple[list[WrittenFile], list[WrittenFile]]:  # fmt: skip
    """Write a key merge on the target: delete files for the rows of `scanned` (the target's segments where the
    keys can be) whose key changes, and one segment with the keys' new rows. The keys are those of `only` and of
    `rows` ((key values, the new row or None for a deleted key)). Returns the segments and delete files written.
    Raises DoubledKeyError, before writing anything, if a key would be written twice or is live in one of `others`
    (the target's segments outside `scanned`) whose key bounds hold the merged keys."""
    replaced = only
    if rows:
        schema = T.StructType([*(only.schema[k] for k in table.keys), only.schema[AFTER]])
        replaced = replaced.unionByName(spark.createDataFrame([(*key, row) for key, row in rows], schema))
    replaced = cached(replaced)
    new_rows = replaced.filter(F.col(AFTER).isNotNull()).select(f"{AFTER}.*")
    _keys_once(spark, table, new_rows, others)
    current = table.data.read(spark, scanned, positions=True)
    hit = rows_with_keys(current, replaced, table.keys).select(SEGMENT_ID, POSITION)
    deltas = write_deltas(table.data.warehouse, table.data.base, hit, tag=tag)  # none where no row is hit
    written = table.data.write(new_rows.coalesce(1), tag)
    return [s for s in written if s.row_count], deltas


def _keys_once(spark, table: KeyTable, new_rows: DataFrame, others: Sequence[KeyedSegment]) -> None:
    """The guard of key_merge_write: each merged key once among the rows it writes, and in none of the segments it
    leaves alone. Only those of `others` whose first key's bounds hold a merged key are read (their key columns)."""
    keys = list(table.keys)
    new_keys = new_rows.select(*[_quoted(k) for k in keys])
    twice = new_keys.groupBy(*keys).count().filter(F.col("count") > 1).drop("count").limit(5).collect()
    if not twice and others:
        low, high = new_keys.agg(F.min(_quoted(keys[0])), F.max(_quoted(keys[0]))).first()
        reads = [seg.read for seg in others if low is not None and _may_hold(seg, low, high)]
        if reads:
            live = table.data.read(spark, reads).select(*[_quoted(k) for k in keys])
            twice = rows_with_keys(live, new_keys, keys).limit(5).collect()
    if twice:
        raise DoubledKeyError([row.asDict() for row in twice])


def _may_hold(segment: KeyedSegment, low: Any, high: Any) -> bool:
    """Whether a segment's key bounds may hold a key between `low` and `high` (unknown or incomparable: yes)."""
    try:
        below = segment.high is not None and segment.high < low
        above = segment.low is not None and segment.low > high
        return not (below or above)
    except TypeError:
        return True
