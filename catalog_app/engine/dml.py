"""Row-level changes as pure DataFrame transforms. Rows carry their segment and position columns."""

from collections.abc import Mapping

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from catalog_app.engine.tables import POSITION, SEGMENT_ID


def matches(predicate: SparkColumn) -> SparkColumn:
    """SQL semantics: a row whose predicate is NULL does not match."""
    return F.coalesce(predicate, F.lit(False))


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
