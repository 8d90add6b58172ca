"""Reading and writing table data on Spark. Plain values in and out; no Django.

Files are written under `<warehouse>/<base>/data/<tag>/` (segments) and `<warehouse>/<base>/deltas/<tag>/`
(delta files), where `base` is `<catalog id>/<table id>` and `tag` is unique per job run: never overwritten.
Columns carry their stable ids as Parquet field ids; a segment is read with the schema it was written with and
projected onto the current schema by column id (renamed columns keep their data, added ones read as their
default, widened ones are cast up), and the union of its delta files' positions is subtracted.
"""

import base64
import datetime
import decimal
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from catalog_app.engine.session import FIELD_ID_METADATA_KEY

SIMPLE_SPARK_TYPES = {
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
DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
SEGMENT_ID, POSITION, ORDER = "_segment", "_pos", "_order"
_POSITION_COLUMNS = ((SEGMENT_ID, "string"), (POSITION, "long"), (ORDER, "long"))
_GROUP_IN_PATH = re.compile(r"/__g=([^/]+)/")
STATS_TYPES = ("int", "long", "float", "double", "string", "date", "timestamp", "boolean")


@dataclass(frozen=True)
class Column:
    id: int
    name: str
    type: str
    nullable: bool = True
    default: Any = None

    @classmethod
    def from_dict(cls, data: dict) -> "Column":
        return cls(data["id"], data["name"], data["type"], data["nullable"], data.get("default"))


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


def spark_type(type_name: str) -> T.DataType:
    if type_name in SIMPLE_SPARK_TYPES:
        return SIMPLE_SPARK_TYPES[type_name]
    match = DECIMAL.fullmatch(type_name)
    if match is None:
        raise ValueError(f"not a column type: {type_name}")
    return T.DecimalType(int(match[1]), int(match[2]))


def struct_type(columns: Iterable[Column]) -> T.StructType:
    return T.StructType(
        [T.StructField(c.name, spark_type(c.type), True, {FIELD_ID_METADATA_KEY: c.id}) for c in columns]
    )


def empty_frame(spark: SparkSession, columns: Sequence[Column]) -> DataFrame:
    return spark.createDataFrame([], struct_type(columns))


class Warehouse:
    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")

    def uri(self, relative: str) -> str:
        return f"{self.root}/{relative}"


def _relative_path(path_column: SparkColumn, base: str) -> SparkColumn:
    """The part of a file URI from `base` (`<catalog id>/<table id>`) on: the path as the catalog stores it."""
    return F.regexp_extract(path_column, f"({re.escape(base)}/.*)$", 1)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value


# --- reading ----------------------------------------------------------------------------------------------


def read_segments(
    spark: SparkSession,
    warehouse: Warehouse,
    base: str,
    current: Sequence[Column],
    segments: Sequence[SegmentRead],
    *,
    positions: bool = False,
) -> DataFrame:
    """The rows of `segments` in the `current` schema, deltas applied. With `positions`, each row also carries
    its segment id, its position in the segment and the segment's order (for stable paging)."""
    if not segments:
        frame = empty_frame(spark, current)
        if positions:
            frame = frame.select("*", *[F.lit(None).cast(t).alias(n) for n, t in _POSITION_COLUMNS])
        return frame
    by_schema: dict[tuple[Column, ...], list[SegmentRead]] = {}
    for segment in segments:
        by_schema.setdefault(segment.columns, []).append(segment)
    parts = []
    for written, group in by_schema.items():
        frame = spark.read.schema(struct_type(written)).parquet(*[warehouse.uri(s.path) for s in group])
        by_id = {column.id: column for column in written}
        projection = [
            (F.col(f"`{by_id[c.id].name}`") if c.id in by_id else F.lit(c.default))
            .cast(spark_type(c.type))
            .alias(c.name)
            for c in current
        ]
        path = _relative_path(F.col("_metadata.file_path"), base).alias("_path")
        parts.append(frame.select(*projection, path, F.col("_metadata.row_index").alias(POSITION)))
    rows = reduce(DataFrame.unionByName, parts)
    files = spark.createDataFrame(
        [(s.path, s.id, s.order) for s in segments], f"_path string, {SEGMENT_ID} string, {ORDER} long"
    )
    rows = rows.join(F.broadcast(files), "_path").drop("_path")
    delta_paths = {delta: segment.id for segment in segments for delta in segment.deltas}
    if delta_paths:
        deleted = spark.read.schema("pos long").parquet(*[warehouse.uri(p) for p in delta_paths])
        owners = spark.createDataFrame(list(delta_paths.items()), f"_dpath string, {SEGMENT_ID} string")
        deleted = deleted.select(_relative_path(F.col("_metadata.file_path"), base).alias("_dpath"), F.col("pos"))
        deleted = deleted.join(F.broadcast(owners), "_dpath").select(SEGMENT_ID, F.col("pos").alias(POSITION))
        rows = rows.join(deleted, [SEGMENT_ID, POSITION], "left_anti")
    if not positions:
        rows = rows.drop(SEGMENT_ID, POSITION, ORDER)
    return rows


# --- writing ----------------------------------------------------------------------------------------------


def write_segments(
    warehouse: Warehouse,
    base: str,
    rows: DataFrame,
    columns: Sequence[Column],
    *,
    partition_ids: Sequence[int] = (),
    tag: str,
    group_column: str | None = None,
) -> list[WrittenFile]:
    """Write `rows` (already in the table's schema) as new segments; one partition value per file. With
    `group_column` (a string column of `rows`, not stored), each group value gets files of its own."""
    target = f"{base}/data/{tag}"
    by_id = {column.id: column for column in columns}
    frame = rows.select(
        *[
            F.col(f"`{c.name}`").cast(spark_type(c.type)).alias(c.name, metadata={FIELD_ID_METADATA_KEY: c.id})
            for c in columns
        ],
        *([F.col(group_column).alias("__g")] if group_column else []),
    )
    writer_columns = ["__g"] if group_column else []
    writer_columns += [f"__p{column_id}" for column_id in partition_ids]
    if writer_columns:
        frame = frame.select("*", *[F.col(f"`{by_id[i].name}`").alias(f"__p{i}") for i in partition_ids])
        frame = frame.repartition(*writer_columns)
        frame.write.partitionBy(*writer_columns).parquet(warehouse.uri(target))
    else:
        frame.write.parquet(warehouse.uri(target))
    return _describe_segments(warehouse, base, target, columns, partition_ids)


def _describe_segments(warehouse, base, target, columns, partition_ids) -> list[WrittenFile]:
    """Row count, size and per-column min/max/nulls of each file just written, from the files' Parquet footers
    (no pass over the data). A column whose footer has no min/max for a file (values too long for parquet-mr to
    keep) is left out of that file's stats: never pruned on."""
    stat_columns = [c for c in columns if c.type in STATS_TYPES or c.type.startswith("decimal")]
    described = []
    for path, size, footer in _written_files(warehouse, base, target):
        if footer.num_rows == 0:  # Spark writes an empty file for an empty frame: no segment
            continue
        chunks = _column_chunks(footer)
        stats = {str(c.id): stat for c in stat_columns if (stat := _column_stats(chunks.get(c.id))) is not None}
        partition_values = {str(i): stats[str(i)]["min"] for i in partition_ids if str(i) in stats}
        group = _GROUP_IN_PATH.search(path)
        described.append(WrittenFile(path, footer.num_rows, size, stats, partition_values, group=group and group[1]))
    return sorted(described, key=lambda written: written.path)


def _written_files(warehouse: "Warehouse", base: str, target: str) -> Iterator[tuple[str, int, Any]]:
    """(path from `base` on, size, Parquet footer) of each data file Spark wrote under `target`."""
    filesystem, root = pafs.FileSystem.from_uri(_arrow_uri(warehouse.uri(target)))
    for info in filesystem.get_file_info(pafs.FileSelector(root, recursive=True)):
        if info.type == pafs.FileType.File and info.base_name.endswith(".parquet") and info.base_name[0] not in "._":
            with filesystem.open_input_file(info.path) as handle:
                footer = pq.ParquetFile(handle).metadata
            yield target + info.path[len(root.rstrip("/")) :], info.size, footer


def _arrow_uri(uri: str) -> str:
    """Hadoop's s3a:// is pyarrow's s3://; plain paths are absolute."""
    if uri.startswith("s3a://"):
        return "s3://" + uri[len("s3a://") :]
    return uri if "://" in uri or uri.startswith("file:") else os.path.abspath(uri)


def _column_chunks(footer) -> dict[int, list]:
    """Each column's chunks (one per row group), by Parquet field id."""
    chunks: dict[int, list] = {}
    for index, field_id in enumerate(_field_ids(footer)):
        if field_id is not None:
            chunks[field_id] = [footer.row_group(g).column(index) for g in range(footer.num_row_groups)]
    return chunks


def _field_ids(footer) -> list[int | None]:
    schema = footer.schema.to_arrow_schema()
    return [int(f.metadata[b"PARQUET:field_id"]) if f.metadata and b"PARQUET:field_id" in f.metadata else None
            for f in schema]  # fmt: skip


def _column_stats(chunks: list | None) -> dict | None:
    if not chunks:
        return None
    statistics = [chunk.statistics for chunk in chunks]
    if any(s is None or not s.has_null_count for s in statistics):
        return None
    if any(s.num_values and not s.has_min_max for s in statistics):
        return None  # a row group holds values but no min/max
    nulls, bounded = sum(s.null_count for s in statistics), [s for s in statistics if s.has_min_max]
    if not bounded:
        return {"min": None, "max": None, "nulls": nulls}
    low, high = min(_stat_value(s.min) for s in bounded), max(_stat_value(s.max) for s in bounded)
    return {"min": _json_value(low), "max": _json_value(high), "nulls": nulls}


def _stat_value(value: Any) -> Any:
    """Timestamps come tz-aware (UTC) from the footer; the catalog keeps them naive, in UTC, as Spark gives them."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.UTC).replace(tzinfo=None)
    return value


def write_deltas(warehouse: Warehouse, base: str, deleted: DataFrame, *, tag: str) -> list[WrittenFile]:
    """Write the (segment, position) pairs in `deleted` as one delta file per segment."""
    target = f"{base}/deltas/{tag}"
    frame = deleted.select(F.col(SEGMENT_ID).alias("__segment"), F.col(POSITION).alias("pos")).distinct()
    frame.repartition("__segment").write.partitionBy("__segment").parquet(warehouse.uri(target))
    segment_of = re.compile(r"__segment=([0-9a-f-]{36})/")
    return sorted(
        (
            WrittenFile(path, footer.num_rows, size, segment_id=segment_of.search(path)[1])
            for path, size, footer in _written_files(warehouse, base, target)
            if footer.num_rows
        ),
        key=lambda delta: delta.path,
    )


def json_value(value: Any) -> Any:
    """A value as JSON: dates and times in ISO 8601, decimals as strings, bytes as base64."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    return _json_value(value)


def read_page(
    spark: SparkSession,
    warehouse: Warehouse,
    base: str,
    current: Sequence[Column],
    segments: Sequence[SegmentRead],
    *,
    offset: int,
    limit: int,
) -> list[list[Any]]:
    """Rows `offset` to `offset + limit` in a stable order (segment, then position). Reads only the segments
    the window can reach: a preview of a large table reads its first segments, not the whole table."""
    frame = read_segments(spark, warehouse, base, current, segments, positions=True)
    page = frame.orderBy(ORDER, POSITION).offset(offset).limit(limit).collect()
    return [[json_value(row[c.name]) for c in current] for row in page]


def deleted_count(spark: SparkSession, warehouse: Warehouse, base: str, segments: Sequence[SegmentRead]) -> int:
    """Rows deleted by the delta files of `segments`, counting a position deleted twice once."""
    paths = [delta for segment in segments for delta in segment.deltas]
    if not paths:
        return 0
    frame = spark.read.schema("pos long").parquet(*[warehouse.uri(p) for p in paths])
    return (
        frame.select(_relative_path(F.col("_metadata.file_path"), base).alias("f"), "pos")
        .select(F.regexp_extract("f", r"__segment=([^/]+)/", 1).alias("s"), "pos")
        .distinct()
        .count()
    )
