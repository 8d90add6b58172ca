"""The write half of the Iceberg REST catalog: an engine's create, drop, rename and commit at a branch become
ordinary LakeUI commits (databases.py and tables.py services, and the data operations a LakeUI job records), never
a copy of data: docs/iceberg.md#what-a-write-does.

The engine writes its data files itself into the write location loadTable hands out for the table on that branch
(`<warehouse>/<catalog id>/<table id>/writes/<branch id>/`, given as the `write.data.path` and
`write.metadata.path` properties). A commit names the snapshot it made; what that snapshot holds, compared with the
table's files on the branch, is what the commit does:

- new data files, nothing removed: an `insert` of those files as segments (statistics from their footers);
- live files removed and new ones added (copy-on-write, `delete`/`overwrite` with a filter): each removed segment's
  rows that no new file holds become a positional `delete` of that segment (a delta file of positions), the new
  files' rows that are no removed segment's row an `insert` (a new file holding only such rows is taken as it is;
  the new rows of a file that also rewrote old ones are written as a segment of their own), and a rewrite of a
  file's remaining rows is nothing at all, as it changes no row;
- every live row removed and new files added: an `overwrite`.

Requirements are checked against the table's metadata on the branch (as loadTable serves it): the table's snapshot
id is its newest commit on the branch, so a commit to a table that did not move goes through even if other tables
of the branch did, and one to a table that moved answers 409 `CommitFailedException` (engines retry).

A commit is prepared without the catalog lock and published under it (`prepared_then_locked`): the file work first,
on the branch's head as read; under the lock only a compare-and-swap of what it read (services/commits.py
`draft_lock`) and the commit's rows (docs/iceberg.md, "Prepared outside the catalog lock").
"""

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
from django.conf import settings
from django.core.cache import caches
from django.db import IntegrityError, transaction

from catalog_app import table_schema
from catalog_app.engine import iceberg_incoming
from catalog_app.engine.iceberg_incoming import FileRefused
from catalog_app.engine.iceberg_metadata import table_uri
from catalog_app.engine.segment_writes import write_segments_arrow
from catalog_app.engine.segments import Column
from catalog_app.engine.types import decimal_digits
from catalog_app.engine.warehouse import Warehouse, data_folder, delta_folder, path_remove
from catalog_app.iceberg.requests import NOT_IDENTIFIER_TYPES
from catalog_app.iceberg.selectors import namespace_get, namespace_table_find, namespace_table_get
from catalog_app.iceberg.services import LoadedTable, iceberg_table_load
from catalog_app.models import Branch, Catalog, Commit, DataFile, ObjectKind, ObjectVersion, Operation
from catalog_app.names import check_identifier, check_properties
from catalog_app.selectors.objects import object_find
from catalog_app.selectors.refs import Chain, ResolvedRef, branch_get, chain_after, commit_chain
from catalog_app.selectors.table_files import NO_FILES, TableFiles, table_columns, table_has_rows, tables_file_rows
from catalog_app.services.commits import CommitDraft, WriteTarget, draft_lock
from catalog_app.services.databases import name_free
from catalog_app.services.tables import _partition_and_key, column_id_next
from lakeui.errors import ApplicationError, ConflictError
from lakeui.lineage import Dataset, Lineage, lineage_commit_emit

Op = Operation.Op
TABLE = ObjectKind.TABLE
WRITES = "writes"
PREPARE_TRIES = 3  # a commit whose tables moved while it was prepared is prepared again, this many times in all
Prepared = TypeVar("Prepared")
Published = TypeVar("Published")
RESERVED_PROPERTIES = ("write.data.path", "write.metadata.path", "lakeui.", "format-version")
ICEBERG_TYPES = {
    "boolean": "boolean",
    "int": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "timestamptz": "timestamp",
}
MESSAGE_READ_ONLY = "{ref!r} is a {kind}: it is read-only; commit to a branch (/iceberg/{{catalog}}/{{branch}})."
MESSAGE_MOVED_KEYS = (
    "Table {name!r} changed on branch {branch!r} since the commit's snapshot started: rows committed meanwhile hold "
    "keys it adds, so it would hold them twice; load the table again and retry (an upsert then updates them)."
)
MESSAGE_MOVED = (
    "Table {name!r} changed on branch {branch!r} since it was read ({what}); load it again and retry the commit."
)
MESSAGE_KEPT_MOVING = (
    "What this commit writes changed on branch {branch!r} each time it was prepared ({tries} times); load the "
    "tables again and retry."
)
MESSAGE_RACED = (
    "Another commit took a file or name this one names, at the same time ({constraint}); nothing was committed: "
    "load the table again and retry."
)


@contextmanager
def refused_as(code: str, unreadable: str | None = None) -> Iterator[None]:
    """A file an engine named that LakeUI refuses (`FileRefused`) as a 400 `code` with the reason; with `unreadable`
    (what was being read), one that cannot be read at all (OSError, ValueError) too."""
    try:
        yield
    except FileRefused as exc:
        raise ApplicationError(code, str(exc)) from None
    except (OSError, ValueError) as exc:
        if unreadable is None:
            raise
        raise ApplicationError(code, f"{unreadable} cannot be read: {str(exc)[:300]}") from None


_WRITTEN: ContextVar[set[str] | None] = ContextVar("iceberg_written", default=None)


def files_written_under(base: str) -> None:
    """The running commit writes files of its own (delta files, segments) under the table folder `base`."""
    written = _WRITTEN.get()
    if written is not None:
        written.add(base)


@contextmanager
def written_or_removed(warehouse: Warehouse, *, tag: str) -> Iterator[None]:
    """The files a commit writes itself (delta files of positions, segments of rewritten rows: the folders named by
    its `tag` under each table folder it noted with `files_written_under`) are removed when the commit fails, so a
    refused commit leaves no file behind. A unique constraint the commit breaks means another commit took the same
    file or name meanwhile (two registers of one table, two transactions naming one file): Iceberg's 409
    CommitFailedException, for the engine to reload and retry, never a 500."""
    written: set[str] = set()
    token = _WRITTEN.set(written)
    try:
        yield
    except BaseException as exc:
        for base in written:
            for folder in (data_folder(base, tag), delta_folder(base, tag)):
                path_remove(warehouse.uri(folder))
        if isinstance(exc, IntegrityError):
            constraint = getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None) or "a unique key"
            raise ConflictError("commit_failed", MESSAGE_RACED.format(constraint=constraint)) from exc
        raise
    finally:
        _WRITTEN.reset(token)


class _Moved(Exception):
    """What a draft prepared without the lock read changed before it took the lock (`draft_lock`)."""


def prepared_then_locked(
    warehouse: Warehouse,
    *,
    prefix: str,
    prepare: Callable[[str, bool], tuple[CommitDraft, Prepared]],
    publish: Callable[[CommitDraft, Prepared], Published],
    branch: str,
    lock: Callable[[CommitDraft], bool] | None = None,
) -> Published:
    """A commit that reads and writes files, made without holding the catalog lock across them: `prepare(tag, again)`
    reads the branch's head (no lock: as the request read it on the first try, as it is now `again`), checks, writes
    the commit's own files (under the folders the tag names) and stages a draft (`commit_prepare`) that watches what
    it read; then, in one transaction, `lock` (`draft_lock` unless given) takes the lock and `publish` records the
    draft, reading the database only. If what the draft watched changed meanwhile (the tables it writes moved on the
    branch), its files are removed and it is prepared again against the new state, where the engine's requirements
    are checked again (409 if they no longer hold); up to PREPARE_TRIES times, then 409 too."""
    for attempt in range(PREPARE_TRIES):
        tag = uuid.uuid4().hex
        try:
            with written_or_removed(warehouse, tag=f"{prefix}-{tag}"):
                draft, prepared = prepare(tag, attempt > 0)
                with transaction.atomic():
                    if (lock or draft_lock)(draft):
                        return publish(draft, prepared)
                raise _Moved
        except _Moved:
            continue
    raise ConflictError("commit_failed", MESSAGE_KEPT_MOVING.format(branch=branch, tries=PREPARE_TRIES))


def iceberg_branch(resolved: ResolvedRef) -> Branch:
    """The branch a write names: a tag or a commit id answers Iceberg's 403 ForbiddenException."""
    if resolved.kind != "branch" or resolved.branch is None:
        raise ApplicationError(
            "read_only_ref", MESSAGE_READ_ONLY.format(ref=resolved.name, kind=resolved.kind), status=403
        )
    return resolved.branch


def write_folder(*, catalog_id, table_id, branch_id) -> str:
    """The folder (from the warehouse root) an engine writes the table's files into on that branch, named by ids."""
    return f"{catalog_id}/{table_id}/{WRITES}/{branch_id}"


def loaded_for_branch(loaded: LoadedTable, *, table: ObjectVersion, branch: Branch) -> bytes:
    """loadTable's metadata at a branch: as served at any ref, plus where an engine writes on this branch."""
    metadata = json.loads(loaded.metadata_json)
    warehouse = Warehouse(settings.LAKEUI_WAREHOUSE)
    folder = write_folder(catalog_id=table.catalog_id, table_id=table.object_id, branch_id=branch.id)
    properties = {k: v for k, v in metadata["properties"].items() if k != "lakeui.read-only"}
    properties |= {k: str(v) for k, v in (table.state.get("properties") or {}).items()}
    properties |= {
        "write.data.path": table_uri(warehouse, f"{folder}/data"),
        "write.metadata.path": table_uri(warehouse, f"{folder}/metadata"),
        "lakeui.branch": branch.name,
    }
    metadata["properties"] = properties
    identifiers = table.state.get("primary_key") or []
    for schema in metadata["schemas"]:
        if schema["schema-id"] == metadata["current-schema-id"]:
            schema["identifier-field-ids"] = list(identifiers)
    return json.dumps({"metadata-location": loaded.location, "metadata": metadata, "config": {}}).encode()


# --- create table: an Iceberg schema and spec as LakeUI columns ------------------------------------------------


def lakeui_type(iceberg: Any, name: str) -> str:
    if isinstance(iceberg, str) and iceberg in ICEBERG_TYPES:
        return ICEBERG_TYPES[iceberg]
    if isinstance(iceberg, str) and iceberg.replace(" ", "").startswith("decimal("):
        try:
            precision, scale = decimal_digits(iceberg.replace(" ", ""))
            return f"decimal({precision},{scale})"
        except ValueError:
            pass
    why = (
        "a timestamp without time zone: use timestamptz"
        if iceberg == "timestamp"
        else f"type {json.dumps(iceberg)[:100]} is not one LakeUI tables hold"
    )
    raise ApplicationError(
        "invalid_schema", f"Column {name!r}: {why} (LakeUI types: {', '.join(ICEBERG_TYPES)}, decimal(p, s))."
    )


@dataclass(frozen=True)
class TableSpec:
    """A createTable request in LakeUI's terms (services.tables.table_create)."""

    columns: list[dict]
    partition_by: list[str]
    primary_key: list[str]
    properties: dict[str, str]


def table_spec(body: dict) -> TableSpec:
    """The columns, identity partitions, key (identifier fields) and properties of a createTable body; 400 for
    what LakeUI tables cannot hold (nested types, other transforms, a location of the engine's choosing)."""
    if body.get("location"):
        raise ApplicationError(
            "invalid_input", "LakeUI chooses table locations (by ids, per branch); create the table without one."
        )
    schema = body.get("schema") or {}
    fields = schema.get("fields") or []
    if not isinstance(fields, list) or not fields:
        raise ApplicationError("invalid_schema", "The schema needs at least one field.")
    names = {}
    columns = []
    for field in fields:
        name = str(field.get("name", ""))
        columns.append(
            {
                "name": name,
                "type": lakeui_type(field.get("type"), name),
                "nullable": not field.get("required", False),
                **({"comment": field["doc"]} if field.get("doc") else {}),
            }
        )
        names[field.get("id")] = name
    key = [names[i] for i in schema.get("identifier-field-ids") or [] if i in names]
    partition_by = []
    for part in (body.get("partition-spec") or {}).get("fields") or []:
        if part.get("transform") != "identity" or part.get("source-id") not in names:
            raise ApplicationError(
                "invalid_partition_spec",
                f"Partition field {part.get('name')!r}: LakeUI partitions by identity transforms of columns only.",
            )
        partition_by.append(names[part["source-id"]])
    properties = {k: v for k, v in (body.get("properties") or {}).items() if k != "format-version"}
    _check_reserved(properties)
    return TableSpec(columns, partition_by, key, check_properties(properties))


def ids_in_order(schema: dict) -> None:
    """LakeUI numbers a new table's columns 1, 2, ... in schema order: files written with another numbering could not
    be read by field id."""
    ids = [f.get("id") for f in schema.get("fields") or []]
    if ids != list(range(1, len(ids) + 1)):
        raise ApplicationError(
            "invalid_schema", f"The schema's field ids must be 1, 2, ... in order, as LakeUI numbers columns; they "
            f"are {ids[:20]}.",
        )  # fmt: skip


def table_put_new(draft: CommitDraft, *, database: ObjectVersion, name: str, spec: TableSpec, object_id: uuid.UUID):
    """Stage a new table in `draft` (the create operation included), as services.tables.table_create does, for a
    commit that also writes its data (a staged create, a register)."""
    check_identifier(name, "Table")
    name_free(draft, kind=TABLE, name=name, parent_id=database.object_id)
    columns = table_schema.columns_create(spec.columns)
    partition_ids, key_ids = _partition_and_key(columns, spec.partition_by, spec.primary_key)
    state = {
        "columns": columns, "last_column_id": len(columns), "partition_by": partition_ids, "primary_key": key_ids,
        "properties": spec.properties, "comment": "",
    }  # fmt: skip
    table = draft.put(kind=TABLE, object_id=object_id, name=name, parent_id=database.object_id, state=state,
                      new_schema=columns)  # fmt: skip
    draft.operation(object_id=object_id, kind=TABLE, op=Op.CREATE, details={"name": name, **state})
    return table


def _check_reserved(keys) -> None:
    reserved = [k for k in keys if k.startswith(RESERVED_PROPERTIES)]
    if reserved:
        raise ApplicationError("invalid_properties", f"Properties {reserved} are LakeUI's to set.")


# --- stage-create: a table created by the commit that writes its first data ------------------------------------


def iceberg_table_stage(*, target: WriteTarget, database: str, body: dict) -> bytes:
    """createTable with `stage-create`: the metadata of a table that does not exist yet, with a fresh table uuid and
    the write location on the branch that uuid names; nothing is stored. The table exists once a commit asserting
    `assert-create` (with that uuid) creates it, with whatever data the engine wrote meanwhile, in one commit."""
    spec = table_spec(body)
    name = str(body.get("name", ""))
    check_identifier(name, "Table")
    branch = branch_get(catalog=target.catalog, name=target.branch)
    chain = commit_chain(branch.head)
    found = namespace_get(chain, name=database)
    if namespace_table_find(chain, database=found, name=name) is not None:
        raise ApplicationError("name_exists", f"Table already exists: {database}.{name}", status=409)
    table_id = uuid.uuid4()
    warehouse = Warehouse(settings.LAKEUI_WAREHOUSE)
    folder = write_folder(catalog_id=target.catalog.id, table_id=table_id, branch_id=branch.id)
    columns = table_schema.columns_create(spec.columns)
    by_name = {c["name"]: c["id"] for c in columns}
    fields = body["schema"]["fields"]
    schema = {
        "type": "struct", "schema-id": 0, "identifier-field-ids": [by_name[n] for n in spec.primary_key],
        "fields": [{**f, "id": by_name[f["name"]]} for f in fields],
    }  # fmt: skip
    parts = [{"source-id": by_name[n], "field-id": 1000 + i, "name": n, "transform": "identity"}
             for i, n in enumerate(spec.partition_by)]  # fmt: skip
    metadata = {
        "format-version": 2, "table-uuid": str(table_id),
        "location": table_uri(warehouse, f"{target.catalog.id}/{table_id}"), "last-sequence-number": 0,
        "last-updated-ms": int(time.time() * 1000), "last-column-id": len(columns), "current-schema-id": 0,
        "schemas": [schema], "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": parts}],
        "last-partition-id": 999 + len(parts), "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": {**spec.properties, "write.data.path": table_uri(warehouse, f"{folder}/data"),
                       "write.metadata.path": table_uri(warehouse, f"{folder}/metadata"), "lakeui.branch": branch.name},
        "snapshots": [], "refs": {}, "snapshot-log": [], "metadata-log": [],
    }  # fmt: skip
    return json.dumps({"metadata-location": None, "metadata": metadata, "config": {}}).encode()


def _table_create_commit(
    draft: CommitDraft, database: ObjectVersion, request: "TableCommitRequest", *, warehouse: Warehouse, tag: str
) -> ObjectVersion:
    """A commit asserting `assert-create`: the table its updates describe (as a staged create's transaction sends
    them: uuid, schema, partition spec, location, properties), created with the data its snapshot adds."""
    if any(r.get("type") != "assert-create" for r in request.requirements):
        raise ApplicationError("invalid_requirement", "A commit that creates a table asserts only assert-create.")
    table_id, location = uuid.uuid4(), None
    schemas: list[dict] = []
    specs: list[dict] = []
    schema = spec = main = None
    properties: dict[str, str] = {}
    snapshots: dict[int, dict] = {}
    for update in request.updates:
        action = update.get("action")
        if action == "assign-uuid":
            table_id = _fresh_table_id(update.get("uuid"))
        elif action == "upgrade-format-version":
            if int(update.get("format-version", 2)) != 2:
                raise ApplicationError("invalid_update", "LakeUI serves Iceberg format version 2.")
        elif action == "add-schema":
            schemas.append(update.get("schema") or {})
        elif action == "set-current-schema":
            schema = _chosen(schemas, update.get("schema-id"), "schema-id", "set-current-schema")
        elif action == "add-spec":
            specs.append(update.get("spec") or {})
        elif action == "set-default-spec":
            spec = _chosen(specs, update.get("spec-id"), "spec-id", "set-default-spec")
        elif action == "set-location":
            location = update.get("location")
        elif action == "set-properties":
            properties |= update.get("updates") or {}
        elif action == "remove-properties":
            properties = {k: v for k, v in properties.items() if k not in (update.get("removals") or [])}
        elif action == "add-snapshot":
            snapshot = update.get("snapshot") or {}
            snapshots[snapshot.get("snapshot-id")] = snapshot
        elif action == "set-snapshot-ref":
            if update.get("ref-name") != "main" or update.get("type", "branch") != "branch":
                raise ApplicationError("invalid_update", "A LakeUI table has one Iceberg branch, main.")
            main = update.get("snapshot-id")
        elif action in ("add-sort-order", "set-default-sort-order", "set-statistics", "set-partition-statistics"):
            continue
        else:
            raise ApplicationError(
                "unsupported_update", f"LakeUI does not take the Iceberg update {str(action)[:60]!r} yet.", status=406
            )
    if schema is None:
        raise ApplicationError("invalid_update", "A commit that creates a table names its schema (add-schema).")
    draft.watch(check=lambda: not ObjectVersion.objects.filter(object_id=table_id).exists())  # still no object's
    if location not in (None, table_uri(warehouse, f"{draft.catalog.id}/{table_id}")):
        raise ApplicationError("invalid_input", "LakeUI chooses table locations (by ids); create without one.")
    ids_in_order(schema)
    kept = {k: v for k, v in properties.items() if not k.startswith(RESERVED_PROPERTIES)}
    body = {"name": request.name, "schema": schema, "partition-spec": spec or {}, "properties": kept}
    table = table_put_new(draft, database=database, name=request.name, spec=table_spec(body), object_id=table_id)
    if main is not None:
        if main not in snapshots:
            raise ApplicationError("invalid_update", f"set-snapshot-ref names snapshot {main}, which is not added.")
        _data_commit(draft, table, snapshots[main], warehouse=warehouse, tag=tag, started=(main, None))
    return table


def _chosen(added: list[dict], wanted, key: str, action: str) -> dict:
    found = added[-1:] if wanted == -1 else [x for x in added if x.get(key) == wanted]
    if not found:
        raise ApplicationError("invalid_update", f"{action} names {key} {wanted}, which the commit does not add.")
    return found[-1]


def _fresh_table_id(value) -> uuid.UUID:
    """The uuid a staged create handed out: a new table's id, so no object of any catalog may have it already."""
    try:
        table_id = uuid.UUID(str(value))
    except ValueError:
        raise ApplicationError("invalid_update", f"assign-uuid: {str(value)[:60]!r} is no uuid.") from None
    if ObjectVersion.objects.filter(object_id=table_id).exists():
        raise ApplicationError("invalid_update", "assign-uuid names the uuid of an existing object.")
    return table_id


# --- commit a table ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableCommitRequest:
    namespace: str
    name: str
    requirements: list[dict]
    updates: list[dict]


@dataclass(frozen=True)
class Committed:
    """What an Iceberg commit made: the commit (None when every requirement held and nothing changed), the tables as
    it left them, and where they are read (the chain of the branch's head after it, and the branch)."""

    commit: Commit | None
    tables: list[ObjectVersion]
    chain: Chain
    branch: Branch

    def table_loaded(self, table: ObjectVersion) -> bytes:
        """loadTable's answer for one of the tables, as the commit left it, without reading the branch again."""
        changed = self.commit is not None and table.commit_id == self.commit.id  # a version the commit made
        loaded = iceberg_table_load(self.chain, table=table, changed=changed)
        return loaded_for_branch(loaded, table=table, branch=self.branch)


def iceberg_tables_commit(*, target: WriteTarget, requests: list[TableCommitRequest]) -> Committed:
    """Commit one table (`POST .../tables/{t}`) or several (`POST /v1/transactions/commit`) as one LakeUI commit:
    all or nothing. Prepared without the lock on the branch's head as read (`prepared_then_locked`): what a refused
    commit wrote itself is removed (`written_or_removed`); the engine's own files stay orphans for garbage
    collection."""
    if not requests:
        raise ApplicationError("invalid_input", "A commit names at least one table.")
    warehouse = Warehouse(settings.LAKEUI_WAREHOUSE)

    catalog, branch, author = target.catalog, target.branch, target.author

    def prepare(tag: str, again: bool) -> tuple[CommitDraft, list[ObjectVersion]]:
        draft = target.prepare(again=again)
        return draft, [_table_commit(draft, request, warehouse=warehouse, tag=tag) for request in requests]

    def publish(draft: CommitDraft, tables: list[ObjectVersion]) -> Committed:
        names = ", ".join(f"{r.namespace}.{r.name}" for r in requests)
        try:
            commit = draft.commit(author=author, message=f"Iceberg commit to {names}")
        except ApplicationError as nothing:  # every requirement met, nothing changed: no commit
            if nothing.code != "empty_commit":
                raise
            return Committed(None, tables, draft.chain, draft.branch)
        written = [Dataset(branch, f"{r.namespace}.{r.name}") for r in requests]
        lineage = Lineage(catalog, outputs=written, facts={"commit": commit.id})
        lineage_commit_emit(lineage=lineage, job_name="iceberg_commit", actor=author)
        return Committed(commit, tables, chain_after(draft.chain, commit), draft.branch)

    return prepared_then_locked(warehouse, prefix="iceberg", prepare=prepare, publish=publish, branch=branch)


def iceberg_table_at_branch(*, catalog: Catalog, branch: str, table: ObjectVersion) -> bytes:
    """loadTable's answer for `table` at the branch's head."""
    found = branch_get(catalog=catalog, name=branch)
    loaded = iceberg_table_load(commit_chain(found.head), table=table)
    return loaded_for_branch(loaded, table=table, branch=found)


def _table_commit(draft: CommitDraft, request: TableCommitRequest, *, warehouse: Warehouse, tag: str) -> ObjectVersion:
    table = object_find(draft.chain, kind=TABLE, name=request.name, parent_named=request.namespace)  # one query
    if table is None:
        database = namespace_get(draft.chain, name=request.namespace)
        if not any(r.get("type") == "assert-create" for r in request.requirements):
            namespace_table_get(draft.chain, database=database, name=request.name)  # its 404
        draft.watch(objects=[database.object_id], name=(database.object_id, request.name))
        return _table_create_commit(draft, database, request, warehouse=warehouse, tag=tag)
    # its database, and its state: its version and its files
    draft.watch(objects=[table.parent_id, table.object_id], files_of=[table.object_id])
    metadata = json.loads(iceberg_table_load(draft.chain, table=table).metadata_json)
    try:
        _requirements_check(metadata, request.requirements, table=table, branch=draft.branch.name)
    except ConflictError:
        _started_remember(draft.branch, table, request.updates)
        raise
    state = dict(table.state)
    snapshots: dict[int, dict] = {}
    added_schemas: list[dict] = []
    main: int | None = None
    current: dict | None = None
    for update in request.updates:
        action = update.get("action")
        if action == "assign-uuid":
            if update.get("uuid") != metadata["table-uuid"]:
                raise ApplicationError("invalid_update", "A LakeUI table keeps its uuid (its table id).")
        elif action == "upgrade-format-version":
            if int(update.get("format-version", 2)) != 2:
                raise ApplicationError("invalid_update", "LakeUI serves Iceberg format version 2.")
        elif action == "set-properties":
            _check_reserved(update.get("updates") or {})
            state["properties"] = {**state["properties"], **check_properties(update.get("updates") or {})}
        elif action == "remove-properties":
            state["properties"] = {
                k: v for k, v in state["properties"].items() if k not in (update.get("removals") or [])
            }
        elif action == "add-schema":
            added_schemas.append(update.get("schema") or {})
        elif action == "set-current-schema":
            wanted = update.get("schema-id")
            known = (
                added_schemas[-1:]
                if wanted == -1
                else [x for x in [*added_schemas, *metadata["schemas"]] if x.get("schema-id") == wanted]
            )
            if not known:
                raise ApplicationError("invalid_update", f"set-current-schema names no schema ({wanted}).")
            state = _schema_apply(draft, table, state, known[-1])
            current = known[-1]
        elif action == "add-snapshot":
            snapshot = update.get("snapshot") or {}
            snapshots[snapshot.get("snapshot-id")] = snapshot
        elif action == "set-snapshot-ref":
            if update.get("ref-name") != "main" or update.get("type", "branch") != "branch":
                raise ApplicationError(
                    "invalid_update",
                    "A LakeUI table has one Iceberg branch, main: the LakeUI branch of the catalog URI. Create a "
                    "LakeUI branch and point the catalog at it instead.",
                )
            main = update.get("snapshot-id")
        elif action in (
            "add-sort-order",
            "set-default-sort-order",
            "set-statistics",
            "remove-statistics",
            "set-partition-statistics",
            "remove-partition-statistics",
        ):
            continue  # advice to readers LakeUI does not keep
        elif action in ("add-spec", "set-default-spec", "remove-partition-specs"):
            raise ApplicationError(
                "unsupported_update", "LakeUI does not change a table's partitioning through Iceberg: change it with "
                "LakeUI's API (PATCH .../tables/{table} with partition_by), then load the table again.", status=406,
            )  # fmt: skip
        else:
            raise ApplicationError(
                "unsupported_update", f"LakeUI does not take the Iceberg update {str(action)[:60]!r} yet.", status=406
            )
    if state["properties"] != table.state["properties"]:
        old = table.state["properties"]
        changed = {k: v for k, v in state["properties"].items() if old.get(k) != v}
        unset = [k for k in old if k not in state["properties"]]
        details = {"set": changed, "unset": unset, "previous": {k: old.get(k) for k in [*changed, *unset]}}
        draft.operation(object_id=table.object_id, kind=TABLE, op=Op.ALTER_PROPERTIES, details=details)
    data = main is not None and main != metadata.get("current-snapshot-id")
    if state == table.state and not data:
        return table
    new_schema = state["columns"] if state["columns"] != table.state["columns"] else None
    if new_schema is not None and data:
        _ids_agree(new_schema, current or {})
    version = draft.put(
        kind=TABLE,
        object_id=table.object_id,
        name=table.name,
        parent_id=table.parent_id,
        state=state,
        new_schema=new_schema,
    )
    if data:
        if main not in snapshots:
            raise ApplicationError(
                "invalid_update",
                f"set-snapshot-ref names snapshot {main}, which the commit does "
                "not add; LakeUI keeps one line of snapshots per branch.",
            )
        if new_schema is not None:  # data in the new schema: its segments take the version the commit records
            version.state = {k: v for k, v in version.state.items() if k != "schema_version_id"}
        _data_commit(draft, version if new_schema is not None else table, snapshots[main], warehouse=warehouse,
                     tag=tag, started=(main, _started_from(snapshots, main)))  # fmt: skip
    return version


def _ids_agree(columns: list[dict], schema: dict) -> None:
    """Data written in a schema this commit changes: LakeUI numbers an added column itself (ids are never reused on
    any branch), so the engine's files must carry the ids LakeUI gave, or the data waits for a commit of its own."""
    given = {c["name"]: c["id"] for c in columns}
    differ = [f.get("name") for f in schema.get("fields") or [] if given.get(f.get("name")) != f.get("id")]
    if differ:
        raise ApplicationError(
            "invalid_update", f"Columns {differ[:5]} get other ids on this branch than the engine's schema gives "
            "them (LakeUI numbers new columns itself): commit the schema change first, load the table, then write.",
        )  # fmt: skip


def _schema_apply(draft: CommitDraft, table: ObjectVersion, state: dict, schema: dict) -> dict:
    """An Iceberg schema made current, as LakeUI's column operations by field id (in the order the merge rules
    replay them): drops, then renames, widenings and nullability changes, then additions (new ids are LakeUI's
    own next column ids: ids are never reused on any branch)."""
    columns = list(state["columns"])
    by_id = {c["id"]: c for c in columns}
    fields = schema.get("fields") or []
    wanted = {f.get("id"): f for f in fields}
    has_rows = table_has_rows(draft.chain, table_id=table.object_id)
    details: list[dict] = []
    protected = {*state["partition_by"], *state["primary_key"]}
    for column in list(columns):
        if column["id"] not in wanted:
            columns, detail = table_schema.column_drop(columns, column["name"], protected_ids=protected)
            details.append(detail)
    for field in fields:
        column = by_id.get(field.get("id"))
        if column is None:
            continue
        changes = {"name": field.get("name"), "type": lakeui_type(field.get("type"), str(field.get("name"))),
                   "nullable": not field.get("required", False)}  # fmt: skip
        changes = {k: v for k, v in changes.items() if v != column[k]}
        if changes:
            columns, altered = table_schema.column_alter(columns, column["name"], changes, table_has_rows=has_rows)
            details += altered
    last = state["last_column_id"]
    first_free = None
    for field in fields:
        if field.get("id") in by_id:
            continue
        if first_free is None:  # the ids are the catalog's next ones still when the commit is recorded
            first_free = column_id_next(table)
            draft.watch(check=lambda free=first_free: column_id_next(table) == free)
        last = max(last, first_free, last + 1)
        spec = {"name": field.get("name"), "type": lakeui_type(field.get("type"), str(field.get("name"))),
                "nullable": not field.get("required", False)}  # fmt: skip
        columns, detail = table_schema.column_add(columns, spec, column_id=last, table_has_rows=has_rows)
        details.append(detail)
    _key_kept(columns, state["primary_key"])
    for detail in details:
        draft.operation(object_id=table.object_id, kind=TABLE, op=Op.ALTER_COLUMN, details=detail)
    return {**state, "columns": columns, "last_column_id": last}


def _key_kept(columns: list[dict], key_ids: list[int]) -> None:
    """The table's key columns are its Iceberg identifier fields: a schema that made one nullable, or of a type no
    identifier field may be, would leave the table unloadable by every engine (Iceberg checks them on loading)."""
    for column in columns:
        if column["id"] in key_ids and (column["nullable"] or column["type"] in NOT_IDENTIFIER_TYPES):
            raise ApplicationError(
                "invalid_schema", f"Column {column['name']!r} is the table's key (an identifier field): it stays "
                "required and of a type an identifier field may be (not float or double); drop the key first.",
            )  # fmt: skip


def _requirements_check(metadata: dict, requirements: list[dict], *, table: ObjectVersion, branch: str) -> None:
    """Iceberg's requirements against the table as loadTable serves it on the branch now: 409 if one fails."""
    current_schema = metadata["current-schema-id"]
    for requirement in requirements:
        kind = requirement.get("type")
        if kind == "assert-ref-snapshot-id":
            wanted = requirement.get("snapshot-id")
            have = metadata.get("current-snapshot-id") if requirement.get("ref") == "main" else None
            ok, what = wanted == have, f"its snapshot is {have}, not {wanted}"
        elif kind == "assert-table-uuid":
            ok, what = requirement.get("uuid") == metadata["table-uuid"], "another table of that name"
        elif kind == "assert-current-schema-id":
            ok, what = requirement.get("current-schema-id") == current_schema, "its schema changed"
        elif kind == "assert-last-assigned-field-id":
            ok, what = requirement.get("last-assigned-field-id") == metadata["last-column-id"], "its columns changed"
        elif kind == "assert-default-spec-id":
            ok, what = requirement.get("default-spec-id") == metadata["default-spec-id"], "its partitioning changed"
        elif kind == "assert-last-assigned-partition-id":
            ok = requirement.get("last-assigned-partition-id") == metadata["last-partition-id"]
            what = "its partitioning changed"
        elif kind == "assert-default-sort-order-id":
            ok, what = True, ""
        elif kind == "assert-create":
            ok, what = False, "it exists already"
        else:
            raise ApplicationError("invalid_requirement", f"Unknown Iceberg requirement {str(kind)[:60]!r}.")
        if not ok:
            raise ConflictError("commit_failed", MESSAGE_MOVED.format(name=table.name, branch=branch, what=what))


def _relative(warehouse: Warehouse, location: str) -> str | None:
    """A location under the warehouse as the catalog keeps paths (from the warehouse root); None elsewhere."""
    root = table_uri(warehouse, "").rstrip("/") + "/"
    if location.startswith("file://"):
        location = location[len("file://") :]
    if not location.startswith(root) or "/../" in location or "/./" in location:
        return None
    return location[len(root) :]


def _data_commit(
    draft: CommitDraft, table: ObjectVersion, snapshot: dict, *, warehouse: Warehouse, tag: str, started: tuple
) -> None:
    """The snapshot's files against the table's live files on the branch, recorded as LakeUI operations. `started`:
    the snapshot's id and the one the engine started from (`_started_from`)."""
    folder = write_folder(catalog_id=table.catalog_id, table_id=table.object_id, branch_id=draft.branch.id)
    base = f"{table.catalog_id}/{table.object_id}"
    manifest_list = _relative(warehouse, snapshot.get("manifest-list") or "")
    if manifest_list is None or not manifest_list.startswith((f"{folder}/", f"{base}/iceberg/")):
        raise ApplicationError(
            "invalid_snapshot",
            "The snapshot's manifest list is not under the table's write "
            f"location on this branch ({table_uri(warehouse, folder)}).",
        )
    allowed = [table_uri(warehouse, f"{folder}/"), table_uri(warehouse, f"{base}/iceberg/")]

    def opened(location: str, what: str) -> None:
        path = _relative(warehouse, location)
        if path is None or not path.startswith((f"{folder}/", f"{base}/iceberg/")):
            raise FileRefused(f"{what} {location[:300]!r} is not under the table's locations.")
        iceberg_incoming.file_checked(warehouse, path, what, max_bytes=iceberg_incoming.MAX_METADATA_BYTES)

    with refused_as("invalid_snapshot", unreadable="The snapshot's manifests"):
        opened(snapshot["manifest-list"], "Manifest list")
        served = table_uri(warehouse, f"{base}/iceberg/manifests") + "/"  # LakeUI's own: content-addressed
        named = iceberg_incoming.snapshot_files(snapshot["manifest-list"], allowed, immutable=served, checked=opened)
    # plain values, not models: a commit to a table of thousands of files reads them all
    files = tables_file_rows(draft.chain, table_ids=[table.object_id]).get(table.object_id, NO_FILES)
    live = {table_uri(warehouse, s.path): s for s in files.segments}
    with refused_as("invalid_delete_file"):
        deleted = _engine_deletes(named, files, live, table, warehouse=warehouse, base=base, folder=folder)
    removed = [s for uri, s in live.items() if uri not in named.data]
    added = []
    columns = table_columns(table)
    for location, records in named.data.items():
        if location in live:
            continue
        path = _relative(warehouse, location)
        if path is None or not path.startswith(f"{folder}/data/"):
            raise ApplicationError(
                "file_outside_location",
                f"Data file {location[:300]!r} is not under the table's write "
                f"location on this branch ({table_uri(warehouse, folder)}/data).",
            )
        with refused_as("invalid_data_file"):
            iceberg_incoming.file_checked(warehouse, path, "Data file")  # before its path is looked up, too
        added.append((path, records))
    paths = [p for p, _ in added]
    taken = set(DataFile.objects.filter(path__in=paths).values_list("path", flat=True))
    if taken:
        raise ApplicationError("file_committed", f"Data files already committed: {sorted(taken)[:5]}.")
    # a file another commit takes meanwhile breaks DataFile.path's unique index: a 409 (`written_or_removed`)
    with refused_as("invalid_data_file"):
        written = [
            iceberg_incoming.data_file_checked(warehouse, p, columns, table.state["partition_by"], n) for p, n in added
        ]
        _record(draft, table, files, columns, removed, written, deleted, warehouse=warehouse, tag=tag,
                started=started)  # fmt: skip


def _engine_deletes(named, files: TableFiles, live: dict, table, *, warehouse, base, folder) -> dict[str, set[int]]:
    """The positions, by segment id, that the snapshot's new delete files delete: position delete files naming live
    segments, and equality delete files by the table's primary key (a delete by key; refused on a table without a
    key or by other columns, as LakeUI identifies rows by key or by position only)."""
    served = {
        table_uri(warehouse, f"{base}/iceberg/deletes/{d.id}.parquet") for ds in files.deltas.values() for d in ds
    }
    reads = {r.id: r for r in files.reads()}
    segment_of = {uri: str(s.id) for uri, s in live.items()}
    deleted: dict[str, set[int]] = {}
    new_files = [p for p in [*named.position_deletes, *named.equality_deletes] if p not in served]
    for location in new_files:
        path = _relative(warehouse, location)
        if path is None or not path.startswith(f"{folder}/"):
            raise FileRefused(f"Delete file {location!r} is not under the table's write location on this branch.")
        if location in named.position_deletes:
            for target, positions in iceberg_incoming.position_deletes_read(warehouse, path).items():
                if target not in segment_of:
                    raise FileRefused(f"Position delete file {location!r} names {target!r}, no live file of the table.")
                deleted.setdefault(segment_of[target], set()).update(positions)
            continue
        key = table.state.get("primary_key") or []
        if not key or set(named.equality_ids[location]) != set(key):
            raise FileRefused(
                f"Equality delete file {location!r} is refused: LakeUI takes equality deletes only by the table's "
                "primary key (its identifier fields); write position deletes or copy-on-write instead."
            )
        found = iceberg_incoming.equality_deletes_match(warehouse, path, key, table_columns(table),
                                                        list(reads.values()))  # fmt: skip
        for segment_id, positions in found.items():
            deleted.setdefault(segment_id, set()).update(positions)
    for segment_id, positions in deleted.items():
        positions -= iceberg_incoming.deleted_positions(warehouse, reads[segment_id])
    return {s: p for s, p in deleted.items() if p}


def _record(
    draft, table, files: TableFiles, columns: list[Column], removed, written, engine_deleted, *, warehouse, tag,
    started: tuple,
) -> None:  # fmt: skip
    base = f"{table.catalog_id}/{table.object_id}"
    files_written_under(base)
    schema_version_id = table.state.get("schema_version_id")  # a table this commit creates: given at the commit
    reads = {s.id: r for s, r in zip(files.segments, files.reads(), strict=True)}
    removed_ids = {s.id for s in removed}
    kept = [s for s in files.segments if s.id not in removed_ids]
    rewrite = iceberg_incoming.rewrite_matched(
        warehouse, [reads[s.id] for s in removed], [w.path for w in written], columns
    )
    lost = {s: set(p) for s, p in rewrite.lost.items()}
    for segment_id, positions in engine_deleted.items():
        lost.setdefault(segment_id, set()).update(positions)
    new_segments = []
    extra_rows = []
    for file in written:
        fresh = rewrite.new_rows[file.path]
        if fresh is None or len(fresh) == file.row_count:
            new_segments.append(file)  # only new rows: taken as it is
        elif fresh:
            extra_rows.append(iceberg_incoming.rows_take(warehouse, file.path, fresh, columns))
    if extra_rows:
        new_segments += write_segments_arrow(
            warehouse,
            base,
            pa.concat_tables(extra_rows),
            columns,
            partition_ids=table.state["partition_by"],
            tag=f"iceberg-{tag}",
        )
    key_ids = table.state.get("primary_key") or []
    if key_ids:
        new_paths = [f.path for f in new_segments]
        stats = {str(s.id): s.stats for s in files.segments}  # only segments whose key range overlaps are read
        doubled = iceberg_incoming.keys_doubled(
            warehouse, new_paths, list(reads.values()), columns, key_ids, lost, stats=stats
        )
        if doubled:
            seen = _started_segments(draft, table, *started)
            if seen is not None:  # only the rows the engine started from count as its mistake
                saw = [r for r in reads.values() if r.id in seen]
                doubled = iceberg_incoming.keys_doubled(warehouse, new_paths, saw, columns, key_ids, lost, stats=stats)
            if not doubled:
                moved = MESSAGE_MOVED_KEYS.format(name=table.name, branch=draft.branch.name)
                raise ConflictError("commit_failed", moved)
            raise FileRefused(f"The commit would hold these keys twice: {doubled}; nothing was committed.")
    live_rows = {str(s.id): s.row_count - _deleted_count(warehouse, reads[s.id]) for s in removed}
    every_row = not kept and all(len(lost[str(s.id)]) == live_rows[str(s.id)] for s in removed)
    deleted_rows = sum(len(p) for p in lost.values())
    if removed and every_row and new_segments:
        segments = _data_files(draft, table, new_segments, schema_version_id)
        gone = [f for s in removed for f in [s, *files.deltas.get(s.id, [])]]
        for file in gone:
            draft.remove_file(file)
        _operation(
            draft,
            table,
            Op.OVERWRITE,
            segments_added=segments,
            segments_removed=removed,
            rows_inserted=sum(f.row_count for f in new_segments),
            rows_deleted=deleted_rows,
        )
        return
    if deleted_rows:
        emptied = [s for s in removed if len(lost[str(s.id)]) == live_rows[str(s.id)]]
        for segment in emptied:
            for file in [segment, *files.deltas.get(segment.id, [])]:
                draft.remove_file(file)
        partly = [s for s in files.segments if s not in emptied and lost.get(str(s.id))]
        deltas = [
            iceberg_incoming.positions_write(
                warehouse, delta_folder(base, f"iceberg-{tag}"), str(s.id), lost[str(s.id)]
            )
            for s in partly
        ]
        delta_files = _data_files(draft, table, deltas, None, kind=DataFile.Kind.DELTA)
        _operation(
            draft,
            table,
            Op.DELETE,
            deltas_added=delta_files,
            segments_removed=emptied,
            segments_touched=partly,
            rows_deleted=deleted_rows,
        )
    if new_segments:
        segments = _data_files(draft, table, new_segments, schema_version_id)
        _operation(draft, table, Op.INSERT, segments_added=segments, rows_inserted=sum(f.row_count for f in segments))


def _started_key(branch: Branch, table: ObjectVersion, snapshot_id) -> str:
    return f"iceberg-started:{branch.id}:{table.object_id}:{snapshot_id}"


def _started_from(snapshots: dict[int, dict], snapshot_id) -> Any:
    """The snapshot a commit's snapshot started from: its parent, past the snapshots the same commit adds (an upsert
    adds an overwrite, then an append on it)."""
    parent, passed = snapshots[snapshot_id].get("parent-snapshot-id"), {snapshot_id}
    while parent in snapshots and parent not in passed:
        passed.add(parent)
        parent = snapshots[parent].get("parent-snapshot-id")
    return parent


def _started_remember(branch: Branch, table: ObjectVersion, updates: list[dict]) -> None:
    """A commit refused because the table moved: the snapshot each of its new snapshots started from, kept an hour
    by snapshot id. An engine's retry keeps the snapshot ids and its data files but makes the head it reloaded the
    parent (pyiceberg's does), so without this the rows committed meanwhile would look like rows it saw. A memo
    only: when it is not there, the commit is judged by its parent."""
    added = [u.get("snapshot") for u in updates if u.get("action") == "add-snapshot"]
    snapshots = {s["snapshot-id"]: s for s in added if isinstance(s, dict) and isinstance(s.get("snapshot-id"), int)}
    for snapshot_id in snapshots:
        try:  # the first refusal's is kept: a later retry started no earlier
            started = {"parent": _started_from(snapshots, snapshot_id)}
            caches["shared"].add(_started_key(branch, table, snapshot_id), started, 3600)
        except Exception:  # the shared cache down: the retry is judged by its parent
            continue


def _started_segments(draft: CommitDraft, table: ObjectVersion, snapshot_id, parent) -> set[str] | None:
    """The ids of the table's segments live at the snapshot the engine's commit started from (`parent`, or the one
    its first attempt that a 409 refused started from): rows committed after it are rows the engine could not see.
    None when that snapshot is not known (then every live row counts as seen, as before)."""
    try:
        remembered = caches["shared"].get(_started_key(draft.branch, table, snapshot_id))
    except Exception:  # the shared cache down: judged by the parent
        remembered = None
    if remembered is not None:
        parent = remembered["parent"]
    if parent is None:  # started from a table without a snapshot: it saw no rows
        return set()
    if not isinstance(parent, int) or parent < 0:
        return None
    commit = Commit.objects.filter(catalog=draft.catalog, id__startswith=f"{parent:015x}").first()
    if commit is None:
        return None
    files = tables_file_rows(commit_chain(commit), table_ids=[table.object_id]).get(table.object_id, NO_FILES)
    return {str(s.id) for s in files.segments}


def _deleted_count(warehouse, read) -> int:
    return len(iceberg_incoming.deleted_positions(warehouse, read)) if read.deltas else 0


def _data_files(draft, table, written, schema_version_id, *, kind=DataFile.Kind.SEGMENT) -> list[DataFile]:
    files = [
        DataFile(
            catalog=draft.catalog,
            table_id=table.object_id,
            kind=kind,
            path=w.path,
            row_count=w.row_count,
            size_bytes=w.size_bytes,
            stats=w.stats,
            partition_values=w.partition_values,
            schema_version_id=schema_version_id if kind == DataFile.Kind.SEGMENT else None,
            segment_id=uuid.UUID(w.segment_id) if w.segment_id else None,
        )
        for w in written
    ]
    for file in files:
        draft.add_file(file)
    return files


def _operation(
    draft,
    table,
    op,
    *,
    segments_added=(),
    segments_removed=(),
    segments_touched=(),
    deltas_added=(),
    rows_inserted=0,
    rows_deleted=0,
) -> None:
    details = {
        "segments_added": [str(f.id) for f in segments_added],
        "deltas_added": [str(f.id) for f in deltas_added],
        "segments_removed": [str(f.id) for f in segments_removed],
        "deltas_removed": [],
        "segments_touched": [str(f.id) for f in segments_touched],
        "rows_inserted": rows_inserted,
        "rows_updated": 0,
        "rows_deleted": rows_deleted,
        "segments_written": len(segments_added),
        "delta_files_written": len(deltas_added),
        "source": "iceberg",
    }
    draft.operation(object_id=table.object_id, kind=TABLE, op=op, details=details)
