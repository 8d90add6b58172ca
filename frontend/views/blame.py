"""Who wrote the values a ref holds (docs/provenance.md), as pages: a table's blame (its rows a page at a time, each
cell with the commit that wrote it and the chain of merges and picks that brought it, every step a link), and the
history of one key. Both read through the selectors the API calls."""

import json
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from catalog_app.selectors.blame import key_history, table_blame
from checks_app.selectors import check_rules_of_runs
from frontend.views.common import get_catalog, page_number, ref_context, ui_view
from lakeui.errors import ApplicationError

PAGE_SIZE = 20  # as the table page's rows


def key_json(key: dict | list) -> str:
    """A key as the blame takes it: a JSON array of the key's values in the key's column order."""
    return json.dumps(list(key.values()) if isinstance(key, dict) else key, default=str)


def key_url(name: str, catalog: str, database: str, table: str, *, ref: str, key: dict | list, at: str = "") -> str:
    """The blame (`frontend:table-blame`) or a key's history (`frontend:table-key-history`) of one key at a ref."""
    params = {"ref": ref, "key": key_json(key)}
    if at:
        params["at"] = at
    return f"{reverse(name, args=[catalog, database, table])}?{urlencode(params)}"


def _steps(commits: dict[str, dict], catalog: str) -> dict[str, dict]:
    """Each commit the answer names, as the pages show it: its description, its page, its merge request's page and
    its checks each with a link (a SQL check run: its check's page; an external status: the URL it posted)."""
    runs = [c["id"] for commit in commits.values() for c in commit.get("checks") or [] if c.get("kind") == "sql"]
    rules = check_rules_of_runs(run_ids=runs)
    shown = {}
    for commit_id, commit in commits.items():
        checks = []
        for check in commit.get("checks") or []:
            rule = rules.get(str(check["id"]))
            url = reverse("frontend:check", args=[catalog, rule]) if rule else check.get("url")
            checks.append({**check, "link": url, "external": not rule})
        number = commit.get("merge_request")
        shown[commit_id] = {
            **commit, "short": commit_id[:12], "url": reverse("frontend:commit", args=[catalog, commit_id]),
            "request_url": reverse("frontend:merge-request", args=[catalog, number]) if number else None,
            "checks": checks, "when": (commit.get("created_at") or "")[:19].replace("T", " "),
        }  # fmt: skip
    return shown


def _writer(cell: dict, steps: dict[str, dict]) -> dict:
    """One cell's (or row's) writer: the commit, the chain of steps from it to the ref, and a one-line text for the
    tooltip."""
    commit = steps.get(cell.get("commit") or "")
    chain = [steps[c] for c in cell.get("chain") or [] if c in steps]
    if commit is None:
        return {"commit": None, "chain": [], "resolution": False, "text": "no commit found"}
    text = f"{commit['kind']} {commit['short']} by {commit['author'] or 'no one'}"
    text += f" on {commit['branch']}" if commit["branch"] else ""
    text += f", {commit['when']}"
    for step in chain:
        text += f"; then {step['kind']} {step['short']}" + (f" (!{step['merge_request']})" if step.get(
            "merge_request") else "")  # fmt: skip
    if cell.get("resolution"):
        text += "; a resolution of the merge made this value"
    return {"commit": commit, "chain": chain, "resolution": bool(cell.get("resolution")), "text": text}


def _settlement(settled: dict | None, steps: dict[str, dict]) -> dict | None:
    """A resolution as the pages show it: its choice (a column rule's as JSON), scope, merge (a step, linked) and who
    chose it."""
    if not settled:
        return None
    choice = settled["choice"] if isinstance(settled["choice"], str) else json.dumps(settled["choice"])
    scope = settled["scope"] + (f" {settled['column']}" if settled.get("column") else "")
    return {
        "choice": choice,
        "scope": scope,
        "merge": steps.get(settled["merge"]),
        "chosen_by": settled.get("chosen_by"),
    }


@ui_view
def table_blame_page(request: HttpRequest, catalog: str, database: str, table: str) -> HttpResponse:
    """A page of the table's rows at the ref (a keyed table's by key), each cell with who wrote it (a table without
    a key: each row); `key` shows that key alone."""
    found = get_catalog(request, catalog)
    ref = ref_context(request, found)
    page = page_number(request)
    key = (request.GET.get("key") or "").strip() or None
    fragment = bool(request.GET.get("fragment"))  # the blame table alone, for a page's script (a refusal in it)
    try:
        blame = table_blame(resolved=ref.resolved, database=database, table=table, page=page, page_size=PAGE_SIZE,
                            key=key)  # fmt: skip
    except ApplicationError as error:
        if not fragment:
            raise
        return render(request, "frontend/blame_fragment.html", {"error": error})
    steps = _steps(blame.commits, found.name)
    names = [c["name"] for c in blame.table["columns"]]
    rows = []
    for result in blame.results:
        if result["key"] is not None:
            cells = [{"name": n, "value": result["row"][n], **_writer(result["cells"][n], steps)} for n in names]
            groups: dict[tuple, dict] = {}  # the row's panel: cells written alike listed together
            for n in names:
                c = result["cells"][n]
                group = groups.setdefault((c["commit"], tuple(c["chain"]), c["resolution"]), {"columns": []})
                group["columns"].append(n)
                group["writer"] = _writer(c, steps)
            history = key_url("frontend:table-key-history", found.name, database, table, ref=ref.ref,
                              key=result["key"], at=ref.at_text)  # fmt: skip
            rows.append({"key": result["key"], "key_text": key_json(result["key"]), "cells": cells,
                         "groups": list(groups.values()), "history": history})  # fmt: skip
        else:
            writer = _writer(result, steps)
            cells = [{"name": n, "value": result["row"][n]} for n in names]
            rows.append({"key": None, "cells": cells, "groups": [{"columns": names, "writer": writer}],
                         "writer": writer})  # fmt: skip
    pages = max(1, -(-blame.count // PAGE_SIZE))
    base = reverse("frontend:table-blame", args=[found.name, database, table])
    query = {"ref": ref.ref, **({"at": ref.at_text} if ref.at_text else {})}
    context = {
        "catalog": found, "ref": ref, "database": database, "table": table, "blame": blame, "names": names,
        "rows": rows, "key": key, "page": page, "pages": pages, "first_row": (page - 1) * PAGE_SIZE + 1,
        "previous": f"{base}?{urlencode({**query, 'page': page - 1})}" if page > 1 and not key else None,
        "next": f"{base}?{urlencode({**query, 'page': page + 1})}" if page < pages and not key else None,
        "all_rows": f"{base}?{urlencode(query)}",
    }  # fmt: skip
    return render(request, "frontend/blame_fragment.html" if fragment else "frontend/blame.html", context)


@ui_view
def table_key_history_page(request: HttpRequest, catalog: str, database: str, table: str) -> HttpResponse:
    """Every version of one key at the ref, newest first, each with the commit and the merge or pick that made it."""
    found = get_catalog(request, catalog)
    ref = ref_context(request, found)
    answer = key_history(resolved=ref.resolved, database=database, table=table, key=request.GET.get("key", ""))
    steps = _steps(answer["commits"], found.name)
    names = [c["name"] for c in answer["table"]["columns"]]
    versions = [
        {"change": v["change"], "changed": v["changed"], "writer": _writer(v, steps),
         "cells": [{"name": n, "value": (v["row"] or {}).get(n), "changed": n in v["changed"]} for n in names],
         "settled": _settlement(v["settled_by"], steps), "kept": [_settlement(k, steps) for k in v["kept_by"]]}
        for v in answer["versions"]
    ]  # fmt: skip
    context = {
        "catalog": found, "ref": ref, "database": database, "table": table, "names": names, "versions": versions,
        "key": answer["key"],
        "blame": key_url("frontend:table-blame", found.name, database, table, ref=ref.ref, key=answer["key"],
                         at=ref.at_text),
    }  # fmt: skip
    return render(request, "frontend/key_history.html", context)
