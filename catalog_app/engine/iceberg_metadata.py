"""A table's history as Iceberg metadata (format v2), written into the warehouse once per table state and reused.
No Django: the catalog hands over the table's commits on a ref as plain values (`TableCommit`).

Layout, under `<warehouse>/<catalog id>/<table id>/iceberg/` (paths built here from ids and hashes):

- `deletes/<delta file id>.parquet`: one Iceberg position delete file per LakeUI delta file (`file_path`, `pos`),
  written the first time a state needs it and kept;
- `manifests/<hash>.avro`: the live files one commit added (one manifest per commit, spec and kind), named by a
  hash of their content, so a later state whose files of that commit are unchanged reuses it;
- `snapshots/snap-<snapshot id>-<hash>.avro`: a commit's manifest list (what the table held at that commit);
- `metadata/<commit id>-<hash>.metadata.json`: the whole history up to the table's newest commit on the ref.

A commit that added one segment to a 1,000-segment table writes one manifest, one manifest list and one
metadata.json; the segments themselves are never copied (data files are LakeUI's segments).
"""

import hashlib
import json
import os
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyiceberg.conversions import to_bytes
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
    construct_partition_summaries,
    read_manifest_list,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record

from catalog_app.engine import iceberg_incoming
from catalog_app.engine.segments import Column
from catalog_app.engine.types import decimal_digits, is_decimal, is_widening, parse_type, stat_value
from catalog_app.engine.warehouse import Warehouse, arrow_filesystem

FORMAT_REVISION = "2"  # part of every file name's hash: a change to what is written here starts afresh
FOLDER = "iceberg"
PATH_FIELD_ID, POS_FIELD_ID = 2147483546, 2147483545  # Iceberg's reserved ids of a position delete file
PARTITION_FIELD_BASE = 1000  # a partition field's id: this plus its source column's id
SIMPLE = {"boolean": "boolean", "int": "int", "long": "long", "float": "float", "double": "double",
          "string": "string", "binary": "binary", "date": "date", "timestamp": "timestamptz"}  # fmt: skip
POSITION_DELETE_SCHEMA = pa.schema([
    pa.field("file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": str(PATH_FIELD_ID).encode()}),
    pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_FIELD_ID).encode()}),
])  # fmt: skip


# The manifests each manifest list this process wrote or read lists, by its location (a list never changes once
# written): the next state's list starts from its parent's without reading it back.
_LISTED: dict[str, dict[str, ManifestFile]] = {}
LISTED_MAX = 32


class NotRepresentable(Exception):
    """The table's history holds something Iceberg readers cannot read as LakeUI does (a widening Iceberg has no
    promotion for): refused with this message rather than served wrong."""


@dataclass(frozen=True)
class TableFile:
    """A segment or delta file as a commit added it. `segment_id` names a delta file's segment."""

    id: str
    path: str  # from the warehouse root
    row_count: int
    size_bytes: int
    partition_values: dict[str, Any] = field(default_factory=dict)  # segments: by column id
    written: tuple[Column, ...] = ()  # segments: the schema the file was written with
    segment_id: str | None = None
    stats: dict[str, dict] = field(default_factory=dict)  # segments: {column id: {min, max, nulls}} (footer)


@dataclass(frozen=True)
class TableCommit:
    """One commit of the table on the ref, oldest first: its state after the commit and the files it changed."""

    commit_id: str
    seq: int  # the catalog's commit sequence: rises along a ref's history (Iceberg's sequence number)
    timestamp_ms: int
    columns: tuple[Column, ...]
    partition_by: tuple[int, ...]
    added: tuple[TableFile, ...] = ()
    removed: tuple[str, ...] = ()  # file ids
    expired: bool = False  # removed from time travel by retention: replayed for the files, never a snapshot


@dataclass(frozen=True)
class Written:
    location: str  # the metadata.json's URI
    metadata_json: bytes  # as written: served as it is
    files_written: int  # by this call (0 when the state's metadata was there already)
    bytes_written: int


def snapshot_id(commit_id: str) -> int:
    """A commit's snapshot id: the first 60 bits of its (hex) id, a positive long."""
    return int(commit_id[:15], 16)


def metadata_folder(base: str) -> str:
    return f"{base}/{FOLDER}"


def metadata_path(base: str, head_commit: str) -> str:
    """The metadata.json of the table's history up to `head_commit` (its newest commit on the ref): the key of a
    state (the history up to a commit never changes)."""
    return f"{metadata_folder(base)}/metadata/{head_commit}-{FORMAT_REVISION}.metadata.json"


def table_uri(warehouse: Warehouse, relative: str) -> str:
    """A file's location as Iceberg readers open it: a URI, or an absolute path for a local warehouse."""
    uri = warehouse.uri(relative)
    return uri if "://" in uri or uri.startswith("file:") else os.path.abspath(uri)


def metadata_read(warehouse: Warehouse, base: str, head_commit: str) -> bytes | None:
    """The metadata.json written for this state already, if any."""
    filesystem, path = arrow_filesystem(warehouse.uri(metadata_path(base, head_commit)))
    try:
        with filesystem.open_input_stream(path) as stream:
            return stream.read()
    except FileNotFoundError:
        return None


def iceberg_type(type_name: str) -> str:
    if is_decimal(type_name):
        precision, scale = decimal_digits(type_name)
        return f"decimal({precision}, {scale})"
    return SIMPLE[type_name]


def readable_as(written: str, current: str) -> bool:
    """Whether Iceberg readers read a file column of type `written` as `current` (Iceberg's promotions)."""
    if written == current:
        return True
    if is_decimal(written) and is_decimal(current):
        (p1, s1), (p2, s2) = decimal_digits(written), decimal_digits(current)
        return s1 == s2 and p1 <= p2
    return (written, current) in {("int", "long"), ("float", "double")}


def _default_json(value: Any, type_name: str) -> Any:
    """A LakeUI default (JSON, as the catalog keeps it) in Iceberg's JSON single-value form."""
    if type_name == "timestamp":
        moment = stat_value(value, "timestamp")
        return (moment if moment.tzinfo else moment.replace(tzinfo=None)).isoformat(timespec="microseconds") + "+00:00"
    if type_name == "binary":
        import base64

        return base64.b64decode(value).hex().upper()
    if is_decimal(type_name):
        return str(stat_value(value, type_name))
    return value


def schema_json(columns: Sequence[Column], schema_id: int) -> dict:
    """The Iceberg schema of a LakeUI schema: column ids as field ids. A column's default is its
    `initial-default` (what files written before the column was added read as, as LakeUI reads them) and its
    `write-default`."""
    fields = []
    for column in columns:
        described = {"id": column.id, "name": column.name, "required": not column.nullable,
                     "type": iceberg_type(column.type)}  # fmt: skip
        if column.default is not None:
            described["initial-default"] = described["write-default"] = _default_json(column.default, column.type)
        fields.append(described)
    return {"type": "struct", "schema-id": schema_id, "identifier-field-ids": [], "fields": fields}


def spec_id(columns: Sequence[int]) -> int:
    """A partition spec's id from its source columns alone, so a manifest names the same spec in every state:
    0 for an unpartitioned one."""
    return 0 if not columns else zlib.crc32(json.dumps(list(columns)).encode()) & 0x7FFFFFFF


def spec_json(columns: Sequence[int]) -> dict:
    fields = [
        {"source-id": c, "field-id": PARTITION_FIELD_BASE + c, "name": f"p{c}", "transform": "identity"}
        for c in columns
    ]  # fmt: skip
    return {"spec-id": spec_id(columns), "fields": fields}


def _spec(columns: Sequence[int]) -> PartitionSpec:
    fields = [PartitionField(source_id=c, field_id=PARTITION_FIELD_BASE + c, transform=IdentityTransform(),
                             name=f"p{c}") for c in columns]  # fmt: skip
    return PartitionSpec(*fields, spec_id=spec_id(columns))


def _partition_value(value: Any, type_name: str) -> Any:
    """A partition value or bound as Iceberg keeps it: days for a date, microseconds for a timestamp."""
    if value is None:
        return None
    parsed = stat_value(value, type_name)
    if type_name == "date":
        import datetime

        return (parsed - datetime.date(1970, 1, 1)).days
    if type_name == "timestamp":
        import datetime

        moment = parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)
        return (moment - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)) // datetime.timedelta(microseconds=1)
    return parsed


class _DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg's v2 manifest writer for delete files (it writes data manifests only)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


@dataclass
class _Live:
    """A live file in the replay of the table's commits."""

    file: TableFile
    seq: int  # the sequence number of the commit that added it
    snapshot: int
    spec: tuple[int, ...]


class MetadataWriter:
    """Writes the Iceberg metadata of one table's history (`write`), reusing every file an earlier state wrote."""

    def __init__(self, warehouse: Warehouse, base: str, table_id: str) -> None:
        self.warehouse, self.base, self.table_id = warehouse, base, table_id
        self.io = PyArrowFileIO()
        self.root = table_uri(warehouse, "").rstrip("/")  # the warehouse as readers open it, made absolute once
        self.files_written = self.bytes_written = 0

    def uri(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def write(self, commits: Sequence[TableCommit], key: str | None = None) -> Written:
        """`key`: the name of the metadata.json (default: the head commit's id)."""
        head = commits[-1]
        schemas: list[tuple[Column, ...]] = []
        specs: dict[tuple[int, ...], None] = {(): None}
        live: dict[str, _Live] = {}
        snapshots, log = [], []
        list_paths = [self._manifest_list_path(snapshot_id(c.commit_id), c) for c in commits]
        missing = self._lists_missing(list_paths)
        for folder in ("manifests", "snapshots"):
            filesystem, path = arrow_filesystem(self.warehouse.uri(f"{metadata_folder(self.base)}/{folder}"))
            filesystem.create_dir(path, recursive=True)
        known: dict[str, ManifestFile] | None = None  # the manifests the previous snapshot lists, once read
        types_by_id: dict[int, str] = {}
        for commit in commits:
            if commit.columns not in schemas:
                schemas.append(commit.columns)
            types_by_id.update({c.id: c.type for c in commit.columns})
            current_spec = tuple(commit.partition_by)
            specs.setdefault(current_spec, None)
            snapshot = snapshot_id(commit.commit_id)
            for removed in commit.removed:
                live.pop(removed, None)
            for added in commit.added:
                if added.segment_id is None:
                    spec = tuple(int(c) for c in added.partition_values)
                else:  # a delta file is in its segment's partition
                    owner = live.get(added.segment_id)
                    spec = owner.spec if owner is not None else ()
                specs.setdefault(spec, None)
                live[added.id] = _Live(file=added, seq=commit.seq, snapshot=snapshot, spec=spec)
            parent = snapshots[-1]["snapshot-id"] if snapshots else None
            list_path = list_paths[len(snapshots)]
            if commit is head:
                for written in {entry.file.written for entry in live.values() if entry.file.segment_id is None}:
                    _check_readable(written, head.columns)  # the head's files; older ones are refused by readers
            if list_path in missing:
                if known is None:
                    known = self._listed(list_paths[len(snapshots) - 1] if snapshots else None)
                self._write_manifest_list(list_path, commit, snapshot, parent, list(live.values()), types_by_id,
                                          known)  # fmt: skip
                known = _LISTED[self.uri(list_path)]
            else:
                known = None
            operation = "append" if not commit.removed else ("delete" if not commit.added else "overwrite")
            snapshots.append({
                "snapshot-id": snapshot, **({"parent-snapshot-id": parent} if parent is not None else {}),
                "sequence-number": commit.seq, "timestamp-ms": commit.timestamp_ms,
                "manifest-list": self.uri(list_path), "schema-id": schemas.index(commit.columns),
                "summary": {"operation": operation, "lakeui.commit": commit.commit_id},
            })  # fmt: skip
            log.append({"snapshot-id": snapshot, "timestamp-ms": commit.timestamp_ms})
        snapshots, log = _without_expired(snapshots, log, {snapshot_id(c.commit_id) for c in commits if c.expired})
        metadata = {
            "format-version": 2,
            "table-uuid": self.table_id,
            "location": self.uri(self.base),
            "last-sequence-number": head.seq,
            "last-updated-ms": head.timestamp_ms,
            "last-column-id": max([c.id for s in schemas for c in s], default=0),
            "current-schema-id": schemas.index(head.columns),
            "schemas": [schema_json(s, i) for i, s in enumerate(schemas)],
            "default-spec-id": spec_id(head.partition_by),
            "partition-specs": [spec_json(s) for s in specs],
            "last-partition-id": max([PARTITION_FIELD_BASE - 1] + [PARTITION_FIELD_BASE + c for s in specs for c in s]),
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": {
                "lakeui.table-id": self.table_id,
                "lakeui.commit": head.commit_id,
                "lakeui.read-only": "true",
            },
            "current-snapshot-id": snapshot_id(head.commit_id),
            "refs": {"main": {"snapshot-id": snapshot_id(head.commit_id), "type": "branch"}},
            "snapshots": snapshots,
            "snapshot-log": log,
            "metadata-log": [],
            "statistics": [],
            "partition-statistics": [],
        }
        path = metadata_path(self.base, key or head.commit_id)
        content = json.dumps(metadata, separators=(",", ":")).encode()
        self._put(path, content)
        return Written(self.uri(path), content, self.files_written, self.bytes_written)

    # -- manifests and manifest lists

    def _manifest_list_path(self, snapshot: int, commit: TableCommit) -> str:
        digest = hashlib.sha256(f"{FORMAT_REVISION}/{commit.commit_id}/{self.table_id}".encode()).hexdigest()[:16]
        return f"{metadata_folder(self.base)}/snapshots/snap-{snapshot}-{digest}.avro"

    def _write_manifest_list(
        self, path, commit: TableCommit, snapshot, parent, files: list[_Live], types, known: dict[str, ManifestFile]
    ) -> list[ManifestFile]:
        """Writes the snapshot's manifest list: a manifest the previous snapshot lists (`known`) is listed as it is
        there; any other is written unless a state written before has it already."""
        groups: dict[tuple[bool, int, tuple[int, ...]], list[_Live]] = {}
        for entry in files:
            groups.setdefault((entry.file.segment_id is not None, entry.seq, entry.spec), []).append(entry)
        by_id = {entry.file.id: entry for entry in files}
        manifests = [
            self._manifest(deletes, seq, spec, group, by_id, types, known)
            for (deletes, seq, spec), group in sorted(groups.items())
        ]
        temporary = f"{path}.{uuid.uuid4().hex}.tmp"
        with write_manifest_list(2, self.io.new_output(self.uri(temporary)), snapshot, parent, commit.seq,
                                 "deflate") as writer:  # fmt: skip
            writer.add_manifests(manifests)
        self._publish(temporary, path)
        _remember(self.uri(path), {m.manifest_path: m for m in manifests})
        return manifests

    def _listed(self, manifest_list: str | None) -> dict[str, ManifestFile]:
        """The manifests a manifest list written before lists, by location."""
        if manifest_list is None:
            return {}
        location = self.uri(manifest_list)
        if location not in _LISTED:
            try:
                _remember(location, {m.manifest_path: m for m in read_manifest_list(self.io.new_input(location))})
            except FileNotFoundError:
                return {}
        return _LISTED[location]

    def _manifest(self, deletes: bool, seq: int, spec_columns, group: list[_Live], by_id, types, known) -> ManifestFile:
        group = sorted(group, key=lambda e: e.file.path)
        digest = hashlib.sha256(
            json.dumps(
                [
                    FORMAT_REVISION,
                    deletes,
                    seq,
                    spec_columns,
                    [types.get(c) for c in spec_columns],
                    [[e.file.id, e.file.path, e.snapshot] for e in group],
                ]
            ).encode()
        ).hexdigest()[:24]
        path = f"{metadata_folder(self.base)}/manifests/{digest}-{'d' if deletes else 'm'}.avro"
        if self.uri(path) in known:
            return known[self.uri(path)]
        spec = _spec(spec_columns)
        schema = Schema(*[_nested(c, types[c]) for c in spec_columns], schema_id=0)
        data_files = [self._delete_file(e, by_id, types) if deletes else self._data_file(e, types) for e in group]
        info = self._file_info(path)
        if info.type == pafs.FileType.NotFound:
            temporary = f"{path}.{uuid.uuid4().hex}.tmp"
            writer_class = _DeleteManifestWriter if deletes else ManifestWriterV2
            with writer_class(spec, schema, self.io.new_output(self.uri(temporary)), group[0].snapshot,
                              "deflate") as writer:  # fmt: skip
                for entry, data_file in zip(group, data_files, strict=True):
                    writer.existing(ManifestEntry.from_args(
                        status=ManifestEntryStatus.EXISTING, snapshot_id=entry.snapshot, sequence_number=entry.seq,
                        file_sequence_number=entry.seq, data_file=data_file))  # fmt: skip
            self._publish(temporary, path)
            info = self._file_info(path)
        iceberg_incoming.manifest_entries_remember(self.uri(path), data_files)
        return ManifestFile.from_args(
            manifest_path=self.uri(path), manifest_length=info.size, partition_spec_id=spec.spec_id,
            content=ManifestContent.DELETES if deletes else ManifestContent.DATA, sequence_number=seq,
            min_sequence_number=seq, added_snapshot_id=group[0].snapshot, added_files_count=0,
            existing_files_count=len(group), deleted_files_count=0, added_rows_count=0,
            existing_rows_count=sum(d.record_count for d in data_files), deleted_rows_count=0,
            partitions=construct_partition_summaries(spec, schema, [d.partition for d in data_files]),
            key_metadata=None,
        )  # fmt: skip

    def _partition(self, entry: _Live, types) -> Record:
        values = entry.file.partition_values
        return Record(*[_partition_value(values.get(str(c)), types[c]) for c in entry.spec])

    def _data_file(self, entry: _Live, types) -> DataFile:
        data_file = DataFile.from_args(
            _table_format_version=2, content=DataFileContent.DATA, file_path=self.uri(entry.file.path),
            file_format=FileFormat.PARQUET, partition=self._partition(entry, types),
            record_count=entry.file.row_count, file_size_in_bytes=entry.file.size_bytes,
            **column_statistics(entry.file, types),
        )  # fmt: skip
        data_file.spec_id = spec_id(entry.spec)
        return data_file

    def _delete_file(self, entry: _Live, by_id: dict[str, _Live], types) -> DataFile:
        """The position delete file of one LakeUI delta file, written the first time (and kept)."""
        segment = by_id[entry.file.segment_id]
        target = self.uri(segment.file.path)
        path = f"{metadata_folder(self.base)}/deletes/{entry.file.id}.parquet"
        info = self._file_info(path)
        if info.type == pafs.FileType.NotFound:
            filesystem, source = arrow_filesystem(self.warehouse.uri(entry.file.path))
            positions = pq.read_table(source, columns=["pos"], filesystem=filesystem).column(0)
            positions = pa.array(sorted(positions.to_pylist()), pa.int64())
            rows = pa.table([pa.array([target] * len(positions), pa.string()), positions],
                            schema=POSITION_DELETE_SCHEMA)  # fmt: skip
            temporary = f"{path}.{uuid.uuid4().hex}.tmp"
            filesystem, local = arrow_filesystem(self.warehouse.uri(temporary))
            filesystem.create_dir(local.rsplit("/", 1)[0], recursive=True)
            pq.write_table(rows, local, filesystem=filesystem)
            self._publish(temporary, path, count=True)
            info = self._file_info(path)
        bound = {PATH_FIELD_ID: target.encode()}
        data_file = DataFile.from_args(
            _table_format_version=2, content=DataFileContent.POSITION_DELETES, file_path=self.uri(path),
            file_format=FileFormat.PARQUET, partition=self._partition(entry, types),
            record_count=entry.file.row_count, file_size_in_bytes=info.size, lower_bounds=bound, upper_bounds=bound,
        )  # fmt: skip
        data_file.spec_id = spec_id(entry.spec)
        return data_file

    # -- files

    def _file_info(self, relative: str) -> pafs.FileInfo:
        filesystem, path = arrow_filesystem(self.warehouse.uri(relative))
        return filesystem.get_file_info(path)

    def _lists_missing(self, paths: list[str]) -> set[str]:
        """The manifest lists not written yet. A state's metadata is written after every list of its history, so
        looking back from the newest finds where the written ones end (the newest state written before), in as many
        look-ups as commits since (past 16, every list is looked up at once)."""
        for index in range(len(paths) - 1, -1, -1):
            if self._file_info(paths[index]).type != pafs.FileType.NotFound:
                return set(paths[index + 1 :])
            if len(paths) - index > 16:
                return self._missing(paths)
        return set(paths)

    def _missing(self, relatives: list[str]) -> set[str]:
        if not relatives:
            return set()
        filesystem, _ = arrow_filesystem(self.warehouse.uri(relatives[0]))
        infos = filesystem.get_file_info([arrow_filesystem(self.warehouse.uri(r))[1] for r in relatives])
        return {r for r, info in zip(relatives, infos, strict=True) if info.type == pafs.FileType.NotFound}

    def _publish(self, temporary: str, final: str, *, count: bool = True) -> None:
        """A file written under a temporary name becomes visible whole: readers never see half of one."""
        filesystem, source = arrow_filesystem(self.warehouse.uri(temporary))
        _, target = arrow_filesystem(self.warehouse.uri(final))
        filesystem.move(source, target)
        if count:
            self.files_written += 1
            self.bytes_written += filesystem.get_file_info(target).size

    def _put(self, relative: str, content: bytes) -> None:
        temporary = f"{relative}.{uuid.uuid4().hex}.tmp"
        filesystem, path = arrow_filesystem(self.warehouse.uri(temporary))
        filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with filesystem.open_output_stream(path) as stream:
            stream.write(content)
        self._publish(temporary, relative)


def column_statistics(file: TableFile, types: dict[int, str]) -> dict[str, dict[int, Any]]:
    """A segment's per-column value and null counts and lower/upper bounds (Iceberg's single-value binary form)
    from the statistics its footer gave, so engines skip files a filter rules out. Only columns whose type the
    file was written with is the current one (a bound of a widened column would be read in the wrong width)."""
    written = {c.id: c.type for c in file.written}
    counts, nulls, lower, upper = {}, {}, {}, {}
    for key, stat in file.stats.items():
        column_id = int(key)
        type_name = types.get(column_id)
        if type_name is None or written.get(column_id) != type_name:
            continue
        counts[column_id], nulls[column_id] = file.row_count, stat.get("nulls", 0)
        if stat.get("min") is None or stat.get("max") is None or type_name == "binary":
            continue
        iceberg = _nested(column_id, type_name).field_type
        lower[column_id] = to_bytes(iceberg, _partition_value(stat["min"], type_name))
        upper[column_id] = to_bytes(iceberg, _partition_value(stat["max"], type_name))
    return {"value_counts": counts, "null_value_counts": nulls, "lower_bounds": lower, "upper_bounds": upper}


def _remember(location: str, manifests: dict[str, ManifestFile]) -> None:
    if len(_LISTED) >= LISTED_MAX:
        _LISTED.pop(next(iter(_LISTED)))
    _LISTED[location] = manifests


def _nested(column_id: int, type_name: str):
    from pyiceberg.types import NestedField

    return NestedField(column_id, f"c{column_id}", iceberg_type(type_name), required=False)


def _check_readable(written: tuple[Column, ...], current: tuple[Column, ...]) -> None:
    by_id = {c.id: c for c in written}
    for column in current:
        old = by_id.get(column.id)
        if old is None and column.fill:
            raise NotRepresentable(
                f"Column {column.name!r} is filled by an expression for the rows written without it (a merge's "
                f"fill), which Iceberg readers cannot compute; read it with LakeUI's own readers (the rows API, "
                f"read_arrow, read_table)."
            )
        if old is not None and not readable_as(old.type, column.type):
            raise NotRepresentable(
                f"Column {column.name!r} was {_changed(old.type, column.type)} from {old.type} to {column.type}, "
                f"which Iceberg readers cannot read in the files written before (Iceberg promotes only int to long, "
                f"float to double and decimal precision up); read it with LakeUI's own readers (the rows API, "
                f"read_arrow, read_table)."
            )


def _changed(old: str, new: str) -> str:
    return "widened" if is_widening(parse_type(old), parse_type(new)) else "cast by a merge"


def _without_expired(snapshots: list[dict], log: list[dict], expired: set[int]) -> tuple[list[dict], list[dict]]:
    """The snapshots and log less the expired ones, each kept snapshot's parent the nearest kept ancestor: an engine's
    time travel to an expired snapshot finds no such snapshot (a clean error), never a file GC removed."""
    if not expired:
        return snapshots, log
    parent_of = {s["snapshot-id"]: s.get("parent-snapshot-id") for s in snapshots}
    kept = []
    for snapshot in snapshots:
        if snapshot["snapshot-id"] in expired:
            continue
        parent = parent_of[snapshot["snapshot-id"]]
        while parent is not None and parent in expired:
            parent = parent_of.get(parent)
        snapshot = {k: v for k, v in snapshot.items() if k != "parent-snapshot-id"}
        kept.append(snapshot | ({"parent-snapshot-id": parent} if parent is not None else {}))
    return kept, [entry for entry in log if entry["snapshot-id"] not in expired]


def table_metadata_write(
    warehouse: Warehouse, base: str, table_id: str, commits: Sequence[TableCommit], key: str | None = None
) -> Written:
    """The Iceberg metadata of the table's history `commits` (oldest first, at least one): read if this state's
    was written already, written otherwise (reusing every manifest, manifest list and delete file written before).
    Raises NotRepresentable for a history Iceberg readers would read wrong."""
    name = key or commits[-1].commit_id
    kept = metadata_read(warehouse, base, name)
    if kept is not None:
        return Written(table_uri(warehouse, metadata_path(base, name)), kept, 0, 0)
    return MetadataWriter(warehouse, base, table_id).write(commits, key)
