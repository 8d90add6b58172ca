"""What an engine's Iceberg commit names, read and checked without Django: the live files of the snapshot it
commits (its manifest list), and each data file it wrote, checked against the table's schema and described as a
segment from its Parquet footer (statistics included, no pass over the data, no copy).

The catalog (catalog_app/iceberg/commits.py) turns the difference between that snapshot and the table's state on
the branch into LakeUI operations.
"""

import json
import os
import stat
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyiceberg.avro.file
import pyiceberg.manifest
from pydantic import ValidationError
from pyiceberg.avro.decoder import StreamingBinaryDecoder
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import DataFileContent, FileFormat, read_manifest_list
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadataUtil
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

from catalog_app.engine.pruning import bounds
from catalog_app.engine.segment_writes import _field_ids, segment_described
from catalog_app.engine.segments import Column, SegmentRead, WrittenFile
from catalog_app.engine.types import arrow_type
from catalog_app.engine.warehouse import Warehouse, arrow_filesystem

MAX_NAMED = 5  # doubled keys named in a refusal
MAX_PATH = 1024  # a file's path from the warehouse root, as the catalog keeps it (DataFile.path)
MAX_METADATA_BYTES = 64 * 1024 * 1024  # a metadata file, manifest list or manifest read on an engine's word
FORMAT_VERSION = 2  # the Iceberg table format LakeUI reads and serves


class FileRefused(Exception):
    """A file the commit names that the table cannot take: the message says which and why (Iceberg's 400)."""


def file_checked(warehouse: Warehouse, path: str, what: str, *, max_bytes: int | None = None) -> None:
    """A file an engine names (`path` from the warehouse root, inside a folder it may name) is opened as what it is:
    a regular file at exactly that path, reached through no symbolic link, with no second name (a hard link is a
    file of another folder, another catalog's perhaps, under a name this one allows), and within `max_bytes`. Paths
    are checked where they are opened, after resolving, not as strings. An object store has no links: there only
    the path itself is checked. Raises FileRefused."""
    shown = repr(path[:200]) + ("..." if len(path) > 200 else "")
    if "\x00" in path or len(path) > MAX_PATH:
        raise FileRefused(f"{what} {shown}: a path holds no NUL character and at most {MAX_PATH} characters.")
    root = warehouse.root.removeprefix("file://")
    if "://" in root:
        return
    root = os.path.realpath(root)
    wanted = os.path.join(root, path)
    if os.path.normpath(wanted) != wanted:
        raise FileRefused(f"{what} {shown} is no plain path (it holds '.', '..' or '//').")
    try:
        real = os.path.realpath(wanted, strict=True)
        info = os.lstat(real)
    except OSError:
        raise FileRefused(f"{what} {shown} does not exist.") from None
    if real != wanted:
        raise FileRefused(
            f"{what} {shown} is a symbolic link or lies under one; LakeUI opens files only as themselves."
        )
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused(f"{what} {shown} is not a regular file.")
    if info.st_nlink > 1:
        raise FileRefused(
            f"{what} {shown} has {info.st_nlink} names (hard links); LakeUI takes only a file of one name, written "
            "where it is named."
        )
    if max_bytes is not None and info.st_size > max_bytes:
        raise FileRefused(f"{what} {shown} is larger than {max_bytes:,} bytes.")


# pyiceberg's Avro files are decoded by its Cython decoder, which trusts the lengths a file gives: on a junk manifest
# list it read past its buffer and the process died of a segmentation fault (a web process, every request in it). Its
# pure-Python decoder checks each length and raises. Files of an engine's choosing are decoded by the latter, in
# `decoded`; LakeUI's own files by the fast one.
_fast_decoder = pyiceberg.avro.file.new_decoder
_untrusted = threading.local()


def _new_decoder(data: bytes):
    return StreamingBinaryDecoder(data) if getattr(_untrusted, "files", False) else _fast_decoder(data)


pyiceberg.avro.file.new_decoder = _new_decoder


# Every Avro file pyiceberg opens converts the schema in its header to an Iceberg schema (pydantic models, a field at
# a time): a third of reading a small manifest. The few schemas manifests and manifest lists are written with are
# converted once per process; a header's text is the key, so a schema of any other text is converted as it comes.
SCHEMA_KEPT_CHARS = 64 * 1024  # a longer schema text is converted each time, never kept
SCHEMAS_KEPT = 256
_headers_kept: dict[int, Schema] = {}  # the header schemas kept, by id: only their reader trees are kept (below)


@lru_cache(maxsize=SCHEMAS_KEPT)
def _header_schema(text: str) -> Schema:
    return AvroSchemaConversion().avro_to_iceberg(json.loads(text))


def _get_schema(header: pyiceberg.avro.file.AvroFileHeader) -> Schema:
    text = header.meta.get(pyiceberg.avro.file._SCHEMA_KEY)
    if not isinstance(text, str):
        raise ValueError("No schema found in Avro file headers")
    if len(text) > SCHEMA_KEPT_CHARS:
        return _header_schema.__wrapped__(text)
    schema = _header_schema(text)
    if len(_headers_kept) >= SCHEMAS_KEPT:
        _headers_kept.clear()
    _headers_kept[id(schema)] = schema
    return schema


pyiceberg.avro.file.AvroFileHeader.get_schema = _get_schema


# Then it builds a tree of readers from the file's schema and the one it reads in (the other third), and one for the
# header; a file written builds a tree of writers and converts its schema to Avro's for its header. A tree keeps no
# state between records, and manifests and manifest lists are read and written in pyiceberg's few fixed schemas (a
# manifest's with its partition type, made once per type below) and read from the few header schemas kept above:
# each tree and header schema is made once per process. An entry holds the schemas it was made from, so their ids
# name them while it is kept.
TREES_KEPT = SCHEMAS_KEPT
_trees: dict[tuple, tuple] = {}
_avro = pyiceberg.avro.file
_resolve_reader, _resolve_writer, _construct_writer = _avro.resolve_reader, _avro.resolve_writer, _avro.construct_writer
_with_partition = pyiceberg.manifest.ManifestWriter._with_partition


def _kept(kind: str, make: Callable, *schemas, options: tuple = ()):
    """`make(*schemas)`, made once per process for these schema objects and `options`."""
    key = (kind, *map(id, schemas), options)
    kept = _trees.get(key)
    if kept is None:
        if len(_trees) >= TREES_KEPT:
            _trees.clear()
        kept = _trees[key] = (schemas, make(*schemas))
    return kept[1]


def _write_header(self) -> None:
    """pyiceberg's `AvroOutputFile._write_header`, with the header's schema text and writer kept."""
    from pyiceberg.table import TableProperties

    codec = self.metadata.get(_avro.AVRO_CODEC_KEY, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT)
    codec = _avro.CODEC_MAPPING_ICEBERG_TO_AVRO.get(codec) or codec
    text = _kept("header schema", lambda schema: json.dumps(AvroSchemaConversion().iceberg_to_avro(
        schema, schema_name=self.schema_name)), self.file_schema, options=(self.schema_name,))  # fmt: skip
    meta = {**self.metadata, _avro._SCHEMA_KEY: text, _avro.AVRO_CODEC_KEY: codec}
    _kept("writer", _construct_writer, _avro.META_SCHEMA).write(
        self.encoder, _avro.AvroFileHeader(_avro.MAGIC, meta, self.sync_bytes)
    )


def _resolve_reader_kept(file_schema, read_schema, read_types=_avro.EMPTY_DICT, read_enums=_avro.EMPTY_DICT):
    if _headers_kept.get(id(file_schema)) is not file_schema:  # a long schema an engine wrote: not kept either
        return _resolve_reader(file_schema, read_schema, read_types, read_enums)
    return _kept("reader", lambda file, read: _resolve_reader(file, read, read_types, read_enums), file_schema,
                 read_schema, options=(tuple(read_types.items()), tuple(read_enums.items())))  # fmt: skip


def _manifest_schema(self, format_version):
    """A manifest's entry schema, made once per partition type (a value: equal types are one key)."""
    partition_type = self._spec.partition_type(self._schema)
    return _kept("entry schema", lambda: _with_partition(self, format_version),
                 options=(format_version, partition_type))  # fmt: skip


_avro.resolve_reader = _resolve_reader_kept
_avro.resolve_writer = lambda record_schema, file_schema: _kept("resolved writer", _resolve_writer, record_schema,
                                                                file_schema)  # fmt: skip
_avro.construct_writer = lambda file_schema: _kept("writer", _construct_writer, file_schema)
_avro.AvroFile._read_header = lambda self: _kept(
    "header reader", lambda schema: _avro.construct_reader(schema, {-1: _avro.AvroFileHeader}), _avro.META_SCHEMA
).read(self.decoder)
_avro.AvroOutputFile._write_header = _write_header
pyiceberg.manifest.ManifestWriter._with_partition = _manifest_schema


@contextmanager
def decoded(what: str, location: str) -> Iterator[None]:
    """Decoding a file of an engine's choosing (with the decoder that checks what it reads, above) fails in any way
    its decoder does: each is the 400 naming the file, never a 500."""
    _untrusted.files = True
    try:
        yield
    except FileRefused:
        raise
    except Exception as exc:
        raise FileRefused(f"{what} {location[:300]!r} cannot be read: {type(exc).__name__}: {str(exc)[:200]}") from None
    finally:
        _untrusted.files = False


@dataclass(frozen=True)
class SnapshotFiles:
    """The live files of an Iceberg snapshot, by location."""

    data: dict[str, int] = field(default_factory=dict)  # location: record count
    position_deletes: dict[str, int] = field(default_factory=dict)
    equality_deletes: dict[str, int] = field(default_factory=dict)
    equality_ids: dict[str, tuple[int, ...]] = field(default_factory=dict)  # equality delete file: its field ids


# The live files of manifests LakeUI wrote, by location: they are named by a hash of their content and never
# rewritten (catalog_app/engine/iceberg_metadata.py), and an engine's snapshot lists every one of the table's
# manifests again, so a commit reads only the manifests the engine wrote itself.
_ENTRIES: dict[str, tuple[tuple[DataFileContent, str, int, tuple[int, ...]], ...]] = {}
ENTRIES_MAX = 4096


def manifest_entries_remember(location: str, data_files: Sequence) -> None:
    """The files of a manifest LakeUI just wrote at `location` (pyiceberg DataFiles), for the commits that list it."""
    if len(_ENTRIES) >= ENTRIES_MAX:
        _ENTRIES.pop(next(iter(_ENTRIES)))
    _ENTRIES[location] = tuple(
        (f.content, f.file_path, f.record_count, tuple(f.equality_ids or ())) for f in data_files
    )


def snapshot_files(
    manifest_list: str,
    allowed: Sequence[str],
    immutable: str | None = None,
    checked: Callable[[str, str], None] = lambda location, what: None,
) -> SnapshotFiles:
    """Every live file the snapshot's manifest list names (entries marked deleted are left out). Its manifests must
    be under one of the `allowed` locations; those under `immutable` (LakeUI's own) are read once per process, the
    others each `checked(location, what)` before it is opened (it raises FileRefused)."""
    io = PyArrowFileIO()
    files = SnapshotFiles()
    kinds = {
        DataFileContent.DATA: files.data,
        DataFileContent.POSITION_DELETES: files.position_deletes,
        DataFileContent.EQUALITY_DELETES: files.equality_deletes,
    }
    with decoded("Manifest list", manifest_list):
        manifests = list(read_manifest_list(io.new_input(manifest_list)))
    for manifest in manifests:
        path = manifest.manifest_path
        if not isinstance(path, str) or not path.startswith(tuple(allowed)) or "/../" in path:
            raise FileRefused(f"Manifest {str(path)[:300]!r} is not under the table's locations.")
        entries = _ENTRIES.get(path) if immutable and path.startswith(immutable) else None
        if entries is None:
            if not (immutable and path.startswith(immutable)):
                checked(path, "Manifest")
            with decoded("Manifest", path):
                live = [entry.data_file for entry in manifest.fetch_manifest_entry(io, discard_deleted=True)]
            if immutable and path.startswith(immutable):
                manifest_entries_remember(path, live)
                entries = _ENTRIES[path]
            else:
                entries = tuple((f.content, f.file_path, f.record_count, tuple(f.equality_ids or ())) for f in live)
        for content, location, record_count, equality_ids in entries:
            kinds[content][location] = record_count
            if content == DataFileContent.EQUALITY_DELETES:
                files.equality_ids[location] = equality_ids
    return files


def _footer(warehouse: Warehouse, path: str):
    filesystem, location = arrow_filesystem(warehouse.uri(path))
    try:
        size = filesystem.get_file_info(location).size
        with filesystem.open_input_file(location) as handle:
            return size, pq.ParquetFile(handle).metadata
    except FileNotFoundError:
        raise FileRefused(f"Data file {path!r} does not exist.") from None
    except (OSError, pa.ArrowException) as exc:
        raise FileRefused(f"Data file {path!r} is not a Parquet file: {str(exc)[:200]}") from None


def _same_type(found: pa.DataType, wanted: pa.DataType) -> bool:
    plain = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}
    found, wanted = plain.get(found, found), plain.get(wanted, wanted)
    if pa.types.is_timestamp(found) and pa.types.is_timestamp(wanted):
        return found.unit == wanted.unit and (found.tz is None) == (wanted.tz is None)
    return found == wanted


def data_file_checked(
    warehouse: Warehouse, path: str, columns: Sequence[Column], partition_ids: Sequence[int], record_count: int
) -> WrittenFile:
    """The data file at `path` (from the warehouse root) as a new segment of a table of `columns`: a Parquet file
    whose every column carries the field id of a column of the table with its name and type, holding every NOT
    NULL column without a null, one value per partition column, and as many rows as the commit says. Raises
    FileRefused otherwise."""
    file_checked(warehouse, path, "Data file")
    size, footer = _footer(warehouse, path)
    schema = footer.schema.to_arrow_schema()
    by_id = {c.id: c for c in columns}
    present = set()
    for arrow_field, field_id in zip(schema, _field_ids(footer), strict=True):
        if field_id is None:
            raise FileRefused(f"Data file {path!r}: column {arrow_field.name!r} carries no Iceberg field id.")
        column = by_id.get(field_id)
        if column is None:
            raise FileRefused(
                f"Data file {path!r}: field id {field_id} ({arrow_field.name!r}) is no column of the table."
            )
        if arrow_field.name != column.name:
            raise FileRefused(
                f"Data file {path!r}: field id {field_id} is named {arrow_field.name!r}, not {column.name!r} as in "
                "the table's current schema; write with the current schema."
            )
        if not _same_type(arrow_field.type, arrow_type(column.type)):
            raise FileRefused(
                f"Data file {path!r}: column {column.name!r} (field id {field_id}) holds {arrow_field.type}, but the "
                f"column is {column.type}."
            )
        present.add(field_id)
    if footer.num_rows != record_count:
        raise FileRefused(f"Data file {path!r} holds {footer.num_rows} rows, not {record_count} as the commit says.")
    described = segment_described(warehouse, path, size, footer, columns, partition_ids)
    for column in columns:
        if column.nullable:
            continue
        if column.id not in present:
            raise FileRefused(f"Data file {path!r} lacks the NOT NULL column {column.name!r}.")
        nulls = (described.stats.get(str(column.id)) or {}).get("nulls")
        if nulls is None:
            nulls = _read(warehouse, path, [column.name]).column(0).null_count
        if nulls:
            raise FileRefused(f"Data file {path!r} holds {nulls} nulls in the NOT NULL column {column.name!r}.")
    for column_id in partition_ids:
        stat = described.stats.get(str(column_id))
        if str(column_id) not in described.partition_values or (stat is not None and stat["min"] != stat["max"]):
            name = by_id[column_id].name
            raise FileRefused(f"Data file {path!r} holds rows of several partitions (column {name!r}).")
    return described


def _read(warehouse: Warehouse, path: str, names: list[str] | None) -> pa.Table:
    filesystem, location = arrow_filesystem(warehouse.uri(path))
    return pq.read_table(location, columns=names, filesystem=filesystem)


def _live_keys(
    warehouse: Warehouse, segment: SegmentRead, key_ids: Sequence[int], names: list[str], lost: Sequence[int]
) -> pa.Table:
    """The key columns of a segment's live rows (its delta files' positions and `lost` left out), named as the
    table names them now."""
    written = {c.id: c.name for c in segment.columns}
    rows = _read(warehouse, segment.path, [written[i] for i in key_ids]).rename_columns(names)
    gone = sorted(deleted_positions(warehouse, segment) | set(lost))
    if gone:
        keep = pc.invert(pc.is_in(pa.array(range(rows.num_rows), pa.int64()), value_set=pa.array(gone, pa.int64())))
        rows = rows.filter(keep)
    return rows


def keys_doubled(
    warehouse: Warehouse,
    new_paths: Sequence[str],
    live: Sequence[SegmentRead],
    columns: Sequence[Column],
    key_ids: Sequence[int],
    lost: Mapping[str, Sequence[int]],
    *,
    live_too: bool = False,
    stats: Mapping[str, Mapping] | None = None,
) -> list[tuple]:
    """Keys that the new files hold twice, or that the live segments' rows (less the positions `lost` by segment
    id) hold already: a few, sorted. Without new files, none (the live rows were checked when committed), unless
    `live_too` (rows registered from another catalog, which checked no key). With the live segments' catalog
    `stats` (by segment id), only the segments whose first key column's min/max overlap a new file's are read."""
    by_id = {c.id: c for c in columns}
    names = [by_id[i].name for i in key_ids]
    new = [_read(warehouse, p, names) for p in new_paths]
    if not new and not live_too:
        return []
    if stats is not None and not live_too:
        ranges = [pc.min_max(t.column(names[0])).as_py() for t in new]
        first = by_id[key_ids[0]]
        live = [s for s in live if _may_hold_keys(stats.get(s.id, {}).get(str(first.id)), first.type, ranges)]
    old = [
        _live_keys(warehouse, s, key_ids, names, lost.get(s.id, ()))
        for s in live
        if all(i in {c.id for c in s.columns} for i in key_ids)
    ]
    if not new and not old:
        return []
    every = pa.concat_tables([t.cast((new or old)[0].schema) for t in [*new, *old]])
    counted = every.group_by(names).aggregate([([], "count_all")])
    doubled = counted.filter(pc.greater(counted.column("count_all"), 1)).select(names).to_pylist()
    return sorted(tuple(row[n] for n in names) for row in doubled)[:MAX_NAMED]


def _may_hold_keys(stat: Mapping | None, type_name: str, ranges: Sequence[Mapping]) -> bool:
    """Whether a segment whose first key column has the catalog statistic `stat` may hold a key inside one of the
    new files' `ranges` ({min, max} of that column): unknown, unpruned or incomparable bounds may."""
    found = bounds(stat, type_name) if stat else None
    if found is None:
        return True
    try:
        return any(
            r["min"] is not None and found.low is not None and not (found.high < r["min"] or found.low > r["max"])
            for r in ranges
        )
    except TypeError:
        return True


@dataclass(frozen=True)
class Rewrite:
    """How the new files of a copy-on-write commit relate to the segments it removed, row by row (a multiset match
    of whole rows): the removed segments' live rows no new file holds (lost: a positional delete), and the rows of
    each new file that are not rows of a removed segment (its new rows: an insert)."""

    lost: dict[str, list[int]]  # removed segment id: positions of its lost rows
    new_rows: dict[str, list[int] | None]  # new file path: positions of its new rows (None: every row)


def _rows(table: pa.Table, columns: Sequence[Column]) -> list[tuple]:
    values = [
        table.column(c.name).to_pylist() if c.name in table.column_names else [c.default] * table.num_rows
        for c in columns
    ]
    return list(zip(*values, strict=True)) if values else []


def _segment_rows(warehouse: Warehouse, segment: SegmentRead, columns: Sequence[Column]) -> list[tuple]:
    """A segment's rows (all positions) in the current schema, matched by column id."""
    written = {c.id: c.name for c in segment.columns}
    present = [c for c in columns if c.id in written]
    table = _read(warehouse, segment.path, [written[c.id] for c in present]).rename_columns([c.name for c in present])
    return _rows(table, columns)


def deleted_positions(warehouse: Warehouse, segment: SegmentRead) -> set[int]:
    return {p for d in segment.deltas for p in _read(warehouse, d, ["pos"]).column(0).to_pylist()}


def rewrite_matched(
    warehouse: Warehouse, removed: Sequence[SegmentRead], new_paths: Sequence[str], columns: Sequence[Column]
) -> Rewrite:
    """Match the live rows of the `removed` segments with the rows of the new files (see `Rewrite`). An append
    (nothing removed) reads no rows: every row of its files is new."""
    if not removed:
        return Rewrite({}, {path: None for path in new_paths})
    pool: dict[tuple, list[tuple[str, int]]] = {}
    lost: dict[str, set[int]] = {}
    for segment in removed:
        gone = deleted_positions(warehouse, segment)
        live = lost.setdefault(segment.id, set())
        for position, row in enumerate(_segment_rows(warehouse, segment, columns)):
            if position not in gone:
                pool.setdefault(row, []).append((segment.id, position))
                live.add(position)
    new_rows: dict[str, list[int]] = {}
    for path in new_paths:
        fresh = []
        for position, row in enumerate(_rows(_read(warehouse, path, None), columns)):
            matches = pool.get(row)
            if matches:
                segment_id, kept = matches.pop()
                lost[segment_id].discard(kept)
            else:
                fresh.append(position)
        new_rows[path] = fresh
    return Rewrite({s: sorted(p) for s, p in lost.items()}, new_rows)


def positions_write(warehouse: Warehouse, folder: str, segment_id: str, positions: Sequence[int]) -> WrittenFile:
    """A LakeUI delta file deleting `positions` of a segment, under `folder` (a delta folder, see
    warehouse.delta_folder): a few numbers, never rows."""
    path = f"{folder}/__segment={segment_id}/part-00000.parquet"
    filesystem, location = arrow_filesystem(warehouse.uri(path))
    filesystem.create_dir(location.rsplit("/", 1)[0], recursive=True)
    pq.write_table(pa.table({"pos": pa.array(sorted(positions), pa.int64())}), location, filesystem=filesystem)
    size = filesystem.get_file_info(location).size
    return WrittenFile(path, len(positions), size, segment_id=segment_id)


def rows_take(warehouse: Warehouse, path: str, positions: Sequence[int], columns: Sequence[Column]) -> pa.Table:
    """Some rows of a new file, in the table's current schema (to be written as a segment of their own)."""
    table = _read(warehouse, path, None).take(pa.array(positions, pa.int64()))
    return pa.table(
        {
            c.name: table.column(c.name)
            if c.name in table.column_names
            else pa.nulls(table.num_rows, arrow_type(c.type))
            for c in columns
        }
    )


def position_deletes_read(warehouse: Warehouse, path: str) -> dict[str, list[int]]:
    """An Iceberg position delete file's positions, by the data file location they delete from."""
    file_checked(warehouse, path, "Position delete file")
    with decoded("Position delete file", path):
        rows = _read(warehouse, path, ["file_path", "pos"])
    by_file: dict[str, list[int]] = {}
    for location, position in zip(rows.column(0).to_pylist(), rows.column(1).to_pylist(), strict=True):
        by_file.setdefault(location, []).append(position)
    return by_file


def equality_deletes_match(
    warehouse: Warehouse, path: str, key_ids: Sequence[int], columns: Sequence[Column], live: Sequence[SegmentRead]
) -> dict[str, list[int]]:
    """The positions, by segment id, of the live rows whose key an equality delete file names (its columns found by
    field id): a delete by key."""
    file_checked(warehouse, path, "Equality delete file")
    _, footer = _footer(warehouse, path)
    by_id = {c.id: c for c in columns}
    named = dict(zip(_field_ids(footer), footer.schema.to_arrow_schema().names, strict=True))
    if any(i not in named for i in key_ids):
        raise FileRefused(f"Equality delete file {path!r} lacks a key column.")
    names = [by_id[i].name for i in key_ids]
    keys = _read(warehouse, path, [named[i] for i in key_ids]).rename_columns(names)
    wanted = set(zip(*[keys.column(n).to_pylist() for n in names], strict=True))
    found: dict[str, list[int]] = {}
    for segment in live:
        written = {c.id: c.name for c in segment.columns}
        if any(i not in written for i in key_ids):
            continue
        rows = _read(warehouse, segment.path, [written[i] for i in key_ids])
        gone = deleted_positions(warehouse, segment)
        values = zip(*[rows.column(i).to_pylist() for i in range(len(key_ids))], strict=True)
        hits = [p for p, key in enumerate(values) if key in wanted and p not in gone]
        if hits:
            found[segment.id] = hits
    return found


# --- register: an Iceberg table of another catalog, read where it lies ----------------------------------------


@dataclass(frozen=True)
class ForeignFile:
    location: str  # as the table's manifests name it
    record_count: int
    sequence_number: int  # its data sequence number: an equality delete applies to data files older than itself
    equality_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class ForeignTable:
    """The current state of an Iceberg table another catalog wrote: its schema, partition spec and properties as
    Iceberg's REST createTable names them, and the live files of its current snapshot."""

    schema: dict
    partition_spec: dict
    properties: dict[str, str]
    data: list[ForeignFile]
    position_deletes: list[ForeignFile]
    equality_deletes: list[ForeignFile]


def foreign_table_read(metadata_location: str, checked: Callable[[str, str], None]) -> ForeignTable:
    """Read the table whose metadata file is `metadata_location`: every file it and its current snapshot name
    (metadata file, manifest list, manifests, data and delete files) is `checked(location, what)` before it is
    opened (it raises FileRefused), every data file must be Parquet, and each file LakeUI decodes is refused as
    the 400 naming it when it cannot be. Raises FileRefused otherwise."""
    io = PyArrowFileIO()
    checked(metadata_location, "Metadata file")
    with decoded("Metadata file", metadata_location), io.new_input(metadata_location).open() as stream:
        document = json.loads(stream.read())
    if not isinstance(document, dict) or document.get("format-version") != FORMAT_VERSION:
        found = document.get("format-version") if isinstance(document, dict) else f"a JSON {type(document).__name__}"
        raise FileRefused(
            f"Metadata file {metadata_location[:300]!r} is no Iceberg table metadata of format version "
            f"{FORMAT_VERSION} (it is {str(found)[:60]}); LakeUI registers format version {FORMAT_VERSION} tables."
        )
    try:
        metadata = TableMetadataUtil.parse_obj(document)
    except (ValidationError, ValueError) as exc:
        raise FileRefused(f"Metadata file {metadata_location[:300]!r} is no valid Iceberg table metadata: "
                          f"{str(exc)[:300]}") from None  # fmt: skip
    schema = json.loads(metadata.schema().model_dump_json(by_alias=True))
    spec = json.loads(metadata.spec().model_dump_json(by_alias=True))
    table = ForeignTable(schema, spec, dict(metadata.properties), [], [], [])
    snapshot = metadata.current_snapshot()
    if snapshot is None:
        return table
    checked(snapshot.manifest_list, "Manifest list")
    with decoded("Manifest list", snapshot.manifest_list):
        manifests = list(read_manifest_list(io.new_input(snapshot.manifest_list)))
    for manifest in manifests:
        checked(manifest.manifest_path, "Manifest")
        with decoded("Manifest", manifest.manifest_path):
            entries = manifest.fetch_manifest_entry(io, discard_deleted=True)
        for entry in entries:
            data_file = entry.data_file
            checked(data_file.file_path, "File")
            if data_file.file_format != FileFormat.PARQUET:
                raise FileRefused(f"File {data_file.file_path!r} is {data_file.file_format}; LakeUI reads Parquet.")
            found = ForeignFile(data_file.file_path, data_file.record_count, entry.sequence_number or 0,
                                tuple(data_file.equality_ids or ()))  # fmt: skip
            {
                DataFileContent.DATA: table.data,
                DataFileContent.POSITION_DELETES: table.position_deletes,
                DataFileContent.EQUALITY_DELETES: table.equality_deletes,
            }[data_file.content].append(found)
    return table
