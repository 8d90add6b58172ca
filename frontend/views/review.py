"""What a reviewer reads: the changed rows of a table between two refs (a fragment the diff, merge request, compare
and commit pages load per table when it is opened), the Compare page of any two refs, and the commit page."""

import json
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from catalog_app.models import Role
from catalog_app.selectors.commits import commit_detail
from catalog_app.selectors.refs import branch_list, ref_resolve, tag_list
from catalog_app.services.table_diff import PAGE_SIZE, table_diff_read, tables_changed
from frontend.views.blame import key_url
from frontend.views.common import get_catalog, page_number, refused, ui_view, url_with
from lakeui.errors import ApplicationError
from lakeui.jobs.services import read_is_pending
from merge_app.selectors.graph import branches_with_commit
from merge_app.selectors.merges import merge_of_commit
from merge_app.services.picks import pick_submit

CHANGE_LABEL = {"insert": "added", "delete": "deleted", "update": "changed"}


def rows_url(catalog: str, *, source: str, target: str, table_id: str, page: int = 1) -> str:
    """The fragment of a table's changed rows from `source` to `target` (refs or commit ids)."""
    query = urlencode({"from": source, "to": target, "table_id": table_id, "page": page, "fragment": 1})
    return f"{reverse('frontend:diff-rows', args=[catalog])}?{query}"


def shown_rows(result: dict) -> list[dict]:
    """Each changed row as the fragment shows it: per column the value, or old -> new for a changed cell."""
    names = [c["name"] for c in result["columns"]]
    shown = []
    for row in result["rows"]:
        cells = []
        for i, name in enumerate(names):
            before = None if row["before"] is None else row["before"][i]
            after = None if row["after"] is None else row["after"][i]
            cells.append({"before": before, "after": after, "changed": name in row["cells"]})
        shown.append({"change": row["change"], "label": CHANGE_LABEL[row["change"]], "cells": cells})
    return shown


@ui_view
def diff_rows(request: HttpRequest, catalog: str) -> HttpResponse:
    """A page of one table's changed rows between two refs; with `fragment=1` only the table (for the script)."""
    found = get_catalog(request, catalog)
    source, target = request.GET.get("from", "").strip(), request.GET.get("to", "").strip()
    table_id, table = request.GET.get("table_id", "").strip(), request.GET.get("table", "").strip()
    database, _, name = table.partition(".")
    page = page_number(request)
    # `blame_at`: a ref (a merge request's target) whose blame of each changed key the rows link to.
    blame_at = request.GET.get("blame_at", "").strip()
    context = {"catalog": found, "source": source, "target": target, "blame_at": blame_at}
    try:
        result = table_diff_read(
            source=ref_resolve(catalog=found, ref=source), target=ref_resolve(catalog=found, ref=target),
            database=database, table=name, table_id=table_id, user=request.user, page=page, page_size=PAGE_SIZE,
        )  # fmt: skip
    except ApplicationError as error:
        context["error"] = error
    else:
        _shown(context, result, source=source, target=target, page=page)
    template = "frontend/_row_diff.html" if request.GET.get("fragment") else "frontend/row_diff.html"
    return render(request, template, context)


def _shown(context: dict, result: dict, *, source: str, target: str, page: int) -> None:
    """The page of changed rows, or the worker's job reading it (the page or the script reads again once it has
    finished)."""
    if read_is_pending(result):
        context["reading"] = result["job"]
        return
    found = context["catalog"]
    pages = {
        n: rows_url(found.name, source=source, target=target, table_id=result["table_id"], page=n)
        for n in (page - 1, page + 1) if 1 <= n <= result["pages"]
    }  # fmt: skip
    rows = shown_rows(result)
    if context.get("blame_at") and result["primary_key"]:
        _blame_links(context, result, rows)
    pages = {n: url + (f"&{urlencode({'blame_at': context['blame_at']})}" if context.get("blame_at") else "")
             for n, url in pages.items()}  # fmt: skip
    context.update(result=result, rows=rows, previous=pages.get(page - 1), next=pages.get(page + 1))


def _blame_links(context: dict, result: dict, rows: list[dict]) -> None:
    """Each changed row's key linked to its blame at `blame_at` (who wrote the value that ref holds now), and the
    key's history there: the provenance of the target's value beside the incoming one."""
    database, _, table = result["table"].partition(".")
    names = [c["name"] for c in result["columns"]]
    places = [names.index(k) for k in result["primary_key"]]
    for row, listed in zip(rows, result["rows"], strict=True):
        values = listed["after"] if listed["after"] is not None else listed["before"]
        key = [values[i] for i in places]
        row["blame"] = key_url("frontend:table-blame", context["catalog"].name, database, table,
                               ref=context["blame_at"], key=key)  # fmt: skip
        row["history"] = key_url("frontend:table-key-history", context["catalog"].name, database, table,
                                 ref=context["blame_at"], key=key)  # fmt: skip


def _refs(found) -> dict:
    return {"branches": list(branch_list(catalog=found)), "tags": list(tag_list(catalog=found))}


@ui_view
def compare_page(request: HttpRequest, catalog: str) -> HttpResponse:
    """Any two refs (branches, tags, commit ids), every changed table; each table's rows load when it is opened."""
    found = get_catalog(request, catalog)
    source = request.GET.get("from", "").strip()
    target = request.GET.get("to", "").strip() or found.default_branch
    context = {"catalog": found, "source": source, "target": target, **_refs(found)}
    if source:
        try:
            source_ref, target_ref = ref_resolve(catalog=found, ref=source), ref_resolve(catalog=found, ref=target)
            tables = tables_changed(source=source_ref, target=target_ref)
        except ApplicationError as error:
            context["error"] = error
        else:
            for table in tables:
                table["rows_url"] = rows_url(
                    found.name, source=source_ref.commit.id, target=target_ref.commit.id, table_id=table["table_id"]
                )
            context.update(source_ref=source_ref, target_ref=target_ref, tables=tables)
    return render(request, "frontend/compare.html", context)


VALUES = ("base", "source", "target", "result")  # a settled cell's values, as the audit log keeps them


def _rule_name(choice) -> str:
    """A resolution's rule as the pages name it: a choice, `concat ' / '`, the expression's text, a type or a fill."""
    if isinstance(choice, str):
        return choice
    if "expression" in choice:
        return f"expression {choice['expression']}"
    if "concat" in choice:
        return f"concat {json.dumps(choice['concat'].get('separator', ' | '))}"
    return ", ".join(f"{k} {json.dumps(v)}" for k, v in choice.items())


def _settled_rows(log: dict) -> list[dict]:
    """The cells a merge's resolutions settled, as its audit log keeps them: each pick, the sample each column rule
    kept (with how many cells it settled), each schema settlement."""
    rows = []
    for entry in log.get("resolutions", []):
        base = {"table": entry.get("object"), "column": entry.get("column"), "by": entry.get("chosen_by"),
                "rule": _rule_name(entry.get("choice"))}  # fmt: skip
        if entry.get("scope") == "cell":
            rows.append({**base, "key": entry["key"], **{k: json.dumps(entry.get(k)) for k in VALUES}})
        elif entry.get("scope") == "schema":
            rows.append({**base, "key": None, "rule": f"schema: {base['rule']}"})
        elif "sample" in entry:
            for cell in entry["sample"]:
                rule = f"{base['rule']} ({entry['cells']} cells)"
                rows.append({**base, "key": cell["key"], "rule": rule, **{k: json.dumps(cell.get(k)) for k in VALUES}})
    return rows


@ui_view
def commit_page(request: HttpRequest, catalog: str, commit_id: str) -> HttpResponse:
    found = get_catalog(request, catalog)
    detail = commit_detail(catalog=found, commit_id=commit_id)
    commit = detail.commit
    tables = [
        {"name": op.object_name, "table_id": str(op.object_id),
         "rows_url": rows_url(found.name, source=commit.parent_id, target=commit.id, table_id=str(op.object_id))
         if commit.parent_id else None}
        for op in detail.tables
    ]  # fmt: skip
    merge = merge_of_commit(commit=commit)
    context = {
        "catalog": found, "detail": detail, "commit": commit, "tables": tables, "merge": merge,
        "settled": _settled_rows(merge.log) if merge is not None else [],
    }  # fmt: skip
    if commit.parent_id:  # a revert needs a branch that has the commit, a cherry-pick one that has not
        context["revert_branches"], context["pick_branches"] = branches_with_commit(catalog=found, commit_id=commit.id)
    return render(request, "frontend/commit.html", context)


@ui_view
@require_POST
def commit_pick(request: HttpRequest, catalog: str, commit_id: str) -> HttpResponse:
    """The commit page's and the log's buttons: revert the commit on a branch, or cherry-pick it onto one (a job)."""
    found = get_catalog(request, catalog, Role.EDITOR)
    kind, branch = request.POST.get("kind", ""), request.POST.get("branch", "")
    try:
        job = pick_submit(catalog=found, kind=kind, branch=branch, commit=commit_id, user=request.user)
    except ApplicationError as error:
        refused(request, error)
        back = url_with(reverse("frontend:log", args=[found.name]), ref=branch) if request.POST.get("back") else None
        return redirect(back or reverse("frontend:commit", args=[found.name, commit_id]))
    verb = "Revert" if kind == "revert" else "Cherry-pick"
    messages.success(request, f"{verb} of {commit_id[:12]} on branch {branch} submitted.")
    return redirect("frontend:job", job_id=job.id)
