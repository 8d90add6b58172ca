"""Row-level changes as pure DataFrame transforms. Rows carry their segment and position columns."""

import operator
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from catalog_app.engine.predicate_columns import balanced
from catalog_app.engine.segments import POSITION, SEGMENT_ID, Column
from catalog_app.engine.strategies import GROUP
from catalog_app.engine.types import spark_type


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
