"""The catalog's events at a ref, as the Iceberg REST events endpoint proposes them (apache/iceberg#12584, `POST
/v1/{prefix}/events`; docs/iceberg.md#events): each commit of the ref's first-parent history, oldest first, as the
catalog operations it made, so an engine or a catalog federation follows a branch by polling with the continuation
token it was given.

An event per namespace or table a commit changed: `create-namespace`, `drop-namespace`,
`update-namespace-properties`, `create-table`, `drop-table`, `rename-table`, `update-table` (a table's data or
schema); a merge commit also gives `x-lakeui-merge`, naming the merged commit. Events of one commit share its id as
`request-id`. The continuation token is the last commit's place in the catalog's order, so the next page starts
after it whatever was committed since.
"""

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from catalog_app.models import Commit, ObjectKind
from catalog_app.selectors.commits import commits_with_operations
from catalog_app.selectors.refs import ResolvedRef
from lakeui.errors import ApplicationError

TABLE_OPS = {"create": "create-table", "drop": "drop-table", "alter_name": "rename-table"}
NAMESPACE_OPS = {
    "create": "create-namespace", "drop": "drop-namespace", "set_properties": "update-namespace-properties",
    "unset_properties": "update-namespace-properties", "modify_name": "x-lakeui-rename-namespace",
}  # fmt: skip
MERGE = "x-lakeui-merge"


@dataclass(frozen=True)
class EventsPage:
    events: list[dict[str, Any]]
    token: str | None  # where the next page starts; None when nothing is left now
    highest_ms: int | None  # the newest commit time read


def token_parsed(token: str | None) -> int:
    """The catalog order a continuation token names (none: from the first commit); a 400 for any other."""
    if token is None:
        return -1
    if not isinstance(token, str) or not token.isdigit() or len(token) > 19:
        raise ApplicationError("invalid_input", "continuation-token is not one this catalog gave.")
    return int(token)


def iceberg_events(
    *, resolved: ResolvedRef, after: int, page_size: int, after_ms: int | None, types: set[str] | None
) -> EventsPage:
    """A page of the ref's events after catalog order `after`: whole commits, as many as fit in `page_size` events
    (at least one)."""
    commits = Commit.objects.filter(resolved.chain.q()).order_by("seq").select_related("author")
    if after_ms is not None:
        commits = commits.filter(created_at__gt=_from_ms(after_ms))
    events: list[dict[str, Any]] = []
    last, full, batch = None, False, max(page_size, 100)
    while not full:
        chunk = list(commits.filter(seq__gt=last.seq if last else after)[:batch])  # commits with no event are passed
        for commit, operations in commits_with_operations(chunk):
            made = [
                e for e in _events(commit, operations) if types is None or e["operation"]["operation-type"] in types
            ]
            if events and len(events) + len(made) > page_size:
                full = True
                break
            events, last = events + made, commit
            full = len(events) >= page_size
            if full:
                break
        if len(chunk) < batch:
            break
    if last is None:
        return EventsPage([], None, None)
    more = commits.filter(seq__gt=last.seq).exists()
    return EventsPage(events, str(last.seq) if more else None, _ms(last))


def _events(commit: Commit, operations) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    seen: set = set()
    for op, name in operations:
        if op.object_kind == ObjectKind.TABLE:
            kind = TABLE_OPS.get(op.op, "update-table")
            namespace, _, table = name.partition(".")
            operation = {"operation-type": kind, "identifier": {"namespace": [namespace], "name": table},
                         "table-uuid": str(op.object_id)}  # fmt: skip
            if kind == "rename-table":
                old = op.details.get("old")
                operation["source"] = {"namespace": [namespace], "name": old} if old else None
        elif op.object_kind == ObjectKind.DATABASE and op.op in NAMESPACE_OPS:
            operation = {"operation-type": NAMESPACE_OPS[op.op], "namespace": [name]}
        else:
            continue
        key = (operation["operation-type"], op.object_id)
        if key not in seen:  # one update-table per table a commit changed, however many operations it made
            seen.add(key)
            found.append(operation)
    if commit.merge_parent_id:
        found.append({"operation-type": MERGE, "merged-commit": commit.merge_parent_id})
    actor = {"user": commit.author.username} if commit.author else None
    return [
        {"event-id": f"{commit.id}-{i}", "request-id": commit.id, "event-count": len(found),
         "timestamp-ms": _ms(commit), "actor": actor, "operation": operation}
        for i, operation in enumerate(found)
    ]  # fmt: skip


def _ms(commit: Commit) -> int:
    return int(commit.created_at.timestamp() * 1000)


def _from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)
