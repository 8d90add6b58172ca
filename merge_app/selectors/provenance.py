"""What made a commit, for the blame of a table (docs/provenance.md): the merge, cherry-pick, revert or restore
whose audit log names it as its commit, with the merge request, its approvers and the check runs that gated it.
Read from the records those operations keep (Merge, MergeRequest, its reviews, CheckRun, Restore), registered in
MergeAppConfig.ready as catalog_app.selectors.merge_links' commit links reader: catalog_app never imports this app."""

import threading
from typing import Any

from checks_app.selectors import check_run_dict, runs_of_heads, statuses_of
from merge_app.models import Merge, MergeRequest, Restore
from merge_app.plan import semantics
from merge_app.selectors.merge_requests import merge_request_approvers
from merge_app.selectors.merges import key_conflict_rows


def commit_links(commit_ids: list[str]) -> dict[str, dict[str, Any]]:
    """For each of these commits a merge, pick, revert or restore made: what made it (see merge_links)."""
    found: dict[str, dict[str, Any]] = {}
    merges = Merge.objects.filter(commit_id__in=commit_ids).defer("report", "log").select_related("catalog")
    requests = {
        r.merge_id: r
        for r in MergeRequest.objects.filter(merge__commit_id__in=commit_ids).prefetch_related("reviews__reviewer")
    }
    for merge in merges:
        link: dict[str, Any] = {"kind": merge.kind, "source": merge.source, "target": merge.target}
        if merge.kind == Merge.Kind.CHERRY_PICK:
            link["picked_from"] = merge.source
        elif merge.kind == Merge.Kind.REVERT:
            link["reverted"] = merge.source
        request = requests.get(merge.id)
        link["merge_request"] = request.number if request is not None else None
        link["approved_by"] = (
            merge_request_approvers(merge_request=request, source_head=merge.source_head) if request is not None else []
        )
        runs = []
        if merge.kind == Merge.Kind.MERGE:  # as they ran for this pair of heads (a check changed since still shows)
            runs = [
                *runs_of_heads(catalog=merge.catalog, source_head=merge.source_head, target_head=merge.target_head),
                *statuses_of(catalog=merge.catalog, commit=merge.source_head),
            ]
        link["checks"] = [
            {k: check_run_dict(run)[k] for k in ("id", "kind", "name", "state", "advisory", "url")} for run in runs
        ]
        found[merge.commit_id] = link
    for restore in Restore.objects.filter(commit_id__in=commit_ids):
        found[restore.commit_id] = {
            "kind": "restore", "point": restore.point, "table": f"{restore.database}.{restore.table}"
            if restore.table else None, "merge_request": None, "approved_by": [], "checks": [],
        }  # fmt: skip
    return found


SETTLED_KEPT = 256  # (commit, table) pairs whose settled cells this process keeps
_settled: dict[tuple[str, str], dict[str, dict[str, dict[str, Any]]]] = {}
_settling = threading.Lock()


def cells_settled(commit_ids: list[str], table_id: str) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """For each of these commits a merge, cherry-pick or revert made with a resolution that settled conflicting keys
    of the table: {commit: {key_id: {column, or "*" for the whole row, : the settlement}}}. A settlement is the
    choice (`source_wins`, `target_wins`, a column rule), its scope (`key`, `table`, `default`, `column`), the column
    a column rule settled, and who chose it and when, as the merge's audit log records them (its `resolutions`); the
    keys come from the report the merge decided on (`objects[].keys.choices`, every conflicting key a worker's plan
    listed). Kept per process: a published merge's records never change, nor does a commit's having none."""
    found: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    with _settling:
        missing = [c for c in commit_ids if (c, table_id) not in _settled]
        found = {c: _settled[(c, table_id)] for c in commit_ids if (c, table_id) in _settled}
    read: dict[str, dict] = {c: {} for c in missing}
    if missing:
        merges = Merge.objects.filter(commit_id__in=missing, status=Merge.Status.MERGED).defer("report")
        for merge in merges:
            if merge.log.get("resolutions"):
                read[merge.commit_id] = _settled_of(merge, table_id)
    with _settling:
        for commit_id, settled in read.items():
            _settled[(commit_id, table_id)] = settled
        while len(_settled) > SETTLED_KEPT:
            _settled.pop(next(iter(_settled)))
    return {c: s for c, s in (found | read).items() if s}


def _settled_of(merge: Merge, table_id: str) -> dict[str, dict[str, dict[str, Any]]]:
    """One merge's settled keys of the table (see cells_settled)."""
    report = Merge.objects.values_list("report", flat=True).get(id=merge.id) or {}
    objects = [o for o in report.get("objects", []) if o.get("object_id") == str(table_id)]
    if not objects or not (objects[0].get("keys") or {}).get("choices"):
        return {}
    name = objects[0]["name"]
    logged = [entry for entry in merge.log.get("resolutions", []) if entry.get("object") == name]

    def chooser(**match: Any) -> dict[str, Any]:
        for entry in logged:
            if all(entry.get(k) == v for k, v in match.items()):
                return {"chosen_by": entry.get("chosen_by"), "chosen_at": entry.get("chosen_at")}
        return {"chosen_by": None, "chosen_at": None}

    compared = key_conflict_rows(
        table_id=table_id, base=merge.base, source_head=merge.source_head, target_head=merge.target_head
    ).values_list("key_id", "conflict__cells")
    conflicting = {key_id: cells or ["*"] for key_id, cells in compared}
    settled: dict[str, dict[str, dict[str, Any]]] = {}
    for choice in objects[0]["keys"]["choices"]:
        key_id = choice["key_id"]
        if choice.get("cells"):  # column rules: each conflicting cell its rule (or the table's or default choice)
            settled[key_id] = {
                column: {"merge": merge.commit_id, "choice": cell["rule"], "scope": cell["scope"], "column": column,
                         **chooser(scope=cell["scope"], column=column, choice=cell["rule"],
                                   **({"key_id": key_id} if cell["rule"] == semantics.PICK else {}))}
                for column, cell in choice["cells"].items()
            }  # fmt: skip
        else:  # the key's conflicting cells (every cell: "*"), by its own choice, the table's or the default
            entry = {"merge": merge.commit_id, "choice": choice["choice"], "scope": choice["scope"], "column": None,
                     **chooser(scope=choice["scope"], key_id=key_id)}  # fmt: skip
            settled[key_id] = dict.fromkeys(conflicting.get(key_id, ["*"]), entry)
    return settled
