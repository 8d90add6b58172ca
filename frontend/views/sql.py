"""The SQL console: SELECT over a ref's tables, CREATE BRANCH, USE BRANCH and MERGE BRANCH."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from catalog_app.models import Role
from catalog_app.selectors.refs import branch_list, tag_list
from frontend.views.common import get_catalog, ui_view
from lakeui.errors import ApplicationError
from merge_app.services.sql import Context, current_branch, sql_execute, sql_reads_only

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
    if request.method == "POST":
        try:
            context["result"] = sql_execute(catalog=found, statement=statement, ref=ref, user=request.user,
                                            limit=MAX_ROWS)  # fmt: skip
        except ApplicationError as error:
            status = 400 if error.status < 500 else error.status
            context["error"] = error
            position = (error.details or {}).get("position") if isinstance(error.details, dict) else None
            if isinstance(position, int) and 0 <= position <= len(statement):
                context["before"], context["after"] = statement[:position], statement[position:]
                context["position"] = position
    context["current"] = current_branch(Context(catalog=found, user=request.user, branch=None))
    return render(request, "frontend/sql.html", context, status=status)
