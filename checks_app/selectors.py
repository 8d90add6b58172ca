"""Reading checks and their runs, and what they say of a merge."""

import fnmatch
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from catalog_app.models import Catalog
from checks_app.models import Check, CheckRun
from lakeui.errors import NotFoundError


def check_list(*, catalog: Catalog) -> QuerySet[Check]:
    return Check.objects.filter(catalog=catalog).select_related("created_by")


def check_get(*, catalog: Catalog, check_id: int) -> Check:
    check = check_list(catalog=catalog).filter(id=check_id).first()
    if check is None:
        raise NotFoundError("check_not_found", f"There is no check {check_id} in catalog {catalog.name!r}.")
    return check


def checks_guarding(*, catalog: Catalog, branch: str) -> list[Check]:
    """The SQL checks a merge into `branch` must pass: those whose pattern matches it."""
    return [check for check in check_list(catalog=catalog) if fnmatch.fnmatchcase(branch, check.branches)]


def runs_of_merge(*, catalog: Catalog, source_head: str, target_head: str) -> list[CheckRun]:
    """The newest run of each SQL check on the merge of these two heads (the checks as they are now: a run of an
    older version of a check, or of a check since deleted, does not count)."""
    runs = CheckRun.objects.filter(
        catalog=catalog, kind=CheckRun.Kind.SQL, source_head=source_head, target_head=target_head
    ).select_related("check_rule")
    newest: dict[int, CheckRun] = {}
    for run in runs.order_by("created_at"):
        if run.check_rule is not None and run.check_version == run.check_rule.version:
            newest[run.check_rule_id] = run
    return sorted(newest.values(), key=lambda run: run.name)


def runs_of_heads(*, catalog: Catalog, source_head: str, target_head: str) -> list[CheckRun]:
    """The newest run of each SQL check, by name, on the merge of these two heads, as they ran (a check changed or
    deleted since still shows): what gated a merge made of them (docs/provenance.md)."""
    newest: dict[str, CheckRun] = {}
    runs = CheckRun.objects.filter(
        catalog=catalog, kind=CheckRun.Kind.SQL, source_head=source_head, target_head=target_head
    )
    for run in runs.order_by("created_at"):
        newest[run.name] = run
    return sorted(newest.values(), key=lambda run: run.name)


def statuses_of(*, catalog: Catalog, commit: str) -> list[CheckRun]:
    """The external statuses posted for a commit, the newest of each name."""
    newest: dict[str, CheckRun] = {}
    for run in CheckRun.objects.filter(catalog=catalog, kind=CheckRun.Kind.EXTERNAL, commit=commit).order_by(
        "created_at"
    ):
        newest[run.name] = run
    return sorted(newest.values(), key=lambda run: run.name)


def check_runs(*, check: Check) -> QuerySet[CheckRun]:
    return CheckRun.objects.filter(check_rule=check).select_related("created_by")


def check_run_get(*, catalog: Catalog, run_id: object) -> CheckRun:
    run = CheckRun.objects.filter(catalog=catalog, id=run_id).first()
    if run is None:
        raise NotFoundError("check_run_not_found", f"There is no check run {run_id} in catalog {catalog.name!r}.")
    return run


def check_rules_of_runs(*, run_ids: list[str]) -> dict[str, int]:
    """The check each of these SQL check runs ran (run id -> check id), for a link to the check's page; a run of a
    check deleted since is left out."""
    runs = CheckRun.objects.filter(id__in=run_ids, check_rule__isnull=False).values_list("id", "check_rule_id")
    return {str(run_id): rule_id for run_id, rule_id in runs}


def check_runs_of_job(job) -> list[CheckRun]:
    return list(CheckRun.objects.filter(job=job).order_by("name"))


def check_run_dict(run: CheckRun, *, rows: bool = False) -> dict[str, Any]:
    """A run as the API, the audit log and `check.finished` show it (its failing rows only when asked)."""
    answer = {
        "id": str(run.id), "kind": run.kind, "check": run.check_rule_id, "name": run.name, "state": run.state,
        "advisory": run.advisory, "commit": run.commit, "source_head": run.source_head or None,
        "target_head": run.target_head or None, "row_count": run.row_count, "message": run.message,
        "url": run.url or None, "description": run.description, "duration_ms": run.duration_ms,
        "reused_from": str(run.reused_from_id) if run.reused_from_id else None,
        "created_at": run.created_at.isoformat() if run.created_at else None,
    }  # fmt: skip
    if rows:
        answer |= {"columns": run.columns, "failing_rows": run.failing_rows}
    return answer


# --- the verdict of a merge's checks ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ChecksVerdict:
    """What the checks say of one merge: the SQL checks that failed (not advisory) and the required external
    checks that failed or have not succeeded yet."""

    runs: list[CheckRun] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failed and not self.pending


def checks_verdict(*, runs: list[CheckRun], statuses: list[CheckRun] = (), required: list[str] = ()) -> ChecksVerdict:
    failed = [run.name for run in runs if not run.advisory and run.state in ("failure", "error")]
    by_name = {status.name: status for status in statuses}
    pending = []
    for name in required:
        status = by_name.get(name)
        if status is not None and status.state in ("failure", "error"):
            failed.append(name)
        elif status is None or status.state != "success":
            pending.append(name)
    return ChecksVerdict(runs=[*runs, *statuses], failed=failed, pending=pending)
