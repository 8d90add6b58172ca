"""Views, shares and roles: versioned with their branch, listed and time-travelled, never merged."""

import uuid

from django.db import transaction

from catalog_app.models import ObjectKind, ObjectVersion, Operation
from catalog_app.names import check_identifier
from catalog_app.services.commits import WriteTarget
from catalog_app.services.databases import name_free

LABEL = {ObjectKind.VIEW: "view", ObjectKind.SHARE: "share", ObjectKind.ROLE: "role"}


def _parent_id(draft, database: str | None) -> uuid.UUID | None:
    return draft.get(ObjectKind.DATABASE, database).object_id if database else None


@transaction.atomic
def branch_object_create(
    *, target: WriteTarget, kind: str, name: str, state: dict, database: str | None = None
) -> ObjectVersion:
    check_identifier(name, LABEL[kind].capitalize())
    draft = target.begin()
    parent_id = _parent_id(draft, database)
    name_free(draft, kind=kind, name=name, parent_id=parent_id)
    object_id = uuid.uuid4()
    version = draft.put(kind=kind, object_id=object_id, name=name, parent_id=parent_id, state=state)
    draft.operation(object_id=object_id, kind=kind, op=Operation.Op.CREATE, details={"name": name, **state})
    target.finish(draft, f"Create {LABEL[kind]} {name}")
    return version


@transaction.atomic
def branch_object_drop(*, target: WriteTarget, kind: str, name: str, database: str | None = None):
    draft = target.begin()
    current = draft.get(kind, name, _parent_id(draft, database))
    draft.put(
        kind=kind, object_id=current.object_id, name=name, parent_id=current.parent_id, state=current.state,
        dropped=True,
    )  # fmt: skip
    draft.operation(object_id=current.object_id, kind=kind, op=Operation.Op.DROP, details={"name": name})
    return target.finish(draft, f"Drop {LABEL[kind]} {name}")
