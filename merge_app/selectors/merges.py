import uuid
from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet

from catalog_app.models import Catalog, Commit
from catalog_app.selectors.commits import catalog_names
from catalog_app.selectors.refs import catalog_find, merge_commit_ids
from lakeui.errors import NotFoundError
from lakeui.jobs.models import Job
from lakeui.jobs.selectors import job_of_kind
from merge_app.job_specs import KeysSpec, MergeSpec, PickSpec, RestoreSpec
from merge_app.models import KeyConflict, Merge, MergeRequest, Restore


def merge_list(*, catalog: Catalog, kind: str | None = Merge.Kind.MERGE) -> QuerySet[Merge]:
    """A catalog's merge logs of one kind, or of every kind (merges, reverts, cherry-picks) with kind None."""
    found = Merge.objects.filter(catalog=catalog) if kind is None else Merge.objects.filter(catalog=catalog, kind=kind)
    return found.select_related("requested_by").defer("report", "log")


def merge_get(*, catalog: Catalog, merge_id: uuid.UUID) -> Merge:
    merge = Merge.objects.filter(catalog=catalog, id=merge_id).select_related("requested_by").first()
    if merge is None:
        raise NotFoundError("merge_not_found", f"There is no merge {merge_id} in catalog {catalog.name!r}.")
    return merge


def merge_of_job(job: Job) -> Merge | None:
    """The merge (or dry run) a job made, if it made one: a job delivered again after it finished."""
    return Merge.objects.filter(job=job).first()


def merges_of_job(job: Job) -> list[Merge]:
    """The merges a revert or cherry-pick job committed (a range makes one per commit), oldest first."""
    return list(
        Merge.objects.filter(job=job, status__in=[Merge.Status.MERGED, Merge.Status.UP_TO_DATE]).order_by("created_at")
    )


def restore_of_job(job: Job) -> Restore | None:
    return Restore.objects.filter(job=job).first()


def job_outcome(job: Job) -> dict[str, Any]:
    """Where a job's outcome lives: its catalog, and the merge, merge request or restore it made or served. Any
    app's job, whatever its params hold (a job page never fails on them): they are read by name, not as a spec."""
    params, result = job.params or {}, job.result or {}
    catalog = catalog_find(catalog_id=params["catalog_id"]) if params.get("catalog_id") else None
    merge = None
    if catalog is not None and isinstance(result, dict) and result.get("merge"):
        merge = Merge.objects.filter(id=result["merge"], catalog=catalog).first()
    if merge is None and job.kind == MergeSpec.KIND:
        merge = merge_of_job(job)
    request_id = params.get("merge_request") or params.get("merge_request_id")
    merge_request = None
    if catalog is not None and request_id is not None:
        merge_request = MergeRequest.objects.filter(id=request_id, catalog=catalog).first()
    restore = restore_of_job(job) if job.kind == RestoreSpec.KIND else None
    picks = merges_of_job(job) if job.kind == PickSpec.KIND else []
    return {"job_catalog": catalog, "merge": merge, "merge_request": merge_request, "restore": restore, "picks": picks}


def job_catalog_names(jobs) -> dict[str, str]:
    """The names of the catalogs a page of jobs ran in (by the id their params name), in one query."""
    return catalog_names(ids={str(job.params["catalog_id"]) for job in jobs if (job.params or {}).get("catalog_id")})


def keys_job_get(*, catalog: Catalog, job_id: uuid.UUID) -> Job:
    """A key comparison job of the catalog's diffs: whoever reads the catalog follows it, whoever started it (the
    diff page polls it; the job is shared by every reader of the same heads)."""
    job = job_of_kind(job_id=job_id, kind=KeysSpec.KIND, params={"catalog_id": str(catalog.id)})
    if job is None:
        raise NotFoundError("job_not_found", f"There is no key comparison {job_id} in catalog {catalog.name!r}.")
    return job


def key_conflict_rows(*, table_id: object, base: str, source_head: str, target_head: str) -> QuerySet:
    """The rows (`KeyConflict`) of a primary-key table's stored key comparison at these heads, in order."""
    return KeyConflict.objects.filter(
        comparison__table_id=table_id, comparison__base=base, comparison__source_head=source_head,
        comparison__target_head=target_head,
    ).order_by("position")  # fmt: skip


def key_conflicts(*, table_id: uuid.UUID, base: str, source_head: str, target_head: str) -> QuerySet:
    """The conflicting keys of that comparison, in order (each: key, key_id, changes, base/source/target rows,
    cells)."""
    rows = key_conflict_rows(table_id=table_id, base=base, source_head=source_head, target_head=target_head)
    return rows.values_list("conflict", flat=True)


def merge_logs_check(catalog: Catalog, finding) -> Iterator:
    """`lakeui_check`: every merge commit has its merge log (registered in apps.py)."""
    logged = set(Merge.objects.filter(catalog=catalog, commit__isnull=False).values_list("commit_id", flat=True))
    for commit_id in merge_commit_ids(catalog=catalog):
        if commit_id not in logged:
            yield finding("merge_without_log", f"merge commit {commit_id} has no merge log (merge_app Merge)")


def restore_list(*, catalog: Catalog) -> QuerySet[Restore]:
    return Restore.objects.filter(catalog=catalog).select_related("requested_by")


def restore_get(*, catalog: Catalog, restore_id: uuid.UUID) -> Restore:
    restore = restore_list(catalog=catalog).filter(id=restore_id).first()
    if restore is None:
        raise NotFoundError("restore_not_found", f"There is no restore {restore_id} in catalog {catalog.name!r}.")
    return restore


def merge_of_commit(*, commit: Commit) -> Merge | None:
    """The merge audit log whose merge made this commit (a merge commit), if any."""
    return Merge.objects.filter(commit=commit).defer("report", "log").first()


def merge_request_numbers(commit_ids: list[str]) -> dict[str, int]:
    """The number of the merge request whose merge made each of these commits (the rest left out), in one query:
    the change feed's reader (catalog_app.selectors.merge_links), registered in MergeAppConfig.ready."""
    made = MergeRequest.objects.filter(merge__commit_id__in=commit_ids).values_list("merge__commit_id", "number")
    return dict(made)


def merges_tables_changed(*, merge_ids) -> list[str]:
    """The tables the merges changed (`db.table`, as their audit logs name them)."""
    logs = Merge.objects.filter(id__in=list(merge_ids)).values_list("log", flat=True)
    return sorted({o["name"] for log in logs for o in (log or {}).get("objects", []) if o.get("kind") == "table"})
