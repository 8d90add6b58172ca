"""Submitting table data jobs from the web process, one service per action (the API and the UI both call them):
each takes the job's spec (catalog_app/job_specs.py, its shape already checked), checks it against the table at
the branch head with every check that needs no Spark, so bad input is a 400 before anything is enqueued, and
enqueues the job; the worker does the rest (services/load_changes.py, services/data_changes.py). Also the reads
of a table's rows (here from the files, or by an interactive job, never waited for) and its scan plan."""

import dataclasses
import decimal
import uuid
import zoneinfo
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from catalog_app.engine import pruning
from catalog_app.engine.incoming import FILE_FORMATS, PARQUET_MAGIC, catalog_value, upload_problem
from catalog_app.engine.predicate_parser import parse_assignments, parse_predicate
from catalog_app.engine.segments import Column
from catalog_app.engine.warehouse import Warehouse
from catalog_app.job_specs import (
    MESSAGE_PARTITIONS_FOR,
    TABLE_JOB_SPECS,
    CatalogGcSpec,
    CompactSpec,
    DeleteSpec,
    FileUpload,
    LoadSpec,
    Rows,
    RowsPageSpec,
    Staging,
    StoredFiles,
    TableJobSpec,
    TableTarget,
    UpdateSpec,
)
from catalog_app.models import Catalog, ObjectKind, ObjectVersion
from catalog_app.selectors.objects import object_get
from catalog_app.selectors.refs import ResolvedRef, ref_resolve
from catalog_app.selectors.table_files import ScanPlan, table_columns, table_files, table_scan_plan
from catalog_app.selectors.table_rows import rows_page
from catalog_app.services.access import branch_write_check
from catalog_app.services.commits import WriteTarget
from catalog_app.services.data_changes import predicate_errors
from catalog_app.services.load_changes import load_table_check
from lakeui.errors import ApplicationError, ConflictError
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_create, job_read

MAX_PAGE_SIZE = 1000
# Spark's OFFSET is a 32-bit int: page * page_size must stay below 2**31.
MAX_PAGE = 1_000_000
UPLOAD_SNIFF_BYTES = 64 * 1024
MESSAGE_STAGING_EMPTY = "The staging location {staged} holds no Parquet files; write the data there first."


def _table_at(resolved: ResolvedRef, database: str, table: str) -> ObjectVersion:
    db = object_get(resolved.chain, kind=ObjectKind.DATABASE, name=database)
    return object_get(resolved.chain, kind=ObjectKind.TABLE, name=table, parent_id=db.object_id)


def table_for_write(target: WriteTarget, database: str, table: str) -> ObjectVersion:
    return _table_at(_writable(target), database, table)


def _writable(target: WriteTarget) -> ResolvedRef:
    """The target's branch, resolved; a tag or commit, a protected branch, or a branch that moved from
    `expected_head`, refused: a data job is refused before anything is stored or enqueued (commit_begin would
    refuse it again in the job)."""
    branch_write_check(catalog=target.catalog, branch=target.branch)
    resolved = ref_resolve(catalog=target.catalog, ref=target.branch)
    if resolved.kind != "branch":
        raise ApplicationError(
            "read_only_ref", f"{target.branch!r} is a {resolved.kind}; only branches can be written to."
        )
    if target.expected_head and not resolved.commit.id.startswith(target.expected_head):
        raise ConflictError(
            "branch_moved", f"Branch {target.branch!r} has moved.", details={"head": resolved.commit.id}
        )
    return resolved


def _partitions(table: ObjectVersion, partitions: tuple[dict, ...]) -> tuple[dict, ...]:
    """full_refresh's `partitions`: each a value for every partition column, in the form the catalog keeps them
    (so that `"1.5"` finds the files of a decimal(10,2) partition 1.50)."""
    spec = [c for c in table_columns(table) if c.id in table.state["partition_by"]]
    names = sorted(c.name for c in spec)
    if not spec:
        raise ApplicationError("invalid_input", MESSAGE_PARTITIONS_FOR)
    if not all(isinstance(p, dict) and sorted(p) == names for p in partitions):
        raise ApplicationError("invalid_input", f"Each partition must give a value for exactly {names}.")
    checked = []
    for partition in partitions:
        try:
            checked.append({c.name: catalog_value(partition[c.name], c) for c in spec})
        except (TypeError, ValueError, decimal.InvalidOperation):
            message = f"The partition {partition} does not fit the types of the partition columns {names}."
            raise ApplicationError("invalid_partition_value", message) from None
    return tuple(checked)


def _job_create(*, target: WriteTarget, current: ObjectVersion, database: str, table: str, spec: TableJobSpec) -> Job:
    where = TableTarget(
        catalog_id=str(target.catalog.id), branch=target.branch, table_id=str(current.object_id), database=database,
        table=table, message=target.message,
    )  # fmt: skip
    return job_create(kind=spec.KIND, params=where.to_params() | spec.to_params(), requested_by=target.author)


def load_rows_check(rows: object) -> None:
    """The one limit on rows sent with a request (JSON rows, the API's and the load form's): LAKEUI_MAX_ROWS. The API
    also calls it before anything else is validated, so an oversized body is refused at once."""
    if isinstance(rows, list | tuple) and len(rows) > settings.LAKEUI_MAX_ROWS:
        raise ApplicationError(
            "payload_too_large",
            f"A load may send at most {settings.LAKEUI_MAX_ROWS} rows; upload a file or load in parts.",
            status=413,
        )


def table_load_submit(*, target: WriteTarget, database: str, table: str, spec: LoadSpec) -> Job:
    """Check a load against the table at the branch head, store its upload and enqueue it (202). The API and
    the UI both submit here."""
    if isinstance(spec.source, Rows):
        load_rows_check(spec.source.rows)
    resolved = _writable(target)
    current = _table_at(resolved, database, table)
    load_table_check(spec, current, lambda: table_files(resolved.chain, table_id=current.object_id))
    if spec.partitions is not None:
        spec = dataclasses.replace(spec, partitions=_partitions(current, spec.partitions))
    if isinstance(spec.source, FileUpload):
        stored = upload_store(
            catalog=target.catalog, table=current, upload=spec.source.file, file_format=spec.source.format
        )
        spec = dataclasses.replace(spec, source=stored)
    elif isinstance(spec.source, Staging):
        spec = dataclasses.replace(spec, source=staged_upload(catalog=target.catalog, staged=spec.source.id))
    return _job_create(target=target, current=current, database=database, table=table, spec=spec)


def table_delete_submit(*, target: WriteTarget, database: str, table: str, spec: DeleteSpec) -> Job:
    """Check a delete's predicate against the table at the branch head and enqueue it (202)."""
    current = _table_at(_writable(target), database, table)
    with predicate_errors():
        parse_predicate(spec.where, _column_types(current))
    return _job_create(target=target, current=current, database=database, table=table, spec=spec)


def table_update_submit(*, target: WriteTarget, database: str, table: str, spec: UpdateSpec) -> Job:
    """Check an update's predicate and assignments against the table at the branch head and enqueue it (202)."""
    current = _table_at(_writable(target), database, table)
    types = _column_types(current)
    with predicate_errors():
        parse_predicate(spec.where, types)
        parse_assignments(dict(spec.assignments), types)
    return _job_create(target=target, current=current, database=database, table=table, spec=spec)


def table_compact_submit(*, target: WriteTarget, database: str, table: str, spec: CompactSpec) -> Job:
    current = _table_at(_writable(target), database, table)
    return _job_create(target=target, current=current, database=database, table=table, spec=spec)


def _column_types(table: ObjectVersion) -> dict[str, str]:
    return {c.name: c.type for c in table_columns(table)}


TABLE_SUBMITS: dict[str, Callable[..., Job]] = {
    LoadSpec.KIND: table_load_submit,
    DeleteSpec.KIND: table_delete_submit,
    UpdateSpec.KIND: table_update_submit,
    CompactSpec.KIND: table_compact_submit,
}


def table_data_submit(*, target: WriteTarget, database: str, table: str, kind: str, params: dict) -> Job:
    """For callers in this process that hold a data job's input as a dict (the demo command, benchmarks,
    tests): parsed into the kind's spec as a request is, then submitted by the kind's service."""
    spec = TABLE_JOB_SPECS[kind].from_request(params)
    return TABLE_SUBMITS[kind](target=target, database=database, table=table, spec=spec)


def catalog_gc_submit(*, catalog: Catalog, grace_hours: float, user) -> Job:
    """Enqueue garbage collection of the catalog's unreferenced files older than the grace period (202)."""
    spec = CatalogGcSpec.from_request(catalog_id=str(catalog.id), grace_hours=grace_hours)
    return job_create(kind=spec.KIND, params=spec.to_params(), requested_by=user)


def upload_store(*, catalog: Catalog, table: ObjectVersion, upload: UploadedFile, file_format: str) -> StoredFiles:
    """Save an uploaded file where the workers read it: the table's staging folder in the warehouse, marked for
    removal once its load has an outcome (`staged`, see catalog_app/job_kinds.py)."""
    if file_format not in FILE_FORMATS:
        raise ApplicationError("unsupported_format", f"format must be one of {FILE_FORMATS}.")
    if "://" in settings.LAKEUI_WAREHOUSE:
        raise ApplicationError("upload_unsupported", "Uploads need a local warehouse; load from a query instead.")
    upload_check(upload, file_format)
    relative = f"{catalog.id}/{table.object_id}/staging/{uuid.uuid4().hex}.{file_format}"
    destination = Path(settings.LAKEUI_WAREHOUSE) / relative
    destination.parent.mkdir(parents=True, exist_ok=True)
    with destination.open("wb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    return StoredFiles(path=relative, format=file_format, staged=True)


def upload_check(upload: UploadedFile, file_format: str) -> None:
    """The one check of an uploaded file before it is stored, for every entry point (the API, the load form, the
    CLI and the Python client through the API): an empty file, or one that is not the format it is sent as, is a
    400 saying what is wrong with it (engine.incoming.upload_problem)."""
    size = upload.size or 0
    upload.seek(0)
    head = upload.read(UPLOAD_SNIFF_BYTES)
    upload.seek(max(0, size - len(PARQUET_MAGIC)))
    tail = upload.read(len(PARQUET_MAGIC))
    upload.seek(0)
    problem = upload_problem(size=size, head=head, tail=tail, file_format=file_format)
    if problem is not None:
        raise ApplicationError(problem.code, problem.message, details={"file": upload.name, "format": file_format})


def table_rows_read(*, resolved: ResolvedRef, database: str, table: str, page: int, page_size: int, user) -> dict:
    """A page of rows at a ref, answered at once: read here from the files (pyarrow) when the page's segments are in
    the table's current schema, else by a worker's SparkSession on the interactive queue, whose job the answer names
    until it has finished (`job_read`: `{"complete": false, "job": ...}`, to read again)."""
    if not 1 <= page <= MAX_PAGE or not 1 <= page_size <= MAX_PAGE_SIZE:
        raise ApplicationError("invalid_input", f"page must be 1 to {MAX_PAGE} and page_size 1 to {MAX_PAGE_SIZE}.")
    current = _table_at(resolved, database, table)
    answered = rows_page(resolved.chain, current, page=page, page_size=page_size)
    if answered is not None:
        return answered
    spec = RowsPageSpec(commit=resolved.commit.id, table_id=str(current.object_id), page=page, page_size=page_size)
    return job_read(kind=spec.KIND, params=spec.to_params(), requested_by=user)


def staging_path(catalog: Catalog, staging_id: str) -> str:
    """Built from ids only: a client names its staging location by id, never by path."""
    return f"{catalog.id}/staging/{staging_id}"


def staging_create(*, target: WriteTarget, database: str, table: str) -> dict:
    """A new staging location in the warehouse where a client writes Parquet files for one load (`staged`).
    Nothing is created here: the client's own Spark job writes the folder. The branch and table are checked now
    (a tag, a protected branch or a missing table is refused before any data is written). A folder no load
    consumes is removed by garbage collection after its grace period."""
    table_for_write(target, database, table)
    staging_id = uuid.uuid4().hex
    path = staging_path(target.catalog, staging_id)
    return {"id": staging_id, "path": path, "uri": Warehouse(settings.LAKEUI_WAREHOUSE).uri(path), "format": "parquet"}


def staged_upload(*, catalog: Catalog, staged: str) -> StoredFiles:
    """A load's `staged` source (an id checked by job_specs.LoadSpec) as the load reads an upload: the staging
    folder's Parquet files, marked for removal once the load has run (see catalog_app/job_kinds.py)."""
    path = staging_path(catalog, staged)
    if "://" not in settings.LAKEUI_WAREHOUSE:  # a remote warehouse is checked by the job's read
        folder = Path(settings.LAKEUI_WAREHOUSE) / path
        if not folder.is_dir() or not any(f.name[0] not in "._" for f in folder.rglob("*.parquet")):
            raise ApplicationError("staging_empty", MESSAGE_STAGING_EMPTY.format(staged=staged))
    return StoredFiles(path=path, format="parquet", staged=True)


def table_scan(
    *, resolved: ResolvedRef, database: str, table: str, where: str | None = None, time_zone: str = "UTC"
) -> ScanPlan:
    """The table's scan plan at a ref (time travel included), for a client's own SparkSession. With `where` (a
    predicate as deletes take it), only the segments whose partition values and column statistics do not rule it
    out (`engine.pruning`; `time_zone` is the reader's session zone, for timestamps without an offset); the reader
    still filters the rows."""
    current = _table_at(resolved, database, table)
    warehouse = Warehouse(settings.LAKEUI_WAREHOUSE)
    plan = table_scan_plan(resolved.chain, commit_id=resolved.commit.id, table=current, warehouse=warehouse)
    if where is None:
        return plan
    columns = table_columns(current)
    with predicate_errors():
        expr = parse_predicate(where, {c.name: c.type for c in columns})
    try:
        zone = zoneinfo.ZoneInfo(time_zone).key
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise ApplicationError("invalid_input", f"Unknown time zone {time_zone!r}.") from None
    kept = [
        s for s in plan.segments if pruning.may_match(
            expr, pruning.segment_bounds(s["stats"], columns, written=[Column.from_dict(c) for c in s["columns"]]),
            time_zone=zone,
        )
    ]  # fmt: skip
    return dataclasses.replace(plan, segments=kept)
