"""The events merge_app tells webhooks of (lakeui/events.py), each emitted inside the transaction of its change, so
that a change that rolls back tells no one. Their payloads are described in docs/api.md#webhooks."""

from typing import Any

from lakeui import events
from merge_app.models import Merge, MergeRequest, Restore

# A merge request's own event kinds (MergeRequestEvent.kind) that are webhook events; a review is one if it approves.
_REQUEST_EVENTS = {
    "opened": events.MERGE_REQUEST_OPENED,
    "merged": events.MERGE_REQUEST_MERGED,
    "merged_elsewhere": events.MERGE_REQUEST_MERGED,
    "closed": events.MERGE_REQUEST_CLOSED,
}


def merge_request_event_emit(merge_request: MergeRequest, kind: str, actor: Any, details: dict[str, Any]) -> None:
    approved = kind == "reviewed" and details.get("decision") == "approve"
    emitted = events.MERGE_REQUEST_APPROVED if approved else _REQUEST_EVENTS.get(kind)
    if emitted is None:
        return
    request = {
        "number": merge_request.number,
        "title": merge_request.title,
        "source": merge_request.source,
        "target": merge_request.target,
        "state": merge_request.state,
        "author": merge_request.author.username if merge_request.author_id else None,
    }
    payload = {"merge_request": request, **details}
    events.event_emit(catalog=merge_request.catalog, kind=emitted, payload=payload, actor=actor)


# A merge's event by its kind: a revert and a cherry-pick are logged as merges of their kind (services/picks.py).
_MERGE_EVENTS = {
    Merge.Kind.MERGE: events.MERGE_COMPLETED,
    Merge.Kind.REVERT: events.REVERT_COMPLETED,
    Merge.Kind.CHERRY_PICK: events.CHERRY_PICK_COMPLETED,
}


def merge_event_emit(merge: Merge) -> None:
    """A merge, revert or cherry-pick that made a commit (not a refused, up-to-date or dry-run one)."""
    if merge.commit_id is None:
        return
    payload = {
        "merge": str(merge.id),
        "kind": merge.kind,
        "source": merge.source,
        "target": merge.target,
        "commit": merge.commit_id,
        "source_head": merge.source_head,
        "target_head": merge.target_head,
        "base": merge.base,
    }
    events.event_emit(catalog=merge.catalog, kind=_MERGE_EVENTS[merge.kind], payload=payload, actor=merge.requested_by)


def restore_event_emit(restore: Restore) -> None:
    payload = {
        "restore": str(restore.id),
        "branch": restore.branch,
        "database": restore.database or None,
        "table": restore.table or None,
        "point": restore.point,
        "head_before": restore.head_before,
        "commit": restore.commit_id,
    }
    events.event_emit(
        catalog=restore.catalog, kind=events.RESTORE_COMPLETED, payload=payload, actor=restore.requested_by
    )
