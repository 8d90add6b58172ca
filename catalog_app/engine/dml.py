"""Row-level changes: pure DataFrame transforms (rows carry their segment and position columns), and the Spark work
of the delete, update and compaction jobs, which take plain values (the table's `TableData`, the segments to read,
predicates as parsed ASTs) and return the files they wrote."""

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from catalog_app.engine import incoming, keymatch
from catalog_app.engine.predicate_columns import balanced, to_column
from catalog_app.engine.predicate_parser import Expr
from catalog_app.engine.segments import POSITION, SEGMENT_ID, Column, SegmentRead, WrittenFile
from catalog_app.engine.strategies import GROUP
from catalog_app.engine.table_data import TableData
from catalog_app.engine.types import spark_type
from catalog_app.engine.writes import write_deltas


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


def matched_rows_updated(rows: DataFrame, predicate: SparkColumn, assignments: Mapping[str, SparkColumn]) -> DataFrame:
    """Only the matching rows, with the assignments applied (merge-on-read: written as new segments)."""
    return rows.filter(matches(predicate)).select(
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
    """The rows a predicate matches in some segments (the candidates): their positions, collected as Arrow by
    segment when the candidates hold few rows (one task, no shuffle), else a cached frame; and the candidates'
    rows with their positions, for an update's new row versions."""

    rows: DataFrame
    predicate: SparkColumn
    positions: DataFrame | dict[str, pa.Array]
    per_segment: dict[str, int]

    def counts(self) -> dict[str, int]:
        """How many rows match in each segment, by segment id (segments without a match left out)."""
        return self.per_segment

    def write_deletes(self, table: TableData, tag: str) -> list[WrittenFile]:
        """The delta files of the matched positions: written here with pyarrow when they were collected."""
        if isinstance(self.positions, dict):
            return keymatch.write_position_deltas(table.warehouse, table.base, self.positions, tag=tag)
        return write_deltas(table.warehouse, table.base, self.positions, tag=tag)


def rows_matching(
    spark: SparkSession, table: TableData, candidates: Sequence[SegmentRead], where: Expr, *, few: bool
) -> Matched:
    """The rows of `candidates` that `where` matches; `few`: the candidates hold up to FEW_ROWS rows."""
    predicate = to_column(where)
    rows = table.read(spark, candidates, positions=True)
    matched = positions_matching(rows, predicate)
    if few:
        positions = keymatch.positions_by_segment(matched.coalesce(1).toArrow())
        return Matched(rows, predicate, positions, {segment: len(found) for segment, found in positions.items()})
    matched = matched.cache()
    return Matched(rows, predicate, matched, count_per_segment(matched))


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
    (`incoming.IncomingError`)."""
    columns = {name: to_column(expression) for name, expression in assignments.items()}
    if touched is not None:
        new_rows = rows_updated(table.read(spark, touched, positions=True), matched.predicate, columns)
    else:
        new_rows = matched_rows_updated(matched.rows, matched.predicate, columns)
    new_rows = by_origin(new_rows, table.columns)
    names = [c.name for c in table.columns]
    checked = incoming.checked_frame(new_rows, names, table.columns, keep=[GROUP], only=columns.keys())
    return table.write(checked, tag, grouped=True, few=few)


def compacted_write(
    spark: SparkSession, table: TableData, segments: Sequence[SegmentRead], tag: str, *, files: int
) -> list[WrittenFile]:
    """The rows of `segments` (deltas applied) rewritten into `files` new segments."""
    return table.write(table.read(spark, segments).coalesce(files), tag)
