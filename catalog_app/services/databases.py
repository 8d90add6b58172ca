"""Database DDL: create, drop, rename (modify_name), set and unset properties. One commit each."""

import uuid

from django.db import transaction

from catalog_app.models import ObjectKind, ObjectVersion, Operation
from catalog_app.names import check_identifier, check_properties
from catalog_app.services.commits import CommitDraft, WriteTarget
from catalog_app.services.properties import properties_apply
from lakeui.errors import ConflictError

DATABASE = ObjectKind.DATABASE
Op = Operation.Op


def name_free(draft: CommitDraft, *, kind: str, name: str, parent_id: uuid.UUID | None = None) -> None:
    """Tables and views share their database's namespace; databases, shares and roles have their own."""
    kinds = [ObjectKind.TABLE, ObjectKind.VIEW] if kind in (ObjectKind.TABLE, ObjectKind.VIEW) else [kind]
    for other in kinds:
        if draft.find(other, name, parent_id) is not None:
            raise ConflictError("name_exists", f"A {other} named {name!r} already exists at this ref.")


@transaction.atomic
def database_create(
    *, target: WriteTarget, name: str, properties: dict | None = None, comment: str = ""
) -> ObjectVersion:
    check_identifier(name, "Database")
    draft = target.begin()
    name_free(draft, kind=DATABASE, name=name)
    state = {"properties": check_properties(properties or {}), "comment": comment}
    object_id = uuid.uuid4()
    version = draft.put(kind=DATABASE, object_id=object_id, name=name, state=state)
    draft.operation(object_id=object_id, kind=DATABASE, op=Op.CREATE, details={"name": name, **state})
    target.finish(draft, f"Create database {name}")
    return version


@transaction.atomic
def database_update(
    *,
    target: WriteTarget,
    name: str,
    new_name: str | None = None,
    set_properties: dict | None = None,
    unset_properties: list | None = None,
    comment: str | None = None,
) -> ObjectVersion:
    draft = target.begin()
    current = draft.get(DATABASE, name)
    object_id, final_name = current.object_id, current.name
    if new_name is not None and new_name != current.name:
        final_name = check_identifier(new_name, "Database")
        name_free(draft, kind=DATABASE, name=final_name)
        draft.operation(
            object_id=object_id, kind=DATABASE, op=Op.MODIFY_NAME, details={"old": current.name, "new": final_name}
        )
    old_properties = current.state["properties"]
    properties, changed, unset = properties_apply(
        old_properties, set_properties=set_properties, unset_properties=unset_properties
    )
    if changed:
        previous = {key: old_properties.get(key) for key in changed}
        draft.operation(
            object_id=object_id, kind=DATABASE, op=Op.SET_PROPERTIES, details={"set": changed, "previous": previous}
        )
    if unset:
        previous = {key: old_properties[key] for key in unset}
        draft.operation(
            object_id=object_id, kind=DATABASE, op=Op.UNSET_PROPERTIES, details={"unset": unset, "previous": previous}
        )
    state = {**current.state, "properties": properties}
    if comment is not None and comment != current.state.get("comment"):
        state["comment"] = comment
        draft.operation(object_id=object_id, kind=DATABASE, op=Op.SET_PROPERTIES, details={"comment": comment})
    if state == current.state and final_name == current.name:
        return current
    version = draft.put(kind=DATABASE, object_id=object_id, name=final_name, state=state)
    target.finish(draft, f"Alter database {final_name}")
    return version


@transaction.atomic
def database_drop(*, target: WriteTarget, name: str, cascade: bool = False):
    """Refused while the database holds tables or views, unless `cascade` drops them in the same commit."""
    draft = target.begin()
    current = draft.get(DATABASE, name)
    children = draft.children(ObjectKind.TABLE, current.object_id) + draft.children(ObjectKind.VIEW, current.object_id)
    if children and not cascade:
        raise ConflictError(
            "database_not_empty",
            f"Database {name!r} holds {len(children)} tables or views; drop them first or drop with cascade.",
            details={"objects": sorted(child.name for child in children)},
        )
    for child in [*children, current]:
        draft.put(
            kind=child.kind, object_id=child.object_id, name=child.name, parent_id=child.parent_id,
            state=child.state, dropped=True,
        )  # fmt: skip
        draft.operation(object_id=child.object_id, kind=child.kind, op=Op.DROP, details={"name": child.name})
    return target.finish(draft, f"Drop database {name}")
