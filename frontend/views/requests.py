"""Merge request pages: the list, the form that opens one, and the request with its merge plan (the diff page's
rule tables), reviews, conflict resolutions, timeline, and the merge button with the reasons it is disabled.

Every action calls the merge request service the API calls, and every refusal is a message on the request page. The
request's page reads only (no job, no row written): a plan of heads that moved since is shown as such while the
workers' upkeep plans the request again (services/merge_requests.py `merge_requests_follow_heads`)."""

import json
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from catalog_app.models import Role
from catalog_app.selectors.access import branch_protection, role_at_least
from catalog_app.selectors.refs import branch_list
from checks_app.selectors import check_run_dict, check_run_get
from frontend.views.blame import key_url
from frontend.views.common import get_catalog, refused, ui_view, url_with
from frontend.views.diff import key_rows, object_view
from frontend.views.queue import queue_context
from lakeui.errors import ApplicationError
from merge_app.models import MergeRequest, MergeRequestReview
from merge_app.plan.objects import SIDES
from merge_app.plan.resolutions import KEYS_IN_REPORT
from merge_app.plan.rules import CHOICES, CONFLICT
from merge_app.selectors.merge_requests import (
    merge_request_events,
    merge_request_get,
    merge_request_list,
    merge_request_reviews,
    merge_request_status,
    resolution_preview,
)
from merge_app.services.merge_requests import (
    merge_request_merge,
    merge_request_open,
    merge_request_review,
    merge_request_update,
)
from merge_app.services.queue import GATES as QUEUE_GATES

PAGE_SIZE = 50
STATES = MergeRequest.State.values
NO_STATUS_YET = "No status was posted for the source head yet."
CHOICE_LABELS = {"fail": "fail (keep it a conflict)", "source_wins": "source wins", "target_wins": "target wins"}


def _counted(values) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return sorted(counts.items())


def _page(catalog, number: int) -> str:
    return reverse("frontend:merge-request", args=[catalog.name, number])


@ui_view
def merge_request_index(request: HttpRequest, catalog: str) -> HttpResponse:
    """GET: the requests of one state (default open); POST: open a request (editor)."""
    found = get_catalog(request, catalog, Role.EDITOR if request.method == "POST" else Role.VIEWER)
    form = {"source": request.GET.get("source", ""), "target": request.GET.get("target") or found.default_branch}
    status = 200
    if request.method == "POST":
        form = {key: request.POST.get(key, "").strip() for key in ("source", "target", "title", "description")}
        try:
            opened = merge_request_open(catalog=found, author=request.user, **form)
        except ApplicationError as error:
            refused(request, error)
            status = 400
        else:
            messages.success(request, f"Merge request !{opened.number} opened; its merge plan is being computed.")
            return redirect(_page(found, opened.number))
    state = request.GET.get("state", "open")
    requests = merge_request_list(catalog=found, state=state if state in STATES else None)
    context = {
        "catalog": found, "state": state, "form": form,
        "page": Paginator(requests.order_by("-number"), PAGE_SIZE).get_page(request.GET.get("page")),
        "branches": list(branch_list(catalog=found)),
        "tabs": [(s, merge_request_list(catalog=found, state=s).count()) for s in STATES],
        "extra": f"state={state}",
    }  # fmt: skip
    return render(request, "frontend/merge_requests.html", context, status=status)


def _event_text(kind: str, details: dict) -> str:
    """One line of the timeline for an event's details."""
    if kind == "opened":
        return f"opened to merge {details.get('source')} into {details.get('target')}"
    if kind == "plan_updated":
        conflicts, resolved = details.get("conflicts") or [], details.get("resolved") or []
        verdict = f"conflicts in {', '.join(conflicts)}" if conflicts else "no conflicts"
        if resolved:
            verdict = ("" if not conflicts else verdict + "; ") + f"conflicts resolved in {', '.join(resolved)}"
        return f"merge plan updated ({verdict})"
    if kind == "reviewed":
        what = "approved" if details.get("decision") == "approve" else "requested changes"
        comment = details.get("comment")
        return f"{what}" + (f": “{comment}”" if comment else "")
    if kind == "approvals_dismissed":
        reason = "a new source commit" if details.get("reason") == "source_moved" else "changed resolutions"
        return f"approvals of {', '.join(details.get('reviewers') or []) or 'nobody'} dismissed after {reason}"
    if kind == "merged_elsewhere":
        commit = details.get("commit") or ""
        return f"closed as merged: the source was merged into the target by merge commit {commit[:12]}"
    if kind == "approvals_kept":
        return f"approvals of {', '.join(details.get('reviewers') or [])} kept: the choice changes no conflict"
    if kind == "resolutions_changed":
        parts = []
        for choice in details.get("choices") or []:
            table, key, column = choice.get("table"), choice.get("key"), choice.get("column")
            where = {"default": "default", "table": table, "key": f"{table} key {key}",
                     "column": f"{table} column {column}", "cell": f"{table} key {key} cell {column}",
                     }.get(choice.get("scope"), "?")  # fmt: skip
            given = choice.get("choice")
            if isinstance(given, dict) and set(given) <= {"pick", "value"}:  # a cell's pick: its side or value
                given = given.get("pick") or json.dumps(given.get("value"))
            parts.append(f"{where}: {'taken back' if given is None else given}")
        return "resolutions changed (" + "; ".join(parts) + ")"
    if kind == "edited":
        return "edited " + ", ".join(sorted(details))
    if kind == "merge_started":
        return "merge submitted"
    if kind == "merged":
        commit = details.get("commit") or ""
        return f"merged ({details.get('status')}, commit {commit[:12]})"
    return kind


def _checks_view(catalog, merge_request: MergeRequest, status) -> list[dict]:
    """The request's checks on its current heads (`status.checks`), a failed SQL check with its failing rows, and
    each required external check no status was posted for yet (pending)."""
    protection = branch_protection(catalog=catalog, branch=merge_request.target)
    required = protection.required_checks if protection else []
    checks = []
    for check in status.checks:
        if check["kind"] == "sql" and check["state"] == "failure":
            check = check_run_dict(check_run_get(catalog=catalog, run_id=check["id"]), rows=True)
        checks.append({**check, "required": check["kind"] == "external" and check["name"] in required})
    posted = {check["name"] for check in checks if check["kind"] == "external"}
    for name in required:
        if name not in posted:
            checks.append({
                "kind": "external", "name": name, "state": "pending", "required": True, "check": None, "url": None,
                "duration_ms": None, "row_count": None, "description": NO_STATUS_YET,
            })  # fmt: skip
    return checks


@ui_view
def merge_request_detail(request: HttpRequest, catalog: str, number: int) -> HttpResponse:
    found = get_catalog(request, catalog)
    merge_request = merge_request_get(catalog=found, number=number)
    status = merge_request_status(merge_request)
    plan = merge_request.plan or {}
    resolutions = merge_request.resolutions or {}
    # A page of one table's conflicting keys other than its first (the pager below each table's keys).
    keys_table, keys_offset = request.GET.get("keys_table"), request.GET.get("keys_offset", "0")
    keys_offset = int(keys_offset) if keys_offset.isdigit() else 0
    objects = []
    for obj in plan.get("objects", []):
        settled = obj["name"] in status.conflicts and obj["name"] not in status.unresolved_conflicts
        chosen_keys = resolutions.get("keys", {}).get(obj["name"], {})
        view = object_view(obj, chosen_keys=chosen_keys, resolved=settled)
        view["rows"] = plan.get("rows", {}).get(obj["name"])
        view["table_choice"] = resolutions.get("tables", {}).get(obj["name"], "")
        if settled:  # by which choice: the table's, per key, or the whole merge's
            keys = resolutions.get("keys", {}).get(obj["name"], {})
            by_key = ", ".join(f"{n} key{'s' if n > 1 else ''} {c}" for c, n in _counted(keys.values()))
            view["settled_by"] = view["table_choice"] or by_key or resolutions.get("default", "")
        view["in_conflict"] = obj["name"] in status.conflicts
        view["schema_rows"] = _schema_rows(obj, resolutions.get("schema", {}).get(obj["name"], {}))
        if view["key_rows"]:
            # A page of its conflicting keys as the resolution's preview settles them: the cells to pick.
            offset = keys_offset if obj["name"] == keys_table else 0
            page = resolution_preview(merge_request, table=obj["name"], offset=offset, limit=KEYS_IN_REPORT)
            if page["keys"]:  # the comparison the plan stored (else the keys the plan lists, without picks)
                view["key_rows"] = key_rows({"keys": {"listed": page["keys"]}}, chosen_keys)
                _cell_picks_view(page, view["key_rows"], resolutions.get("cells", {}).get(obj["name"], {}))
                view["keys_pager"] = _keys_pager(obj["name"], offset, page["count"])
            database, _, table = obj["name"].partition(".")
            for k in view["key_rows"]:  # who wrote the target's value of each key: its blame, read when opened
                k["target_blame"] = key_url("frontend:table-blame", found.name, database, table,
                                            ref=merge_request.target, key=k["key"])  # fmt: skip
        objects.append(view)
    reviews = list(merge_request_reviews(merge_request))
    is_open = merge_request.state == MergeRequest.State.OPEN
    checks_failed = any(blocker["code"] == "checks_failed" for blocker in status.blockers)
    context = {
        "catalog": found, "mr": merge_request, "status": status, "plan": plan, "objects": objects,
        "reviews": reviews,
        "events": [
            {"event": e, "text": _event_text(e.kind, e.details or {})}
            for e in merge_request_events(merge_request)
        ],
        "resolutions": resolutions, "default_choice": resolutions.get("default", "fail"),
        "choices": [(c, CHOICE_LABELS[c]) for c in CHOICES],
        "is_author": merge_request.author_id == request.user.pk,
        "has_approved": request.user.get_username() in status.approved_by,  # not offered Approve again
        # The plan's one verdict counts the checks too: no conflicts but a failed or pending check is not mergeable.
        "check_blockers": [blocker for blocker in status.blockers if blocker["code"] in CHECK_BLOCKERS],
        "is_open": is_open,
        "checks": _checks_view(found, merge_request, status),
        # An admin may merge through failed checks with a reason (merge_request_merge's `override_checks`).
        "can_override": is_open and checks_failed and role_at_least(request.catalog_role.role, Role.ADMIN),
        "other_blockers": [blocker for blocker in status.blockers if blocker["code"] != "checks_failed"],
        # "Merge when ready" is offered once the queue would take the request (queue_enqueue's gates), and the
        # page says what it waits for otherwise; the request's checks run in the queue.
        "queue_gates": [blocker for blocker in status.blockers if blocker["code"] in QUEUE_GATES],
        "diff_url": url_with(reverse("frontend:diff", args=[found.name]),
                             **{"from": merge_request.source, "to": merge_request.target}),
        "plan_job": merge_request.plan_job, "merge_job": merge_request.merge_job,
        # The source's changed rows link each key to the provenance of the target's current value (its blame).
        "blame_suffix": "&" + urlencode({"blame_at": merge_request.target}),
        **queue_context(merge_request),
    }  # fmt: skip
    return render(request, "frontend/merge_request.html", context)


CHECK_BLOCKERS = ("checks_failed", "checks_pending")


def _cell_picks_view(page: dict, key_rows: list[dict], picks: dict[str, dict]) -> None:
    """Each key's conflicting cells on a page of the resolution's preview (`resolution_preview`) as the reviewer picks
    them (`k["cells"]`): the three values, the pick kept (and whether it went stale), and the merged value the plan
    computes with the rule that made it."""
    previewed = {key["key_id"]: key for key in page["keys"]}
    for k in key_rows:
        key = previewed[k["key_id"]]
        if key["source"] is None or key["target"] is None or "*" in key["cells"]:
            k["cells"] = []
            continue
        cells = []
        for column, cell in key["cells"].items():
            picked = picks.get(k["key_id"], {}).get(column)
            stands = cell["rule"] == "stands"
            cells.append({
                "column": column, "sides": [(side, json.dumps(cell[side])) for side in SIDES],
                "text": any(isinstance(cell[side], str) for side in ("source", "target")),
                "picked": picked and (picked.get("pick") or "value"),
                "typed": "" if not picked or "value" not in picked else _typed(picked["value"]),
                "stale": cell.get("stale_pick"), "result": None if stands else json.dumps(cell["result"]),
                "rule": None if stands else cell["rule"],
            })  # fmt: skip
        k["cells"] = cells


def _schema_rows(obj: dict, settled: dict[str, dict]) -> list[dict]:
    """A table's schema conflicts a resolution settles (A6.1 by a type, A6.2 by a fill: `settles` in the plan) and
    the settlements saved, a row each: the column, how it is settled, why (while it conflicts) and the value saved."""
    rows: dict[str, dict] = {}
    for decided in [*obj.get("conflicts", []), *obj.get("pairs", [])]:
        settles = decided.get("settles")
        if settles and decided["verdict"] == CONFLICT:
            rows[settles["column"]] = {**settles, "reason": decided["reason"], "value": ""}
    for column, settlement in settled.items():
        by = next(iter(settlement))
        rows.setdefault(column, {"column": column, "by": by, "type": None, "reason": None})
        fill = settlement[by]
        shown = f"={fill['expression']}" if isinstance(fill, dict) and "expression" in fill else _typed(fill)
        rows[column] |= {"by": by, "value": shown}
    return [{**row, "text": row["by"] == "fill" and row["type"] == "string"} for row in rows.values()]


def _keys_pager(table: str, offset: int, count: int) -> dict | None:
    """Links to the pages of a table's conflicting keys before and after this one, if there are."""
    if count <= KEYS_IN_REPORT and offset == 0:
        return None

    def link(at: int) -> str:
        return "?" + urlencode({"keys_table": table, "keys_offset": at})

    return {
        "first": offset + 1,
        "last": min(offset + KEYS_IN_REPORT, count),
        "count": count,
        "previous": link(max(offset - KEYS_IN_REPORT, 0)) if offset > 0 else None,
        "next": link(offset + KEYS_IN_REPORT) if offset + KEYS_IN_REPORT < count else None,
    }


def _typed(value) -> str:
    """A typed value as its field shows it: text as it is, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _refused(request: HttpRequest, error: ApplicationError) -> None:
    """The refusal's message, and every further blocker a refused merge reports."""
    refused(request, error)
    blockers = error.details.get("blockers") if isinstance(error.details, dict) else None
    for blocker in (blockers or [])[1:]:
        messages.error(request, f"{blocker['message']} ({blocker['code']})")


def _act(request: HttpRequest, catalog: str, number: int, wanted: str, action, done: str) -> HttpResponse:
    """Run one action on the request; a refusal is a message on the request page."""
    found = get_catalog(request, catalog, wanted)
    merge_request = merge_request_get(catalog=found, number=number)
    try:
        action(merge_request)
    except ApplicationError as error:
        _refused(request, error)
    else:
        messages.success(request, done)
    return redirect(_page(found, number))


@ui_view
@require_POST
def merge_request_review_view(request: HttpRequest, catalog: str, number: int) -> HttpResponse:
    decision = request.POST.get("decision", "")
    done = "Approved." if decision == MergeRequestReview.Decision.APPROVE else "Changes requested."
    return _act(
        request, catalog, number, Role.APPROVER,
        lambda mr: merge_request_review(merge_request=mr, reviewer=request.user, decision=decision,
                                        comment=request.POST.get("comment", "")[:10_000]),
        done,
    )  # fmt: skip


def _resolutions_from(post) -> dict:
    """The resolution form: `default`, `table:<db.t>` and `key:<db.t>:<key id>` fields; an empty choice is left
    as it is (a key or table choice cannot be taken back, only changed). Each conflicting cell: `cell:<db.t>:<key
    id>:<column>` (base, source, target, value: the typed `cellvalue:` field, or none: the pick taken back); a
    typed value alone picks it too. A typed value is text for a column whose values are text (`celltext:`), else
    JSON (a number, true, false, null), else text. A schema conflict: `schema:<db.t>:<column>:<type|fill>`, a fill
    typed as a cell's value is (`schematext:` for a text column), or an expression after `=` (`=id * 10`)."""
    given: dict = {}
    schema: dict[str, dict] = {}
    if post.get("default"):
        given["default"] = post["default"]
    for field, value in post.items():
        if field.startswith("cellvalue:") and value and not post.get("cell:" + field[len("cellvalue:") :]):
            field, value = "cell:" + field[len("cellvalue:") :], "value"
        if not value:
            continue
        if field.startswith("table:"):
            given.setdefault("tables", {})[field[len("table:") :]] = value
        elif field.startswith("key:"):
            table, _, key = field[len("key:") :].partition(":")
            given.setdefault("keys", {}).setdefault(table, {})[key] = value
        elif field.startswith("cell:"):
            name = field[len("cell:") :]
            table, _, rest = name.partition(":")
            key, _, column = rest.rpartition(":")
            pick = None if value == "none" else {"pick": value}  # an unknown pick is refused with the others
            if value == "value":
                typed = post.get(f"cellvalue:{name}", "")
                pick = {"value": _typed_value(typed, text=bool(post.get(f"celltext:{name}")))}
            given.setdefault("cells", {}).setdefault(table, {}).setdefault(key, {})[column] = pick
        elif field.startswith("schema:"):
            name = field[len("schema:") :]
            table, _, rest = name.partition(":")
            column, _, by = rest.rpartition(":")
            if by == "type":
                settled = value
            elif value.startswith("="):  # a fill by an expression, as a spreadsheet's formula is written
                settled = {"expression": value[1:].strip()}
            else:
                settled = _typed_value(value, text=bool(post.get(f"schematext:{name}")))
            schema.setdefault(table, {})[column] = {by: settled}
    for table, settled in schema.items():  # a table's schema settlements go with its choice, if one is made
        chosen = given.setdefault("tables", {}).get(table)
        given["tables"][table] = {**({"choice": chosen} if chosen else {}), "schema": settled}
    return given


def _typed_value(typed: str, *, text: bool):
    if text:
        return typed
    try:
        return json.loads(typed)
    except json.JSONDecodeError:
        return typed


@ui_view
@require_POST
def merge_request_resolve(request: HttpRequest, catalog: str, number: int) -> HttpResponse:
    found = get_catalog(request, catalog, Role.EDITOR)
    merge_request = merge_request_get(catalog=found, number=number)
    approved = set(merge_request_status(merge_request).approved_by)
    try:
        updated = merge_request_update(
            merge_request=merge_request, user=request.user, resolutions=_resolutions_from(request.POST)
        )
    except ApplicationError as error:
        _refused(request, error)
        return redirect(_page(found, number))
    dismissed = sorted(approved - set(merge_request_status(updated).approved_by))
    if dismissed:
        note = f"the approvals of {', '.join(dismissed)} are dismissed: the choice changes how a conflict merges."
    elif approved:
        note = f"the approvals of {', '.join(sorted(approved))} stay: the choice changes no conflict of the plan."
    else:
        note = "the merge plan is computed again with them."
    messages.success(request, f"Resolutions saved; {note}")
    return redirect(_page(found, number))


@ui_view
@require_POST
def merge_request_state(request: HttpRequest, catalog: str, number: int) -> HttpResponse:
    state = request.POST.get("state", "")
    return _act(
        request, catalog, number, Role.EDITOR,
        lambda mr: merge_request_update(merge_request=mr, user=request.user, state=state),
        "Merge request closed." if state == "closed" else "Merge request reopened.",
    )  # fmt: skip


@ui_view
@require_POST
def merge_request_merge_view(request: HttpRequest, catalog: str, number: int) -> HttpResponse:
    found = get_catalog(request, catalog, Role.EDITOR)
    merge_request = merge_request_get(catalog=found, number=number)
    # The override form sends a reason (an empty one is refused by the service with its message); the merge button
    # sends none.
    override = request.POST.get("override_checks")
    try:
        job = merge_request_merge(merge_request=merge_request, user=request.user, override_checks=override)
    except ApplicationError as error:
        _refused(request, error)
        return redirect(_page(found, number))
    through = " through its failed checks" if override is not None else ""
    messages.success(
        request, f"Merge of !{number} ({merge_request.source} into {merge_request.target}){through} submitted."
    )
    return redirect("frontend:job", job_id=job.id)
