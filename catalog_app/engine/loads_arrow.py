"""Small key loads done in this process with pyarrow, with no Spark job (docs/api.md#write-strategies): the incoming
rows read and checked here (`incoming_rows`), the rows `insert`, `update`, `upsert` and `delete_insert` write
(`keyed_rows`), both as the Spark path gives them; `loads._key_change_arrow` matches the keys (`keymatch`) and
writes the files (`writes.write_segments_arrow`, delta files and copy-on-write copies as the driver path writes
them). Each raises `Unsupported` where Arrow could not give exactly what Spark gives, before anything is written,
and the load runs on Spark instead.

The incoming rows are JSON rows (converted by `incoming.rows_arrays`, as the Spark path converts them) or an
uploaded Parquet file (or a folder of them) whose columns Arrow casts to the table's types exactly as Spark's
`try_cast` does: the same type, an integer into a wider integer or a decimal, a decimal into a decimal, a float into
a double, a timestamp with a time zone (milli- or microseconds) into a timestamp. Anything else (CSV and JSON
lines, queries, text parsed into numbers, naive or nanosecond timestamps, a column of Arrow's null type, which Spark
reads as int, a missing column with a default, ...) and any row the checks of `incoming.checked_frame` would refuse
goes to Spark, which refuses it with its own message.
"""

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from catalog_app.engine import incoming
from catalog_app.engine.predicate_arrow import Unsupported
from catalog_app.engine.reads import READ_ERRORS
from catalog_app.engine.segments import Column
from catalog_app.engine.strategies import GROUP, INSERT, UPDATE
from catalog_app.engine.types import arrow_type, is_decimal
from catalog_app.engine.warehouse import Warehouse, arrow_filesystem
from catalog_app.job_specs import Rows, StoredFiles

ARROW_ROWS = 1_000_000  # a key load of up to this many incoming rows is read, matched and written here
ARROW_BYTES = 256 * 2**20  # ... and of up to this much uncompressed Parquet
STRATEGIES = ("insert", "update", "upsert", "delete_insert")  # the key strategies that write incoming rows only
_INDEX, _COUNT = "_row", "_matches"

__all__ = ["ARROW_BYTES", "ARROW_ROWS", "STRATEGIES", "Unsupported", "incoming_rows", "keyed_rows"]


def incoming_rows(
    warehouse: Warehouse, source: Any, columns: Sequence[Column], *, limit: int, time_zone: str
) -> pa.Table:
    """The incoming rows of `source` (a `Rows` or `StoredFiles` source) in the table's `columns` and Arrow types,
    checked as the Spark path checks them; `Unsupported` for more than `limit` rows, or what Spark must do."""
    if isinstance(source, Rows):
        if len(source.rows) > limit:
            raise Unsupported(f"{len(source.rows)} incoming rows")
        return pa.table(incoming.rows_arrays(list(source.rows), columns))  # its IncomingError is Spark's
    if not isinstance(source, StoredFiles) or source.format != "parquet":
        raise Unsupported("incoming rows that are not JSON rows or Parquet")
    try:
        read = _parquet(warehouse.uri(source.path), limit)
    except READ_ERRORS as exc:
        raise Unsupported(f"reading the incoming file here: {exc}") from None
    return _checked(read, columns, time_zone=time_zone)


def _parquet(uri: str, limit: int) -> pa.Table:
    """The rows of the Parquet file at `uri`, or of the data files of the folder at `uri`, as Spark lists them
    (names starting with `_` or `.` skipped); a folder with folders in it (which Spark reads as partitions) is
    left to Spark, as are files of different schemas."""
    filesystem, path = arrow_filesystem(uri)
    info = filesystem.get_file_info(path)
    if info.type == pafs.FileType.File:
        listed = [info]
    elif info.type == pafs.FileType.Directory:
        listed = [i for i in filesystem.get_file_info(pafs.FileSelector(path)) if i.base_name[0] not in "._"]
    else:
        raise Unsupported(f"no incoming file at {uri}")
    if not listed or any(i.type != pafs.FileType.File for i in listed):
        raise Unsupported("an incoming folder with no file, or with folders")
    footers, rows, size = [], 0, 0
    for file in sorted(listed, key=lambda i: i.path):
        with filesystem.open_input_file(file.path) as handle:
            footer = pq.ParquetFile(handle).metadata
        rows += footer.num_rows
        size += sum(footer.row_group(g).total_byte_size for g in range(footer.num_row_groups))
        footers.append((file.path, footer))
        if rows > limit or size > ARROW_BYTES:
            raise Unsupported(f"more than {limit} incoming rows or {ARROW_BYTES} bytes")
    schemas = {footer.schema.to_arrow_schema().remove_metadata() for _, footer in footers}
    if len(schemas) > 1:
        raise Unsupported("incoming files of different schemas")
    parts = []
    for path, _ in footers:
        with filesystem.open_input_file(path) as handle:
            parts.append(pq.ParquetFile(handle).read())  # the file alone: no partition columns from its path
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _checked(read: pa.Table, columns: Sequence[Column], *, time_zone: str) -> pa.Table:
    """`read` in the table's schema, as `incoming.checked_frame` gives it, or `Unsupported` wherever that would
    refuse the data or convert a value in a way Arrow does not repeat exactly."""
    names = read.column_names
    if len({name.lower() for name in names}) < len(names) or set(names) - {c.name for c in columns}:
        raise Unsupported("incoming columns named twice, or that the table does not have")
    arrays = {}
    for column in columns:
        target = arrow_type(column.type)
        if column.name not in names:
            if column.default is not None:
                raise Unsupported(f"column {column.name!r} missing: Spark casts its default")
            arrays[column.name] = pa.nulls(read.num_rows, target)
            continue
        values = _cast(read.column(column.name), column)
        if not column.nullable and values.null_count:
            raise Unsupported(f"NULL in NOT NULL column {column.name!r}")
        if column.type == "string" and pc.any(pc.match_substring(values, incoming.NUL)).as_py():
            raise Unsupported(f"a NUL character in column {column.name!r}")
        if column.type in ("date", "timestamp") and not _years_fit(values, column.type, time_zone):
            raise Unsupported(f"a {column.type} outside the years 1 to 9999 in column {column.name!r}")
        arrays[column.name] = values
    return pa.table(arrays)


_INTEGERS = (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32())


def _cast(values: pa.ChunkedArray, column: Column) -> pa.ChunkedArray:
    """`values` as the column's Arrow type, converted exactly as Spark's `try_cast` converts the type Spark reads
    them as (see `types.FITTING_SOURCES`), or `Unsupported`: a value that does not fit raises in Arrow's safe cast
    (Spark would refuse it, or round a decimal)."""
    target, source = arrow_type(column.type), values.type
    if pa.types.is_dictionary(source):
        values, source = values.cast(source.value_type), source.value_type
    if source == target:
        return values
    if column.type == "string":
        fits = pa.types.is_large_string(source) or pa.types.is_string_view(source)
    elif column.type == "binary":
        fits = pa.types.is_large_binary(source) or pa.types.is_fixed_size_binary(source)
    elif column.type in ("int", "long"):
        fits = source in _INTEGERS
    elif is_decimal(column.type):
        fits = source in (*_INTEGERS, pa.uint64()) or pa.types.is_decimal(source)
    elif column.type == "double":
        fits = source == pa.float32()
    elif column.type == "timestamp":
        fits = pa.types.is_timestamp(source) and source.tz is not None and source.unit in ("ms", "us")
    else:
        fits = False
    if not fits:
        raise Unsupported(f"{source} into {column.type} column {column.name!r}")
    try:
        if pa.types.is_integer(source) and is_decimal(column.type):  # Arrow checks the type's digits, not values
            values = values.cast(pa.decimal128(38, target.scale), safe=True)
        return values.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise Unsupported(f"column {column.name!r} as {column.type}: {exc}") from None


_FIRST_DAY, _LAST_DAY = -719162, 2932896  # 0001-01-01 and 9999-12-31, in days since 1970-01-01
_DAY_MICROS = 86_400_000_000


def _years_fit(values: pa.ChunkedArray, type_name: str, time_zone: str) -> bool:
    """Whether every value lies in the years 1 to 9999 (`incoming.MIN_YEAR`, `MAX_YEAR`): of the instant in the
    session's time zone, as Spark's `year` reads it (UTC only here)."""
    if type_name == "timestamp" and time_zone not in ("UTC", "Etc/UTC", "Z", "+00:00"):
        raise Unsupported(f"timestamps checked in the session's time zone {time_zone}")
    days = values.cast(pa.int32()) if type_name == "date" else values.cast(pa.int64())
    low, high = pc.min_max(days).values()
    if low.as_py() is None:
        return True
    scale = 1 if type_name == "date" else _DAY_MICROS
    return _FIRST_DAY * scale <= low.as_py() and high.as_py() < (_LAST_DAY + 1) * scale


def keyed_rows(strategy: str, rows: pa.Table, matched: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The rows `strategy` writes, as `strategies.keyed_rows` gives them: `rows` (the incoming rows) tagged in
    GROUP, given `matched` (one row per matched table row, with its key columns). An incoming row updates each
    table row of its key, so it is written once per match; a row with a NULL key matches nothing."""
    if strategy == "delete_insert":
        return rows.append_column(GROUP, pa.array([INSERT] * rows.num_rows, pa.string()))
    counts = np.zeros(rows.num_rows, dtype=np.int64)
    if matched.num_rows:
        per_key = matched.select(list(keys)).group_by(list(keys)).aggregate([([], "count_all")])
        indexed = rows.select(list(keys)).append_column(_INDEX, pa.array(np.arange(rows.num_rows)))
        joined = indexed.join(per_key.rename_columns([*keys, _COUNT]), list(keys), join_type="inner")
        counts[joined.column(_INDEX).to_numpy()] = joined.column(_COUNT).to_numpy()
    updated = np.repeat(np.arange(rows.num_rows), counts) if strategy != "insert" else np.array([], np.int64)
    inserted = np.flatnonzero(counts == 0) if strategy != "update" else np.array([], np.int64)
    parts = [
        rows.take(pa.array(indices, pa.int64())).append_column(GROUP, pa.array([group] * len(indices), pa.string()))
        for group, indices in ((UPDATE, updated), (INSERT, inserted))
    ]
    return pa.concat_tables(parts)
