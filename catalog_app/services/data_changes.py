"""Table data changes run by jobs on a worker: delete, update, compaction (loads: services/load_changes.py), one
commit each.

A job reads a snapshot of the table at the branch head, does its Spark work (writing new files only), and then
commits in one transaction on the branch's current head, provided the table is still as the job read it: the same
schema and the same files (optimistic concurrency, as Delta Lake does). A file another commit added or removed
meanwhile could hold a key the job matched, a row its predicate selects, or a position it deletes: committing
on top would keep a key twice or lose a change. Two changes commute with what was added meanwhile (`_commutes`):
an append of given rows to a table without a key, and a compaction none of whose segments changed. Otherwise the
commit raises `concurrent_change`, the job runs again from a new snapshot (`REPLANS` times) and then fails with
that code; the files a refused attempt wrote are orphans for garbage collection. A job delivered again after its
commit finds that commit (by job id) and does not write twice.
"""

import math
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction

from catalog_app.engine import dml, incoming, pruning
from catalog_app.engine.dml import FEW_ROWS
from catalog_app.engine.frames import Frame, cache_scope
from catalog_app.engine.predicate_parser import Expr, PredicateError, parse_assignments, parse_predicate
from catalog_app.engine.segments import Column, SegmentRead, WrittenFile
from catalog_app.engine.session import DataRefused, data_refusals, time_zone
from catalog_app.engine.table_data import TableData
from catalog_app.engine.warehouse import Warehouse
from catalog_app.job_specs import CompactSpec, DeleteSpec, TableTarget, UpdateSpec
from catalog_app.models import Catalog, Commit, DataFile, ObjectKind, ObjectVersion, Operation
from catalog_app.selectors.objects import object_by_id
from catalog_app.selectors.refs import branch_get, commit_chain
from catalog_app.selectors.table_files import TableFiles, table_columns, table_files
from catalog_app.services.commits import commit_begin
from lakeui.errors import ApplicationError, ConflictError, NotFoundError
from lakeui.jobs.models import Job
from lakeui.jobs.registry import Progress

Op = Operation.Op
WRITE_MODE, COPY_ON_WRITE, MERGE_ON_READ = "write.mode", "copy-on-write", "merge-on-read"
COMPACTION_TARGET = "compaction.target-bytes"
DEFAULT_COMPACTION_TARGET = 128 * 1024 * 1024
MESSAGE_CONCURRENT = "Table {table!r} changed on branch {branch!r} while the job ran ({why}); nothing was committed."


@contextmanager
def predicate_errors() -> Iterator[None]:
    """A predicate or assignment the user wrote that does not parse or check is a 400 `invalid_predicate`."""
    try:
        yield
    except PredicateError as exc:
        raise ApplicationError("invalid_predicate", str(exc), details={"position": exc.position}) from None


def parsed_predicate(where: str, columns: list[Column]) -> Expr:
    with predicate_errors():
        return parse_predicate(where, {c.name: c.type for c in columns})


def parsed_assignments(assignments: dict[str, str], columns: list[Column]) -> dict[str, Expr]:
    with predicate_errors():
        return parse_assignments(assignments, {c.name: c.type for c in columns})


@dataclass
class Snapshot:
    """The table as the job read it at the start."""

    catalog: Catalog
    branch: str
    table: ObjectVersion
    files: TableFiles
    warehouse: Warehouse
    head: Commit

    @property
    def columns(self) -> list[Column]:
        return table_columns(self.table)

    @property
    def base(self) -> str:
        return f"{self.catalog.id}/{self.table.object_id}"

    @property
    def copy_on_write(self) -> bool:
        return self.table.state["properties"].get(WRITE_MODE, MERGE_ON_READ) == COPY_ON_WRITE

    @property
    def data(self) -> TableData:
        """The table's data as the engine reads and writes it."""
        state = self.table.state
        return TableData(
            self.warehouse, self.base, tuple(self.columns), tuple(state["partition_by"]),
            tuple(state.get("primary_key") or ()),
        )  # fmt: skip

    def reads(self, segments: list[DataFile] | None = None) -> list[SegmentRead]:
        """What the engine reads of `segments` (all live segments by default), with their live delta files."""
        return (self.files if segments is None else TableFiles(segments, self.files.deltas)).reads()

    def read(
        self,
        spark,
        segments: list[DataFile] | None = None,
        *,
        positions: bool = False,
        dropped: Mapping[str, Any] | None = None,
    ) -> Frame:
        return self.data.read(spark, self.reads(segments), positions=positions, dropped=dropped)

    def write(self, rows: Frame, tag: str, *, grouped: bool = False, few: bool = False) -> list[WrittenFile]:
        """Write `rows` as new segments (see `TableData.write`)."""
        return self.data.write(rows, tag, grouped=grouped, few=few)

    def with_deltas(self, segments: list[DataFile]) -> list[DataFile]:
        return [*segments, *(delta for s in segments for delta in self.files.deltas.get(s.id, []))]

    def unsplit(self) -> list[DataFile]:
        return self.files.unsplit(self.table.state["partition_by"])


@dataclass
class DataChange:
    """One DML operation of a commit; `more` holds the further operations of the same commit (a write strategy
    may amount to an update plus an insert, say), `new_columns` a schema the commit sets first (scd2)."""

    op: str
    new_segments: list[WrittenFile] = field(default_factory=list)
    new_deltas: list[WrittenFile] = field(default_factory=list)
    removed: list[DataFile] = field(default_factory=list)  # segments and delta files the change replaces
    touched: list[DataFile] = field(default_factory=list)  # segments whose rows it deleted or updated
    by_origin: bool = False  # its new segments are grouped by the segment their rows come from (`dml.by_origin`)
    counts: dict[str, int] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    segments_read: list[DataFile] = field(default_factory=list)
    more: list["DataChange"] = field(default_factory=list)
    strategy: str | None = None
    new_columns: list[dict] | None = None
    column_changes: list[dict] = field(default_factory=list)
    commutes: bool = False  # reads nothing of the table: commits made since the snapshot do not affect it

    def operations(self) -> list["DataChange"]:
        return [self, *self.more]

    @property
    def empty(self) -> bool:
        return not any(op.new_segments or op.new_deltas or op.removed for op in self.operations())

    def figures(self) -> dict[str, int]:
        return _figures(self.operations())

    def result(self) -> dict[str, Any]:
        return {**self.figures(), **({"strategy": self.strategy} if self.strategy else {})}


def _figures(operations: list[DataChange]) -> dict[str, int]:
    """Row counts, files and bytes of some operations; a segment read by several of them counts once."""
    read = list({s.id: s for op in operations for s in op.segments_read}.values())
    rewritten = [f for op in operations if op.op != Op.OVERWRITE for f in op.removed if f.kind == DataFile.Kind.SEGMENT]
    segments = [f for op in operations for f in op.new_segments]
    deltas = [f for op in operations for f in op.new_deltas]
    counts = {"rows_inserted": 0, "rows_updated": 0, "rows_deleted": 0}
    for op in operations:
        for key, value in op.counts.items():
            counts[key] = counts.get(key, 0) + value
    return {
        **counts, "segments_read": len(read), "segments_rewritten": len(rewritten),
        "segments_written": len(segments), "delta_files_written": len(deltas),
        "bytes_read": sum(s.size_bytes for s in read),
        "bytes_written": sum(f.size_bytes for f in [*segments, *deltas]),
    }  # fmt: skip


# --- the worker side --------------------------------------------------------------------------------------


def table_snapshot(*, catalog_id: str, branch: str, table_id: str, warehouse: str) -> Snapshot:
    catalog = Catalog.objects.get(id=catalog_id)
    chain = commit_chain(branch_get(catalog=catalog, name=branch).head)
    table = object_by_id(chain, object_id=uuid.UUID(table_id))
    if table is None or table.dropped or table.kind != ObjectKind.TABLE:
        raise NotFoundError("table_not_found", f"The table no longer exists on branch {branch!r}.")
    files = table_files(chain, table_id=table.object_id)
    return Snapshot(catalog, branch, table, files, Warehouse(warehouse), chain.commit)


# A data job's Spark work: (spark, snapshot, spec, tag) -> the change, its new files written (CHANGES, load_change).
ChangeMaker = Callable[[Any, Snapshot, Any, str], DataChange]


def data_change_run(
    *, target: TableTarget, spec: Any, make: ChangeMaker, spark: Callable[[], Any], job: Job, message: str,
    tag: str, progress: Progress,
) -> dict[str, Any]:  # fmt: skip
    """One attempt of a data job: read the table at the branch head, make the change on Spark (`spark()` gives
    the worker's session) and commit it if nothing it depends on changed meanwhile (`data_change_commit`; its
    files are orphans otherwise). Returns the job's result: the commit (None if nothing changed) and figures."""
    progress.report(5, "Reading the table")
    snapshot = table_snapshot(
        catalog_id=target.catalog_id, branch=target.branch, table_id=target.table_id,
        warehouse=settings.LAKEUI_WAREHOUSE,
    )  # fmt: skip
    session = spark()
    progress.report(15, "Running on Spark")
    try:
        with data_refusals():
            change = make(session, snapshot, spec, tag)
    except DataRefused as exc:
        raise ApplicationError("data_error", f"Spark refused the data: {exc.message}") from None
    if change.empty:
        return {"commit": None, **change.result()}
    progress.report(90, "Committing")
    commit = data_change_commit(snapshot=snapshot, change=change, job=job, message=message)
    return {"commit": commit.id, **change.result()}


def data_change_commit(*, snapshot: Snapshot, change: DataChange, job: Job, message: str) -> Commit:
    """Commit `change` on the branch's current head if the table is still as the job read it."""
    with transaction.atomic():
        draft = commit_begin(catalog=snapshot.catalog, branch=snapshot.branch)
        current = object_by_id(draft.chain, object_id=snapshot.table.object_id)
        if current is None or current.dropped:
            raise ConflictError(
                "concurrent_change",
                MESSAGE_CONCURRENT.format(table=snapshot.table.name, branch=snapshot.branch, why="dropped"),
            )
        if current.state["schema_version_id"] != snapshot.table.state["schema_version_id"]:
            why = "its schema changed"
            raise ConflictError(
                "concurrent_change",
                MESSAGE_CONCURRENT.format(table=snapshot.table.name, branch=snapshot.branch, why=why),
            )
        live = table_files(draft.chain, table_id=current.object_id)
        live_ids = {uuid.UUID(i) for i in live.by_id()}
        if not {f.id for op in change.operations() for f in [*op.removed, *op.touched]} <= live_ids:
            why = "files it read were replaced"
            raise ConflictError(
                "concurrent_change",
                MESSAGE_CONCURRENT.format(table=snapshot.table.name, branch=snapshot.branch, why=why),
            )
        if not _commutes(change, current, live, snapshot.files) and set(live.by_id()) != set(snapshot.files.by_id()):
            # Its result depends on the rows it read (key matches, predicates, partitions): any segment or delete
            # file added or removed since may hold rows it would have matched (DuckLake #906 was this bug).
            why = "files were added or removed since it read the table"
            raise ConflictError(
                "concurrent_change",
                MESSAGE_CONCURRENT.format(table=snapshot.table.name, branch=snapshot.branch, why=why),
                details={"table": current.name, "read_at": snapshot.head.id, "head": draft.parent.id},
            )
        state = current.state
        if change.new_columns is not None:
            last_id = max(c["id"] for c in change.new_columns)
            state = {**state, "columns": change.new_columns, "last_column_id": max(last_id, state["last_column_id"])}
            for detail in change.column_changes:
                draft.operation(object_id=current.object_id, kind=ObjectKind.TABLE, op=Op.ALTER_COLUMN, details=detail)
        draft.put(
            kind=ObjectKind.TABLE, object_id=current.object_id, name=current.name, parent_id=current.parent_id,
            state=state, new_schema=change.new_columns,
        )  # fmt: skip
        new_schema = change.new_columns is not None
        for op in change.operations():
            new_segments = [_data_file(snapshot, w, DataFile.Kind.SEGMENT, new_schema) for w in op.new_segments]
            new_deltas = [_data_file(snapshot, w, DataFile.Kind.DELTA, new_schema) for w in op.new_deltas]
            for file in [*new_segments, *new_deltas]:
                draft.add_file(file)
            for file in op.removed:
                draft.remove_file(file)
            origins = {str(f.id): w.group for f, w in zip(new_segments, op.new_segments, strict=True)}
            details = {
                "segments_added": [str(f.id) for f in new_segments],
                "deltas_added": [str(f.id) for f in new_deltas],
                "segments_removed": [str(f.id) for f in op.removed if f.kind == DataFile.Kind.SEGMENT],
                "deltas_removed": [str(f.id) for f in op.removed if f.kind == DataFile.Kind.DELTA],
                "segments_touched": [str(f.id) for f in op.touched],
                **({"segments_from": origins} if op.by_origin else {}),
                **_figures([op]),
                **({"strategy": change.strategy} if change.strategy else {}),
                **op.details,
            }
            draft.operation(object_id=current.object_id, kind=ObjectKind.TABLE, op=op.op, details=details)
        return draft.commit(author=job.requested_by, message=message, job=job)


def _commutes(change: DataChange, table: ObjectVersion, live: TableFiles, read: TableFiles) -> bool:
    """Whether `change` commits on whatever was added to its table meanwhile: an append of given rows into a table
    without a primary key (appends commute; a query's rows may come from the table itself), or a compaction none of
    whose segments got a delete file since it read them."""
    if all(op.op == Op.COMPACTION for op in change.operations()):
        changed = {s.id for s in live.changes_since(read)[0]}
        return not any(f.id in changed for op in change.operations() for f in op.removed)
    return change.commutes  # an append of given rows into a table without a key (services/load_changes.py)


def _data_file(snapshot: Snapshot, written: WrittenFile, kind: str, new_schema: bool = False) -> DataFile:
    """A new file's catalog row; with `new_schema` its segments get the schema version the commit creates."""
    schema_version_id = None if new_schema else snapshot.table.state["schema_version_id"]
    return DataFile(
        catalog=snapshot.catalog, table_id=snapshot.table.object_id, kind=kind, path=written.path,
        row_count=written.row_count, size_bytes=written.size_bytes, stats=written.stats,
        partition_values=written.partition_values,
        schema_version_id=schema_version_id if kind == DataFile.Kind.SEGMENT else None,
        segment_id=uuid.UUID(written.segment_id) if written.segment_id else None,
    )  # fmt: skip


# --- the changes ------------------------------------------------------------------------------------------


def _matched(spark, snapshot: Snapshot, where: Expr, *, op: str, counted: str) -> tuple[dml.Matched, DataChange]:
    """The rows of the segments `where` may match by their statistics that it does match (see
    `engine.dml.rows_matching`), and the change so far: the segments those rows sit in (touched) and how many
    rows match (under `counted`)."""
    candidates = _segments_matching(spark, snapshot, where)
    matched = dml.rows_matching(
        spark, snapshot.data, snapshot.reads(candidates), where, few=_rows_in(candidates) <= FEW_ROWS
    )
    per_segment = matched.counts()
    touched = [s for s in candidates if str(s.id) in per_segment]
    counts = {counted: sum(per_segment.values())}
    return matched, DataChange(op, touched=touched, counts=counts, segments_read=candidates)


def _segments_matching(spark, snapshot: Snapshot, where: Expr) -> list[DataFile]:
    """The live segments whose column statistics do not rule `where` out (see `engine.pruning`), less those with no
    live row left."""
    named = where.columns()
    columns = [c for c in snapshot.columns if c.name in named]
    zone = time_zone(spark)
    emptied = snapshot.files.emptied()
    return [
        s for s, read in zip(snapshot.files.segments, snapshot.files.reads(), strict=True)
        if s.id not in emptied and pruning.may_match(
            where, pruning.segment_bounds(s.stats, columns, written=read.columns), time_zone=zone
        )
    ]  # fmt: skip


@cache_scope()
def delete_change(spark, snapshot: Snapshot, spec: DeleteSpec, tag: str) -> DataChange:
    where = parsed_predicate(spec.where, snapshot.columns)
    matched, change = _matched(spark, snapshot, where, op=Op.DELETE, counted="rows_deleted")
    if not change.counts["rows_deleted"]:
        return change
    if snapshot.copy_on_write:
        few = _rows_in(change.touched) <= FEW_ROWS
        reads = snapshot.reads(change.touched)
        change.new_segments = dml.rows_kept_write(spark, snapshot.data, reads, where, tag, few=few)
        change.by_origin = True
        change.removed = snapshot.with_deltas(change.touched)
    else:
        change.new_deltas = matched.write_deletes(snapshot.data, tag)
    return change


def _rows_in(segments: list[DataFile]) -> int:
    return sum(segment.row_count for segment in segments)


@cache_scope()
def update_change(spark, snapshot: Snapshot, spec: UpdateSpec, tag: str) -> DataChange:
    where = parsed_predicate(spec.where, snapshot.columns)
    assignments = parsed_assignments(dict(spec.assignments), snapshot.columns)
    matched, change = _matched(spark, snapshot, where, op=Op.UPDATE, counted="rows_updated")
    if not change.counts["rows_updated"]:
        return change
    touched = change.touched
    if snapshot.copy_on_write:
        rewritten = snapshot.reads(touched)
        change.removed = snapshot.with_deltas(touched)
        few = _rows_in(touched) <= FEW_ROWS
    else:
        rewritten = None
        few = change.counts["rows_updated"] <= FEW_ROWS
        change.new_deltas = matched.write_deletes(snapshot.data, tag)
    try:
        change.new_segments = dml.rows_updated_write(
            spark, snapshot.data, matched, assignments, tag, touched=rewritten, few=few
        )
    except incoming.IncomingError as exc:
        raise ApplicationError(exc.code, exc.message) from None
    change.by_origin = True
    return change


def compaction_change(spark, snapshot: Snapshot, spec: CompactSpec, tag: str) -> DataChange:
    """Rewrite small segments, segments with delta files and segments written before the table was partitioned as
    it is now into fewer files, one partition each; no row changes."""
    target = int(snapshot.table.state["properties"].get(COMPACTION_TARGET, DEFAULT_COMPACTION_TARGET))
    rewrite = {s.id for s in snapshot.unsplit()} | set(snapshot.files.deltas)  # whatever their size
    small = [s for s in snapshot.files.segments if s.size_bytes < target or s.id in rewrite]
    if len(small) < 2 and not any(s.id in rewrite for s in small):
        return DataChange(Op.COMPACTION)
    files = max(1, math.ceil(sum(s.size_bytes for s in small) / target))
    live = TableFiles(small, snapshot.files.deltas).live_rows(snapshot.warehouse)
    written = dml.compacted_write(spark, snapshot.data, snapshot.reads(small), tag, files=files)
    if sum(w.row_count for w in written) != live:
        raise ApplicationError("compaction_mismatch", "Compaction wrote a different number of rows; nothing committed.")
    return DataChange(Op.COMPACTION, new_segments=written, removed=snapshot.with_deltas(small), segments_read=small)


CHANGES = {"table_delete": delete_change, "table_update": update_change, "table_compact": compaction_change}
