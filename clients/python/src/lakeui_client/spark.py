"""Read a table at any ref into a DataFrame, and write a DataFrame into a branch, with your own SparkSession.

The data goes straight between your Spark and the warehouse; LakeUI's server only gives the scan plan (which
files, which deleted positions, which schema) and runs the load job. Your Spark must reach the warehouse: the
same folder for a local warehouse, or the same bucket (with your own s3a credentials) for `s3a://`.

Files keep their columns' stable ids as Parquet field ids, so a renamed column is read from its old files by id
(as the server's engine reads it); this needs `spark.sql.parquet.fieldId.read.enabled`, which `read_table` sets
on your session.
"""

from collections.abc import Sequence
from functools import reduce
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeui_client.client import Client

FIELD_ID = "parquet.field.id"
FIELD_ID_READ = "spark.sql.parquet.fieldId.read.enabled"
TYPES = {
    "boolean": T.BooleanType(),
    "int": T.IntegerType(),
    "long": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "string": T.StringType(),
    "binary": T.BinaryType(),
    "date": T.DateType(),
    "timestamp": T.TimestampType(),
}
_FILE, _POS, _DELETES = "__lakeui_file", "__lakeui_pos", "__lakeui_delete_file"


def read_table(
    spark: SparkSession,
    client: Client,
    catalog: str,
    ref: str,
    table: str,
    at: str | None = None,
    where: str | None = None,
) -> DataFrame:
    """The rows of `table` ("db.table") at `ref` (a branch, tag or commit id; `at`: an ISO time for time travel)
    as a lazy DataFrame in the table's current schema, deleted rows left out. With `where` (a SQL predicate over
    the table's columns), only the rows it matches: the scan plan leaves out the files whose partition values
    and statistics rule it out, and the rest are filtered by your Spark."""
    zone = spark.conf.get("spark.sql.session.timeZone") if where else None
    frame = plan_frame(spark, client.table_scan(catalog, ref, table, at=at, where=where, time_zone=zone))
    return frame.filter(F.expr(where)) if where else frame


def write_table(
    df: DataFrame,
    client: Client,
    catalog: str,
    branch: str,
    table: str,
    strategy: str = "append_only",
    key_columns: Sequence[str] | None = None,
    wait: bool = True,
    expected_head: str | None = None,
    **fields: Any,
) -> dict:
    """Write `df` as Parquet to a staging location of the warehouse and load it into `table` on `branch` with one
    load job of `strategy` (any of docs/api.md#write-strategies; its fields such as `watermark` or `partition_column` as
    keyword arguments). Columns are matched by name and checked against the table's schema by the job. Returns the job
    (its `result` has the counts); with `wait`, a failed load raises `JobFailed` with the API's code. `expected_head`:
    the branch head your data was based on; if the branch has moved since, the load is refused (`ConflictError`, code
    `branch_moved`) and nothing is loaded."""
    headers = {"If-Match": expected_head} if expected_head else {}
    staging = client.request("POST", f"{client._table(catalog, branch, table)}/staging", headers=headers)
    df.write.parquet(staging["uri"])
    body = {"strategy": strategy, "staged": staging["id"], **fields}
    if key_columns:
        body["key_columns"] = list(key_columns)
    path = f"{client._table(catalog, branch, table)}/load"
    return client._maybe_wait(client.request("POST", path, json=body, headers=headers), wait)


def read_changes(spark: SparkSession, client: Client, catalog: str, source: str, target: str, table: str) -> DataFrame:
    """The row changes of `table` ("db.table") from `source` to `target` (any two refs) as a DataFrame: `_change`
    (insert, update, delete), each column before (`b:<name>`) and after (`a:<name>`), `_changed` (the columns an
    update changed), `_commit`, `_merge` and `_merge_request` (docs/changes.md). Unlike `read_table`, the records
    come from the server (its Arrow stream: which rows changed and who changed them is decided there, from the
    files that differ), then live in your session."""
    import pyarrow as pa

    changes = client.changes_arrow(catalog, source, target, table)  # the ids dictionary-encoded: plain for Spark
    plain = [f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f for f in changes.schema]
    return spark.createDataFrame(changes.cast(pa.schema(plain, metadata=changes.schema.metadata)))


def plan_frame(spark: SparkSession, plan: dict) -> DataFrame:
    """The rows a scan plan describes: each file read with the schema it was written with (one scan per written
    schema), projected onto the current schema by column id, less the positions its delete files list."""
    spark.conf.set(FIELD_ID_READ, "true")
    current = plan["columns"]
    if not plan["segments"]:
        return spark.createDataFrame([], _struct(current))
    by_schema: dict[tuple, list[dict]] = {}
    for segment in plan["segments"]:
        written = tuple((c["id"], c["name"], c["type"]) for c in segment["columns"])
        by_schema.setdefault(written, []).append(segment)
    base = plan["base"]
    parts = []
    for group in by_schema.values():
        written = group[0]["columns"]
        frame = spark.read.schema(_struct(written)).parquet(*[s["uri"] for s in group])
        parts.append(
            frame.select(
                *_projection(written, current),
                _relative(F.col("_metadata.file_path"), base).alias(_FILE),
                F.col("_metadata.row_index").alias(_POS),
            )
        )
    rows = reduce(DataFrame.unionByName, parts)
    deletes = [(d["path"], s["path"], d["uri"]) for s in plan["segments"] for d in s["deletes"]]
    if deletes:
        owners = spark.createDataFrame([(d, s) for d, s, _ in deletes], f"{_DELETES} string, {_FILE} string")
        deleted = spark.read.schema("pos long").parquet(*[uri for _, _, uri in deletes])
        deleted = deleted.select(_relative(F.col("_metadata.file_path"), base).alias(_DELETES), F.col("pos"))
        deleted = deleted.join(F.broadcast(owners), _DELETES).select(_FILE, F.col("pos").alias(_POS))
        rows = rows.join(deleted, [_FILE, _POS], "left_anti")
    return rows.drop(_FILE, _POS)


def spark_type(type_name: str) -> T.DataType:
    """A LakeUI column type as Spark's: the simple types, and decimal(p,s)."""
    if type_name in TYPES:
        return TYPES[type_name]
    precision, scale = type_name.removeprefix("decimal(").removesuffix(")").split(",")
    return T.DecimalType(int(precision), int(scale))


def _struct(columns: Sequence[dict]) -> T.StructType:
    return T.StructType([T.StructField(c["name"], spark_type(c["type"]), True, {FIELD_ID: c["id"]}) for c in columns])


def _projection(written: Sequence[dict], current: Sequence[dict]) -> list[SparkColumn]:
    """A file's columns in the current schema, matched by id: renamed columns keep their data, columns added
    since read as their default, widened ones are cast up."""
    names = {c["id"]: c["name"] for c in written}
    return [
        (F.col(f"`{names[c['id']]}`") if c["id"] in names else F.lit(c.get("default")))
        .cast(spark_type(c["type"]))
        .alias(c["name"])
        for c in current
    ]


def _relative(path: SparkColumn, base: str) -> SparkColumn:
    """A file's path from the table's folder on, as the plan gives it (Spark's own path is a full URI)."""
    escaped = "".join(f"\\{ch}" if not ch.isalnum() else ch for ch in base)
    return F.regexp_extract(path, f"({escaped}/.*)$", 1)
