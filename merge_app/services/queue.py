"""The merge queue of a branch (docs/merge-queue.md#how-it-works-merge_appservicesqueuepy): approved merge
requests merge one after another, each checked on exactly the state it will publish.

"Merge when ready" puts a request in line (`queue_enqueue`). A job works the line (`queue_run`, one job per branch
at a time, `MergeQueueRunner`): the entry at position k is prepared on the result of the entries 1..k-1, a commit
no branch points to (`merge_result_checked`: planned, materialised and judged by the branch's SQL checks), up to
LAKEUI_MERGE_QUEUE_DEPTH entries ahead. The first entry, once its required external statuses succeeded on its
source head, is published: the branch moves to its checked result by compare-and-swap (`commit_publish`), so it
only ever moves to a commit that was checked as it is; if anything else moved the branch, the prepared results
no longer lie on it and are built again. An entry that conflicts, fails a check or loses its approvals leaves the
line with its reason; the entries behind it were prepared on a result that included it, so they are built again
without it. What wakes the queue is what changes its state: an entry queued or taken out, a status posted, and
a head that moved (the branch or a source), which the workers' upkeep finds within a round
(`queues_follow_heads`), as merge requests are planned again. A read of the queue starts nothing.
"""

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from catalog_app.models import Catalog, Role
from catalog_app.selectors.access import branch_protection, catalog_with_role, role_at_least
from catalog_app.selectors.refs import branch_heads, commit_by_id
from checks_app.selectors import checks_verdict, statuses_of
from lakeui import events
from lakeui.errors import ApplicationError, ConflictError, NotFoundError
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_create
from merge_app.job_specs import QueueSpec
from merge_app.models import Merge, MergeQueueRunner, MergeRequest, MergeRequestEvent, QueueEntry
from merge_app.selectors.merge_requests import merge_request_heads, merge_request_status, resolution_of
from merge_app.selectors.queue import queue_line
from merge_app.services.merge_requests import merge_request_audit, merge_request_merged, merge_request_refresh
from merge_app.services.merges import merge_result_checked
from merge_app.services.pipeline import MergeMoved, MergeRun, Prepared

QUEUE_JOB = QueueSpec.KIND
STEPS = 500  # a pass gives up after this many preparations and publications (the next kick goes on)
# What keeps a request out of the line, or takes it out: checks are the queue's own work, on the result.
GATES = ("merge_request_not_open", "branch_missing", "changes_requested", "approvals_missing")
REFUSALS = ("merge_conflict", "checks_failed", "nothing_to_merge")  # a preparation that takes the entry out
WEBHOOKS = {"queued": events.MERGE_QUEUE_QUEUED, "dequeued": events.MERGE_QUEUE_DEQUEUED,
            "merged_by_queue": events.MERGE_QUEUE_MERGED}  # fmt: skip


def _user(user: AbstractBaseUser | None) -> AbstractBaseUser | None:
    return user if user is not None and user.is_authenticated else None


def _event(entry: QueueEntry, kind: str, actor: AbstractBaseUser | None, **details: Any) -> None:
    """On the request's timeline and to webhooks, in the caller's transaction."""
    request = entry.merge_request
    details = {"entry": entry.id, "target": entry.target, **details}
    MergeRequestEvent.objects.create(merge_request=request, kind=kind, actor=_user(actor), details=details)
    payload = {
        "merge_request": {"number": request.number, "title": request.title, "source": request.source,
                          "target": request.target},
        **details,
    }  # fmt: skip
    events.event_emit(catalog=entry.catalog, kind=WEBHOOKS[kind], payload=payload, actor=_user(actor))


# --- in line and out ------------------------------------------------------------------------------------------


def queue_enqueue(*, merge_request: MergeRequest, user: AbstractBaseUser) -> QueueEntry:
    """ "Merge when ready": put an open, approved request in its target's line (409 `already_queued`; the first of
    GATES that stands in the way otherwise). Its checks run in the queue, on the result it will publish."""
    merge_request = merge_request_refresh(merge_request=merge_request, user=user)
    with transaction.atomic():
        locked = (
            MergeRequest.objects.select_for_update(of=("self",)).select_related("catalog", "author", "plan_job")
            .get(id=merge_request.id)
        )  # fmt: skip
        if QueueEntry.objects.filter(merge_request=locked, state__in=QueueEntry.ACTIVE).exists():
            raise ConflictError("already_queued", f"Merge request {locked.number} is already in the queue.")
        blockers = [b for b in merge_request_status(locked).blockers if b["code"] in GATES]
        if blockers:
            first = blockers[0]
            raise ApplicationError(first["code"], first["message"], status=first["status"],
                                   details={"blockers": blockers})  # fmt: skip
        entry = QueueEntry.objects.create(
            catalog=locked.catalog, target=locked.target, merge_request=locked, enqueued_by=_user(user)
        )
        position = QueueEntry.objects.filter(
            catalog=locked.catalog, target=locked.target, state__in=QueueEntry.ACTIVE, id__lte=entry.id
        ).count()
        _event(entry, "queued", user, position=position)
        queue_kick(catalog_id=locked.catalog_id, target=locked.target)
    return entry


def queue_leave(*, merge_request: MergeRequest, user: AbstractBaseUser) -> QueueEntry:
    """Take a request out of the line: its author or an admin of the catalog (403 `role_required`); 404
    `not_queued` if it is not in line."""
    catalog = merge_request.catalog
    is_admin = role_at_least(catalog_with_role(user=user, name=catalog.name)[1], Role.ADMIN)
    if not is_admin and (merge_request.author_id is None or merge_request.author_id != user.pk):
        raise ApplicationError("role_required", "Only the request's author or an admin may take it out of the queue.",
                               status=403)  # fmt: skip
    with transaction.atomic():
        entry = (
            QueueEntry.objects.select_for_update(of=("self",)).select_related("merge_request", "catalog")
            .filter(merge_request=merge_request, state__in=QueueEntry.ACTIVE).first()
        )  # fmt: skip
        if entry is None:
            raise NotFoundError("not_queued", f"Merge request {merge_request.number} is not in the queue.")
        _remove(entry, "dequeued", f"Taken out of the queue by {user.get_username()}.", actor=user)
        queue_kick(catalog_id=catalog.id, target=entry.target)
    return entry


def _remove(entry: QueueEntry, reason: str, message: str, details: dict | None = None, actor=None) -> None:
    with transaction.atomic():
        if not _still_in_line(entry):
            return  # it left the line meanwhile (taken out, or removed by a pass): that stands
        entry.state, entry.reason, entry.message = QueueEntry.State.REMOVED, reason, message
        entry.details, entry.finished_at = details or {}, timezone.now()
        entry.save()
        _event(entry, "dequeued", actor, reason=reason, message=message)


def _still_in_line(entry: QueueEntry) -> bool:
    """Whether the entry is still in line, its row locked to the end of the transaction. The runner prepares an
    entry for seconds from a row read before; a request taken out of the line meanwhile stays out (the runner's
    write of the stale row would have put it back in line, and a new entry for it would then fail)."""
    return QueueEntry.objects.select_for_update().filter(id=entry.id, state__in=QueueEntry.ACTIVE).exists()


# --- who works the line ---------------------------------------------------------------------------------------


def queue_kick(*, catalog_id: object, target: str) -> None:
    """Ask for a pass over `target`'s queue: the job working it does one more, or a new job starts (enqueued when
    the caller's transaction commits)."""
    with transaction.atomic():
        MergeQueueRunner.objects.get_or_create(catalog_id=catalog_id, target=target)
        runner = (
            MergeQueueRunner.objects.select_for_update(of=("self",))
            .select_related("job")
            .get(catalog_id=catalog_id, target=target)
        )
        runner.again = True
        if runner.job is None or runner.job.is_finished:
            spec = QueueSpec(catalog_id=str(catalog_id), target=target)
            runner.job = job_create(kind=spec.KIND, params=spec.to_params())
        runner.save()


def queues_follow_heads() -> None:
    """Kick every queue whose entries were prepared on what moved since (the branch, a source) or one of which
    waits to be prepared. The job workers run this every round of their upkeep (`merge_app.job_kinds`): a head
    that moves wakes its queues within a round, and no read of a queue starts a job."""
    active = QueueEntry.objects.filter(state__in=QueueEntry.ACTIVE).values_list("catalog_id", "target").distinct()
    for catalog_id, target in sorted(set(active), key=str):
        queue_follow_heads(catalog_id=catalog_id, target=target)


def queue_follow_heads(*, catalog_id: object, target: str) -> None:
    """Kick `target`'s queue if what its entries were prepared on moved or one waits to be prepared."""
    line = queue_line(catalog_id=catalog_id, target=target)
    if not line:
        return
    heads = branch_heads(catalog_id=catalog_id, names=[target, *{e.merge_request.source for e in line}])
    stale = line[0].onto != heads.get(target) or any(
        entry.state == QueueEntry.State.QUEUED or entry.source_head != heads.get(entry.merge_request.source)
        for entry in line
    )
    if stale:
        queue_kick(catalog_id=catalog_id, target=target)


def queue_run(*, catalog: Catalog, target: str, job: Job) -> dict[str, Any]:
    """The queue job: passes over the line while it is asked for more (`MergeQueueRunner.again`)."""
    done = {"merged": 0, "removed": 0, "prepared": 0, "rebuilt": 0}
    while True:
        with transaction.atomic():
            runner = MergeQueueRunner.objects.select_for_update().get(catalog=catalog, target=target)
            if runner.job_id != job.id:
                return done  # another job works the line
            if not runner.again:
                runner.job = None
                runner.save()
                return done
            runner.again = False
            runner.save()
        _pass(catalog, target, job, done)


def _pass(catalog: Catalog, target: str, job: Job, done: dict[str, int]) -> None:
    """Prepare the first entries on what each will publish, and publish the first while it is ready."""
    depth = max(1, settings.LAKEUI_MERGE_QUEUE_DEPTH)
    for _ in range(STEPS):
        line = queue_line(catalog_id=catalog.id, target=target)
        head = branch_heads(catalog_id=catalog.id, names=[target]).get(target)
        if not line:
            return
        if head is None:
            for entry in line:
                _remove(entry, "branch_missing", f"The branch {target!r} no longer exists.")
            return
        if not _prepared(line[:depth], head, job, done):
            continue  # an entry left the line: those behind it are prepared again without it
        first = line[0]
        protection = branch_protection(catalog=catalog, branch=target)
        verdict = checks_verdict(runs=[], statuses=statuses_of(catalog=catalog, commit=first.source_head),
                                 required=protection.required_checks if protection else [])  # fmt: skip
        if verdict.failed:
            message = f"Required check(s) failed on the source head: {', '.join(verdict.failed)}."
            _remove(first, "checks_failed", message, {"checks": verdict.failed, "source_head": first.source_head})
            done["removed"] += 1
            continue
        if verdict.pending:
            return  # a status posted for its source head kicks the queue again
        _publish(first, job, done)


def _prepared(entries: list[QueueEntry], head: str, job: Job, done: dict[str, int]) -> bool:
    """Each entry prepared on the head and the results of the entries ahead of it; False when one left the line."""
    onto, ahead = head, []
    for entry in entries:
        request = entry.merge_request
        heads = merge_request_heads(request)
        blockers = [b for b in merge_request_status(request, heads).blockers if b["code"] in GATES]
        if blockers:
            details = {"source_head": heads["source"], "prepared_with": entry.source_head or None}
            _remove(entry, blockers[0]["code"], blockers[0]["message"], details)
            done["removed"] += 1
            return False
        ready = entry.state == QueueEntry.State.PREPARED and (entry.onto, entry.source_head) == (onto, heads["source"])
        if not ready and not _prepare(entry, onto, ahead, job, done):
            return False
        onto = entry.result_id
        ahead.append(request.number)
    return True


def _prepare(entry: QueueEntry, onto: str, ahead: list[int], job: Job, done: dict[str, int]) -> bool:
    """Build and check the entry's result on `onto`; False (the entry taken out, with the refusal) if it conflicts,
    fails a check or has nothing to merge."""
    request = entry.merge_request
    audit = merge_request_audit(request, merge_request_status(request))
    audit["merge_queue"] = {"target": entry.target, "entry": entry.id, "checked_with": list(ahead), "onto": onto}
    try:
        planned = merge_result_checked(
            catalog=entry.catalog, source=request.source, onto=commit_by_id(onto), target=entry.target,
            resolution=resolution_of(request), user=entry.enqueued_by, job=job, audit=audit,
        )  # fmt: skip
    except ApplicationError as refused:
        if refused.code not in REFUSALS:
            raise
        combined = f" Checked with {', '.join(f'#{n}' for n in ahead)} ahead of it in the queue." if ahead else ""
        _remove(entry, refused.code, refused.message + combined, {**refused.details, "checked_with": ahead,
                                                                   "onto": onto})  # fmt: skip
        done["removed"] += 1
        return False
    with transaction.atomic():
        if not _still_in_line(entry):
            return False
        if entry.state == QueueEntry.State.PREPARED:
            entry.rebuilds += 1
            done["rebuilt"] += 1
        entry.state, entry.onto, entry.source_head = QueueEntry.State.PREPARED, onto, planned.source_head
        entry.result_id, entry.checked_with, entry.plan_merge = planned.log["checked_result"], list(ahead), planned
        entry.save()
    done["prepared"] += 1
    return True


def _publish(entry: QueueEntry, job: Job | None, done: dict[str, int]) -> None:
    """Publish the entry's checked result as a merge publishes its prepared one (`MergeRun.publish`: the branch moved
    to it by compare-and-swap of both heads, fenced by the job's claim), its logged plan made the merge's audit log
    and the request merged with it. If the branch or the request's source moved, or the entry left the line, nothing
    is published (the next step prepares the entry again, or takes it out with its reason)."""
    planned = entry.plan_merge
    log = {"merge_queue": {**planned.log.get("merge_queue", {}), "published": entry.result_id,
                           "rebuilds": entry.rebuilds}}  # fmt: skip

    def merged(merge: Merge) -> None:  # in the publish's transaction, under the commit lock
        if not _still_in_line(entry):
            raise _LeftLine  # taken out of the line while it was prepared: not published
        merge_request_merged(merge_request_id=entry.merge_request_id, merge=merge)  # approvals checked again
        entry.state, entry.merge, entry.finished_at = QueueEntry.State.MERGED, merge, timezone.now()
        entry.save()
        _event(entry, "merged_by_queue", entry.enqueued_by, merge=str(merge.id), commit=entry.result_id,
               checked_with=entry.checked_with)  # fmt: skip

    prepared = Prepared(planned, commit_by_id(entry.result_id), written=[])
    try:
        # One queue job publishes many merges: each is fenced by its claim, none becomes its commit.
        run = MergeRun(user=entry.enqueued_by, job=job)
        run.publish(prepared, via_merge_request=entry.merge_request_id, on_merged=merged, timings=planned.timings,
                    log=log, commit_of_job=False)  # fmt: skip
    except (MergeMoved, _LeftLine):
        return
    except ApplicationError as blocked:  # the request's recheck under the lock: nothing was published
        _remove(entry, blocked.code, blocked.message)
        done["removed"] += 1
        return
    done["merged"] += 1


class _LeftLine(Exception):
    """The entry left the line while its result was prepared: nothing is published."""


def queue_status_posted(*, merge_request: MergeRequest) -> None:
    """A status was posted for the request's source head: its entry, if in line, may be ready to publish."""
    if QueueEntry.objects.filter(merge_request=merge_request, state__in=QueueEntry.ACTIVE).exists():
        queue_kick(catalog_id=merge_request.catalog_id, target=merge_request.target)
