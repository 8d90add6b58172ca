"""A catalog's retention page (docs/retention.md), for admins: the rules, a preview of what they (or rules being
edited) would remove, saving them, and running an expiry now. A refusal of the services is a message on the form,
which keeps what was typed."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from catalog_app.models import Role
from catalog_app.selectors.retention import rules_get
from catalog_app.services.retention import expire_submit, retention_preview, rules_set
from frontend.views.common import get_catalog, refused, ui_view
from lakeui.errors import ApplicationError

BLANK_ROWS = 2


def _number(text: str) -> int | str | None:
    """A number field as the services take it: empty is None, a whole number an int, anything else as typed (the
    service refuses it with its own message)."""
    text = text.strip()
    return None if not text else int(text) if text.isdigit() else text


def _rules_typed(request: HttpRequest) -> list[dict]:
    patterns, days, commits = (request.POST.getlist(f) for f in ("pattern", "keep_days", "keep_commits"))
    rows = zip(patterns, days, commits, strict=False)
    return [
        {"pattern": p.strip(), "keep_days": _number(d), "keep_commits": _number(c)} for p, d, c in rows if p.strip()
    ]


@ui_view
def retention_page(request: HttpRequest, catalog: str) -> HttpResponse:
    """GET: the rules; POST `action`: `preview` (the typed rules, nothing saved), `save`, or `expire` (a job)."""
    found = get_catalog(request, catalog, Role.ADMIN)
    rules = [rule.as_dict() for rule in rules_get(catalog=found)]
    plan, status = None, 200
    if request.method == "POST":
        action = request.POST.get("action")
        rules = rules if action == "expire" else _rules_typed(request)
        try:
            if action == "expire":
                job = expire_submit(catalog=found, user=request.user)
                messages.success(request, "Expiry started: garbage collection reclaims the files after it.")
                return redirect("frontend:job", job_id=job.id)
            if action == "save":
                rules_set(catalog=found, rules=rules)
                messages.success(request, "Retention rules saved. Nothing expires until an expiry runs.")
                return redirect("frontend:retention", catalog=found.name)
            plan = retention_preview(catalog=found, rules=rules).as_dict()
        except ApplicationError as error:
            refused(request, error)
            status = 400
    rows = rules + [{"pattern": "", "keep_days": None, "keep_commits": None}] * BLANK_ROWS
    return render(request, "frontend/retention.html", {"catalog": found, "rows": rows, "plan": plan}, status=status)
