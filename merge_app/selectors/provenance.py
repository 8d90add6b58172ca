"""What made a commit, for the blame of a table (docs/provenance.md): the merge, cherry-pick, revert or restore
whose audit log names it as its commit, with the merge request, its approvers and the check runs that gated it.
Read from the records those operations keep (Merge, MergeRequest, its reviews, CheckRun, Restore), registered in
MergeAppConfig.ready as catalog_app.selectors.merge_links' commit links reader: catalog_app never imports this app."""

from typing import Any

from checks_app.selectors import check_run_dict, runs_of_heads, statuses_of
from merge_app.models import Merge, MergeRequest, Restore
from merge_app.selectors.merge_requests import merge_request_approvers


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
