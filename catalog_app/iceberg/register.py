"""Iceberg's `register` at a branch: an existing Iceberg table (another catalog's, written by any engine) becomes a
LakeUI table without copying a data file: docs/iceberg.md#registering-an-existing-table.

The table must lie under one of the folders LAKEUI_ICEBERG_REGISTER_ROOTS names (from the warehouse root, never a
catalog's own folder): its metadata file, manifests, data and delete files alike, each checked before it is opened.
One LakeUI commit creates the table (its schema, identity partitions, identifier fields as the primary key) and
inserts its current snapshot's data files as segments where they lie, their statistics read from the footers; its
position deletes, and its equality deletes by the primary key, become LakeUI delta files (positions only, written
in the table's own folder). Registered files are never garbage collected: GC lists only a catalog's own folder
(catalog_app/engine/gc.py), and nothing else deletes a segment's file.

A file belongs to one LakeUI table (a data file's path is unique in the catalog store): registering the same
Iceberg table twice is refused. Registering needs the Iceberg field ids to be 1, 2, ... in schema order (as LakeUI
numbers columns) and each file written with the current column names; a table whose columns were dropped or renamed
is refused with a message that says so.
"""

import uuid

from django.conf import settings

from catalog_app.engine import iceberg_incoming
from catalog_app.engine.iceberg_incoming import FileRefused, ForeignFile, ForeignTable
from catalog_app.engine.segments import SegmentRead
from catalog_app.engine.warehouse import Warehouse, delta_folder
from catalog_app.iceberg.commits import (
    RESERVED_PROPERTIES,
    _data_files,
    _operation,
    _relative,
    files_written_under,
    ids_in_order,
    prepared_then_locked,
    refused_as,
    table_put_new,
    table_spec,
)
from catalog_app.models import DataFile, ObjectKind, ObjectVersion, Operation
from catalog_app.names import check_identifier
from catalog_app.selectors.table_files import table_columns
from catalog_app.services.commits import CommitDraft, WriteTarget
from lakeui.errors import ApplicationError, ConflictError

TABLE = ObjectKind.TABLE
Op = Operation.Op
MESSAGE_NOT_ALLOWED = (
    "{location!r} is not under a folder of the warehouse that tables are registered from ({roots}); an operator "
    "names those folders in LAKEUI_ICEBERG_REGISTER_ROOTS."
)


def register_roots() -> list[str]:
    """The folders (from the warehouse root) tables are registered from: never a catalog's folder (named by its id),
    whose files LakeUI owns and collects."""
    roots = []
    for root in settings.LAKEUI_ICEBERG_REGISTER_ROOTS:
        root = root.strip().strip("/")
        parts = root.split("/")
        if not root or any(p in ("", ".", "..") for p in parts) or _is_uuid(parts[0]):
            raise ApplicationError(
                "register_misconfigured", f"LAKEUI_ICEBERG_REGISTER_ROOTS names {root!r}, which is no folder tables "
                "can be registered from.", status=500,
            )  # fmt: skip
        roots.append(root)
    return roots


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def registered_path(warehouse: Warehouse, location: str, roots: list[str]) -> str | None:
    """A location as the catalog keeps paths (from the warehouse root) if it lies under one of `roots`; else None."""
    relative = _relative(warehouse, location)
    if relative is None or any(p in ("", ".", "..") for p in relative.split("/")):
        return None
    return relative if any(relative.startswith(f"{root}/") for root in roots) else None


def iceberg_table_register(*, target: WriteTarget, database: str, name: str, metadata_location: str) -> ObjectVersion:
    """Register the Iceberg table whose metadata file is `metadata_location` as `database.name` on the target's
    branch: one commit, all or nothing (400 for a file that is not where it may be, not Parquet or not of the
    schema; 409 for files registered already)."""
    check_identifier(name, "Table")
    warehouse = Warehouse(settings.LAKEUI_WAREHOUSE)
    roots = register_roots()
    if not isinstance(metadata_location, str) or registered_path(warehouse, metadata_location, roots) is None:
        raise ApplicationError(
            "register_not_allowed",
            MESSAGE_NOT_ALLOWED.format(location=str(metadata_location)[:300], roots=", ".join(roots)), status=403,
        )  # fmt: skip

    def opened(location: str, what: str) -> None:
        """A file of the table, checked where it is opened: under a register root, and itself (no link)."""
        path = registered_path(warehouse, location, roots)
        if path is None:
            raise FileRefused(f"{what} {str(location)[:300]!r} is not under a folder tables are registered from.")
        limit = None if what == "File" else iceberg_incoming.MAX_METADATA_BYTES
        iceberg_incoming.file_checked(warehouse, path, what, max_bytes=limit)

    with refused_as("invalid_registration", unreadable="The table's metadata"):
        foreign = iceberg_incoming.foreign_table_read(metadata_location, opened)
    spec = _spec(foreign, name)
    paths = {f.location: registered_path(warehouse, f.location, roots) for f in foreign.data}

    def prepare(tag: str, again: bool) -> tuple[CommitDraft, ObjectVersion]:
        """Without the lock: the table staged and its files read; what it read is watched (its database, its name
        still free, its files still no table's) for `draft_lock`."""
        taken = set(DataFile.objects.filter(path__in=list(paths.values())).values_list("path", flat=True))
        if taken:
            raise ConflictError(
                "file_registered", f"Files of this table are a LakeUI table's already: {sorted(taken)[:3]}; a file "
                "is registered once (branch or tag the table that holds them instead).",
            )  # fmt: skip
        draft = target.prepare(again=again)
        db = draft.get(ObjectKind.DATABASE, database)
        draft.watch(objects=[db.object_id], name=(db.object_id, name))
        draft.watch(check=lambda: not DataFile.objects.filter(path__in=list(paths.values())).exists())
        table = table_put_new(draft, database=db, name=name, spec=spec, object_id=uuid.uuid4())
        with refused_as("invalid_registration"):
            _files_register(draft, table, foreign, paths, warehouse=warehouse, roots=roots, tag=f"register-{tag}")
        return draft, table

    def publish(draft: CommitDraft, table: ObjectVersion) -> ObjectVersion:
        target.finish(draft, f"Register Iceberg table {database}.{name} from {metadata_location}")
        return table

    return prepared_then_locked(
        warehouse, prefix="register", prepare=prepare, publish=publish, branch=target.branch, lock=target.lock
    )


def _spec(foreign: ForeignTable, name: str):
    ids_in_order(foreign.schema)
    properties = {k: v for k, v in foreign.properties.items() if not k.startswith(RESERVED_PROPERTIES)}
    return table_spec({"name": name, "schema": foreign.schema, "partition-spec": foreign.partition_spec,
                       "properties": properties})  # fmt: skip


def _files_register(
    draft, table: ObjectVersion, foreign: ForeignTable, paths: dict[str, str], *, warehouse, roots, tag: str
):
    """The snapshot's data files as segments where they lie (an insert), its deletes as LakeUI delta files (a
    delete)."""
    columns = table_columns(table)
    state = table.state
    written = [
        iceberg_incoming.data_file_checked(warehouse, paths[f.location], columns, state["partition_by"], f.record_count)
        for f in foreign.data
    ]
    segments = _data_files(draft, table, written, None)  # the commit gives them the table's new schema version
    if not segments:
        return
    _operation(draft, table, Op.INSERT, segments_added=segments, rows_inserted=sum(s.row_count for s in segments))
    by_location = {f.location: s for f, s in zip(foreign.data, segments, strict=True)}
    reads = {s.id: SegmentRead(id=str(s.id), path=s.path, columns=tuple(columns)) for s in segments}
    lost: dict[str, set[int]] = {}
    for delete in foreign.position_deletes:
        for location, positions in iceberg_incoming.position_deletes_read(warehouse, _path(warehouse, delete,
                                                                                       roots)).items():  # fmt: skip
            segment = by_location.get(location)
            if segment is not None:  # a file the snapshot no longer holds: nothing to delete
                lost.setdefault(str(segment.id), set()).update(positions)
    key = state.get("primary_key") or []
    for delete in foreign.equality_deletes:
        if not key or set(delete.equality_ids) != set(key):
            raise FileRefused(
                f"Equality delete file {delete.location!r}: LakeUI takes equality deletes only by the table's "
                "primary key (its identifier fields); rewrite the table's deletes as position deletes first."
            )
        older = [reads[by_location[f.location].id] for f in foreign.data if f.sequence_number < delete.sequence_number]
        found = iceberg_incoming.equality_deletes_match(warehouse, _path(warehouse, delete, roots), key, columns, older)
        for segment_id, positions in found.items():
            lost.setdefault(segment_id, set()).update(positions)
    if key:
        doubled = iceberg_incoming.keys_doubled(warehouse, [], list(reads.values()), columns, key,
                                              {s: sorted(p) for s, p in lost.items()}, live_too=True)  # fmt: skip
        if doubled:
            raise FileRefused(f"The table holds these keys of its identifier fields twice: {doubled}.")
    lost = {s: p for s, p in lost.items() if p}
    if not lost:
        return
    base = f"{table.catalog_id}/{table.object_id}"
    files_written_under(base)
    deltas = [
        iceberg_incoming.positions_write(warehouse, delta_folder(base, tag), s, sorted(p)) for s, p in lost.items()
    ]
    delta_files = _data_files(draft, table, deltas, None, kind=DataFile.Kind.DELTA)
    touched = [s for s in segments if str(s.id) in lost]
    _operation(draft, table, Op.DELETE, deltas_added=delta_files, segments_touched=touched,
               rows_deleted=sum(len(p) for p in lost.values()))  # fmt: skip


def _path(warehouse: Warehouse, file: ForeignFile, roots: list[str]) -> str:
    path = registered_path(warehouse, file.location, roots)
    if path is None:  # foreign_table_read checked every location already
        raise FileRefused(f"File {file.location!r} is not under a folder tables are registered from.")
    return path
