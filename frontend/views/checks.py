"""A catalog's SQL merge checks (docs/api.md#merge-checks): the list with each check's last run, a check's page with its
runs and a failed run's failing rows. Everyone who sees the catalog reads them, as the API lets them; only admins
add, change, delete or run one now (the views ask for the role again, whatever the page showed). A refusal of the
services (a statement the SQL console would not run, a table no guarded branch has, a name taken) is a message on
the form, which keeps what was typed."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from catalog_app.models import Role
from catalog_app.selectors.refs import branch_list, tag_list
from checks_app.models import Check, CheckRun
from checks_app.selectors import check_get, check_list, check_runs
from checks_app.services.checks import check_create, check_delete, check_run_submit, check_update
from frontend.views.common import get_catalog, refused, ui_view
from lakeui.errors import ApplicationError
from lakeui.jobs.models import Job

PAGE_SIZE = 20
FIELDS = ("name", "branches", "sql", "max_rows", "advisory")


def _statement(text: str) -> str:
    """A textarea's statement as typed: browsers send its line breaks as CRLF."""
    return text.replace("\r\n", "\n").strip()


def _form(request: HttpRequest) -> dict:
    """The form's fields as the services take them. A bound that is not a whole number is passed on as typed, so
    that the service refuses it with its own message."""
    bound = request.POST.get("max_rows", "").strip()
    try:
        max_rows: int | str = int(bound) if bound else 0
    except ValueError:
        max_rows = bound
    return {
        "name": request.POST.get("name", "").strip(),
        "branches": request.POST.get("branches", "").strip(),
        "sql": _statement(request.POST.get("sql", "")),
        "max_rows": max_rows,
        "advisory": request.POST.get("advisory") == "on",
    }


def _last_run(check: Check) -> CheckRun | None:
    return next(iter(check_runs(check=check)[:1]), None)


def _can_admin(request: HttpRequest) -> bool:
    return request.catalog_role.role == Role.ADMIN


def _parsing(request: HttpRequest, job: Job, what: str) -> HttpResponse:
    """A check whose statement Spark parses: its job's page, which shows the check saved or the statement refused."""
    messages.info(request, f"{what}: the statement is parsed by Spark on a worker; saved once it is found good.")
    return redirect("frontend:job", job_id=job.id)


@ui_view
def check_index(request: HttpRequest, catalog: str) -> HttpResponse:
    """GET: the catalog's checks (everyone who sees it); POST: add one (admins)."""
    found = get_catalog(request, catalog, Role.ADMIN if request.method == "POST" else Role.VIEWER)
    form: dict = {"branches": found.default_branch, "max_rows": 0, "advisory": False}
    status = 200
    if request.method == "POST":
        form = _form(request)
        try:
            check = check_create(catalog=found, created_by=request.user, **form)
        except ApplicationError as error:
            refused(request, error)
            status = 400
        else:
            if isinstance(check, Job):
                return _parsing(request, check, f"Check {form['name']!r}")
            messages.success(request, f"Check {check.name!r} added (version {check.version}).")
            return redirect("frontend:check", catalog=found.name, check_id=check.id)
    checks = [{"check": check, "last_run": _last_run(check)} for check in check_list(catalog=found)]
    context = {"catalog": found, "checks": checks, "form": form, "can_admin": _can_admin(request)}
    return render(request, "frontend/checks.html", context, status=status)


def _detail(request: HttpRequest, catalog, check: Check, *, form: dict | None = None, status: int = 200):
    runs = Paginator(check_runs(check=check), PAGE_SIZE).get_page(request.GET.get("page"))
    failed = [run.id for run in runs if run.state == CheckRun.State.FAILURE]
    context = {
        "catalog": catalog, "check": check, "form": form or check, "page": runs, "can_admin": _can_admin(request),
        "open_run": failed[0] if failed else None,  # the newest failure's rows are shown unfolded
        "branches": list(branch_list(catalog=catalog)), "tags": list(tag_list(catalog=catalog)),
        "run_ref": request.POST.get("ref", "").strip() or catalog.default_branch,
    }  # fmt: skip
    return render(request, "frontend/check.html", context, status=status)


@ui_view
def check_detail(request: HttpRequest, catalog: str, check_id: int) -> HttpResponse:
    """GET: the check and its runs (everyone who sees the catalog); POST: change it (admins)."""
    found = get_catalog(request, catalog, Role.ADMIN if request.method == "POST" else Role.VIEWER)
    check = check_get(catalog=found, check_id=check_id)
    if request.method != "POST":
        return _detail(request, found, check)
    form = _form(request)
    changes = dict(form)
    if changes["sql"] == _statement(check.sql):  # unchanged but for line breaks: not a new version
        del changes["sql"]
    try:
        saved = check_update(check=check, user=request.user, **changes)
    except ApplicationError as error:
        refused(request, error)
        # The check as stored (the service may have changed the instance before it refused), the form as typed.
        return _detail(request, found, check_get(catalog=found, check_id=check_id), form=form, status=400)
    if isinstance(saved, Job):
        return _parsing(request, saved, f"The changes of check {check_id}")
    messages.success(request, f"Check {saved.name!r} saved (version {saved.version}).")
    return redirect("frontend:check", catalog=found.name, check_id=saved.id)


@ui_view
@require_POST
def check_delete_view(request: HttpRequest, catalog: str, check_id: int) -> HttpResponse:
    found = get_catalog(request, catalog, Role.ADMIN)
    check = check_get(catalog=found, check_id=check_id)
    name = check.name
    check_delete(check=check)
    messages.success(request, f"Check {name!r} deleted; its runs stay in the audit logs of the merges they judged.")
    return redirect("frontend:checks", catalog=found.name)


@ui_view
@require_POST
def check_run_view(request: HttpRequest, catalog: str, check_id: int) -> HttpResponse:
    """Run the check now on a ref (a job); its page shows the run when it is done."""
    found = get_catalog(request, catalog, Role.ADMIN)
    check = check_get(catalog=found, check_id=check_id)
    ref = request.POST.get("ref", "").strip()
    try:
        job = check_run_submit(check=check, ref=ref, user=request.user)
    except ApplicationError as error:  # a ref that does not exist
        refused(request, error)
        return _detail(request, found, check, status=400)
    messages.success(request, f"Check {check.name!r} queued on {ref}; the run is listed on the check's page.")
    return redirect("frontend:job", job_id=job.id)
