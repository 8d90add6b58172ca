"""Domain events: what happened in a catalog, for whoever listens (today: webhooks, hooks_app).

The apps where things happen (catalog_app, merge_app, checks) are below or beside the app that delivers them, so
they cannot import it (docs/architecture.md#layers). They call `event_emit` here instead, and a listener registers
itself at start-up with `event_listener` (hooks_app's AppConfig.ready), as job kinds do with lakeui/jobs/registry.py.

`event_emit` runs inside the caller's transaction: a listener records what it needs there (so an action that rolls
back sends nothing) and sends on commit. It never fails the caller: a listener's error is logged, not raised.
"""

import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

# The event kinds, `<entity>.<what happened>`. Payloads are JSON objects; each kind's fields are in
# docs/api.md#webhooks.
BRANCH_CREATED = "branch.created"
BRANCH_DELETED = "branch.deleted"
MERGE_REQUEST_OPENED = "merge_request.opened"
MERGE_REQUEST_APPROVED = "merge_request.approved"
MERGE_REQUEST_MERGED = "merge_request.merged"
MERGE_REQUEST_CLOSED = "merge_request.closed"
CHECK_FINISHED = "check.finished"
MERGE_COMPLETED = "merge.completed"
RESTORE_COMPLETED = "restore.completed"
REVERT_COMPLETED = "revert.completed"
CHERRY_PICK_COMPLETED = "cherry_pick.completed"
MERGE_QUEUE_QUEUED = "merge_queue.queued"
MERGE_QUEUE_DEQUEUED = "merge_queue.dequeued"
MERGE_QUEUE_MERGED = "merge_queue.merged"
# An OpenLineage run event (lakeui/lineage.py): its payload is the RunEvent itself, sent as the body as it is, and
# only to a webhook that names the kind (not to one that listens to every kind, "*").
OPENLINEAGE_RUN = "openlineage.run"
NAMED_ONLY = (OPENLINEAGE_RUN,)

EVENT_KINDS = (
    BRANCH_CREATED,
    BRANCH_DELETED,
    MERGE_REQUEST_OPENED,
    MERGE_REQUEST_APPROVED,
    MERGE_REQUEST_MERGED,
    MERGE_REQUEST_CLOSED,
    CHECK_FINISHED,
    MERGE_COMPLETED,
    RESTORE_COMPLETED,
    REVERT_COMPLETED,
    CHERRY_PICK_COMPLETED,
    MERGE_QUEUE_QUEUED,
    MERGE_QUEUE_DEQUEUED,
    MERGE_QUEUE_MERGED,
    OPENLINEAGE_RUN,
)

# A listener: (catalog, kind, payload, actor) -> None. `catalog` is a catalog_app Catalog, `actor` a user or None.
Listener = Callable[..., None]
_LISTENERS: list[Listener] = []


def event_listener(listener: Listener) -> Listener:
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)
    return listener


def event_emit(*, catalog: Any, kind: str, payload: dict[str, Any], actor: Any = None) -> None:
    """Tell every listener that `kind` happened in `catalog`. Call it inside the transaction of the change."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"Unknown event kind {kind!r}.")  # a programming error, not a user's
    for listener in _LISTENERS:
        try:
            listener(catalog=catalog, kind=kind, payload=payload, actor=actor)
        except Exception:
            logger.exception(
                "Event listener %r failed on %s in catalog %s", listener, kind, getattr(catalog, "id", "?")
            )
