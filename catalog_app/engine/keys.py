"""Key-level changes of primary-key tables (DESIGN.md 4.4), as pure DataFrame transforms.

`changes_by_key` compares a side's rows before and after its changes (only the rows of the segments it touched
and the ones it wrote) and gives one row per key it inserted, updated or deleted, with the row before and after,
as struct columns `before` and `after`. `both_changed` and `only_changed` split the two sides' changes by key.
"""

from collections.abc import Sequence

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

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
