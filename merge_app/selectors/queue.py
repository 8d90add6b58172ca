"""Reading merge queues (docs/merge-queue.md): a branch's line of entries, with each entry's position, state and
reason, and the entry of one merge request."""

from typing import Any

from django.db.models import Count, QuerySet

from catalog_app.models import Catalog
from merge_app.models import MergeRequest, QueueEntry

RECENT = 20  # the entries that left a branch's queue (merged or taken out) shown after the line


def queue_line(*, catalog_id: object, target: str) -> list[QueueEntry]:
    """The entries waiting in `target`'s queue, first in line first."""
    entries = QueueEntry.objects.filter(catalog_id=catalog_id, target=target, state__in=QueueEntry.ACTIVE)
    return list(entries.select_related("merge_request", "merge_request__author", "enqueued_by").order_by("id"))


def queue_recent(*, catalog: Catalog, target: str) -> QuerySet[QueueEntry]:
    """The entries that left `target`'s queue, newest first."""
    entries = QueueEntry.objects.filter(catalog=catalog, target=target).exclude(state__in=QueueEntry.ACTIVE)
    return entries.select_related("merge_request", "enqueued_by").order_by("-finished_at", "-id")[:RECENT]


def queue_lengths(*, catalog: Catalog) -> dict[str, int]:
    """Each branch with entries waiting in its queue, and how many."""
    waiting = QueueEntry.objects.filter(catalog=catalog, state__in=QueueEntry.ACTIVE).values("target")
    return {row["target"]: row["n"] for row in waiting.annotate(n=Count("id")).order_by("target")}


def queue_entry_of(merge_request: MergeRequest) -> QueueEntry | None:
    """The request's newest queue entry (waiting, merged or taken out), or None if it was never queued."""
    return QueueEntry.objects.filter(merge_request=merge_request).select_related("enqueued_by").order_by("-id").first()


def queue_position(entry: QueueEntry) -> int | None:
    """1 for the entry first in line; None for one that left the queue."""
    if entry.state not in QueueEntry.ACTIVE:
        return None
    ahead = QueueEntry.objects.filter(
        catalog_id=entry.catalog_id, target=entry.target, state__in=QueueEntry.ACTIVE, id__lt=entry.id
    )
    return ahead.count() + 1


def queue_entry_dict(entry: QueueEntry, position: int | None) -> dict[str, Any]:
    request = entry.merge_request
    return {
        "id": entry.id,
        "position": position,
        "state": entry.state,
        "merge_request": {"number": request.number, "title": request.title, "source": request.source},
        "target": entry.target,
        "queued_by": entry.enqueued_by.username if entry.enqueued_by_id else None,
        "source_head": entry.source_head or None,
        "onto": entry.onto or None,
        "result": entry.result_id,
        "checked_with": entry.checked_with,
        "rebuilds": entry.rebuilds,
        "merge": str(entry.merge_id) if entry.merge_id else None,
        "reason": entry.reason or None,
        "message": entry.message or None,
        "details": entry.details,
        "created_at": entry.created_at,
        "finished_at": entry.finished_at,
    }


def queue_show(*, catalog: Catalog, target: str) -> dict[str, Any]:
    """A branch's queue: the line, each entry with its position, then the entries that recently left it."""
    line = queue_line(catalog_id=catalog.id, target=target)
    line = [queue_entry_dict(entry, position) for position, entry in enumerate(line, start=1)]
    recent = [queue_entry_dict(entry, None) for entry in queue_recent(catalog=catalog, target=target)]
    return {"target": target, "entries": line, "recent": recent}
