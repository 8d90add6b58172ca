"""Write strategies (DESIGN.md 3.1) as pure DataFrame transforms; no Django.

`target` holds the table rows of the segments that may match (with SEGMENT_ID and POSITION), `incoming` the
checked incoming rows in the table's schema. A strategy gives a `Plan`: the target positions it replaces and
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

from catalog_app.engine.tables import POSITION, SEGMENT_ID, Column, json_value, spark_type

GROUP = "_group"
UPDATE, INSERT = "update", "insert"
_IN = "_in_"  # prefix of the incoming row's columns after a join


def col(name: str) -> SparkColumn:
    return F.col(f"`{name}`")


@dataclass(frozen=True)
class Plan:
    removed: DataFrame | None  # SEGMENT_ID, POSITION of the target rows replaced (updated, closed, deleted)
    rows: DataFrame  # the rows to write: table columns and GROUP
    matched: DataFrame | None = None  # the join both derive from: worth caching while the plan runs


def key_survey(
    spark: SparkSession, incoming: DataFrame, keys: Sequence[Column], ranges: Sequence[tuple[str, list]], limit: int = 5
) -> tuple[set[str], list[dict[str, Any]]]:
    """One pass over the incoming keys: the segments whose key range holds at least one of them (checked per
    key, not against the batch's overall range: a broadcast of the few segment ranges joined with the keys),
    and a few keys that occur more than once. `ranges` holds (segment id, [min, max, min, max, ...] in `keys`
    order, as JSON values)."""
    counted = incoming.groupBy(*[col(k.name) for k in keys]).count()
    if ranges:
        values = [(segment, *[None if v is None else str(v) for v in bounds]) for segment, bounds in ranges]
        schema = ", ".join(["_seg string", *[f"_min{i} string, _max{i} string" for i in range(len(keys))]])
        frame = spark.createDataFrame(values, schema).select(
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
    repeated = F.when(F.col("count") > 1, F.struct(*[col(k.name) for k in keys]))
    found = counted.agg(
        F.collect_set("_seg").alias("segments"), F.slice(F.collect_set(repeated), 1, limit).alias("repeated")
    ).first()
    return set(found["segments"]), [{k.name: json_value(row[k.name]) for k in keys} for row in found["repeated"]]


def newest_per_key(incoming: DataFrame, keys: Sequence[str], watermark: str) -> DataFrame:
    """One row per key: the one with the highest watermark (NULL watermarks lose)."""
    window = Window.partitionBy(*[col(k) for k in keys]).orderBy(col(watermark).desc_nulls_last())
    return incoming.withColumn("_rank", F.row_number().over(window)).filter(F.col("_rank") == 1).drop("_rank")


def _joined(target: DataFrame, incoming: DataFrame, keys: Sequence[str], columns: Sequence[str]) -> DataFrame:
    """Target rows with the incoming row of the same key (inner join), incoming columns prefixed."""
    renamed = incoming.select(*[col(c).alias(_IN + c) for c in columns])
    on = reduce(operator.and_, [col(k) == col(_IN + k) for k in keys])
    return target.join(renamed, on)


def _not_in_target(target: DataFrame, incoming: DataFrame, keys: Sequence[str]) -> DataFrame:
    return incoming.join(target.select(*[col(k) for k in keys]), [*keys], "left_anti")


def _tagged(rows: DataFrame, columns: Sequence[str], group: str) -> DataFrame:
    return rows.select(*[col(c) for c in columns], F.lit(group).alias(GROUP))


def _positions(rows: DataFrame) -> DataFrame:
    return rows.select(SEGMENT_ID, POSITION)


def insert_plan(target: DataFrame, incoming: DataFrame, keys: Sequence[str], columns: Sequence[str]) -> Plan:
    new = _tagged(_not_in_target(target, incoming, keys), columns, INSERT)
    return Plan(None, new)


def update_plan(
    target: DataFrame, incoming: DataFrame, keys: Sequence[str], columns: Sequence[str], *, insert: bool = False
) -> Plan:
    """MERGE INTO ... WHEN MATCHED UPDATE SET * [WHEN NOT MATCHED INSERT *]."""
    matched = _joined(target, incoming, keys, columns)
    updated = matched.select(*[col(_IN + c).alias(c) for c in columns], F.lit(UPDATE).alias(GROUP))
    if insert:
        updated = updated.unionByName(_tagged(_not_in_target(target, incoming, keys), columns, INSERT))
    return Plan(_positions(matched), updated, matched)


def delete_insert_plan(target: DataFrame, incoming: DataFrame, keys: Sequence[str], columns: Sequence[str]) -> Plan:
    matched = target.join(incoming.select(*[col(k) for k in keys]).distinct(), [*keys], "left_semi")
    return Plan(_positions(matched), _tagged(incoming, columns, INSERT))


def scd2_plan(
    target: DataFrame,
    incoming: DataFrame,
    keys: Sequence[str],
    columns: Sequence[str],
    *,
    valid_from: str,
    valid_to: str,
    now: Any,
) -> Plan:
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
    return Plan(_positions(changed), closed.unionByName(opened), matched)


def kept_rows(target: DataFrame, removed: DataFrame, segments: set[str], columns: Sequence[str], group: str):
    """Copy-on-write: the rows of the touched `segments` that the plan does not replace, to be rewritten."""
    rows = target.filter(F.col(SEGMENT_ID).isin(sorted(segments))).join(removed, [SEGMENT_ID, POSITION], "left_anti")
    return _tagged(rows, columns, group)
