"""The merge job kinds: glue from the job's typed spec (job_specs.py, read back from its params) to the merge
services. Each kind is registered under its spec's name (`KIND`), and its params are read only through the spec."""

from typing import Any

from catalog_app.engine.frames import cache_scope
from catalog_app.selectors.refs import catalog_by_id
from catalog_app.spark import spark_session
from lakeui.jobs.registry import Progress, job_kind, job_upkeep
from lakeui.jobs.selectors import job_of_run
from lakeui.lineage import Dataset, Lineage, job_lineage
from merge_app.job_specs import KeysSpec, MergeRequestPlanSpec, MergeSpec, PickSpec, QueueSpec, RestoreSpec
from merge_app.models import Merge
from merge_app.selectors.merge_requests import merge_request_approvers, merge_request_by_id, merge_request_heads
from merge_app.selectors.merges import merge_of_job, merges_of_job, merges_tables_changed, restore_of_job
from merge_app.services.keys import key_comparisons_expire, key_runs
from merge_app.services.merge_logs import merge_conflict_error, merge_result
from merge_app.services.merge_plans import merge_diff_with_bases
from merge_app.services.merge_requests import (
    merge_request_merged,
    merge_request_plan_store,
    merge_requests_follow_heads,
)
from merge_app.services.merges import branch_merge
from merge_app.services.picks import commits_pick, pick_results
from merge_app.services.pipeline import checks_failed_error
from merge_app.services.queue import queue_run, queues_follow_heads
from merge_app.services.restores import branch_restore, restore_result


@job_kind(MergeSpec.KIND)
def merge_job(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    spec = MergeSpec.from_params(params)
    job = job_of_run(progress.job_id)
    done = merge_of_job(job)
    if done is not None:  # delivered again after it finished: report the first run's outcome, never merge twice
        if done.status == Merge.Status.CONFLICT:
            raise merge_conflict_error(done)
        if done.status == Merge.Status.CHECKS_FAILED:
            raise checks_failed_error(done)
        return merge_result(done)
    progress.report(10, "Comparing the branches")
    request_id = spec.merge_request
    merge = branch_merge(
        catalog=catalog_by_id(spec.catalog_id), source=spec.source, target=spec.target, dry_run=spec.dry_run,
        user=job.requested_by, job=job, expected_heads=spec.expected_heads, resolution=spec.resolution,
        via_merge_request=request_id, audit=spec.audit, override=spec.override_checks,
        on_merged=None if request_id is None else (
            lambda merge: merge_request_merged(merge_request_id=request_id, merge=merge)
        ),
    )  # fmt: skip
    return merge_result(merge)


@job_kind(MergeRequestPlanSpec.KIND)
def merge_request_plan_job(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """The dry-run merge of a merge request; its report becomes the request's plan."""
    spec = MergeRequestPlanSpec.from_params(params)
    job = job_of_run(progress.job_id)
    merge_request = merge_request_by_id(spec.merge_request_id)
    merge = merge_of_job(job)
    if merge is None:
        progress.report(10, "Planning the merge")
        merge = branch_merge(
            catalog=catalog_by_id(spec.catalog_id), source=merge_request.source, target=merge_request.target,
            dry_run=True, user=job.requested_by, job=job, resolution=spec.resolution,
        )  # fmt: skip
    merge_request_plan_store(merge_request_id=merge_request.id, merge=merge, resolution=spec.resolution)
    return {**merge_result(merge), "merge_request": merge_request.number}


@job_kind(KeysSpec.KIND, interactive=True)
@cache_scope()
def keys_job(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Compare the primary-key tables of a diff by key, for the diff report (stored as KeyComparison rows); in a
    criss-cross history, make the virtual base first. A comparison stored already (a second job started for the
    same heads) is not made again."""
    spec = KeysSpec.from_params(params)
    diff = merge_diff_with_bases(catalog=catalog_by_id(spec.catalog_id), source=spec.source, target=spec.target,
                                 resolution=None, in_worker=True)  # fmt: skip
    if not diff.pending:
        return {"tables": 0}
    progress.report(20, "Comparing keys on Spark")
    runs = key_runs(spark_session(), diff)
    return {"tables": len(runs)}


@job_kind(PickSpec.KIND)
def pick_job(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """A revert or a cherry-pick (of one commit or a range)."""
    spec = PickSpec.from_params(params)
    job = job_of_run(progress.job_id)
    done = merges_of_job(job)
    if done:  # delivered again after it finished: report the first run's outcome, never apply twice
        return pick_results(done)
    progress.report(10, "Reverting" if spec.kind == "revert" else "Cherry-picking")
    merges = commits_pick(
        catalog=catalog_by_id(spec.catalog_id), kind=spec.kind, branch=spec.branch, commits=list(spec.commits),
        user=job.requested_by, job=job, resolution=spec.resolution,
    )  # fmt: skip
    return pick_results(merges)


@job_kind(RestoreSpec.KIND)
def restore_job(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    spec = RestoreSpec.from_params(params)
    job = job_of_run(progress.job_id)
    done = restore_of_job(job)
    if done is not None:  # delivered again after it finished: never restore twice
        return restore_result(done)
    progress.report(10, "Restoring")
    restore = branch_restore(
        catalog=catalog_by_id(spec.catalog_id), branch=spec.branch, point=spec.point, database=spec.database,
        table=spec.table, user=job.requested_by, job=job,
    )  # fmt: skip
    return restore_result(restore)


@job_kind(QueueSpec.KIND)
@cache_scope()
def merge_queue_job(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Work a branch's merge queue (services/queue.py) while it is asked to."""
    spec = QueueSpec.from_params(params)
    job = job_of_run(progress.job_id)
    return queue_run(catalog=catalog_by_id(spec.catalog_id), target=spec.target, job=job)


# Merge requests are planned again when a branch moves, within a round of the workers' upkeep, not when a page
# first asks (docs/api.md#merge-requests).
job_upkeep(merge_requests_follow_heads)
# A merge queue whose branch or sources moved is worked again within a round too: no read of it starts a job.
job_upkeep(queues_follow_heads)
# Key comparisons of heads that moved on, which no merge was made with, are deleted after a day.
job_upkeep(key_comparisons_expire)


# --- OpenLineage (lakeui/lineage.py): what merges, reverts and picks, and restores read and write ------------------


@job_lineage(MergeSpec.KIND)
def merge_lineage(params: dict[str, Any], result: dict[str, Any] | None) -> Lineage | None:
    spec = MergeSpec.from_params(params)
    if spec.dry_run:
        return None
    facts: dict[str, Any] = {"source": spec.source, "target": spec.target}
    if spec.merge_request is not None:
        request = merge_request_by_id(spec.merge_request)
        head = (spec.expected_heads or {}).get("source") or merge_request_heads(request)["source"]
        approvers = merge_request_approvers(merge_request=request, source_head=head)
        facts |= {"merge_request": request.number, "approvers": approvers}
    tables = merges_tables_changed(merge_ids=[result["merge"]]) if result else []
    if result:
        facts |= {"merge": result["merge"], "commit": result["commit"], "status": result["status"]}
    inputs, outputs = [Dataset(spec.source, t) for t in tables], [Dataset(spec.target, t) for t in tables]
    return Lineage(catalog_by_id(spec.catalog_id), inputs=inputs, outputs=outputs, facts=facts)


@job_lineage(PickSpec.KIND)
def pick_lineage(params: dict[str, Any], result: dict[str, Any] | None) -> Lineage:
    spec = PickSpec.from_params(params)
    facts: dict[str, Any] = {"kind": spec.kind, "picked": list(spec.commits)}
    tables = merges_tables_changed(merge_ids=result["merges"]) if result else []
    if result:
        facts |= {"merges": result["merges"], "commits": result["commits"]}
    return Lineage(catalog_by_id(spec.catalog_id), outputs=[Dataset(spec.branch, t) for t in tables], facts=facts)


@job_lineage(RestoreSpec.KIND)
def restore_lineage(params: dict[str, Any], result: dict[str, Any] | None) -> Lineage:
    spec = RestoreSpec.from_params(params)
    outputs = [Dataset(spec.branch, f"{spec.database}.{spec.table}")] if spec.table else []
    facts = {"point": spec.point, **({"restore": result["restore"], "commit": result["commit"]} if result else {})}
    return Lineage(catalog_by_id(spec.catalog_id), outputs=outputs, facts=facts)
