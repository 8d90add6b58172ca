"""One commit as the commit page and its API show it, and the names of the objects commits' operations touched."""

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import QuerySet

from catalog_app.models import Catalog, Commit, FileEntry, ObjectKind, ObjectVersion, Operation
from catalog_app.selectors.refs import commit_get

ROW_COUNTS = ("rows_inserted", "rows_updated", "rows_deleted")


@dataclass
class CommitOperation:
    position: int
    op: str
    object_id: uuid.UUID
    object_kind: str
    object_name: str  # db.table for a table or view, the name for a database
    details: dict
    rows: dict[str, int] = field(default_factory=dict)


@dataclass
class CommitDetail:
    commit: Commit
    parents: list[str]  # the first parent, then the source head a merge commit merged
    operations: list[CommitOperation]
    tables: list[CommitOperation]  # one operation per table whose data the commit may have changed


def operation_names(operations: Iterable[Operation]) -> dict[tuple[str, uuid.UUID], str]:
    """The name each operation's object had in its commit, `db.table` for tables and views, keyed by (commit id,
    object id). Two queries whatever the number of operations: the versions the commits recorded (every commit
    that changes an object records a version of it), and the names of their databases then."""
    operations = list(operations)
    if not operations:
        return {}
    versions = ObjectVersion.objects.filter(
        commit_id__in={o.commit_id for o in operations}, object_id__in={o.object_id for o in operations}
    ).only("commit_id", "object_id", "parent_id", "name", "seq", "kind")
    found = {(v.commit_id, v.object_id): v for v in versions}
    parents = {v.parent_id for v in found.values() if v.parent_id is not None}
    databases: dict[uuid.UUID, list[tuple[int, str]]] = {}
    for db in ObjectVersion.objects.filter(object_id__in=parents, kind=ObjectKind.DATABASE).only(
        "object_id", "seq", "name"
    ):
        databases.setdefault(db.object_id, []).append((db.seq, db.name))
    names = {}
    for (commit_id, object_id), version in found.items():
        name = version.name
        if version.parent_id is not None:
            earlier = [n for seq, n in sorted(databases.get(version.parent_id, [])) if seq <= version.seq]
            name = f"{earlier[-1] if earlier else '?'}.{name}"
        names[(commit_id, object_id)] = name
    return names


def commits_with_operations(commits: Iterable[Commit]) -> list[tuple[Commit, list[tuple[Operation, str]]]]:
    """A page of the log: each commit with its operations and the name of the object each touched (`db.table`)."""
    commits = list(commits)
    operations: dict[str, list[Operation]] = {}
    for op in Operation.objects.filter(commit_id__in=[c.id for c in commits]).order_by("commit_id", "position"):
        operations.setdefault(op.commit_id, []).append(op)
    names = operation_names(op for ops in operations.values() for op in ops)
    return [
        (commit, [(op, names.get((commit.id, op.object_id), "")) for op in operations.get(commit.id, [])])
        for commit in commits
    ]


def operation_rows(*, commit_ids: Iterable[str], object_ids: Iterable | None = None) -> QuerySet:
    """The operations of these commits (on these objects, if given) as plain (commit id, position, object id, op,
    details) rows, in no order, in one query however many commits (a merge reads those of each side's first-parent
    chain since the base)."""
    rows = Operation.objects.filter(commit_id__any=commit_ids)
    if object_ids is not None:
        rows = rows.filter(object_id__any=object_ids)
    return rows.values_list("commit_id", "position", "object_id", "op", "details")


def objects_touched(*, commit_ids: Iterable[str]) -> set[uuid.UUID]:
    """The ids of the objects an operation of these commits touched, in one query."""
    return set(Operation.objects.filter(commit_id__any=list(commit_ids)).values_list("object_id", flat=True).distinct())


def operations_adding(*, object_id: uuid.UUID, segment_ids: Iterable[str], ops: Iterable[str]) -> QuerySet:
    """The operations of these kinds on this object in the commits, on any line, that made any of these segments live
    (their file entries, by the files' index), as plain (commit id, position, op, details) rows in no order, one
    query. A commit's other operations come too: the caller reads which segments each one added."""
    commits = FileEntry.objects.filter(file_id__any=list(segment_ids), removed=False).values("commit_id")
    rows = Operation.objects.filter(commit_id__in=commits, object_id=object_id, op__in=list(ops))
    return rows.values_list("commit_id", "position", "op", "details")


def commit_operation_rows(*, commit_id: str) -> QuerySet:
    """One commit's operations as plain (position, object id, op, details) rows, the last first."""
    return (
        Operation.objects.filter(commit_id=commit_id)
        .order_by("-position")
        .values_list("position", "object_id", "op", "details")
    )


def catalog_names(*, ids: Iterable[str]) -> dict[str, str]:
    """Catalog names by id (as text), one query."""
    return {str(i): name for i, name in Catalog.objects.filter(id__in=list(ids)).values_list("id", "name")}


def commit_detail(*, catalog: Catalog, commit_id: str) -> CommitDetail:
    """A commit (by id or unambiguous prefix), its parents and its operations with the objects they touched."""
    commit = commit_get(catalog=catalog, commit_id=commit_id)
    operations = list(commit.operations.all())
    names = operation_names(operations)
    shown = []
    for op in operations:
        rows = {k: int(op.details[k]) for k in ROW_COUNTS if isinstance(op.details.get(k), int)}
        shown.append(
            CommitOperation(
                position=op.position, op=op.op, object_id=op.object_id, object_kind=op.object_kind,
                object_name=names.get((commit.id, op.object_id), str(op.object_id)), details=op.details, rows=rows,
            )
        )  # fmt: skip
    tables, seen = [], set()
    for op in shown:
        if op.object_kind == ObjectKind.TABLE and op.object_id not in seen:
            seen.add(op.object_id)
            tables.append(op)
    parents = [p for p in (commit.parent_id, commit.merge_parent_id) if p]
    return CommitDetail(commit=commit, parents=parents, operations=shown, tables=tables)
