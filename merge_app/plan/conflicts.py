"""The merge plan's second stage (docs/architecture.md#the-path-of-a-merge): the conflicts of an object as a whole,
by its name and its place (docs/merge-semantics.md#new-objects). An object the source adds or renames must not take
a name another object of its kind holds on the target, a table the source adds needs its database on the target,
and a database the source dropped must not hold objects the target still has. Plain values in and out.
"""

import uuid
from collections.abc import Hashable, Mapping
from typing import Any

from merge_app.plan.objects import DATABASE, MERGED_KINDS, TABLE, VIEW, ObjectDiff, Version
from merge_app.plan.rules import CONFLICT, Verdict


def object_conflicts(
    objects: list[ObjectDiff],
    versions: Mapping[str, Mapping[uuid.UUID, Version]],
    taken: Mapping[tuple, uuid.UUID],
    children: Mapping[uuid.UUID, list[tuple[uuid.UUID, str]]],
) -> None:
    """Each object's conflicts of names and places (`ObjectDiff.issues`): a new object's (`_check_new`), a database
    the source dropped with objects the target kept in it (`_check_emptied`, `children`: the target's live objects
    of each), a source rename onto a name the target uses (`_check_name`). `versions`: per side, the newest version of
    each object; `taken`: the target's live names the source's objects have."""
    for obj in objects:
        if obj.kind not in MERGED_KINDS or obj.change == "added_in_target":
            continue
        if obj.change == "added_in_source":
            _check_new(obj, versions, taken)
            continue
        src, dest = obj.source, obj.target
        if src.dropped and obj.kind == DATABASE and dest is not None and not dest.dropped:
            _check_emptied(obj, versions, children.get(obj.object_id, []))
        if not src.dropped:
            _check_name(obj, taken)


def _check_new(obj: ObjectDiff, versions: dict, taken: dict) -> None:
    """4.1: a new object is taken over with its id, unless the target has another of its kind and name."""
    parent = obj.source.parent_id
    database = versions["target"].get(parent) if parent is not None else None
    taken_by_other = taken_by_another(taken, namespace(obj.source), obj.object_id)
    obj.issues += new_object_conflicts(
        kind=obj.kind, name=obj.name, taken_by_other=taken_by_other,
        parent_in_base=parent is not None and versions["base"].get(parent) is not None,
        parent_on_target=database is not None and not database.dropped,
    )  # fmt: skip


def _check_emptied(obj: ObjectDiff, versions: Mapping, children: list[tuple[uuid.UUID, str]]) -> None:
    """A database the source dropped must not hold objects the target still has (`children`: the target's live
    objects in it) and the source did not drop."""
    dropped_by_source = {i for i, v in versions["source"].items() if v.dropped}
    kept = [name for object_id, name in children if object_id not in dropped_by_source]
    conflict = emptied_database_conflict(kept)
    if conflict is not None:
        obj.issues.append(conflict)


def _check_name(obj: ObjectDiff, taken: dict) -> None:
    taken_by_other = taken_by_another(taken, namespace(obj.source), obj.object_id)
    conflict = rename_conflict(base_name=obj.base.name, source_name=obj.source.name, taken_by_other=taken_by_other)
    if conflict is not None:
        obj.issues.append(conflict)


def taken_by_another(taken: Mapping[Hashable, Any], name: Hashable, object_id: Any) -> bool:
    """Whether another object holds `name` (`namespace`: kind, parent, lower-case name) on the target."""
    other = taken.get(name)
    return other is not None and other != object_id


def new_object_conflicts(
    *, kind: str, name: str, taken_by_other: bool, parent_in_base: bool, parent_on_target: bool
) -> list[Verdict]:
    """An object the source added is taken over with its id, unless the target has another object of its kind
    and name, or dropped the (older) database the table is in."""
    conflicts = []
    if taken_by_other:
        conflicts.append(Verdict(CONFLICT, "4.1", f"The target already has a {kind} named {name!r} (another object)."))
    if parent_in_base and not parent_on_target:
        conflicts.append(Verdict(CONFLICT, "4.1", "The target dropped the database this table is in."))
    return conflicts


def rename_conflict(*, base_name: str, source_name: str, taken_by_other: bool) -> Verdict | None:
    """A source rename onto a name another object holds on the target."""
    if source_name == base_name or not taken_by_other:
        return None
    return Verdict(CONFLICT, "name", f"The source renamed it to {source_name!r}, a name the target uses.")


def emptied_database_conflict(kept: list[str]) -> Verdict | None:
    """A database the source dropped that still holds objects on the target the source did not drop."""
    if not kept:
        return None
    return Verdict(CONFLICT, "4.2", f"The source dropped the database; the target has objects in it: {sorted(kept)}.")


def namespace(version: Version) -> tuple:
    """Where an object's name must be unique: its kind (a view's as a table's), its parent, its lower-case name."""
    kind = TABLE if version.kind == VIEW else version.kind
    return (kind, version.parent_id, version.name.lower())
