"""A merge's audit log (`Merge`, docs/merge-semantics.md#the-audit-log), what a merge job answers from it, and the
refusal a conflicting merge answers with, shaped from its log (again, for a job delivered twice)."""

from typing import Any

from catalog_app.services.commits import rows_insert
from lakeui.errors import ConflictError
from merge_app.models import Merge
from merge_app.selectors.diff import MergeDiff, diff_as_dict

MESSAGE_CONFLICT = "The merge of {source!r} into {target!r} has {count} conflicting object(s); nothing was merged."


def merge_log(diff: MergeDiff, *, status, user, job, dry_run=False, commit=None, log=None, timings=None) -> Merge:
    """Write a merge's audit log (`merge_log_row`)."""
    return merge_log_write(merge_log_row(diff, status=status, user=user, job=job, dry_run=dry_run, commit=commit,
                                         log=log, timings=timings))  # fmt: skip


def merge_log_write(merge: Merge) -> Merge:
    # With COPY even as one row: the log of a merge of 10,000 tables is 13 MB of JSON, which an INSERT sends quoted
    # into its text for the server to parse again (0.3-0.6 s, against 0.05 s).
    rows_insert(Merge, [merge], copy_from=1)
    return merge


def merge_log_row(diff: MergeDiff, *, status, user, job, dry_run=False, commit=None, log=None, timings=None) -> Merge:
    """A merge's audit log, not written yet: made without the database (a merge commit writes it with its own rows,
    `CommitDraft.commit`'s `also`)."""
    kind = diff.explicit.kind if diff.explicit else Merge.Kind.MERGE
    return Merge(
        kind=kind, catalog=diff.catalog, source=diff.source, target=diff.target, source_head=diff.source_head.id,
        target_head=diff.target_head.id, base=diff.base.id, commit=commit, dry_run=dry_run, status=status,
        requested_by=user if user is not None and user.is_authenticated else None, job=job,
        report=diff_as_dict(diff), log=log or {}, timings=timings or {},
    )  # fmt: skip


def merge_result(merge: Merge) -> dict[str, Any]:
    """What a merge job returns."""
    return {
        "merge": str(merge.id),
        "status": merge.status,
        "commit": merge.commit_id,
        "dry_run": merge.dry_run,
        "mergeable": merge.report.get("mergeable"),
        "counts": merge.report.get("counts"),
    }


def merge_conflict_error(merge: Merge) -> ConflictError:
    conflicts = [
        {"kind": obj["kind"], "name": obj["name"], "conflicts": _conflicts_of(obj)}
        for obj in merge.report["objects"]
        if obj["verdict"] == "conflict"
    ]
    message = MESSAGE_CONFLICT.format(source=merge.source, target=merge.target, count=len(conflicts))
    return ConflictError("merge_conflict", message, details={"merge": str(merge.id), "conflicts": conflicts})


def _conflicts_of(obj: dict) -> list[dict]:
    unresolved = [pair for pair in obj["pairs"] if pair["verdict"] == "conflict" and not pair.get("resolved")]
    return [*obj["conflicts"], *unresolved]
