"""MERGE BRANCH (docs/merge-semantics.md): plan once, then write exactly one commit on the target.

A merge is submitted as a job (`merge_submit`) and run by `branch_merge`: it plans with `merge_plan`
(`services/merge_plans.py`), then does the data work the plan asks for (`MergeWriter.prepare`,
`services/merge_writer.py`: key merges, deletes in segments that mix partitions) before it takes the catalog's
commit lock; under the lock it only checks that both heads are still the planned ones (else it plans again) and
commits, so no commit can slip in between its decision and its commit and no Spark job runs while writers wait. It
either refuses with its conflicts and changes nothing (the refusal is logged, `services/merge_logs.py`), or adds
one commit whose second parent is the source head. When SQL checks guard the target, the result is first committed
where no branch points and judged by them (the checks gate, `_checked`), and the target moves to that very commit.
A merge that did data work (key comparison, merged rows, delete files) prepares its result so too, before the
lock, and its job keeps it: a run of the job after its worker died publishes it with no Spark if neither head moved
(`_resumed`), so what a crash costs does not grow with the merge's size (docs/operations.md#what-survives-a-crash).
"""

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from catalog_app.engine.frames import cache_scope
from catalog_app.engine.warehouse import Warehouse, files_missing
from catalog_app.models import Catalog, Commit, Role
from catalog_app.selectors.access import catalog_with_role, role_at_least
from catalog_app.selectors.refs import commit_by_id, ref_resolve
from catalog_app.services.access import branch_write_check
from catalog_app.services.commits import CommitDraft, commit_begin, commit_begin_detached, commit_publish
from catalog_app.spark import spark_session
from checks_app.selectors import check_run_dict, checks_guarding, checks_verdict
from checks_app.services.checks import checks_error, checks_run
from lakeui.errors import ApplicationError, ConflictError
from lakeui.jobs.models import Job
from lakeui.jobs.registry import ClaimLost
from lakeui.jobs.services import job_checkpoint_save, job_claim_held, job_create
from lakeui.memory import gc_paused
from merge_app.job_specs import MergeSpec
from merge_app.models import Merge
from merge_app.selectors.diff import REVERT, MergeDiff, resolution_check
from merge_app.services.events import merge_event_emit
from merge_app.services.merge_logs import merge_conflict_error, merge_log, merge_log_row, merge_log_write
from merge_app.services.merge_plans import merge_plan
from merge_app.services.merge_writer import MergeWriter

MERGE_JOB = MergeSpec.KIND
MESSAGE_KEPT_MOVING = "{source!r} or {target!r} moved each time the merge was planned ({times} times); try again."
PLANS = 3  # a merge whose heads moved while it planned plans again this many times
PREPARED = "merge_prepared"  # the job checkpoint of a merge whose result is prepared (`_prepared`)


def merge_submit(
    *,
    catalog: Catalog,
    source: str,
    target: str,
    dry_run: bool = False,
    user: AbstractBaseUser | None = None,
    expected_heads: dict[str, str] | None = None,
    resolution: dict | None = None,
    via_merge_request: int | None = None,
    audit: dict[str, Any] | None = None,
    override_checks: str | None = None,
) -> Job:
    """Check what needs no worker and queue the merge job. A merge into a protected branch is refused here (403
    `branch_protected`) unless it is a merge request's (`via_merge_request`); dry runs write nothing and pass.
    `override_checks` (a reason; admins only) lets the merge through failed checks, logged with the reason."""
    src = ref_resolve(catalog=catalog, ref=source)
    dest = ref_resolve(catalog=catalog, ref=target)
    if dest.kind != "branch":
        raise ApplicationError("read_only_ref", f"{target!r} is a {dest.kind}; a merge target must be a branch.")
    if src.commit.id == dest.commit.id and source == target:
        raise ApplicationError("invalid_input", "A branch cannot be merged into itself.")
    if not dry_run:
        branch_write_check(catalog=catalog, branch=target, via_merge_request=via_merge_request)
    spec = MergeSpec(
        catalog_id=str(catalog.id), source=source, target=target, dry_run=dry_run,
        expected_heads=expected_heads or None, resolution=resolution_check(resolution) if resolution else None,
        merge_request=via_merge_request, audit=audit or None,
        override_checks=None if override_checks is None
        else checks_override(catalog=catalog, user=user, reason=override_checks),
    )  # fmt: skip
    return job_create(kind=MERGE_JOB, params=spec.to_params(), requested_by=user)


def checks_override(*, catalog: Catalog, user: AbstractBaseUser | None, reason: object) -> dict[str, str]:
    """An admin's override of failed checks, with the reason the audit log keeps."""
    if user is None or not role_at_least(catalog_with_role(user=user, name=catalog.name)[1], Role.ADMIN):
        raise ApplicationError("role_required", "Only an admin of the catalog may override failed checks.", status=403)
    if not isinstance(reason, str) or not reason.strip() or len(reason) > 1000:
        raise ApplicationError("invalid_input", "An override of failed checks needs a reason (1 to 1000 characters).",
                               details={"field": "override_checks"})  # fmt: skip
    return {"reason": reason.strip(), "by": user.username}


@cache_scope()
@gc_paused()  # one step: the collector, resumed between its parts, walked the whole diff again each time (0.5-1.6 s)
def branch_merge(
    *,
    catalog: Catalog,
    source: str,
    target: str,
    dry_run: bool = False,
    user: AbstractBaseUser | None = None,
    job: Job | None = None,
    expected_heads: dict[str, str] | None = None,
    resolution: dict | None = None,
    via_merge_request: int | None = None,
    audit: dict[str, Any] | None = None,
    on_merged: Callable[[Merge], None] | None = None,
    override: dict[str, str] | None = None,
) -> Merge:
    """Merge `source` (any ref) into the branch `target`. Raises ConflictError `merge_conflict` (logged) when the
    rule tables refuse it and the resolution does not settle it.

    A merge request's merge passes `via_merge_request` (it may write a protected branch), `audit` (entries for the
    log: the request's number and approvers, and `resolution_choices`, who chose each resolution and when, which
    name the chooser of each resolution applied), and `on_merged`, run inside the merge's transaction once the
    merge is logged, so the request and the merge commit together or not at all."""
    started = time.monotonic()
    extra = dict(audit or {})
    refs = {"catalog": catalog, "source": source, "target": target, "resolution": resolution}
    guards = checks_guarding(catalog=catalog, branch=target)
    if dry_run:
        plan = merge_plan(**refs, expected_heads=expected_heads, in_worker=True)
        diff = plan.diff
        status = Merge.Status.CONFLICT if not diff.mergeable else Merge.Status.PLANNED
        if guards and diff.mergeable and not diff.up_to_date:  # what the checks would say of this merge's result
            writer = MergeWriter(diff, key_runs=plan.key_runs)
            writer.prepare()
            _checked(diff, writer, guards, user=user, job=job, extra=extra, override=None, dry_run=True)
        return merge_log(diff, status=status, user=user, job=job, dry_run=True, timings=_since(started), log=extra)
    # Everything that reads or writes data runs before the commit lock is taken: the plan (with the key comparison
    # of primary-key tables, kept even if the merge is refused), the files the merge writes and, when it wrote
    # files, compared keys or checks guard the target, the merge's result committed where no branch points (and
    # judged by the checks: write-audit-publish), which the job keeps for a later run should its worker die. Under
    # the lock the merge only checks that both heads are still the planned ones and commits (or moves the target
    # to the prepared result); if one moved, it plans again. A later run of the job publishes the prepared result
    # as it is if nothing moved (`_resumed`).
    if override:  # an admin's override holds for every failed check, SQL or external (the request's re-check)
        extra["checks_overridden"] = {**override, "checks": []}
    resumed = _resumed(catalog=catalog, job=job, via_merge_request=via_merge_request, on_merged=on_merged,
                       started=started)  # fmt: skip
    if resumed is not None:
        return resumed
    for _ in range(PLANS):
        plan = merge_plan(**refs, expected_heads=expected_heads, in_worker=True)
        planned, writer, prepared = plan.diff, None, None
        if planned.mergeable and not planned.up_to_date:
            writer = MergeWriter(planned, key_runs=plan.key_runs)
            writer.prepare()
            if guards or plan.key_runs or writer.written():  # work a later run of the job need not do again
                prepared = _prepared(planned, writer, guards, user=user, job=job, extra=extra, override=override,
                                     started=started)  # fmt: skip
        try:
            if prepared is not None:
                return merge_published(prepared, job=job, via_merge_request=via_merge_request, on_merged=on_merged,
                                       timings=_since(started))  # fmt: skip
            with transaction.atomic():
                draft = commit_begin(catalog=catalog, branch=target, via_merge_request=via_merge_request)
                src = ref_resolve(catalog=catalog, ref=source)
                if (src.commit.id, draft.parent.id) != (planned.source_head.id, planned.target_head.id):
                    raise MergeMoved
                merge = merge_commit(planned, writer, draft, user=user, job=job, extra=extra, started=started)
                if on_merged is not None:
                    on_merged(merge)
                return merge
        except MergeMoved:
            if prepared is not None:
                _discarded(job)
            continue  # files written for the old heads: orphans for GC, or kept by the prepared result naming them
        except MergeRefused as refused:
            merge = merge_log(refused.diff, status=Merge.Status.CONFLICT, user=user, job=job, timings=_since(started),
                         log=extra)  # fmt: skip
            raise merge_conflict_error(merge) from None
    raise ConflictError("branch_moved", MESSAGE_KEPT_MOVING.format(source=source, target=target, times=PLANS))


def merge_commit(
    diff: MergeDiff, writer: "MergeWriter | None", draft: CommitDraft, *, user, job, extra, started
) -> Merge:
    """Under the commit lock, on the planned heads: refuse, log an up-to-date merge, or stage and commit, the audit
    log written with the commit's rows (made while the database stores them)."""
    if not diff.mergeable:
        raise MergeRefused(diff)
    if diff.up_to_date:
        return merge_log(diff, status=Merge.Status.UP_TO_DATE, user=user, job=job, timings=_since(started), log=extra)
    logged: list[Merge] = []

    def audit_log(commit: Commit) -> Merge:
        logged.append(_merged_log(diff, writer, commit, user=user, job=job, extra=extra, started=started))
        return logged[0]

    merge_write(diff, writer, draft, user=user, job=job, extra=extra, also=audit_log)
    merge_event_emit(logged[0])
    return logged[0]


def merge_write(diff: MergeDiff, writer: "MergeWriter", draft: CommitDraft, *, user, job, extra, also=None) -> Commit:
    """Stage the planned merge on `draft` and commit it (`also`: a row written with the commit, its audit log)."""
    writer.apply(draft)
    chooser = user.username if user is not None and user.is_authenticated else None
    writer.log["resolutions"] = [
        {**entry, **_chosen(entry, extra.get("resolution_choices"), chooser)} for entry in diff.resolution_log
    ]
    if diff.explicit is None:
        message, merge_parent = f"Merge {diff.source} into {diff.target}", diff.source_head
    else:  # a revert or a cherry-pick: one commit on the target, with no second parent (git makes them so)
        verb = "Revert" if diff.explicit.kind == REVERT else "Cherry-pick"
        message = f"{verb} {diff.explicit.commit.id[:12]}: {diff.explicit.commit.message}"[:500]
        merge_parent = None
    return draft.commit(author=user, message=message, merge_parent=merge_parent, job=job, also=also)


def merge_recorded(diff: MergeDiff, writer: "MergeWriter", commit: Commit, *, user, job, extra, started) -> Merge:
    """Log a merge whose commit is on the target already (a pick made before the lock), and tell listeners."""
    merge = merge_log_write(_merged_log(diff, writer, commit, user=user, job=job, extra=extra, started=started))
    merge_event_emit(merge)
    return merge


def _merged_log(diff: MergeDiff, writer: "MergeWriter", commit: Commit, *, user, job, extra, started) -> Merge:
    return merge_log_row(diff, status=Merge.Status.MERGED, user=user, job=job, commit=commit,
                         log={**writer.log, **extra}, timings=_since(started))  # fmt: skip


def _checked(diff: MergeDiff, writer: "MergeWriter", guards: list, *, user, job, extra, override, dry_run) -> Commit:
    """The merge's result committed where no branch points (after the target head, with the source head as second
    parent) and judged by the checks guarding the target (docs/merge-semantics.md#merge-checks); the runs go into
    the audit log (`extra`). Refused with 409 `checks_failed` (logged, nothing merged) when a check that is not
    advisory fails, unless an admin overrides it with a reason (`override`: reason and by, logged)."""
    result = _materialised(diff, writer, user=user, extra=extra)
    runs = checks_run(spark_session, catalog=diff.catalog, checks=guards, commit=result,
                      source_head=diff.source_head.id, target_head=diff.target_head.id, job=job, user=user)  # fmt: skip
    verdict = checks_verdict(runs=runs)
    extra["checks"] = [check_run_dict(run) for run in runs]
    extra["checked_result"] = result.id
    if override:  # the SQL checks this attempt overrode (none, if they passed)
        extra["checks_overridden"] = {**override, "checks": verdict.failed}
    elif verdict.failed and not dry_run:
        raise checks_failed_error(
            merge_log(diff, status=Merge.Status.CHECKS_FAILED, user=user, job=job, log={**writer.log, **extra})
        )
    return result


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A merge's result committed where no branch points (`result`), with the files it wrote (`written`), and its
    plan logged (`merge`: a planned dry run naming the result until it is published, then the merge's audit log)."""

    merge: Merge
    result: Commit
    written: list[str]

    def checkpoint(self) -> dict[str, Any]:
        return {PREPARED: {"merge": str(self.merge.id), "result": self.result.id, "written": self.written}}


def _prepared(diff: MergeDiff, writer: MergeWriter, guards: list, *, user, job, extra, override, started) -> Prepared:
    """The merge's result committed where no branch points (and judged by the checks guarding the target, if any:
    `_checked`), as the merge queue prepares its entries, and its plan logged with what it will publish, before the
    commit lock is taken. A job keeps it as its checkpoint, so that a later run of it (its worker died) publishes it
    as it is, with no Spark, if neither head moved meanwhile (`_resumed`) instead of merging again."""
    if guards:
        result = _checked(diff, writer, guards, user=user, job=job, extra=extra, override=override, dry_run=False)
    else:
        result = _materialised(diff, writer, user=user, extra=extra)
    with transaction.atomic():
        merge = merge_log(diff, status=Merge.Status.PLANNED, user=user, job=None, dry_run=True, commit=result,
                          log={**writer.log, **extra}, timings=_since(started))  # fmt: skip
        prepared = Prepared(merge, result, writer.written())
        if job is not None:
            job_checkpoint_save(job=job, checkpoint=prepared.checkpoint())
    return prepared


def merge_published(
    prepared: Prepared, *, job, via_merge_request, on_merged, timings, log: dict[str, Any] | None = None,
    commit_of_job: bool = True,
) -> Merge:  # fmt: skip
    """The one publish of a merge (a merge's, a merge request's, the merge queue's): in one transaction, under the
    commit lock, the target moved to the prepared result by compare-and-swap if it is still at the result's parent
    and the source at the planned head (else `MergeMoved`, nothing changed), only while `job` holds its claim (else
    `ClaimLost`), and the logged plan made the merge's audit log (with `log`'s entries added). The published
    commit becomes the job's (`commit_of_job`) unless the job makes several (the merge queue's)."""
    merge = prepared.merge
    with transaction.atomic():
        published = commit_publish(catalog=merge.catalog, branch=merge.target, commit=prepared.result,
                                   job=job if commit_of_job else None, via_merge_request=via_merge_request)  # fmt: skip
        if not published or ref_resolve(catalog=merge.catalog, ref=merge.source).commit.id != merge.source_head:
            raise MergeMoved
        if job is not None and not commit_of_job and not job_claim_held(job=job):
            raise ClaimLost()  # as commit_publish fences the commit it makes the job's
        merge.status, merge.dry_run, merge.job, merge.timings = Merge.Status.MERGED, False, job, timings
        merge.commit, merge.log = prepared.result, {**merge.log, **(log or {})}
        merge.save(update_fields=["status", "dry_run", "job", "timings", "commit", "log"])
        merge_event_emit(merge)
        if on_merged is not None:
            on_merged(merge)
    return merge


def _resumed(*, catalog: Catalog, job: Job | None, via_merge_request, on_merged, started) -> Merge | None:
    """A run of a merge job whose earlier run died after it prepared its result (`_prepared`): that result
    published as it is, with no Spark and no plan, if neither head moved since it was planned and every file it
    wrote is still there; otherwise it is discarded and None (the merge plans again), as when nothing was
    prepared."""
    found = ((job.checkpoint or {}) if job is not None else {}).get(PREPARED)
    if found is None:
        return None
    merge = Merge.objects.filter(id=found["merge"], status=Merge.Status.PLANNED, job=None).first()
    prepared = Prepared(merge, commit_by_id(found["result"]), found["written"]) if merge is not None else None
    if prepared is None or files_missing(Warehouse(settings.LAKEUI_WAREHOUSE), prepared.written):
        _discarded(job)
        return None
    timings = {**merge.timings, "resumed_ms": _ms(time.monotonic() - started)}
    try:
        return merge_published(prepared, job=job, via_merge_request=via_merge_request, on_merged=on_merged,
                               timings=timings)  # fmt: skip
    except MergeMoved:
        _discarded(job)
        return None


def _discarded(job: Job | None) -> None:
    """A prepared result that will not be published: the job forgets it. It stays what it is, a commit no branch
    points to, logged by its plan (a planned dry run naming it), as a checked result whose target moved does."""
    if job is not None and job.checkpoint is not None:
        with transaction.atomic():
            job_checkpoint_save(job=job, checkpoint=None)


def _materialised(diff: MergeDiff, writer: MergeWriter, *, user, extra) -> Commit:
    """The merge's result committed where no branch points: after the target head, with the source head as second
    parent (`merge_write` on a detached draft)."""
    with transaction.atomic():
        draft = commit_begin_detached(catalog=diff.catalog, parent=diff.target_head)
        return merge_write(diff, writer, draft, user=user, job=None, extra=extra)


def checks_failed_error(merge: Merge) -> ConflictError:
    """The refusal of a merge logged as `checks_failed` (again, for a job delivered twice)."""
    runs = merge.log.get("checks", [])
    failed = [run["name"] for run in runs if not run["advisory"] and run["state"] in ("failure", "error")]
    details = {"merge": str(merge.id), "result": merge.log.get("checked_result")}
    return checks_error(failed=failed, pending=[], runs=runs, target=merge.target, details=details)


def merge_result_checked(
    *, catalog: Catalog, source: str, onto: Commit, target: str, resolution: dict | None, user, job, audit: dict
) -> Merge:
    """The merge queue's preparation of one entry (merge_app/services/queue.py): `source` merged onto `onto` (the
    target's head, or the unpublished result of the entries ahead), the result written where no branch points and
    judged by the SQL checks guarding the branch `target`, which it names. Nothing is published: returns the logged
    plan (a dry run, `log.checked_result` the judged commit); raises `merge_conflict` or `checks_failed` (logged),
    or `nothing_to_merge`."""
    started = time.monotonic()
    plan = merge_plan(catalog=catalog, source=source, target=onto.id, resolution=resolution, in_worker=True)
    diff, extra = dataclasses.replace(plan.diff, target=target), dict(audit)  # named by the branch it will move
    if not diff.mergeable:
        merge = merge_log(diff, status=Merge.Status.CONFLICT, user=user, job=job, timings=_since(started), log=extra)
        raise merge_conflict_error(merge)
    if diff.up_to_date:
        raise ConflictError("nothing_to_merge", f"{source!r} has nothing to merge into {target!r}.")
    writer = MergeWriter(diff, key_runs=plan.key_runs)
    writer.prepare()
    guards = checks_guarding(catalog=catalog, branch=target)
    _checked(diff, writer, guards, user=user, job=job, extra=extra, override=None, dry_run=False)
    return merge_log(diff, status=Merge.Status.PLANNED, user=user, job=job, dry_run=True,
                     log={**writer.log, **extra}, timings=_since(started))  # fmt: skip


def _chosen(entry: dict, choices: list[dict] | None, merger: str | None) -> dict[str, Any]:
    """Who chose an applied resolution, and when: the latest choice recorded in a merge request at the entry's
    scope (the key, its table, or the default), or the user who ran the merge."""
    scope = entry.get("scope")

    def matches(choice: dict) -> bool:
        if choice["scope"] != scope:
            return False
        if scope == "key":
            return choice.get("table") == entry.get("object") and choice.get("key") == entry.get("key_id")
        return scope == "default" or choice.get("table") == entry.get("object")

    for choice in reversed(choices or []):
        if matches(choice):
            return {"chosen_by": choice["by"], "chosen_at": choice["at"]}
    return {"chosen_by": merger}


class MergeMoved(Exception):
    """A head (the target's or the source's) moved between planning and the commit lock: nothing was published."""


class MergeRefused(Exception):
    def __init__(self, diff: MergeDiff) -> None:
        self.diff = diff


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _since(started: float) -> dict[str, int]:
    return {"total_ms": _ms(time.monotonic() - started)}
