"""Table DDL: create, drop, rename, properties, partition spec, and column changes. One commit each; every
schema change records a new visible schema version."""

import uuid
from typing import Any

from django.db import transaction

from catalog_app import table_schema
from catalog_app.models import ObjectKind, ObjectVersion, Operation, SchemaVersion
from catalog_app.names import check_identifier, check_properties
from catalog_app.selectors.table_files import table_has_rows
from catalog_app.services.commits import CommitDraft, WriteTarget
from catalog_app.services.databases import name_free
from catalog_app.services.properties import properties_apply
from lakeui.errors import ApplicationError

TABLE = ObjectKind.TABLE
Op = Operation.Op


def _table(draft: CommitDraft, database: str, name: str) -> ObjectVersion:
    db = draft.get(ObjectKind.DATABASE, database)
    return draft.get(TABLE, name, db.object_id)


def _stage(draft: CommitDraft, table: ObjectVersion, *, state: dict, name: str | None = None, new_schema=None):
    return draft.put(
        kind=TABLE, object_id=table.object_id, name=name or table.name, parent_id=table.parent_id, state=state,
        new_schema=new_schema,
    )  # fmt: skip


def _partition_and_key(columns: list[dict], partition_by: list[str], primary_key: list[str]) -> tuple[list, list]:
    partition_ids = table_schema.column_ids(columns, partition_by, "partition_by")
    key_ids = table_schema.column_ids(columns, primary_key, "primary_key")
    if len(set(key_ids)) != len(key_ids) or len(set(partition_ids)) != len(partition_ids):
        raise ApplicationError("invalid_input", "partition_by and primary_key must not repeat a column.")
    unpartitionable = [
        column["name"] for column in columns if column["id"] in partition_ids and column["type"] == "binary"
    ]
    if unpartitionable:  # a file's partition value comes from its min/max statistics, which binary columns lack
        raise ApplicationError(
            "invalid_partition_column", f"A table cannot be partitioned by a binary column: {unpartitionable}."
        )
    nullable_keys = [column["name"] for column in columns if column["id"] in key_ids and column["nullable"]]
    if nullable_keys:
        raise ApplicationError(
            "primary_key_nullable", f"Primary key columns must be NOT NULL (nullable: false): {nullable_keys}."
        )
    return partition_ids, key_ids


@transaction.atomic
def table_create(
    *,
    target: WriteTarget,
    database: str,
    name: str,
    columns: list[dict[str, Any]],
    partition_by: list[str] | None = None,
    primary_key: list[str] | None = None,
    properties: dict | None = None,
    comment: str = "",
) -> ObjectVersion:
    check_identifier(name, "Table")
    draft = target.begin()
    db = draft.get(ObjectKind.DATABASE, database)
    name_free(draft, kind=TABLE, name=name, parent_id=db.object_id)
    table_columns = table_schema.columns_create(columns)
    partition_ids, key_ids = _partition_and_key(table_columns, partition_by or [], primary_key or [])
    state = {
        "columns": table_columns,
        "last_column_id": len(table_columns),
        "partition_by": partition_ids,
        "primary_key": key_ids,
        "properties": check_properties(properties or {}),
        "comment": comment,
    }
    object_id = uuid.uuid4()
    version = draft.put(
        kind=TABLE, object_id=object_id, name=name, parent_id=db.object_id, state=state, new_schema=table_columns
    )
    draft.operation(object_id=object_id, kind=TABLE, op=Op.CREATE, details={"name": name, **state})
    target.finish(draft, f"Create table {database}.{name}")
    return version


@transaction.atomic
def table_update(
    *,
    target: WriteTarget,
    database: str,
    name: str,
    new_name: str | None = None,
    set_properties: dict | None = None,
    unset_properties: list | None = None,
    partition_by: list[str] | None = None,
) -> ObjectVersion:
    draft = target.begin()
    table = _table(draft, database, name)
    state, final_name, object_id = dict(table.state), table.name, table.object_id
    if new_name is not None and new_name != table.name:
        final_name = check_identifier(new_name, "Table")
        name_free(draft, kind=TABLE, name=final_name, parent_id=table.parent_id)
        draft.operation(object_id=object_id, kind=TABLE, op=Op.ALTER_NAME, details={"old": name, "new": final_name})
    if set_properties or unset_properties:
        old = state["properties"]
        state["properties"], changed, unset = properties_apply(
            old, set_properties=set_properties, unset_properties=unset_properties
        )
        if changed or unset:
            previous = {key: old.get(key) for key in [*changed, *unset]}
            details = {"set": changed, "unset": unset, "previous": previous}
            draft.operation(object_id=object_id, kind=TABLE, op=Op.ALTER_PROPERTIES, details=details)
    if partition_by is not None:
        new_spec, _ = _partition_and_key(state["columns"], partition_by, [])
        if new_spec != state["partition_by"]:
            details = {"old": state["partition_by"], "new": new_spec}
            draft.operation(object_id=object_id, kind=TABLE, op=Op.ALTER_PARTITION, details=details)
            state["partition_by"] = new_spec
    if state == table.state and final_name == table.name:
        return table
    version = _stage(draft, table, state=state, name=final_name)
    target.finish(draft, f"Alter table {database}.{final_name}")
    return version


@transaction.atomic
def table_drop(*, target: WriteTarget, database: str, name: str):
    draft = target.begin()
    table = _table(draft, database, name)
    draft.put(
        kind=TABLE, object_id=table.object_id, name=table.name, parent_id=table.parent_id, state=table.state,
        dropped=True,
    )  # fmt: skip
    draft.operation(object_id=table.object_id, kind=TABLE, op=Op.DROP, details={"name": name})
    return target.finish(draft, f"Drop table {database}.{name}")


def _schema_change(draft: CommitDraft, table: ObjectVersion, columns: list[dict], details: list[dict], **extra):
    state = {**table.state, "columns": columns, **extra}
    for detail in details:
        draft.operation(object_id=table.object_id, kind=TABLE, op=Op.ALTER_COLUMN, details=detail)
    return _stage(draft, table, state=state, new_schema=columns)


def column_id_next(table: ObjectVersion) -> int:
    """Column ids are never reused on any branch: merges match columns by id
    (docs/merge-semantics.md#tables-without-a-primary-key, A6), so two branches that each add a column must not both
    call it N+1. Safe because the commits of a catalog are serialised."""
    versions = SchemaVersion.objects.filter(table_id=table.object_id).values_list("columns", flat=True)
    return max([table.state["last_column_id"], *(column["id"] for columns in versions for column in columns)]) + 1


@transaction.atomic
def column_add(*, target: WriteTarget, database: str, table: str, spec: dict[str, Any]) -> ObjectVersion:
    draft = target.begin()
    current = _table(draft, database, table)
    column_id = column_id_next(current)
    has_rows = table_has_rows(draft.chain, table_id=current.object_id)
    columns, detail = table_schema.column_add(
        current.state["columns"], spec, column_id=column_id, table_has_rows=has_rows
    )
    version = _schema_change(draft, current, columns, [detail], last_column_id=column_id)
    target.finish(draft, f"Add column {detail['column']['name']} to {database}.{table}")
    return version


@transaction.atomic
def column_update(
    *, target: WriteTarget, database: str, table: str, column: str, changes: dict[str, Any]
) -> ObjectVersion:
    """Rename, widen the type, change nullability or default; `changes` holds only what changes."""
    draft = target.begin()
    current = _table(draft, database, table)
    has_rows = table_has_rows(draft.chain, table_id=current.object_id)
    columns, details = table_schema.column_alter(current.state["columns"], column, changes, table_has_rows=has_rows)
    if not details:
        return current
    version = _schema_change(draft, current, columns, details)
    target.finish(draft, f"Alter column {column} of {database}.{table}")
    return version


@transaction.atomic
def column_drop(*, target: WriteTarget, database: str, table: str, column: str) -> ObjectVersion:
    draft = target.begin()
    current = _table(draft, database, table)
    protected = {*current.state["partition_by"], *current.state["primary_key"]}
    columns, detail = table_schema.column_drop(current.state["columns"], column, protected_ids=protected)
    version = _schema_change(draft, current, columns, [detail])
    target.finish(draft, f"Drop column {column} of {database}.{table}")
    return version
