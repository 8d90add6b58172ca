"""Loading incoming data into a table with one of the nine write strategies (docs/api.md#write-strategies), as one
commit.

The load is checked against the table here, its Spark and Arrow work is `engine.loads`, and its outcome is
recorded here: the operations it amounts to in the merge rules' vocabulary (`update` of the segments touched,
`insert`, `delete`, `overwrite`, `alter_column`), one Operation each.
"""

import copy
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from django.conf import settings

from catalog_app import table_schema
from catalog_app.engine import incoming
from catalog_app.engine import loads as engine_loads
from catalog_app.engine.segments import SegmentRead
from catalog_app.engine.warehouse import path_remove
from catalog_app.job_specs import LoadSpec, Query, StoredFiles
from catalog_app.models import ObjectVersion
from catalog_app.selectors.refs import commit_chain
from catalog_app.selectors.table_files import TableFiles, table_columns
from catalog_app.selectors.table_rows import select_frame
from catalog_app.services.data_changes import DataChange, Op, Snapshot
from catalog_app.services.tables import column_id_next
from lakeui.errors import ApplicationError, ConflictError

MESSAGE_UNSPLIT = (
    "{count} segments of the table were written before it was partitioned as it is now and may hold rows of several "
    "partitions; compact the table first (it splits them by partition), then overwrite partitions."
)


# --- the load's fit to the table (checked at submit time and again on the worker) --------------------------


def load_table_check(spec: LoadSpec, table: ObjectVersion, read_files: Callable[[], TableFiles]) -> None:
    """The load checked against the table (its shape was checked when the spec was built, see job_specs.LoadSpec):
    a column the strategy's fields name that the table lacks is a 400, never a fallback to another strategy; a
    partition overwrite of a table with segments holding several partitions a 409. `read_files` reads the table's
    files, only for a partition overwrite."""
    columns, partition_ids = table_columns(table), table.state["partition_by"]
    by_name = {c.name: c for c in columns}
    if spec.key_columns is not None:
        unknown = [k for k in spec.key_columns if k not in by_name]
        if unknown:
            raise ApplicationError(
                "unknown_key_column", f"key_columns names columns the table does not have: {unknown}.",
                details={"columns": unknown},
            )  # fmt: skip
    if spec.watermark is not None and spec.watermark not in by_name:
        raise ApplicationError("unknown_column", f"watermark names a column the table does not have: {spec.watermark}.")
    if spec.strategy == "scd2":
        validity_columns([dataclasses.asdict(c) for c in columns], 0, spec)
    if spec.partition_column is not None:
        name = spec.partition_column
        if name not in by_name or by_name[name].id not in partition_ids:
            partitions = [c.name for c in columns if c.id in partition_ids]
            raise ApplicationError(
                "invalid_partition_column",
                f"partition_column must be one of the table's partition columns {partitions}, not {name!r}.",
            )
    if spec.overwrites_partitions:
        _refuse_unsplit(read_files(), table)


def validity_columns(columns: list[dict], last_column_id: int, spec: LoadSpec) -> tuple[list[dict], list[dict]]:
    """The table's columns with the scd2 validity columns (timestamps) added if it has neither yet, and the
    `alter_column` details of the additions. A table with only one of them, or with one of another type, is
    refused."""
    existing = {c["name"]: c for c in columns}
    names = (spec.valid_from_column, spec.valid_to_column)
    present = [name for name in names if name in existing]
    if len(present) == 1 or any(existing[name]["type"] != "timestamp" for name in present):
        raise ApplicationError(
            "invalid_validity_columns",
            f"The validity columns {list(names)} must both be timestamp columns of the table, or both be new.",
        )
    changes = []
    for offset, name in enumerate(names if not present else (), start=1):
        spec = {"name": name, "type": "timestamp"}
        columns, detail = table_schema.column_add(columns, spec, column_id=last_column_id + offset, table_has_rows=True)
        changes.append(detail)
    return columns, changes


def staged_remove(warehouse, spec: LoadSpec) -> None:
    """Remove a load's own files, whatever the outcome: an upload the web process stored
    (services/data_submit.upload_store) or a staging folder a client wrote (data_submit.staging_create). Files a
    caller in this process names (`upload` without `staged`, as benchmarks do) are the caller's."""
    if not (isinstance(spec.source, StoredFiles) and spec.source.staged):
        return
    path_remove(warehouse.uri(spec.source.path))


# --- the worker side --------------------------------------------------------------------------------------


@contextmanager
def _incoming_errors() -> Iterator[None]:
    try:
        yield
    except incoming.IncomingError as exc:
        raise ApplicationError(exc.code, exc.message, details=exc.details) from None


def load_change(spark, snapshot: Snapshot, spec: LoadSpec, tag: str) -> DataChange:
    strategy = spec.strategy
    load_table_check(spec, snapshot.table, lambda: snapshot.files)
    new_columns, column_changes = None, []
    if strategy == "scd2":
        state = snapshot.table.state
        last_id = column_id_next(snapshot.table) - 1  # ids never reused on any branch (merges match by id)
        columns, column_changes = validity_columns(state["columns"], last_id, spec)
        if column_changes:  # read and write in the schema the commit sets
            new_columns, table = columns, copy.copy(snapshot.table)
            table.state = {**state, "columns": columns, "last_column_id": last_id + 2}
            snapshot = dataclasses.replace(snapshot, table=table)
    query_rows = None
    if isinstance(spec.source, Query):
        query_rows = select_frame(
            spark, catalog=snapshot.catalog, chain=commit_chain(snapshot.head), statement=spec.source.statement,
            warehouse=snapshot.warehouse,
        )  # fmt: skip
    with _incoming_errors():
        result = engine_loads.load_write(
            spark, _load_table(snapshot), spec, tag, query_rows=query_rows,
            driver_match_rows=settings.LAKEUI_DRIVER_MATCH_ROWS,
        )  # fmt: skip
    change = _recorded(snapshot, spec, result)
    return dataclasses.replace(change, strategy=strategy, new_columns=new_columns, column_changes=column_changes)


def _load_table(snapshot: Snapshot) -> engine_loads.LoadTable:
    unsplit, by_id = {s.id for s in snapshot.unsplit()}, {str(s.id): s for s in snapshot.files.segments}
    segments = tuple(
        engine_loads.LiveSegment(str(s.id), s.row_count, s.size_bytes, s.stats, s.partition_values, s.id in unsplit)
        for s in snapshot.files.segments
    )

    def reads(ids: Sequence[str]) -> list[SegmentRead]:
        return snapshot.reads([by_id[i] for i in ids])

    return engine_loads.LoadTable(snapshot.data, segments, snapshot.copy_on_write, reads)


def _recorded(snapshot: Snapshot, spec: LoadSpec, result: engine_loads.LoadResult) -> DataChange:
    """The load's change as the catalog records it: the engine's segment ids as the catalog's files; an overwrite's
    deleted rows counted from the catalog (not read); a key load's operations that changed nothing left out."""
    by_id = {str(s.id): s for s in snapshot.files.segments}
    changes = []
    for operation in result.operations:
        replaced = [by_id[i] for i in operation.replaced]
        touched = [by_id[i] for i in operation.touched]
        counts = dict(operation.counts)
        if operation.op == Op.OVERWRITE:
            counts["rows_deleted"] = TableFiles(replaced, snapshot.files.deltas).live_rows(snapshot.warehouse)
        removed = snapshot.with_deltas(replaced)
        if operation.op in (Op.UPDATE, Op.DELETE) and snapshot.copy_on_write:
            removed = snapshot.with_deltas(touched)
        change = DataChange(
            Op(operation.op), new_segments=operation.new_segments, new_deltas=operation.new_deltas, removed=removed,
            touched=touched, counts=counts, details=operation.details,
        )  # fmt: skip
        changes.append(change)
    if result.segments_read is None:  # one operation
        (change,) = changes
        if spec.strategy == "append_only":
            # Given rows appended to a table without a key read nothing of it: what commits meanwhile cannot change
            # them. A query's rows may come from the table itself, and a key must stay unique.
            change.commutes = not isinstance(spec.source, Query) and not snapshot.table.state.get("primary_key")
        return change
    modify, _ = changes
    operations = [op for op in changes if op.new_segments or op.new_deltas or op.removed]
    first, *more = operations or [modify]
    return dataclasses.replace(first, more=more, segments_read=[by_id[i] for i in result.segments_read])


def _refuse_unsplit(files: TableFiles, table: ObjectVersion) -> None:
    """A partition overwrite replaces whole files: each segment must hold one partition (409 otherwise)."""
    unsplit = files.unsplit(table.state["partition_by"])
    if unsplit:
        message = MESSAGE_UNSPLIT.format(count=len(unsplit))
        raise ConflictError("unsplit_segments", message, details={"segments": [str(s.id) for s in unsplit[:100]]})
