"""The side-by-side diff of two refs, from the one diff report the merge uses, with each changed object's
conflict rule table and its applicable cells colored; and the merge / dry-run buttons. The page answers at once:
while primary-key tables are compared by key on a worker it shows them pending and polls the comparison's job,
then reloads."""

import json
from dataclasses import dataclass, field

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from catalog_app.models import Role
from catalog_app.selectors.access import branch_protection
from catalog_app.selectors.refs import branch_list, tag_list
from frontend.views.common import back, get_catalog, refused, ui_view, url_with
from frontend.views.jobs import job_state
from lakeui.errors import ApplicationError, NotFoundError
from merge_app.plan.rules import CONFLICT, DISCARDED, NOTES, OK, RULE_TABLES
from merge_app.selectors.merges import keys_job_get
from merge_app.services.diff_reads import merge_diff_read
from merge_app.services.merges import merge_submit

CHANGES = ("added_in_source", "added_in_target", "changed_in_source", "changed_in_target", "changed_in_both")
VERDICTS = ("ok", "conflict", "discarded", "not_merged")
# Worst first: a cell that several operation pairs hit shows the worst of their verdicts.
# A conflict a resolution settles is shown as resolved (not red): the merge goes through with the choice made.
RESOLVED = "resolved"
SEVERITY = {CONFLICT: 4, DISCARDED: 3, RESOLVED: 2, "conditional": 1, OK: 0}
CLASS_LABEL = {
    CONFLICT: "conflict",
    DISCARDED: "discarded",
    RESOLVED: "resolved",
    "conditional": "conditional",
    OK: "ok",
}


@dataclass
class Cell:
    text: str
    applies: bool = False
    shade: str = ""  # ok | conflict | conditional | discarded (when it applies)
    reasons: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return " ".join(self.reasons)


def _shade(pair: dict) -> str:
    if pair.get("resolved") and pair["verdict"] in (CONFLICT, OK):
        return RESOLVED
    if pair["verdict"] == CONFLICT:
        return CONFLICT
    if pair["verdict"] == DISCARDED:
        return DISCARDED
    return OK if pair["cell"] == OK else "conditional"


def rule_grid(kind: str, pairs: list[dict]) -> dict:
    """The rule table of an object's kind, with the cells the report's operation pairs hit marked."""
    table = RULE_TABLES[kind]
    hits: dict[tuple[str, str], list[dict]] = {}
    for pair in pairs:
        hits.setdefault((pair["row"], pair["column"]), []).append(pair)
    rows = []
    for row in table.rows:
        cells = []
        for column in table.columns:
            cell = Cell(text=table.cell(row, column) or "-")
            found = hits.get((row, column), [])
            if found:
                cell.applies = True
                cell.shade = max((_shade(p) for p in found), key=SEVERITY.__getitem__)
                cell.reasons = sorted({
                    f"{p['verdict']}{' (resolved)' if p.get('resolved') else ''} ({p['note']}): {p['reason']}"
                    for p in found
                })  # fmt: skip
            cells.append(cell)
        rows.append((row, cells))
    notes = sorted({p["note"] for p in pairs if p["note"] in NOTES} | {p["cell"] for p in pairs if p["cell"] in NOTES})
    return {"title": table.title, "columns": table.columns, "rows": rows, "notes": [(n, NOTES[n]) for n in notes]}


def distinct_pairs(pairs: list[dict]) -> list[dict]:
    """The applicable cells as listed under the rule table: identical lines once, with how many operation pairs
    they stand for (two updates against two updates are four pairs with one line)."""
    listed: dict[tuple, dict] = {}
    for pair in pairs:
        shade = _shade(pair)
        line = (pair["row"], pair["column"], pair["cell"], pair["verdict"], pair["note"], pair["reason"], shade)
        if line in listed:
            listed[line]["times"] += 1
            listed[line]["discarded_files"] = [*listed[line]["discarded_files"], *pair.get("discarded_files", [])]
        else:
            listed[line] = {
                **pair,
                "shade": shade,
                "times": 1,
                "discarded_files": list(pair.get("discarded_files", [])),
            }
    return list(listed.values())


def object_view(obj: dict, *, chosen_keys: dict | None = None, resolved: bool = False) -> dict:
    """An object of a diff report as the pages show it: its rule grid, and for a primary-key table compared by key
    its conflicting keys side by side (with the choices made per key, on a merge request)."""
    pairs = obj["pairs"]
    if resolved:
        # Every conflict of the object settled (by a table choice, or a choice for each conflicting key): the pairs
        # that conflicted, or whose condition (A1, A3, ...) the key merge decided, show as resolved, not red/amber.
        pairs = [{**p, "resolved": True} if p["verdict"] == CONFLICT or p["cell"] != OK else p for p in pairs]
    view = {**obj, "pairs": distinct_pairs(pairs), "key_rows": key_rows(obj, chosen_keys or {})}
    if obj["rule_table"]:
        view["grid"] = rule_grid(obj["rule_table"], pairs)
    return view


def key_rows(obj: dict, chosen: dict) -> list[dict]:
    """The conflicting keys of a primary-key table: per key the three versions of the row side by side, with the
    conflicting cells marked, and the choice made for the key (if any)."""
    listed = (obj.get("keys") or {}).get("listed") or []
    rows = []
    for conflict in listed:
        cells = set(conflict.get("cells") or [])
        columns = []
        for version in ("base", "source", "target"):
            for name in conflict.get(version) or {}:
                if name not in columns:
                    columns.append(name)
        sides = []
        for version in ("base", "source", "target"):
            values = conflict.get(version)
            sides.append(
                {
                    "name": version,
                    "deleted": values is None,
                    "cells": [
                        {
                            "column": c,
                            "value": "" if values is None else json.dumps(values.get(c)),
                            "conflict": version != "base" and (c in cells or "*" in cells),
                        }
                        for c in columns
                    ],
                }
            )
        rows.append(
            {"key_id": conflict["key_id"], "key": conflict["key"], "columns": columns, "sides": sides,
             "source_change": conflict.get("source_change"), "target_change": conflict.get("target_change"),
             "choice": chosen.get(conflict["key_id"], "")}
        )  # fmt: skip
    return rows


@ui_view
def diff_page(request: HttpRequest, catalog: str) -> HttpResponse:
    found = get_catalog(request, catalog)
    source, target = request.GET.get("from", "").strip(), request.GET.get("to", "").strip() or found.default_branch
    change, verdict = request.GET.get("change", ""), request.GET.get("verdict", "")
    context = {
        "catalog": found, "source": source, "target": target, "change": change, "verdict": verdict,
        "changes": CHANGES, "verdicts": VERDICTS,
        "branches": list(branch_list(catalog=found)), "tags": list(tag_list(catalog=found)),
    }  # fmt: skip
    if source:
        try:
            read = merge_diff_read(catalog=found, source=source, target=target, user=request.user)
        except ApplicationError as error:
            refused(request, error)
        else:
            report = read.as_dict()
            objects = [object_view(obj) for obj in report["objects"]]
            shown = [
                obj for obj in objects
                if (not change or obj["change"] == change) and (not verdict or obj["verdict"] == verdict)
            ]  # fmt: skip
            context.update(report=report, objects=shown, hidden=len(objects) - len(shown), keys_job=read.job)
            # A merge target must be a branch: a tag or a commit is offered no merge (the service refuses it too).
            context["target_not_branch"] = target not in {b.name for b in context["branches"]}
            # A protected target takes changes only through a merge request: the page offers that, not a merge
            # the service would refuse (`branch_protected`).
            if not context["target_not_branch"]:
                context["protection"] = branch_protection(catalog=found, branch=target)
    return render(request, "frontend/diff.html", context)


@ui_view
@require_POST
def merge_new(request: HttpRequest, catalog: str) -> HttpResponse:
    found = get_catalog(request, catalog, Role.EDITOR)
    source, target = request.POST.get("source", ""), request.POST.get("target", "")
    dry_run = request.POST.get("dry_run") == "1"
    heads = {key: request.POST.get(f"{key}_head", "") for key in ("source", "target")}
    try:
        job = merge_submit(
            catalog=found, source=source, target=target, dry_run=dry_run, user=request.user,
            expected_heads={key: head for key, head in heads.items() if head} or None,
        )  # fmt: skip
    except ApplicationError as error:
        refused(request, error)
        return back(request, url_with(reverse("frontend:diff", args=[found.name]), **{"from": source, "to": target}))
    what = "Dry run" if dry_run else "Merge"
    messages.success(request, f"{what} of {source} into {target} submitted.")
    return redirect("frontend:job", job_id=job.id)


@ui_view
def diff_job_status(request: HttpRequest, catalog: str, job_id) -> HttpResponse:
    """The key comparison job's state as JSON, for the diff page's progress bar: anyone who reads the catalog may
    follow it, whoever started it."""
    found = get_catalog(request, catalog)
    try:
        job = keys_job_get(catalog=found, job_id=job_id)
    except NotFoundError as error:
        return JsonResponse(error.as_dict(), status=404)
    return JsonResponse(job_state(job))
