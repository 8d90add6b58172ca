"""Writing segments and delta files with Spark, and describing the files written from their Parquet footers
(row count, size, per-column statistics, partition values): what the catalog records of them."""

import math
import re
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from catalog_app.engine.segments import (
    DELTA_POSITIONS,
    INLINE,
    INLINE_BYTES,
    INLINE_ROWS,
    INLINE_TYPES,
    INLINE_VALUES,
    POSITION,
    SEGMENT_ID,
    Column,
    WrittenFile,
)
from catalog_app.engine.session import FIELD_ID_METADATA_KEY
from catalog_app.engine.spark_hash import xxhash64
from catalog_app.engine.types import arrow_type, has_statistics, json_value, spark_type, stat_json, utc_naive
from catalog_app.engine.warehouse import Warehouse, arrow_filesystem, data_folder, delta_folder

_GROUP_IN_PATH = re.compile(r"/__g=([^/]+)/")
_PLAIN_GROUP = re.compile(r"[0-9A-Za-z_.-]+")  # a group value Spark puts in a folder name as it is (no escaping)
_SEGMENT_IN_PATH = re.compile(r"__segment=([0-9a-f-]{36})/")


def write_segments(
    warehouse: Warehouse,
    base: str,
    rows: DataFrame,
    columns: Sequence[Column],
    *,
    partition_ids: Sequence[int] = (),
    tag: str,
    group_column: str | None = None,
    few: bool = False,
    key_ids: Sequence[int] = (),
) -> list[WrittenFile]:
    """Write `rows` (already in the table's schema) as new segments; one partition value per file. With
    `group_column` (a string column of `rows`, not stored), each group value gets files of its own. `few` rows
    (the caller knows) are written by one task, with no shuffle to gather each group's rows."""
    target = data_folder(base, tag)
    by_id = {column.id: column for column in columns}
    frame = rows.select(
        *[
            F.col(f"`{c.name}`").cast(spark_type(c.type)).alias(c.name, metadata={FIELD_ID_METADATA_KEY: c.id})
            for c in columns
        ],
        *([F.col(group_column).alias("__g")] if group_column else []),
    )
    writer_columns = ["__g"] if group_column else []
    if partition_ids:  # folders named by a hash of the partition's values: any value, of any length, fits a path
        values = [F.col(f"`{by_id[i].name}`") for i in partition_ids]
        frame = frame.select("*", F.xxhash64(*values, *[value.isNull() for value in values]).alias("__p"))
        writer_columns.append("__p")
    if writer_columns:
        frame = frame.coalesce(1) if few else frame.repartition(*writer_columns)
        frame.write.partitionBy(*writer_columns).parquet(warehouse.uri(target))
    else:
        frame.write.parquet(warehouse.uri(target))
    written = describe_segments(warehouse, base, target, columns, partition_ids, key_ids)
    _remove_empty(warehouse, target, keep={w.path for w in written})
    return written


def write_segments_arrow(
    warehouse: Warehouse,
    base: str,
    rows: pa.Table,
    columns: Sequence[Column],
    *,
    partition_ids: Sequence[int] = (),
    tag: str,
    group_column: str | None = None,
    key_ids: Sequence[int] = (),
) -> list[WrittenFile]:
    """`write_segments` of `few` rows held here as Arrow, with pyarrow and no Spark job: the files Spark's write
    gives, one per group value and partition, in the same folders (`__g=<group>/__p=<Spark's xxhash64 of the
    partition values and their NULL flags>`), with the same Parquet types (decimals of up to 18 digits as INT32 or
    INT64, timestamps as INT64 micros in UTC), field ids, and footer statistics. Rows within a file may be in
    another order than Spark's (nothing reads meaning into it). Raises ValueError for a group value Spark would
    escape in a folder name (a segment id never is one)."""
    target = data_folder(base, tag)
    by_id = {column.id: column for column in columns}
    schema = pa.schema(
        [pa.field(c.name, arrow_type(c.type), True, {b"PARQUET:field_id": str(c.id).encode()}) for c in columns]
    )
    data = pa.Table.from_arrays([rows.column(c.name).cast(arrow_type(c.type)) for c in columns], schema=schema)
    partitions = [by_id[i] for i in partition_ids]
    files: dict[tuple[str | None, int | None], list[pa.Array]] = {}
    for (group, *values), indices in _distinct_rows(rows, data, group_column, partitions):
        if group is not None and not _PLAIN_GROUP.fullmatch(group):
            raise ValueError(f"group value {group!r} is not a plain folder name")
        row = [(value, c.type) for value, c in zip(values, partitions, strict=True)]
        hashed = xxhash64([*row, *[(value is None, "boolean") for value, _ in row]]) if partitions else None
        files.setdefault((group, hashed), []).append(indices)  # values Spark hashes alike (0.0, -0.0) share a file
    for (group, hashed), parts in files.items():
        indices = pa.concat_arrays(parts)
        folder = target + (f"/__g={group}" if group_column else "") + (f"/__p={hashed}" if partitions else "")
        filesystem, path = arrow_filesystem(warehouse.uri(folder))
        filesystem.create_dir(path, recursive=True)
        part = data.take(indices)
        pq.write_table(
            part, f"{path}/part-00000-{uuid.uuid4()}.c000.snappy.parquet", filesystem=filesystem,
            compression="snappy", store_decimal_as_integer=True, use_dictionary=_dictionary_columns(part),
        )  # fmt: skip
    return describe_segments(warehouse, base, target, columns, partition_ids, key_ids) if files else []


def _dictionary_columns(rows: pa.Table) -> list[str]:
    """The columns parquet-mr (Spark's writer) keeps dictionary-encoded: those whose dictionary and indices come out
    smaller than their plain values (it falls back to plain otherwise; pyarrow would keep the dictionary)."""
    chosen = []
    for name in rows.column_names:
        values = rows.column(name).drop_null()
        if not len(values) or pa.types.is_boolean(values.type):
            continue
        distinct = pc.unique(values)
        index_bytes = len(values) * max(1, int(len(distinct) - 1).bit_length()) / 8
        if pa.types.is_binary(values.type) or pa.types.is_string(values.type):
            plain = pc.sum(pc.binary_length(values)).as_py() + 4 * len(values)
            dictionary = pc.sum(pc.binary_length(distinct)).as_py() + 4 * len(distinct)
        else:
            width = values.type.byte_width if not pa.types.is_decimal(values.type) else 8
            plain, dictionary = len(values) * width, len(distinct) * width
        if dictionary + index_bytes < plain:
            chosen.append(name)
    return chosen


def _distinct_rows(
    rows: pa.Table, data: pa.Table, group_column: str | None, partitions: Sequence[Column]
) -> Iterator[tuple[list, pa.Array]]:
    """Each distinct (group, partition values...) of the rows, with the positions of its rows: one Arrow group-by,
    so that the partition hash is computed once per partition, not per row."""
    keys = pa.table(
        {"__g": rows.column(group_column) if group_column else pa.nulls(rows.num_rows, pa.string())}
        | {f"__v{i}": data.column(c.name) for i, c in enumerate(partitions)}
        | {"__i": pa.array(np.arange(rows.num_rows, dtype=np.int64))}
    )
    names = [name for name in keys.column_names if name != "__i"]
    distinct = keys.group_by(names, use_threads=False).aggregate([("__i", "list")])
    values = [distinct.column(name).to_pylist() for name in names]
    for index, positions in enumerate(distinct.column("__i_list").combine_chunks()):
        yield [column[index] for column in values], positions.values


def _remove_empty(warehouse: Warehouse, target: str, *, keep: set[str]) -> None:
    """Spark writes an empty Parquet file for an empty frame (and a _SUCCESS marker): no segment refers to it, so
    it is removed now rather than left for GC; a write of no rows leaves no folder at all."""
    filesystem, root = arrow_filesystem(warehouse.uri(target))
    if not keep:
        filesystem.delete_dir(root)
        return
    for info in filesystem.get_file_info(pafs.FileSelector(root, recursive=True)):
        relative = target + info.path[len(root.rstrip("/")) :]
        data_file = info.type == pafs.FileType.File and info.base_name.endswith(".parquet")
        if data_file and info.base_name[0] not in "._" and relative not in keep:
            filesystem.delete_file(info.path)


def describe_segments(warehouse, base, target, columns, partition_ids, key_ids=()) -> list[WrittenFile]:
    """Row count, size and per-column min/max/nulls of each file just written, from the files' Parquet footers
    (no pass over the data). A column whose footer has no min/max for a file (values too long for parquet-mr to
    keep) is left out of that file's stats: never pruned on. Such a partition column's value is read from the
    file itself, and so are the values of the key columns (`key_ids`) of a small file (`inline_values`)."""
    described = [
        segment_described(warehouse, path, size, footer, columns, partition_ids, key_ids)
        for path, size, footer in _written_files(warehouse, base, target)
        if footer.num_rows  # Spark writes an empty file for an empty frame: no segment
    ]
    return sorted(described, key=lambda written: written.path)


def segment_described(warehouse, path: str, size: int, footer, columns, partition_ids, key_ids=()) -> WrittenFile:
    """One segment file as the catalog records it, from its footer (see `describe_segments`); also what an
    engine's Iceberg commit adds (engine/iceberg_incoming.py)."""
    chunks = _column_chunks(footer)
    stats = {str(c.id): stat for c in columns if has_statistics(c.type) and (stat := _column_stats(chunks.get(c.id)))}
    stats |= inline_values(warehouse, path, footer, [c for c in columns if c.id in key_ids], stats)
    by_id = {c.id: c for c in columns}
    partition_values = {str(i): stats[str(i)]["min"] for i in partition_ids if str(i) in stats}
    for i in partition_ids:
        if str(i) not in partition_values:
            partition_values |= _only_value(warehouse, path, by_id[i])
    group = _GROUP_IN_PATH.search(path)
    return WrittenFile(path, footer.num_rows, size, stats, partition_values, group=group and group[1])


def inline_values(warehouse: Warehouse, path: str, footer, keys: Sequence[Column], stats: dict) -> dict[str, dict]:
    """The statistics of a small file's key columns with their values in file order (`INLINE_VALUES`): none for a
    file of more than INLINE_ROWS rows, a key column of another type than INLINE_TYPES or without statistics, or
    values longer than INLINE_BYTES in all."""
    if (
        not keys
        or footer.num_rows > INLINE_ROWS
        or any(c.type not in INLINE_TYPES or str(c.id) not in stats for c in keys)
    ):
        return {}
    names = dict(zip(_field_ids(footer), footer.schema.to_arrow_schema().names, strict=True))
    if any(c.id not in names for c in keys):
        return {}
    filesystem, location = arrow_filesystem(warehouse.uri(path))
    rows = pq.ParquetFile(location, filesystem=filesystem).read(columns=[names[c.id] for c in keys])
    values = {c.id: rows.column(names[c.id]).to_pylist() for c in keys}
    if sum(len(v) for c in keys if c.type == "string" for v in values[c.id] if v is not None) > INLINE_BYTES:
        return {}
    return {str(c.id): {**stats[str(c.id)], INLINE_VALUES: values[c.id]} for c in keys}


def _only_value(warehouse: Warehouse, path: str, column: Column) -> dict[str, Any]:
    """{column id: value} if the file's column holds a single value, else nothing."""
    filesystem, location = arrow_filesystem(warehouse.uri(path))
    with filesystem.open_input_file(location) as handle:
        values = pc.unique(pq.ParquetFile(handle).read(columns=[column.name]).column(0))
    return {str(column.id): json_value(values[0].as_py())} if len(values) == 1 else {}


def _written_files(warehouse: Warehouse, base: str, target: str) -> Iterator[tuple[str, int, Any]]:
    """(path from `base` on, size, Parquet footer) of each data file Spark wrote under `target`."""
    filesystem, root = arrow_filesystem(warehouse.uri(target))
    for info in filesystem.get_file_info(pafs.FileSelector(root, recursive=True)):
        if info.type == pafs.FileType.File and info.base_name.endswith(".parquet") and info.base_name[0] not in "._":
            with filesystem.open_input_file(info.path) as handle:
                footer = pq.ParquetFile(handle).metadata
            yield target + info.path[len(root.rstrip("/")) :], info.size, footer


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
    if any(isinstance(bound, float) and not math.isfinite(bound) for s in bounded for bound in (s.min, s.max)):
        return None  # NaN and infinities bound nothing the catalog can prune with (nor does JSON hold them)
    try:
        low, high = min(utc_naive(s.min) for s in bounded), max(utc_naive(s.max) for s in bounded)
    except (OverflowError, ValueError):  # a date or timestamp outside Python's years 1 to 9999
        return None  # loads refuse such values (incoming.checked_frame); no bound to prune with otherwise
    if any(isinstance(bound, str) and "\x00" in bound for bound in (low, high)):
        return None  # PostgreSQL cannot keep a NUL character; loads refuse it, other writes leave the bound out
    return {"min": stat_json(low), "max": stat_json(high), "nulls": nulls}


def write_deltas(warehouse: Warehouse, base: str, deleted: DataFrame, *, tag: str) -> list[WrittenFile]:
    """Write the (segment, position) pairs in `deleted` as one delta file per segment (one shuffle, which also
    drops repeated pairs)."""
    target = delta_folder(base, tag)
    frame = deleted.select(F.col(SEGMENT_ID).alias("__segment"), F.col(POSITION).alias("pos"))
    frame.repartition("__segment").distinct().write.partitionBy("__segment").parquet(warehouse.uri(target))
    return describe_deltas(warehouse, base, target)


def describe_deltas(warehouse: Warehouse, base: str, target: str) -> list[WrittenFile]:
    """The delta files under `target`, one folder `__segment=<id>` per segment they delete from; each with the
    bounds of the positions it lists (`DELTA_POSITIONS`, from its footer), as an Iceberg position delete file
    carries them, and a small one with its positions themselves (`delta_stats`)."""
    return sorted(
        (
            WrittenFile(
                path,
                footer.num_rows,
                size,
                stats=delta_stats(warehouse, path, footer),
                segment_id=_SEGMENT_IN_PATH.search(path)[1],
            )
            for path, size, footer in _written_files(warehouse, base, target)
            if footer.num_rows
        ),
        key=lambda delta: delta.path,
    )


def delta_stats(warehouse: Warehouse, path: str, footer) -> dict[str, Any]:
    """A delta file's statistics: the bounds of the positions its footer records (none if a row group has no
    statistics), so a reader after a few rows of the segment skips the delete files that cannot list them; and
    when it lists at most `INLINE_ROWS`, the positions themselves (`INLINE`), as Delta Lake keeps a small
    deletion vector inline in its log: a reader of a segment with a thousand small delete files reads their
    catalog rows, not a thousand files."""
    names = footer.schema.to_arrow_schema().names
    if DELTA_POSITIONS not in names:
        return {}
    index = names.index(DELTA_POSITIONS)
    bounds = _column_stats([footer.row_group(g).column(index) for g in range(footer.num_row_groups)])
    stats: dict[str, Any] = {DELTA_POSITIONS: bounds} if bounds else {}
    if footer.num_rows <= INLINE_ROWS:
        filesystem, file = arrow_filesystem(warehouse.uri(path))
        listed = pq.ParquetFile(file, filesystem=filesystem).read(columns=[DELTA_POSITIONS]).column(0)
        stats[INLINE] = sorted(int(p) for p in listed.to_pylist())
    return stats
