"""The merge job kinds: glue from the job's plain parameters to the merge services."""

from typing import Any

from catalog_app.engine.frames import cache_scope
from catalog_app.selectors.refs import catalog_by_id
from catalog_app.spark import spark_session
from lakeui.jobs.registry import Progress, job_kind
from lakeui.jobs.selectors import job_of_run
from merge_app.models import Merge
from merge_app.selectors.merge_requests import merge_request_by_id
from merge_app.selectors.merges import merge_of_job, merges_of_job, restore_of_job
from merge_app.services.keys import KEYS_JOB, key_runs
from merge_app.services.merge_requests import PLAN_JOB, merge_request_merged, merge_request_plan_store
from merge_app.services.merges import (
    MERGE_JOB,
    branch_merge,
    checks_failed_error,
    merge_conflict_error,
    merge_diff_with_bases,
    merge_result,
)
from merge_app.services.picks import PICK_JOB, commits_pick, pick_results
from merge_app.services.queue import QUEUE_JOB, queue_run
from merge_app.services.restores import RESTORE_JOB, branch_restore, restore_result


@job_kind(MERGE_JOB)
def merge_job(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    job = job_of_run(progress.job_id)
    done = merge_of_job(job)
    if done is not None:  # delivered again after it finished: report the first run's outcome, never merge twice
        if done.status == Merge.Status.CONFLICT:
            raise merge_conflict_error(done)
        if done.status == Merge.Status.CHECKS_FAILED:
            raise checks_failed_error(done)
        return merge_result(done)
    progress.report(10, "Comparing the branches")
    request_id = params.get("merge_request")
    merge = branch_merge(
        catalog=catalog_by_id(params["catalog_id"]), source=params["source"], target=params["target"],
        dry_run=params.get("dry_run", False), user=job.requested_by, job=job,
        expected_heads=params.get("expected_heads"), resolution=params.get("resolution"),
        via_merge_request=request_id, audit=params.get("audit"), override=params.get("override_checks"),
        on_merged=None if request_id is None else (
            lambda merge: merge_request_merged(merge_request_id=request_id, merge=merge)
        ),
    )  # fmt: skip
    return merge_result(merge)


@job_kind(PLAN_JOB)
def merge_request_plan_job(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """The dry-run merge of a merge request; its report becomes the request's plan."""
    job = job_of_run(progress.job_id)
    merge_request = merge_request_by_id(params["merge_request_id"])
    merge = merge_of_job(job)
    if merge is None:
        progress.report(10, "Planning the merge")
        merge = branch_merge(
            catalog=catalog_by_id(params["catalog_id"]), source=merge_request.source,
            target=merge_request.target, dry_run=True, user=job.requested_by, job=job,
            resolution=params.get("resolution"),
        )  # fmt: skip
    merge_request_plan_store(merge_request_id=merge_request.id, merge=merge, resolution=params.get("resolution"))
    return {**merge_result(merge), "merge_request": merge_request.number}


@job_kind(KEYS_JOB, interactive=True)
@cache_scope()
def keys_job(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Compare the primary-key tables of a diff by key, for the diff report (stored as KeyComparison rows)."""
    diff = merge_diff_with_bases(catalog=catalog_by_id(params["catalog_id"]), source=params["source"],
                                 target=params["target"], resolution=None, user=None, in_worker=True)  # fmt: skip
    progress.report(20, "Comparing keys on Spark")
    runs = key_runs(spark_session(), diff)
    return {"tables": len(runs)}


@job_kind(PICK_JOB)
def pick_job(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """A revert or a cherry-pick (of one commit or a range)."""
    job = job_of_run(progress.job_id)
    done = merges_of_job(job)
    if done:  # delivered again after it finished: report the first run's outcome, never apply twice
        return pick_results(done)
    progress.report(10, "Reverting" if params["kind"] == "revert" else "Cherry-picking")
    merges = commits_pick(
        catalog=catalog_by_id(params["catalog_id"]), kind=params["kind"], branch=params["branch"],
        commits=params["commits"], user=job.requested_by, job=job, resolution=params.get("resolution"),
    )  # fmt: skip
    return pick_results(merges)


@job_kind(RESTORE_JOB)
def restore_job(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    job = job_of_run(progress.job_id)
    done = restore_of_job(job)
    if done is not None:  # delivered again after it finished: never restore twice
        return restore_result(done)
    progress.report(10, "Restoring")
    restore = branch_restore(
        catalog=catalog_by_id(params["catalog_id"]), branch=params["branch"], point=params["point"],
        database=params.get("database"), table=params.get("table"), user=job.requested_by, job=job,
    )  # fmt: skip
    return restore_result(restore)


@job_kind(QUEUE_JOB)
@cache_scope()
def merge_queue_job(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Work a branch's merge queue (services/queue.py) while it is asked to."""
    job = job_of_run(progress.job_id)
    return queue_run(catalog=catalog_by_id(params["catalog_id"]), target=params["target"], job=job)
