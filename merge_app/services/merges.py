"""MERGE BRANCH (docs/merge-semantics.md): plan once, then write exactly one commit on the target.

A merge is submitted as a job (`merge_submit`) and run by `branch_merge`: it plans with `merge_plan`
(`services/merge_plans.py`), then does the data work the plan asks for (`MergeWriter.prepare`,
`services/merge_writer.py`: key merges, deletes in segments that mix partitions) before it takes the catalog's
commit lock; under the lock it only checks that both heads are still the planned ones (else it plans again) and
commits, so no commit can slip in between its decision and its commit and no Spark job runs while writers wait. It
either refuses with its conflicts and changes nothing (the refusal is logged, `services/merge_logs.py`), or adds
one commit whose second parent is the source head. When SQL checks guard the target, the result is first committed
where no branch points and judged by them (the checks gate, `MergeRun.checked`), and the target moves to that very
commit. A merge that did data work (key comparison, merged rows, delete files) prepares its result so too, before
the lock, and its job keeps it: a run of the job after its worker died publishes it with no Spark if neither head
moved (`MergeRun.resumed`), so what a crash costs does not grow with the merge's size
(docs/operations.md#what-survives-a-crash). Each step is the pipeline's (`services/pipeline.py`).
"""

import dataclasses
from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from catalog_app.engine.frames import cache_scope
from catalog_app.models import Catalog, Commit, Role
from catalog_app.selectors.access import catalog_with_role, role_at_least
from catalog_app.selectors.refs import ref_resolve
from catalog_app.services.access import branch_write_check
from checks_app.selectors import checks_guarding
from lakeui.errors import ApplicationError, ConflictError
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_create
from lakeui.memory import gc_paused
from merge_app.job_specs import MergeSpec
from merge_app.models import Merge
from merge_app.selectors.diff import resolution_check, resolution_columns_check
from merge_app.services.merge_logs import merge_log
from merge_app.services.merge_plans import merge_plan
from merge_app.services.pipeline import MergeMoved, MergeRefused, MergeRun

MERGE_JOB = MergeSpec.KIND
MESSAGE_KEPT_MOVING = "{source!r} or {target!r} moved each time the merge was planned ({times} times); try again."
ATTEMPTS = 3  # a merge whose heads moved before its commit lock is planned this many times at most


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
    resolution = resolution_check(resolution) if resolution else None
    resolution_columns_check(catalog=catalog, refs=[source, target], resolution=resolution)
    spec = MergeSpec(
        catalog_id=str(catalog.id), source=source, target=target, dry_run=dry_run,
        expected_heads=expected_heads or None, resolution=resolution,
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
    run = MergeRun(user=user, job=job, extra=dict(audit or {}))
    refs = {"catalog": catalog, "source": source, "target": target, "resolution": resolution}
    guards = checks_guarding(catalog=catalog, branch=target)
    if dry_run:
        planned = merge_plan(**refs, expected_heads=expected_heads, in_worker=True)
        diff = planned.diff
        status = Merge.Status.CONFLICT if not diff.mergeable else Merge.Status.PLANNED
        writer = run.writer(diff, planned.key_runs) if guards else None
        if writer is not None:  # what the checks would say of this merge's result
            run.checked(diff, writer, guards, override=None, dry_run=True)
        return merge_log(diff, status=status, user=user, job=job, dry_run=True, timings=run.timings(), log=run.extra)
    # Everything that reads or writes data runs before the commit lock is taken: the plan (with the key comparison
    # of primary-key tables, kept even if the merge is refused), the files the merge writes and, when it wrote
    # files, compared keys or checks guard the target, the merge's result committed where no branch points (and
    # judged by the checks: write-audit-publish), which the job keeps for a later run should its worker die. Under
    # the lock the merge only checks that both heads are still the planned ones and commits (or publishes the
    # prepared result); if one moved, it plans again. A later run of the job publishes the prepared result as it
    # is if nothing moved (`MergeRun.resumed`).
    if override:  # an admin's override holds for every failed check, SQL or external (the request's re-check)
        run.extra["checks_overridden"] = {**override, "checks": []}
    resumed = run.resumed(via_merge_request=via_merge_request, on_merged=on_merged)
    if resumed is not None:
        return resumed
    for _ in range(ATTEMPTS):
        planned = merge_plan(**refs, expected_heads=expected_heads, in_worker=True)
        diff, prepared = planned.diff, None
        writer = run.writer(diff, planned.key_runs)
        if writer is not None and (guards or planned.key_runs or writer.written()):  # work a later run need not redo
            result = run.checked(diff, writer, guards, override=override) if guards else None
            prepared = run.prepared(diff, writer, result or run.result(diff, writer))
        try:
            if prepared is not None:
                return run.publish(prepared, via_merge_request=via_merge_request, on_merged=on_merged)
            return run.committed(diff, writer, via_merge_request=via_merge_request, on_merged=on_merged)
        except MergeMoved:
            if prepared is not None:
                run.discarded()
            continue  # files written for the old heads: orphans for GC, or kept by the prepared result naming them
        except MergeRefused as refused:
            raise run.refused(refused.diff) from None
    raise ConflictError("branch_moved", MESSAGE_KEPT_MOVING.format(source=source, target=target, times=ATTEMPTS))


def merge_result_checked(
    *, catalog: Catalog, source: str, onto: Commit, target: str, resolution: dict | None, user, job, audit: dict
) -> Merge:
    """The merge queue's preparation of one entry (merge_app/services/queue.py): `source` merged onto `onto` (the
    target's head, or the unpublished result of the entries ahead), the result written where no branch points and
    judged by the SQL checks guarding the branch `target`, which it names. Nothing is published: returns the logged
    plan (a dry run naming the judged commit, `log.checked_result`), which the queue publishes with
    `merge_published`; raises `merge_conflict` or `checks_failed` (logged), or `nothing_to_merge`."""
    run = MergeRun(user=user, job=job, extra=dict(audit))
    planned = merge_plan(catalog=catalog, source=source, target=onto.id, resolution=resolution, in_worker=True)
    diff = dataclasses.replace(planned.diff, target=target)  # named by the branch it will move
    if not diff.mergeable:
        raise run.refused(diff)
    if diff.up_to_date:
        raise ConflictError("nothing_to_merge", f"{source!r} has nothing to merge into {target!r}.")
    writer = run.writer(diff, planned.key_runs)
    result = run.checked(diff, writer, checks_guarding(catalog=catalog, branch=target), override=None)
    return run.prepared(diff, writer, result, checkpoint=False).merge
