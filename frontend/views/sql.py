"""The SQL console: SELECT over a ref's tables, CREATE BRANCH, USE BRANCH; a SELECT Spark answers, MERGE BRANCH,
RESTORE, REVERT and CHERRY-PICK run as jobs: the console is sent to itself with the job (`?job=`), polls it and
shows its result."""

import uuid

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from catalog_app.models import Role
from catalog_app.selectors.refs import branch_list, tag_list
from frontend.views.common import get_catalog, ui_view, url_with
from lakeui.errors import ApplicationError, NotFoundError
from lakeui.jobs.selectors import job_get
from merge_app.services.sql import Context, Submitted, current_branch, sql_execute, sql_job_result, sql_reads_only

MAX_ROWS = 1000


@ui_view
def sql_console(request: HttpRequest, catalog: str) -> HttpResponse:
    statement = request.POST.get("statement", "") if request.method == "POST" else ""
    wanted = Role.VIEWER if request.method != "POST" or sql_reads_only(statement) else Role.EDITOR
    try:
        found = get_catalog(request, catalog, wanted)
    except ApplicationError as error:
        if error.code != "role_required":
            raise
        found = get_catalog(request, catalog)
        context = {"catalog": found, "statement": statement, "error": error, "ref": request.POST.get("ref", ""),
                   "branches": list(branch_list(catalog=found)), "tags": list(tag_list(catalog=found)),
                   "current": current_branch(Context(catalog=found, user=request.user, branch=None))}  # fmt: skip
        return render(request, "frontend/sql.html", context, status=403)
    ref = (request.POST.get("ref") or "").strip() or None
    context = {"catalog": found, "statement": statement, "ref": ref or "",
               "branches": list(branch_list(catalog=found)), "tags": list(tag_list(catalog=found))}  # fmt: skip
    status = 200
    if request.method != "POST" and request.GET.get("job"):
        _followed(request, context)
    elif request.method == "POST":
        try:
            result = sql_execute(catalog=found, statement=statement, ref=ref, user=request.user, limit=MAX_ROWS)
            if isinstance(result, Submitted):  # its job: followed on a page of its own, which may reload
                url = url_with(request.path, job=str(result.job.id), statement=statement, ref=ref or "")
                return redirect(url)
            context["result"] = result
        except ApplicationError as error:
            status = 400 if error.status < 500 else error.status
            context["error"] = error
            position = (error.details or {}).get("position") if isinstance(error.details, dict) else None
            if isinstance(position, int) and 0 <= position <= len(statement):
                context["before"], context["after"] = statement[:position], statement[position:]
                context["position"] = position
    context["current"] = current_branch(Context(catalog=found, user=request.user, branch=None))
    return render(request, "frontend/sql.html", context, status=status)


def _followed(request: HttpRequest, context: dict) -> None:
    """The console following the job its statement submitted (`?job=`): its progress while it runs, then the
    statement's result, or its refusal as a statement's error."""
    try:
        job_id = str(uuid.UUID(request.GET["job"]))
    except ValueError:
        raise NotFoundError("job_not_found", "There is no such job.") from None
    job = job_get(user=request.user, job_id=job_id)
    context.update(statement=request.GET.get("statement", ""), ref=request.GET.get("ref", ""), job=job)
    if job.status == job.Status.SUCCEEDED:
        context["result"] = sql_job_result(job)
    elif job.is_finished:
        details = job.result if isinstance(job.result, dict) else None
        context["error"] = ApplicationError(job.error_code or job.status, job.error_message, details=details)
