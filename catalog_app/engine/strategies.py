"""Write strategies (docs/api.md#write-strategies) as pure DataFrame transforms; no Django.

`target` holds the table rows of the segments that may match (with SEGMENT_ID and POSITION), `incoming` the
checked incoming rows in the table's schema. A strategy gives a `Rewrite`: the target positions it replaces and
the rows it writes, each tagged in GROUP with the operation it belongs to (`update` or `insert`), so that one
Spark write yields separate files per operation.
"""

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from catalog_app.engine.frames import arrow_frame
from catalog_app.engine.segments import POSITION, SEGMENT_ID, Column
from catalog_app.engine.types import json_value, spark_type

GROUP = "_group"
UPDATE, INSERT = "update", "insert"
_IN = "_in_"  # prefix of the incoming row's columns after a join


def col(name: str) -> SparkColumn:
    return F.col(f"`{name}`")


@dataclass(frozen=True)
class Rewrite:
    removed: DataFrame | None  # SEGMENT_ID, POSITION of the target rows replaced (updated, closed, deleted)
    rows: DataFrame  # the rows to write: table columns and GROUP
    matched: DataFrame | None = None  # the join both derive from: worth caching while the rewrite is made


@dataclass(frozen=True)
class Survey:
    segments: set[str]  # ids of the segments whose key range holds an incoming key
    repeated: list[dict[str, Any]]  # a few keys that occur more than once
    sums: dict[str, int]  # the sum of each of the `summed` columns over all incoming rows


def key_survey(
    spark: SparkSession,
    incoming: DataFrame,
    keys: Sequence[Column],
    ranges: Sequence[tuple[str, list]],
    *,
    summed: Sequence[str] = (),
    limit: int = 5,
) -> Survey:
    """One pass over the incoming rows: the segments whose key range holds at least one of their keys (checked per
    key, not against the batch's overall range: a broadcast of the few segment ranges joined with the keys), a few
    keys that occur more than once, and the sums of the `summed` columns (deferred checks, say). `ranges` holds
    (segment id, [min, max, min, max, ...] in `keys` order, as JSON values)."""
    sums = [F.sum(F.col(f"`{name}`")).alias(name) for name in summed]
    counted = incoming.groupBy(*[col(k.name) for k in keys]).agg(F.count(F.lit(1)).alias("count"), *sums)
    if ranges:
        bounds = {f"_{side}{i}": [None if b[2 * i + j] is None else str(b[2 * i + j]) for _, b in ranges]
                  for i in range(len(keys)) for j, side in enumerate(("min", "max"))}  # fmt: skip
        frame = arrow_frame(spark, {"_seg": [segment for segment, _ in ranges], **bounds}).select(
            "_seg",
            *[F.col(f"_{side}{i}").cast(spark_type(k.type)).alias(f"_{side}{i}") for i, k in enumerate(keys)
              for side in ("min", "max")],
        )  # fmt: skip
        inside = reduce(
            operator.and_, [col(k.name).between(F.col(f"_min{i}"), F.col(f"_max{i}")) for i, k in enumerate(keys)]
        )
        counted = counted.join(F.broadcast(frame), inside, "left")
    else:
        counted = counted.withColumn("_seg", F.lit(None).cast("string"))
    present = reduce(operator.and_, [col(k.name).isNotNull() for k in keys])  # a NULL key equals no key
    repeated = F.when((F.col("count") > 1) & present, F.struct(*[col(k.name) for k in keys]))
    totals = [F.sum(F.when(F.col("_first"), F.col(f"`{name}`"))).alias(name) for name in summed]
    if summed:  # a key in two segments' ranges joins twice: sum each key's figures once
        first = F.row_number().over(Window.partitionBy(*[col(k.name) for k in keys]).orderBy("_seg")) == 1
        counted = counted.withColumn("_first", first)
    found = counted.agg(
        F.collect_set("_seg").alias("segments"), F.slice(F.collect_set(repeated), 1, limit).alias("repeated"), *totals
    ).first()
    return Survey(
        set(found["segments"]),
        [{k.name: json_value(row[k.name]) for k in keys} for row in found["repeated"]],
        {name: found[name] or 0 for name in summed},
    )


def newest_per_key(incoming: DataFrame, keys: Sequence[str], watermark: str) -> DataFrame:
    """One row per key: the one with the highest watermark (NULL watermarks lose). Rows tied on the watermark are
    ordered by their other columns, so the same rows keep the same row whatever order they come in. A row with a
    NULL key is no key's row: each is kept (and inserted, as `upsert` does)."""
    others = [col(c).asc_nulls_first() for c in incoming.columns if c not in (*keys, watermark)]
    window = Window.partitionBy(*[col(k) for k in keys]).orderBy(col(watermark).desc_nulls_last(), *others)
    null_key = reduce(operator.or_, [col(k).isNull() for k in keys])  # matches no row, as in every key strategy
    rank = F.when(null_key, F.lit(1)).otherwise(F.row_number().over(window))
    return incoming.withColumn("_rank", rank).filter(F.col("_rank") == 1).drop("_rank")


def _joined(target: DataFrame, incoming: DataFrame, keys: Sequence[str], columns: Sequence[str]) -> DataFrame:
    """Target rows with the incoming row of the same key (inner join), incoming columns prefixed."""
    renamed = incoming.select(*[col(c).alias(_IN + c) for c in columns])
    on = reduce(operator.and_, [col(k) == col(_IN + k) for k in keys])
    return target.join(renamed, on)


def _not_in_target(target: DataFrame, incoming: DataFrame, keys: Sequence[str]) -> DataFrame:
    return incoming.join(target.select(*[col(k) for k in keys]), [*keys], "left_anti")


def tagged(rows: DataFrame, columns: Sequence[str], group: str) -> DataFrame:
    return rows.select(*[col(c) for c in columns], F.lit(group).alias(GROUP))


def _positions(rows: DataFrame) -> DataFrame:
    return rows.select(SEGMENT_ID, POSITION)


def insert_rewrite(target: DataFrame, incoming: DataFrame, keys: Sequence[str], columns: Sequence[str]) -> Rewrite:
    new = tagged(_not_in_target(target, incoming, keys), columns, INSERT)
    return Rewrite(None, new)


def update_rewrite(
    target: DataFrame, incoming: DataFrame, keys: Sequence[str], columns: Sequence[str], *, insert: bool = False
) -> Rewrite:
    """MERGE INTO ... WHEN MATCHED UPDATE SET * [WHEN NOT MATCHED INSERT *]."""
    matched = _joined(target, incoming, keys, columns)
    updated = matched.select(*[col(_IN + c).alias(c) for c in columns], F.lit(UPDATE).alias(GROUP))
    if insert:
        updated = updated.unionByName(tagged(_not_in_target(target, incoming, keys), columns, INSERT))
    return Rewrite(_positions(matched), updated, matched)


def keyed_rows(
    strategy: str, incoming: DataFrame, matched: DataFrame | None, keys: Sequence[str], columns: Sequence[str]
):
    """The rows `insert`, `update`, `upsert`, `incremental` or `delete_insert` write, tagged, given the keys of the
    target rows the incoming keys matched (found without Spark, see `keymatch`): `matched` holds the key columns,
    one row per matched target row (`delete_insert` writes every incoming row and needs none). These strategies
    write incoming rows only, so no target row is read; like the rewrites above, an incoming row updates each target
    row of its key."""
    if strategy == "insert":
        return tagged(_not_in_target(F.broadcast(matched), incoming, keys), columns, INSERT)
    if strategy == "delete_insert":
        return tagged(incoming, columns, INSERT)
    flagged = F.broadcast(matched.select(*[col(k) for k in keys], F.lit(True).alias("_matched")))
    rows = incoming.join(flagged, [*keys], "inner" if strategy == "update" else "left")
    group = F.when(F.col("_matched"), F.lit(UPDATE)).otherwise(F.lit(INSERT))
    return rows.select(*[col(c) for c in columns], group.alias(GROUP))


def delete_insert_rewrite(
    target: DataFrame, incoming: DataFrame, keys: Sequence[str], columns: Sequence[str]
) -> Rewrite:
    matched = target.join(incoming.select(*[col(k) for k in keys]).distinct(), [*keys], "left_semi")
    return Rewrite(_positions(matched), tagged(incoming, columns, INSERT))


def scd2_rewrite(
    target: DataFrame,
    incoming: DataFrame,
    keys: Sequence[str],
    columns: Sequence[str],
    *,
    valid_from: str,
    valid_to: str,
    now: Any,
) -> Rewrite:
    """Close the open version of each key whose values changed (valid_to = now) and open a new version (valid_from
    = now, valid_to = NULL) for it and for each new key. An unchanged key writes nothing."""
    open_rows = target.filter(col(valid_to).isNull())
    compared = [c for c in columns if c not in {*keys, valid_from, valid_to}]
    matched = _joined(open_rows, incoming, keys, columns)
    same = reduce(operator.and_, [col(c).eqNullSafe(col(_IN + c)) for c in compared], F.lit(True))
    changed = matched.filter(~same)
    moment = F.lit(now).cast("timestamp")
    closed = changed.select(
        *[moment.alias(c) if c == valid_to else col(c) for c in columns], F.lit(UPDATE).alias(GROUP)
    )
    new_versions = changed.select(*[col(_IN + c).alias(c) for c in columns]).unionByName(
        _not_in_target(open_rows, incoming, keys).select(*[col(c) for c in columns])
    )
    opened = new_versions.select(
        *[moment.alias(c) if c == valid_from else F.lit(None).cast("timestamp").alias(c) if c == valid_to else col(c)
          for c in columns],
        F.lit(INSERT).alias(GROUP),
    )  # fmt: skip
    return Rewrite(_positions(changed), closed.unionByName(opened), matched)


def kept_rows(target: DataFrame, removed: DataFrame, columns: Sequence[str], group: str):
    """Copy-on-write: the rows of the segments the rewrite touched (those with a replaced row) that it does not
    replace, to be rewritten."""
    touched = target.join(removed.select(SEGMENT_ID).distinct(), SEGMENT_ID, "left_semi")
    return tagged(touched.join(removed, [SEGMENT_ID, POSITION], "left_anti"), columns, group)
