"""A table's data at a commit: its live segments and delta files."""

import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from django.db import connection
from django.db.models import Exists, OuterRef, Q, QuerySet, TextField
from django.db.models.functions import Cast

from catalog_app.engine.reads import deleted_count
from catalog_app.engine.segments import INLINE, Column, SegmentRead, partitioned_by
from catalog_app.engine.warehouse import Warehouse
from catalog_app.models import DataFile, FileEntry, ObjectVersion, ReclaimedFile, SchemaVersion
from catalog_app.selectors.objects import SchemaRow, chain_sql, newest_on_chain, schema_rows
from catalog_app.selectors.refs import Chain
from lakeui.errors import ApplicationError


@dataclass(frozen=True, slots=True)
class FileRow:
    """A live data file read as plain values: the DataFile row's fields, with the schema version it reads with on
    the chain it was read at (as `tables_files` sets it on a DataFile). A merge of 10,000 tables reads tens of
    thousands of files, and model instances cost most of its time; `CommitDraft` takes these as it takes DataFiles."""

    id: uuid.UUID
    table_id: uuid.UUID
    kind: str
    path: str
    row_count: int
    size_bytes: int
    partition_values_json: str  # as read: decoded when asked for (a file taken over by reference needs neither)
    stats_json: str
    segment_id: uuid.UUID | None
    schema_version: SchemaRow | None
    schema_visible: bool

    @property
    def partition_values(self) -> dict:
        return json.loads(self.partition_values_json)

    @property
    def stats(self) -> dict:
        """Decoded once per process for each distinct text (a reader asks a file's statistics again and again);
        shared, so never changed by a caller."""
        return stats_decoded(self.stats_json)


@lru_cache(maxsize=20_000)
def stats_decoded(text: str) -> dict:
    return json.loads(text)


@dataclass(frozen=True)
class TableFiles:
    segments: list[DataFile | FileRow]  # in the order they became live
    deltas: dict[uuid.UUID, list[DataFile | FileRow]]  # by segment id

    def by_id(self) -> dict[str, DataFile]:
        """Every live file, segments and delta files, by id (as text, as operations record them)."""
        return {str(f.id): f for f in [*self.segments, *(d for ds in self.deltas.values() for d in ds)]}

    def changes_since(self, earlier: "TableFiles") -> tuple[list[DataFile], list[DataFile]]:
        """The segments of `earlier` this state removed or changed the deletes of, and the segments it added: the
        only segments whose rows can differ between the two (the rest are the same files with the same deletes)."""
        live, earlier_ids = {s.id for s in self.segments}, {s.id for s in earlier.segments}

        def deletes(files: TableFiles, segment_id) -> set:
            return {d.id for d in files.deltas.get(segment_id, [])}

        touched = [s for s in earlier.segments if s.id not in live or deletes(earlier, s.id) != deletes(self, s.id)]
        return touched, [s for s in self.segments if s.id not in earlier_ids]

    def live_rows(self, warehouse: Warehouse, read: Callable[[list[str]], np.ndarray] | None = None) -> int:
        """The rows the segments hold less their deleted positions, from the catalog's counts. Only when delta files
        of one segment may list a position twice between them are their positions taken: from their catalog rows
        when they are small enough to be kept there (`engine.writes.delta_stats`), else read (with `read`, the
        positions of a list of delta files' paths; by default with pyarrow, no Spark job)."""
        deleted, unread = 0, []
        for segment in self.segments:
            listed = self.deltas.get(segment.id, [])
            inline = [d.stats or {} for d in listed] if len(listed) > 1 else []
            if len(listed) <= 1:
                deleted += sum(d.row_count for d in listed)
            elif all(INLINE in stats for stats in inline):
                deleted += len({p for stats in inline for p in stats[INLINE] if p < segment.row_count})
            else:
                unread.append(segment)
        if unread and read is None:
            deleted += deleted_count(warehouse, TableFiles(unread, self.deltas).reads())
        for segment in unread if read is not None else ():
            positions = np.unique(np.asarray(read([d.path for d in self.deltas[segment.id]]), np.int64))
            deleted += int(np.count_nonzero(positions < segment.row_count))
        return sum(s.row_count for s in self.segments) - deleted

    def inline_positions(self) -> dict[str, list[int]]:
        """The positions of the delta files small enough to keep them in their catalog rows, by path."""
        found = {}
        for listed in self.deltas.values():
            for delta in listed:
                stats = delta.stats or {}
                if INLINE in stats:
                    found[delta.path] = stats[INLINE]
        return found

    def emptied(self) -> set[uuid.UUID]:
        """The segments with no live row: one delta file deletes as many rows as the segment holds (a row updated
        again and again leaves one such segment per update). With several delta files a position may be listed
        twice, so such a segment is never counted here."""
        return {
            s.id for s in self.segments
            if len(listed := self.deltas.get(s.id, [])) == 1 and listed[0].row_count >= s.row_count
        }  # fmt: skip

    def unsplit(self, partition_by: Iterable[int | str]) -> list[DataFile]:
        """The live segments written before the table was partitioned as it is now (`partition_by`, column ids):
        without a value of some partition column, they may hold rows of several partitions (compaction splits
        them)."""
        ids = {str(i) for i in partition_by}
        return [s for s in self.segments if not partitioned_by(s.partition_values, ids)]

    def reads(self) -> list[SegmentRead]:
        """What the engine needs to read the table: each segment with its written schema and live deltas."""
        return [
            SegmentRead(
                id=str(segment.id),
                path=segment.path,
                columns=_read_columns(segment.schema_version),
                deltas=tuple(delta.path for delta in self.deltas.get(segment.id, [])),
                order=position,
            )
            for position, segment in enumerate(self.segments)
        ]


NO_FILES = TableFiles(segments=[], deltas={})  # read-only: tables_files makes a new TableFiles per table


def _read_columns(schema: SchemaRow | SchemaVersion) -> tuple[Column, ...]:
    """A segment's written columns: a `SchemaRow` keeps them made (the process keeps its schema rows), a model's are
    made here."""
    if isinstance(schema, SchemaRow):
        return schema.read_columns
    return tuple(Column.from_dict(c) for c in schema.columns)


def table_files(chain: Chain, *, table_id: uuid.UUID) -> TableFiles:
    return tables_files(chain, table_ids=[table_id]).get(table_id, NO_FILES)


def tables_files(chain: Chain, *, table_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, TableFiles]:
    """The live files of several tables at a commit, in one query; tables without files are left out."""
    entries = (
        newest_on_chain(FileEntry.objects.filter(table_id__any=list(table_ids)), chain, key="file_id")
        .filter(removed=False)
        .select_related("file", "file__schema_version", "schema_version")
        .order_by("seq", "id")
    )
    files: dict[uuid.UUID, TableFiles] = {}
    for entry in entries:
        if entry.schema_version is not None:  # taken over by a merge: read with this line's copy of its schema
            entry.file.schema_version, entry.file.schema_visible = entry.schema_version, entry.schema_visible
        table = files.setdefault(entry.table_id, TableFiles(segments=[], deltas={}))
        if entry.file.kind == DataFile.Kind.SEGMENT:
            table.segments.append(entry.file)
        else:
            table.deltas.setdefault(entry.file.segment_id, []).append(entry.file)
    return files


FILE_ROW_FIELDS = (
    "table_id", "file_id", "file__kind", "file__path", "file__row_count", "file__size_bytes", "partition_values_json",
    "stats_json", "file__segment_id", "schema_version_id", "schema_visible", "file__schema_version_id",
    "file__schema_visible",
)  # fmt: skip


def _file_row_values(entries: QuerySet, *fields: str) -> QuerySet:
    """File entries as `fields` and then `FILE_ROW_FIELDS`, the files' JSON as its text (`FileRow`)."""
    as_text = {"partition_values_json": Cast("file__partition_values", TextField()),
               "stats_json": Cast("file__stats", TextField())}  # fmt: skip
    return entries.annotate(**as_text).values_list(*fields, *FILE_ROW_FIELDS)


def tables_file_rows(
    chain: Chain,
    *,
    table_ids: Iterable[uuid.UUID],
    segments: Iterable[uuid.UUID] | None = None,
    positions: dict[uuid.UUID, Iterable[int]] | None = None,
) -> dict[uuid.UUID, TableFiles]:
    """`tables_files` read as plain values (`FileRow`s), in two queries: the files, then the schema versions they
    read with; with `segments`, only those segments and their delete files; with `positions`, of the delete files
    of the segments it names only those that may list one of its positions there (a small delete file keeps its
    positions in its catalog row: one of them must be, `INLINE`). Only some files of each table, on several chains
    at once: `files_live_on`."""
    if segments is None and positions is None:
        return _file_rows(_whole_tables_rows(chain, list(table_ids)))
    rows = FileEntry.objects.filter(table_id__any=list(table_ids))
    if segments is not None:
        segments = list(segments)
        rows = rows.filter(Q(file_id__in=segments) | Q(file__segment_id__in=segments))
    if positions is not None:
        listing = ~Q(file__segment_id__in=list(positions)) | ~Q(file__stats__has_key=INLINE)
        for segment_id, listed in positions.items():
            for position in listed:
                listing |= Q(file__segment_id=segment_id, **{f"file__stats__{INLINE}__contains": [int(position)]})
        rows = rows.filter(Q(file__kind=DataFile.Kind.SEGMENT) | listing)
    entries = newest_on_chain(rows, chain, key="file_id").filter(removed=False).order_by("seq", "id")
    return _file_rows(list(_file_row_values(entries)))


def _whole_tables_rows(chain: Chain, table_ids: list[uuid.UUID]) -> list[tuple]:
    """Every live file of these tables on the chain as `FILE_ROW_FIELDS` rows, in the order they became live: the
    query `tables_file_rows` makes with the ORM (`newest_on_chain`), in plain SQL, as every Iceberg commit reads its
    table's files so and the ORM took longer to build the query than the database to answer it."""
    mine, params = chain_sql("e", chain)
    newer, more = chain_sql("n", chain)
    entries, files = FileEntry._meta.db_table, DataFile._meta.db_table
    sql = (
        f"SELECT e.table_id, e.file_id, f.kind, f.path, f.row_count, f.size_bytes, f.partition_values::text,"
        f" f.stats::text, f.segment_id, e.schema_version_id, e.schema_visible, f.schema_version_id, f.schema_visible"
        f" FROM {entries} e JOIN {files} f ON f.id = e.file_id WHERE e.table_id = ANY(%s::uuid[]) AND {mine}"
        f" AND NOT EXISTS (SELECT 1 FROM {entries} n WHERE {newer} AND n.file_id = e.file_id AND n.seq > e.seq)"
        f" AND NOT e.removed ORDER BY e.seq, e.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [table_ids, *params, *more])
        return cursor.fetchall()


def files_live_on(chains: dict[str, Chain], *, file_ids: Iterable[uuid.UUID | str]) -> dict[str, dict]:
    """Of these files, those live on each chain (by the chains' keys; their tables' other files are not read), in two
    queries whatever the number of chains: every entry of the files on any of the chains, each chain's newest per
    file taken here. A merge reads the files its plan names on its three sides so: one query, not one per side."""
    on_any = Q()
    for chain in chains.values():
        on_any |= chain.q()
    rows = FileEntry.objects.filter(on_any, file_id__any=list(file_ids)).order_by("seq", "id")
    found = _file_row_values(rows, "line_id", "seq", "removed")
    entries = [(line_id, seq, removed, row) for line_id, seq, removed, *row in found]  # each unpacked once
    live = {}
    for side, chain in chains.items():
        upto = dict(chain.segments)
        newest: dict[uuid.UUID, int] = {}  # file id -> the seq of its newest entry on the chain
        for line_id, seq, _, row in entries:
            if seq <= upto.get(line_id, -1):
                newest[row[1]] = seq  # in seq order: the last one is the newest
        live[side] = [
            row for line_id, seq, removed, row in entries
            if not removed and seq <= upto.get(line_id, -1) and newest[row[1]] == seq
        ]  # fmt: skip
    schemas = _schemas_of([row for rows in live.values() for row in rows])
    return {side: _file_rows(rows, schemas) for side, rows in live.items()}


_SCHEMA_ROWS: dict[int, SchemaRow] = {}  # by id: a schema version never changes once written
SCHEMA_ROWS_KEPT = 4096


def schema_rows_kept(schema_ids: Iterable[int]) -> dict[int, SchemaRow]:
    """These schema versions by id, those the process read before not read again."""
    wanted = set(schema_ids)
    missing = [i for i in wanted if i not in _SCHEMA_ROWS]
    if missing:
        if len(_SCHEMA_ROWS) + len(missing) > SCHEMA_ROWS_KEPT:
            _SCHEMA_ROWS.clear()
        _SCHEMA_ROWS.update((row.id, row) for row in schema_rows(SchemaVersion.objects.filter(id__any=missing)))
    return {i: _SCHEMA_ROWS[i] for i in wanted if i in _SCHEMA_ROWS}


def _schemas_of(rows: list[tuple]) -> dict[int, SchemaRow]:
    """The schema versions `FILE_ROW_FIELDS` rows read with, by id."""
    return schema_rows_kept({row[9] if row[9] is not None else row[11] for row in rows} - {None})


def _file_rows(rows: list[tuple], schemas: dict[uuid.UUID, SchemaRow] | None = None) -> dict[uuid.UUID, TableFiles]:
    """`FILE_ROW_FIELDS` rows, in the order they became live, as each table's files."""
    schemas = _schemas_of(rows) if schemas is None else schemas
    files: dict[uuid.UUID, TableFiles] = {}
    for table_id, file_id, kind, path, row_count, size, partitions, stats, segment_id, *schema in rows:
        taken_schema, taken_visible, own_schema, own_visible = schema
        if taken_schema is not None:  # taken over by a merge: read with this line's copy of its schema
            own_schema, own_visible = taken_schema, taken_visible
        file = FileRow(
            id=file_id, table_id=table_id, kind=kind, path=path, row_count=row_count, size_bytes=size,
            partition_values_json=partitions, stats_json=stats, segment_id=segment_id,
            schema_version=schemas.get(own_schema),
            schema_visible=own_visible,
        )  # fmt: skip
        table = files.setdefault(table_id, TableFiles(segments=[], deltas={}))
        if kind == DataFile.Kind.SEGMENT:
            table.segments.append(file)
        else:
            table.deltas.setdefault(segment_id, []).append(file)
    return files


def commit_file_changes(commit_id: str) -> dict[uuid.UUID, dict[str, list[str]]]:
    """The files a commit made live and took out, per table, as ids (text): `segments_added`, `segments_removed`,
    `deltas_added`, `deltas_removed`. What the commit did to its first parent's files, whatever its operations'
    details say (a merge's replayed operation names the source's files, not the target's it replaced)."""
    entries = FileEntry.objects.filter(commit_id=commit_id).order_by("id")
    last: dict[tuple, tuple[str, bool]] = {}
    both: set[tuple] = set()
    for table_id, file_id, kind, removed in entries.values_list("table_id", "file_id", "file__kind", "removed"):
        key = (table_id, str(file_id))
        if key in last and last[key][1] != removed:
            both.add(key)  # added and taken out again (or the reverse) within the commit: no change
        last[key] = (kind, removed)
    changes: dict[uuid.UUID, dict[str, list[str]]] = {}
    for (table_id, file_id), (kind, removed) in last.items():
        if (table_id, file_id) in both:
            continue
        table = changes.setdefault(
            table_id, {"segments_added": [], "segments_removed": [], "deltas_added": [], "deltas_removed": []}
        )
        noun = "segments" if kind == DataFile.Kind.SEGMENT else "deltas"
        table[f"{noun}_{'removed' if removed else 'added'}"].append(file_id)
    return changes


def file_segments(file_ids: Iterable[uuid.UUID | str]) -> dict[uuid.UUID, uuid.UUID | None]:
    """The segment each of these delta files deletes from (None for a segment), by file id, in one query."""
    return dict(DataFile.objects.filter(id__any=file_ids).values_list("id", "segment_id"))


def file_stats(file_ids: Iterable[uuid.UUID | str]) -> dict[uuid.UUID, dict]:
    """The column statistics of these files (segments: {column id: {min, max, nulls}}), by file id, in one query."""
    return dict(DataFile.objects.filter(id__any=file_ids).values_list("id", "stats"))


def table_has_rows(chain: Chain, *, table_id: uuid.UUID) -> bool:
    """Whether the table may hold rows. Exact unless a segment has overlapping delta files, where it may say
    True for an empty segment: the safe side for the checks that use it (NOT NULL without a default)."""
    files = table_files(chain, table_id=table_id)
    return any(
        segment.row_count > max((delta.row_count for delta in files.deltas.get(segment.id, [])), default=0)
        for segment in files.segments
    )


def table_columns(table: ObjectVersion) -> list[Column]:
    return [Column.from_dict(column) for column in table.state["columns"]]


@dataclass(frozen=True)
class ScanPlan:
    """What a client's own SparkSession needs to read a table at a commit: the schema with its column ids, each
    live segment with the schema it was written with, and the delete files to subtract from it. Paths are
    relative to `warehouse`; `uri` is each file's full location."""

    commit: str
    table_id: str
    warehouse: str
    base: str
    columns: list[dict]
    partition_by: list[int]
    primary_key: list[int]
    row_count: int
    segments: list[dict]


def table_scan_plan(chain: Chain, *, commit_id: str, table: ObjectVersion, warehouse: Warehouse) -> ScanPlan:
    """The scan plan of `table` at `chain`: the files the engine reads (`TableFiles.reads`, in the same order),
    described for a reader outside the server."""
    files = table_files(chain, table_id=table.object_id)

    def described(file: DataFile) -> dict:
        return {"id": str(file.id), "path": file.path, "uri": warehouse.uri(file.path), "row_count": file.row_count,
                "size_bytes": file.size_bytes}  # fmt: skip

    current, reads = table_columns(table), files.reads()
    filled = [c for c in current if c.fill]
    for read in reads if filled else ():
        lacking = [c.name for c in filled if c.id not in {w.id for w in read.columns}]
        if lacking:
            raise ApplicationError(
                "scan_not_representable",
                f"Column {lacking[0]!r} of {table.name!r} is filled by an expression for the rows written without it "
                "(a merge's fill), which a reader outside the server (read_arrow, read_table) does not compute; "
                "read the table with the rows API.",
                status=406,
            )
    segments = [
        {
            **described(segment),
            "order": read.order,
            "partition_values": segment.partition_values,
            "stats": segment.stats,
            "columns": [_column_dict(column) for column in read.columns],
            "deletes": [described(delta) for delta in files.deltas.get(segment.id, [])],
        }
        for segment, read in zip(files.segments, reads, strict=True)
    ]
    return ScanPlan(
        commit=commit_id,
        table_id=str(table.object_id),
        warehouse=warehouse.root,
        base=f"{table.catalog_id}/{table.object_id}",
        columns=[_column_dict(column) for column in current],
        partition_by=list(table.state["partition_by"]),
        primary_key=list(table.state.get("primary_key") or []),
        row_count=files.live_rows(warehouse),
        segments=segments,
    )


def data_file_paths(catalog_id: uuid.UUID | str) -> set[str]:
    """The paths of every data file any commit of the catalog references, on whichever branch, less the files
    retention reclaimed (no kept commit references them) that no commit made since references again."""
    again = FileEntry.objects.filter(file_id=OuterRef(OuterRef("pk")), seq__gt=OuterRef("upto_seq"))
    reclaimed = ReclaimedFile.objects.filter(file_id=OuterRef("pk")).filter(~Exists(again))
    return set(DataFile.objects.filter(catalog_id=catalog_id).exclude(Exists(reclaimed)).values_list("path", flat=True))


def _column_dict(column: Column) -> dict:
    return {"id": column.id, "name": column.name, "type": column.type, "nullable": column.nullable,
            "default": column.default}  # fmt: skip
