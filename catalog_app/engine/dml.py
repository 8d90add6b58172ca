"""Row-level changes: pure DataFrame transforms (rows carry their segment and position columns), and the Spark work
of the delete, update and compaction jobs, which take plain values (the table's `TableData`, the segments to read,
predicates as parsed ASTs) and return the files they wrote."""

import logging
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pyarrow as pa
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from catalog_app.engine import dml_arrow, incoming, keymatch
from catalog_app.engine.frames import arrow_frame, cached
from catalog_app.engine.predicate_columns import balanced, to_column
from catalog_app.engine.predicate_parser import Expr
from catalog_app.engine.segment_writes import write_deltas, write_segments_arrow
from catalog_app.engine.segments import POSITION, SEGMENT_ID, Column, SegmentRead, WrittenFile
from catalog_app.engine.session import time_zone
from catalog_app.engine.strategies import GROUP
from catalog_app.engine.table_data import TableData
from catalog_app.engine.types import spark_type

logger = logging.getLogger(__name__)


def matches(predicate: SparkColumn) -> SparkColumn:
    """SQL semantics: a row whose predicate is NULL does not match."""
    return F.coalesce(predicate, F.lit(False))


def count_per_segment(positions: DataFrame) -> dict[str, int]:
    """How many of `positions` (SEGMENT_ID, POSITION rows) each segment holds, by segment id: one Spark job."""
    return {row[SEGMENT_ID]: row["count"] for row in positions.groupBy(SEGMENT_ID).count().collect()}


def rows_in_partitions(
    partitions: Sequence[Mapping[str, Any]], columns: Sequence[Column], *, struct: str | None = None
) -> SparkColumn:
    """Whether a row is in one of `partitions` (values by column id, as JSON; NULL matches NULL). With `struct`,
    the row's columns are the fields of that struct column. A column id `columns` lacks (a column dropped since)
    matches any value."""
    by_id = {str(c.id): c for c in columns}

    def holds(column_id: str, value: Any) -> SparkColumn:
        column = by_id.get(column_id)
        if column is None:
            return F.lit(True)
        name = f"{struct}.`{column.name}`" if struct else f"`{column.name}`"
        return F.col(name).eqNullSafe(F.lit(value).cast(spark_type(column.type)))

    return balanced(operator.or_, [
        balanced(operator.and_, [holds(column_id, value) for column_id, value in partition.items()])
        for partition in partitions
    ])  # fmt: skip


def positions_matching(rows: DataFrame, predicate: SparkColumn) -> DataFrame:
    return rows.filter(matches(predicate)).select(SEGMENT_ID, POSITION)


def rows_not_matching(rows: DataFrame, predicate: SparkColumn) -> DataFrame:
    return rows.filter(~matches(predicate))


def rows_updated(rows: DataFrame, predicate: SparkColumn, assignments: Mapping[str, SparkColumn]) -> DataFrame:
    """Every row, with the assignments applied to those that match (copy-on-write rewrite)."""
    hit = matches(predicate)
    return rows.select(
        *[
            F.when(hit, assignments[name]).otherwise(F.col(f"`{name}`")).alias(name) if name in assignments
            else F.col(f"`{name}`")
            for name in rows.columns
        ]
    )  # fmt: skip


def assigned_rows(rows: DataFrame, assignments: Mapping[str, SparkColumn]) -> DataFrame:
    """`rows` (the matched ones) with the assignments applied (merge-on-read: written as new segments)."""
    return rows.select(
        *[assignments[name].alias(name) if name in assignments else F.col(f"`{name}`") for name in rows.columns]
    )


def by_origin(rows: DataFrame, columns: Sequence[Column]) -> DataFrame:
    """The table's `columns` of `rows` (read with their positions), each row tagged in GROUP with the segment it
    comes from: written grouped, each new segment holds rows of one old segment, so a merge can take the new rows
    of some old segments and not of others (A4/A5: a target overwrite replaced those others)."""
    return rows.select(*[F.col(f"`{c.name}`") for c in columns], F.col(SEGMENT_ID).alias(GROUP))


# --- the delete, update and compaction jobs' Spark work ------------------------------------------------------

FEW_ROWS = 1_000_000  # a change writing no more rows than this writes them in one task (no shuffle)


@dataclass
class Matched:
    """The rows a predicate matches in some segments (the candidates): their positions, as Arrow by segment when the
    candidates hold few rows (found here with pyarrow, `dml_arrow`, or collected from one Spark task), else a cached
    frame; and, for an update's new row versions with Spark, the candidates' rows with their positions (`rows`)."""

    spark: SparkSession
    table: TableData
    candidates: Sequence[SegmentRead]
    where: Expr
    positions: DataFrame | dict[str, pa.Array]
    per_segment: dict[str, int]
    time_zone: str
    found_by_arrow: bool = False  # the positions were found with pyarrow (no Spark job)

    @cached_property
    def predicate(self) -> SparkColumn:
        return to_column(self.where)

    @cached_property
    def rows(self) -> DataFrame:
        return self.table.read(self.spark, self.candidates, positions=True)

    def counts(self) -> dict[str, int]:
        """How many rows match in each segment, by segment id (segments without a match left out)."""
        return self.per_segment

    def matched_rows(self) -> DataFrame:
        """The matched rows (with their positions) as a Spark frame: those at the positions found here (exactly
        the rows the delta files delete, whatever Spark's predicate would say), else those the predicate matches."""
        if not self.found_by_arrow:
            return self.rows.filter(matches(self.predicate))
        touched = [s for s in self.candidates if s.id in self.positions]
        owners = [pa.array([segment] * len(found), pa.string()) for segment, found in self.positions.items()]
        found = arrow_frame(self.spark, {SEGMENT_ID: pa.concat_arrays(owners),
                                         POSITION: pa.concat_arrays(list(self.positions.values()))})  # fmt: skip
        rows = self.table.read(self.spark, touched, positions=True)
        return rows.join(F.broadcast(found), [SEGMENT_ID, POSITION], "left_semi")

    def write_deletes(self, table: TableData, tag: str) -> list[WrittenFile]:
        """The delta files of the matched positions: written here with pyarrow when they were collected."""
        if isinstance(self.positions, dict):
            return keymatch.write_position_deltas(table.warehouse, table.base, self.positions, tag=tag)
        return write_deltas(table.warehouse, table.base, self.positions, tag=tag)


def rows_matching(
    spark: SparkSession, table: TableData, candidates: Sequence[SegmentRead], where: Expr, *, few: bool
) -> Matched:
    """The rows of `candidates` that `where` matches; `few`: the candidates hold up to FEW_ROWS rows. Few candidate
    rows are matched here with pyarrow (`dml_arrow.positions_matching`), unless the predicate needs Spark (see
    `predicate_arrow`); then, and for more rows, with Spark."""
    zone = time_zone(spark)
    if few:
        try:
            positions = dml_arrow.positions_matching(table.warehouse, table.columns, candidates, where, time_zone=zone)
        except dml_arrow.Unsupported as why:
            logger.info("matching with Spark: %s", why)
        else:
            counts = {segment: len(found) for segment, found in positions.items()}
            return Matched(spark, table, candidates, where, positions, counts, zone, found_by_arrow=True)
    matched = Matched(spark, table, candidates, where, {}, {}, zone)
    found = positions_matching(matched.rows, matched.predicate)
    if few:
        matched.positions = keymatch.positions_by_segment(found.coalesce(1).toArrow())
        matched.per_segment = {segment: len(positions) for segment, positions in matched.positions.items()}
    else:
        matched.positions = cached(found)
        matched.per_segment = count_per_segment(matched.positions)
    return matched


def rows_kept_write(
    spark: SparkSession, table: TableData, touched: Sequence[SegmentRead], where: Expr, tag: str, *, few: bool
) -> list[WrittenFile]:
    """A copy-on-write delete: the `touched` segments' rows that `where` does not match, as new segments grouped
    by the segment they come from (see `by_origin`)."""
    kept = rows_not_matching(table.read(spark, touched, positions=True), to_column(where))
    return table.write(by_origin(kept, table.columns), tag, grouped=True, few=few)


def rows_updated_write(
    spark: SparkSession,
    table: TableData,
    matched: Matched,
    assignments: Mapping[str, Expr],
    tag: str,
    *,
    touched: Sequence[SegmentRead] | None,
    few: bool,
) -> list[WrittenFile]:
    """An update's new segments, grouped by the segment their rows come from: the `touched` segments rewritten
    with the assignments applied to the matched rows (copy-on-write), or, with `touched` None, only the matched
    rows' new versions (merge-on-read). The assigned values are checked against the columns' types first
    (`incoming.IncomingError`).

    Merge-on-read of up to `dml_arrow.ARROW_ROWS` rows matched here is computed and written here with pyarrow, no
    Spark job, unless an assignment needs Spark (`predicate_arrow`: functions, division, decimal or floating-point
    arithmetic, a value Spark would convert or refuse, ...); copy-on-write always rewrites with Spark."""
    if touched is None and matched.found_by_arrow and sum(matched.per_segment.values()) <= dml_arrow.ARROW_ROWS:
        try:
            new_rows = dml_arrow.updated_rows(
                table.warehouse, table.columns, matched.candidates, matched.positions, assignments,
                time_zone=matched.time_zone,
            )  # fmt: skip
        except dml_arrow.Unsupported as why:
            logger.info("updating with Spark: %s", why)
        else:
            return write_segments_arrow(table.warehouse, table.base, new_rows, table.columns,
                                       partition_ids=table.partition_ids, tag=tag, group_column=GROUP,
                                       key_ids=table.key_ids)  # fmt: skip
    columns = {name: to_column(expression) for name, expression in assignments.items()}
    if touched is not None:
        new_rows = rows_updated(table.read(spark, touched, positions=True), matched.predicate, columns)
    else:
        new_rows = assigned_rows(matched.matched_rows(), columns)
    new_rows = by_origin(new_rows, table.columns)
    names = [c.name for c in table.columns]
    checked = incoming.checked_frame(new_rows, names, table.columns, keep=[GROUP], only=columns.keys())
    return table.write(checked, tag, grouped=True, few=few)


def compacted_write(
    spark: SparkSession, table: TableData, segments: Sequence[SegmentRead], tag: str, *, files: int
) -> list[WrittenFile]:
    """The rows of `segments` (deltas applied) rewritten into `files` new segments."""
    return table.write(table.read(spark, segments).coalesce(files), tag)
