"""Jobs with live progress, and the merge audit logs."""

import json

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from frontend.views.common import get_catalog, refused, ui_view
from lakeui.errors import ApplicationError, NotFoundError
from lakeui.jobs.models import Job
from lakeui.jobs.selectors import job_get, job_list
from lakeui.jobs.services import job_cancel
from merge_app.selectors.merges import (
    job_catalog_names,
    job_outcome,
    merge_get,
    merge_list,
    restore_get,
    restore_list,
)

PAGE_SIZE = 50


COLD_START_HINT = (
    "Waiting for a worker. The first data job after a worker starts also starts Spark, which takes 15-30 s; later "
    "jobs start at once."
)


def job_state(job: Job) -> dict:
    # A finished job's last step label ("Comparing the branches" at 100%) would read as if it were still running.
    message = "" if job.is_finished else job.progress_message
    if job.status == Job.Status.QUEUED and not message:
        message = COLD_START_HINT
    return {
        "id": str(job.id), "status": job.status, "progress": job.progress, "message": message,
        "finished": job.is_finished, "error_code": job.error_code, "error_message": job.error_message,
    }  # fmt: skip


@ui_view
def job_index(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status", "")
    jobs = job_list(user=request.user, status=status)
    page = Paginator(jobs, PAGE_SIZE).get_page(request.GET.get("page"))
    names = job_catalog_names(page)
    for job in page:
        job.where = _where(job, names)
    context = {
        "page": page,
        "status": status,
        "statuses": Job.Status.values,
        "status_query": f"status={status}" if status else "",
    }
    return render(request, "frontend/jobs.html", context)


def _where(job: Job, names: dict[str, str]) -> dict:
    """What a job worked on, for the jobs list: its catalog, branch (or source -> target) and table."""
    params = job.params or {}
    return {
        "catalog": names.get(str(params.get("catalog_id") or "")),
        "branch": params.get("branch") or (f"{params['source']} → {params['target']}" if params.get("source")
                                           and params.get("target") else ""),
        "table": f"{params['database']}.{params['table']}" if params.get("database") and params.get("table") else "",
    }  # fmt: skip


@ui_view
def job_detail(request: HttpRequest, job_id) -> HttpResponse:
    job = job_get(user=request.user, job_id=str(job_id))
    outcome = job_outcome(job)
    context = {
        "job": job, **outcome, "state": job_state(job),
        "catalog": outcome["job_catalog"],  # the catalog menu, as on the catalog's own pages
        "result_json": json.dumps(job.result, indent=2, default=str) if job.result else "",
    }  # fmt: skip
    return render(request, "frontend/job.html", context)


@ui_view
def job_status(request: HttpRequest, job_id) -> HttpResponse:
    """The job's state as JSON, for the progress bars' polling."""
    try:
        job = job_get(user=request.user, job_id=str(job_id))
    except NotFoundError as error:
        return JsonResponse(error.as_dict(), status=404)
    return JsonResponse(job_state(job))


@ui_view
@require_POST
def job_cancel_view(request: HttpRequest, job_id) -> HttpResponse:
    job = job_get(user=request.user, job_id=str(job_id))
    try:
        job_cancel(job=job)
    except ApplicationError as error:
        refused(request, error)
    else:
        messages.success(request, "Cancellation requested.")
    return redirect("frontend:job", job_id=job.id)


@ui_view
def merge_index(request: HttpRequest, catalog: str) -> HttpResponse:
    """The audit log list: merges, reverts and cherry-picks alike."""
    return _log_index(request, catalog, lambda catalog: merge_list(catalog=catalog, kind=None), "frontend/merges.html")


def _log_index(request: HttpRequest, catalog: str, listing, template: str) -> HttpResponse:
    """A page of a catalog's merge or restore logs, newest first."""
    found = get_catalog(request, catalog)
    page = Paginator(listing(catalog=found), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, template, {"catalog": found, "page": page})


@ui_view
def merge_detail(request: HttpRequest, catalog: str, merge_id) -> HttpResponse:
    found = get_catalog(request, catalog)
    merge = merge_get(catalog=found, merge_id=merge_id)
    report, log = merge.report or {}, merge.log or {}
    conflicts = [
        {"name": obj["name"], "kind": obj["kind"],
         "items": [*obj.get("conflicts", []), *(p for p in obj.get("pairs", []) if p["verdict"] == "conflict")]}
        for obj in report.get("objects", []) if obj.get("verdict") == "conflict"
    ]  # fmt: skip
    files = log.get("files", [])
    context = {
        "catalog": found, "merge": merge, "report": report, "log": log, "conflicts": conflicts, "files": files,
        "file_bytes": sum(f.get("bytes", 0) for f in files), "file_rows": sum(f.get("rows", 0) for f in files),
        "schema_versions": log.get("schema_versions", {}),
    }  # fmt: skip
    return render(request, "frontend/merge.html", context)


@ui_view
def restore_index(request: HttpRequest, catalog: str) -> HttpResponse:
    return _log_index(request, catalog, restore_list, "frontend/restores.html")


@ui_view
def restore_detail(request: HttpRequest, catalog: str, restore_id) -> HttpResponse:
    found = get_catalog(request, catalog)
    restore = restore_get(catalog=found, restore_id=restore_id)
    return render(request, "frontend/restore.html", {"catalog": found, "restore": restore, "log": restore.log or {}})
