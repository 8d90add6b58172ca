"""OpenLineage run events (docs/changes.md#openlineage): each job that writes data (a load, a delete, an update, a
compaction, a merge, a revert or cherry-pick, a restore) tells `START` as it starts running and `COMPLETE`, `FAIL` or
`ABORT` (cancelled) as it ends; an Iceberg commit tells `START` and `COMPLETE` together. Each event is the domain
event `openlineage.run` (lakeui/events.py), which a catalog's webhooks that name it receive, through the webhooks'
SSRF-safe delivery with its retries: off unless a webhook is configured for it.

The apps that own the job kinds say what a run reads and writes: a describer registered for its kinds
(`job_lineage`) turns a job's parameters (and, once it ended, its result) into the catalog and its datasets, each
named by the catalog, the branch and the table.
"""

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.utils import timezone

from lakeui.events import OPENLINEAGE_RUN, event_emit

logger = logging.getLogger(__name__)

PRODUCER = "https://github.com/lakeui/lakeui"
RUN_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent"
FACET_SCHEMA = "https://github.com/lakeui/lakeui/blob/main/docs/changes.md#openlineage"
ENDED = {"succeeded": "COMPLETE", "failed": "FAIL", "cancelled": "ABORT"}


@dataclass(frozen=True)
class Dataset:
    branch: str
    table: str  # db.table


@dataclass(frozen=True)
class Lineage:
    """What a run reads and writes, and LakeUI's facts about it (commit, merge, merge request, approvers)."""

    catalog: Any
    inputs: Sequence[Dataset] = ()
    outputs: Sequence[Dataset] = ()
    facts: dict[str, Any] = field(default_factory=dict)


# (params, result or None while it runs) -> Lineage, or None when the run writes nothing worth telling (a dry run).
Describer = Callable[[dict[str, Any], dict[str, Any] | None], Lineage | None]
_DESCRIBERS: dict[str, Describer] = {}


def job_lineage(*kinds: str) -> Callable[[Describer], Describer]:
    def register(describer: Describer) -> Describer:
        for kind in kinds:
            _DESCRIBERS[kind] = describer
        return describer

    return register


def run_event(*, event_type: str, run_id: str, job_name: str, lineage: Lineage) -> dict[str, Any]:
    """An OpenLineage RunEvent; a dataset's namespace is the catalog (`lakeui://<catalog>`), its name
    `<branch>/<db.table>`."""
    namespace = f"lakeui://{lineage.catalog.name}"

    def datasets(found: Sequence[Dataset]) -> list[dict[str, str]]:
        return [{"namespace": namespace, "name": f"{d.branch}/{d.table}"} for d in found]

    facet = {"_producer": PRODUCER, "_schemaURL": FACET_SCHEMA, **lineage.facts}
    return {
        "eventType": event_type, "eventTime": timezone.now().isoformat(), "producer": PRODUCER,
        "schemaURL": RUN_EVENT_SCHEMA,
        "run": {"runId": run_id, "facets": {"lakeui": facet}},
        "job": {"namespace": namespace, "name": job_name},
        "inputs": datasets(lineage.inputs), "outputs": datasets(lineage.outputs),
    }  # fmt: skip


def lineage_emit(*, job, event_type: str) -> None:
    """Tell a job run's event (its result once it succeeded), if its kind has a describer: nothing else is read for
    the many jobs that have none. Never fails the job: an error is logged (not a time limit striking meanwhile,
    which the job's own handling must see)."""
    describer = _DESCRIBERS.get(job.kind)
    if describer is None:
        return
    try:
        lineage = describer(job.params, job.result if event_type == "COMPLETE" else None)
        if lineage is not None:
            event = run_event(event_type=event_type, run_id=str(job.id), job_name=job.kind, lineage=lineage)
            event_emit(catalog=lineage.catalog, kind=OPENLINEAGE_RUN, payload=event, actor=job.requested_by)
    except SoftTimeLimitExceeded:
        raise
    except Exception:
        logger.exception("Could not tell the OpenLineage %s event of job %s (%s)", event_type, job.id, job.kind)


def lineage_told(kind: str) -> bool:
    return kind in _DESCRIBERS


def lineage_commit_emit(*, lineage: Lineage, job_name: str, actor=None) -> None:
    """A write that runs no job (an Iceberg commit): its START and COMPLETE at once, one run. Call it inside the
    commit's transaction: nothing is sent if it rolls back."""
    run_id = str(uuid.uuid4())
    for event_type in ("START", "COMPLETE"):
        event = run_event(event_type=event_type, run_id=run_id, job_name=job_name, lineage=lineage)
        event_emit(catalog=lineage.catalog, kind=OPENLINEAGE_RUN, payload=event, actor=actor)
