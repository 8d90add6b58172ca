"""Reading merge requests: the plan made from a dry run's report, and what stands between a request and its merge.

Approvals count only for the source head they were given on (a new source commit dismisses them even before the
dismissal is written down), a reviewer's latest review is the one that counts, and an author's approval never
counts. The plan is a dry run with the request's resolutions, so the merge engine itself says which conflicts they
settle (a table's choice settles its conflicts, the default those between two data operations, keys per key);
a plan made with other resolutions than the request's current ones is stale.

Reading a request changes nothing: when a head moved since its plan, the status says so (`moved`, the blocker
`plan_stale`) and the job workers' upkeep plans it again within seconds (services/merge_requests.py
`merge_requests_follow_heads`); a read never asks for the plan itself.
"""

from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from catalog_app.models import Catalog, ObjectKind
from catalog_app.selectors.access import branch_protection
from catalog_app.selectors.refs import branch_heads
from checks_app.selectors import ChecksVerdict, check_run_dict, checks_verdict, runs_of_merge, statuses_of
from lakeui.errors import NotFoundError
from merge_app.models import KeyConflict, MergeRequest, MergeRequestEvent, MergeRequestReview
from merge_app.plan import semantics
from merge_app.plan.resolutions import resolution_check
from merge_app.selectors.merges import key_conflict_rows


def merge_request_list(*, catalog: Catalog, state: str | None = None) -> QuerySet[MergeRequest]:
    requests = MergeRequest.objects.filter(catalog=catalog).select_related("author", "merged_by")
    return requests.filter(state=state) if state else requests


def merge_request_get(*, catalog: Catalog, number: int) -> MergeRequest:
    found = (
        MergeRequest.objects.filter(catalog=catalog, number=number)
        .select_related("catalog", "author", "merged_by", "merge", "plan_job", "merge_job")
        .first()
    )
    if found is None:
        raise NotFoundError("merge_request_not_found", f"There is no merge request {number} in {catalog.name!r}.")
    return found


def merge_request_reviews(merge_request: MergeRequest) -> QuerySet[MergeRequestReview]:
    """A request's reviews, oldest first."""
    return merge_request.reviews.select_related("reviewer")


def merge_request_events(merge_request: MergeRequest) -> QuerySet[MergeRequestEvent]:
    """A request's timeline, oldest first."""
    return merge_request.events.select_related("actor")


def merge_request_by_id(merge_request_id: object) -> MergeRequest:
    """The request a job's params name."""
    return MergeRequest.objects.get(id=merge_request_id)


def merge_request_approvers(*, merge_request: MergeRequest, source_head: str) -> list[str]:
    """Who approved the request on `source_head` (the head a merge of it merged); its reviews as prefetched, if they
    were (`reviews__reviewer`)."""
    reviews = list(merge_request.reviews.all())
    return review_effective(reviews, source_head=source_head, author_id=merge_request.author_id)[0]


def merge_request_heads(merge_request: MergeRequest, known: dict[str, str] | None = None) -> dict[str, str | None]:
    """The current heads of the request's branches (None for a branch that no longer exists); `known`: its catalog's
    branch heads by name, read already (for many requests at once)."""
    names = [merge_request.source, merge_request.target]
    heads = known if known is not None else branch_heads(catalog_id=merge_request.catalog_id, names=names)
    return {"source": heads.get(merge_request.source), "target": heads.get(merge_request.target)}


def report_plan(report: dict[str, Any]) -> dict[str, Any]:
    """The merge plan of a dry run's report (merge_app/selectors/diff.py `diff_as_dict`): per object the operations
    of each side and the verdicts with their rule cells, the conflicts, and per table the rows the merge is expected
    to insert, update and delete (the row counts of the source operations it would replay; operations a verdict
    discards are left out)."""
    objects, conflicts, rows = [], [], {}
    for obj in report.get("objects", []):
        obj = {**obj, "keys": _keys_kept(obj.get("keys"))}
        discarded = {pair["source"] for pair in obj["pairs"] if pair["verdict"] == "discarded"}
        replayed = [op for index, op in enumerate(obj["source_operations"]) if index not in discarded]
        object_conflicts = [*obj["conflicts"], *(pair for pair in obj["pairs"] if pair["verdict"] == "conflict")]
        objects.append(
            {
                "kind": obj["kind"],
                "object_id": obj["object_id"],
                "name": obj["name"],
                "change": obj["change"],
                "verdict": obj["verdict"],
                "rule_table": obj["rule_table"],
                "source_operations": obj["source_operations"],
                "target_operations": obj["target_operations"],
                "pairs": obj["pairs"],
                "conflicts": obj["conflicts"],
                "resolution": obj.get("resolution"),
                "keys": obj.get("keys"),
            }
        )
        key_conflicts = (obj.get("keys") or {}).get("conflicts", 0)
        if obj["verdict"] == "conflict" or object_conflicts or key_conflicts:
            conflicts.append(
                {"kind": obj["kind"], "name": obj["name"], "resolved": obj["verdict"] not in ("conflict", "pending"),
                 "resolution": obj.get("resolution"), "keys": obj.get("keys"), "conflicts": object_conflicts}
            )  # fmt: skip
        if obj["kind"] == ObjectKind.TABLE:
            rows[obj["name"]] = {
                what: sum(int(op["details"].get(f"rows_{what}", 0) or 0) for op in replayed)
                for what in ("inserted", "updated", "deleted")
            }
    return {
        "merge": None,
        "mergeable": report.get("mergeable"),
        "up_to_date": report.get("up_to_date"),
        "base": report.get("base"),
        "heads": {"source": report["source"]["head"], "target": report["target"]["head"]},
        "counts": report.get("counts"),
        "objects": objects,
        "conflicts": conflicts,
        "rows": rows,
    }


def _keys_kept(keys: dict | None) -> dict | None:
    """A table's key comparison as the request keeps it in its plan: the choices of the keys listed only (a plan of
    100,000 conflicting keys would otherwise hold each one's settled cells; the preview computes a page's again,
    `resolution_preview`)."""
    if not keys:
        return keys
    listed = {conflict["key_id"] for conflict in keys.get("listed", [])}
    return {**keys, "choices": [choice for choice in keys.get("choices", []) if choice["key_id"] in listed]}


def _comparison(merge_request: MergeRequest, table: str) -> tuple[dict | None, QuerySet]:
    """A primary-key table's object in the request's plan (None if the plan merges no such table) and the conflicts
    of its stored key comparison at the plan's heads, in order."""
    plan = merge_request.plan or {}
    obj = next((o for o in plan.get("objects", []) if o["name"] == table and o.get("keys")), None)
    if obj is None:
        return None, KeyConflict.objects.none()
    found = key_conflict_rows(table_id=obj["object_id"], base=plan["base"], source_head=plan["heads"]["source"],
                              target_head=plan["heads"]["target"])  # fmt: skip
    return obj, found


def plan_key_conflict(merge_request: MergeRequest, table: str, key_id: str) -> dict | None:
    """One conflicting key of a primary-key table at the plan's heads, as the key comparison stored it (key, key_id,
    base, source, target, cells); None if it is not in conflict there."""
    return _comparison(merge_request, table)[1].filter(key_id=key_id).values_list("conflict", flat=True).first()


def resolution_preview(merge_request: MergeRequest, *, table: str, offset: int, limit: int) -> dict[str, Any]:
    """A page of the table's conflicting keys as the plan settles them: per key its three rows, and per
    conflicting cell the base, source and target values, the result and the rule that made it (`stands`: none
    settles it; a stale pick names itself). The page's keys are settled again by the plan's own function
    (`semantics.key_choices`) with the plan's resolution and columns: the merge writes exactly these."""
    obj, found = _comparison(merge_request, table)
    if obj is None:
        raise NotFoundError("table_not_in_conflict", f"The request's plan has no conflicting keys in {table!r}.",
                            details={"table": table})  # fmt: skip
    keys = obj["keys"]
    # positions run 0..n-1 in order: a page is a range of them, read through the index wherever it lies
    page = found.filter(position__gte=offset, position__lt=offset + limit)
    conflicts, listed = list(page.values_list("conflict", flat=True)), keys["conflicts"]  # the comparison's count
    resolution = resolution_check(merge_request.plan.get("resolution") or {})
    decided = semantics.key_choices(
        conflicts, table=table, per_key=resolution.get("keys", {}).get(table, {}),
        rules=resolution.get("columns", {}).get(table, {}), types=keys.get("types", {}),
        not_null=frozenset(keys.get("not_null", [])), picks=resolution.get("cells", {}).get(table, {}),
        **semantics.choices_of(resolution, table),
    )  # fmt: skip
    choices = {choice["key_id"]: choice for choice in decided}
    stale = {(s["key_id"], s["column"]): s for s in keys.get("stale_picks", [])}
    page = []
    for conflict in conflicts:
        choice = choices.get(conflict["key_id"])
        cells = {}
        for column in conflict["cells"]:
            inputs = {row: None if conflict[row] is None else conflict[row].get(column)
                      for row in semantics.ROWS} if column != "*" else {}  # fmt: skip
            settled = (choice or {}).get("cells", {}).get(column)
            if settled is not None:
                cells[column] = {**inputs, "result": settled["result"], "rule": settled["rule"],
                                 "scope": settled["scope"], "by": settled.get("by")}  # fmt: skip
            elif choice is not None:  # the whole key by one choice
                side = "source" if choice["choice"] == "source_wins" else "target"
                cells[column] = {**inputs, "result": inputs.get(side), "rule": choice["choice"],
                                 "scope": choice["scope"], "by": None}  # fmt: skip
            else:
                stale_pick = (stale.get((conflict["key_id"], column)) or {}).get("reason")
                cells[column] = {**inputs, "result": None, "rule": "stands", "scope": None, "by": None,
                                 "stale_pick": stale_pick}  # fmt: skip
        page.append({"key": conflict["key"], "key_id": conflict["key_id"], "source_change": conflict["source_change"],
                     "target_change": conflict["target_change"], "base": conflict["base"],
                     "source": conflict["source"], "target": conflict["target"], "settled": choice is not None,
                     "cells": cells})  # fmt: skip
    return {"table": table, "count": listed, "offset": offset, "limit": limit, "keys": page,
            "unresolved": keys.get("unresolved", 0), "stale_picks": keys.get("stale_picks", [])}  # fmt: skip


def resolution_of(merge_request: MergeRequest) -> dict[str, Any]:
    """The request's resolutions as the merge engine takes them (`resolution_check`'s shape)."""
    chosen = merge_request.resolutions or {}
    resolution = {
        "default": chosen.get("default", "fail"),
        "tables": chosen.get("tables", {}),
        "keys": chosen.get("keys", {}),
    }
    if chosen.get("columns"):  # only when there are: plans made before column rules compare equal
        resolution["columns"] = chosen["columns"]
    for part in ("cells", "schema"):  # the same
        if chosen.get(part):
            resolution[part] = chosen[part]
    return resolution


@dataclass
class MergeRequestStatus:
    """Where a request stands, as read now. `stale`: the plan is not for the current heads and resolutions;
    `moved`: it is for older heads (a branch moved since it was computed), and a new plan is on its way (asked for by
    the workers' upkeep within a round, or queued already); `planning`: a plan job is queued or running."""

    heads: dict[str, str | None]
    stale: bool
    planning: bool
    moved: bool
    protected: bool
    required_approvals: int
    approved_by: list[str] = field(default_factory=list)
    changes_requested_by: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    unresolved_conflicts: list[str] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)  # SQL checks' runs on the heads, external statuses
    blockers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def mergeable(self) -> bool:
        return not self.blockers


# (code, HTTP status, message): the order in which a refused merge names its reason.
BLOCKERS = {
    "merge_request_not_open": (409, "The merge request is {state}; only an open request can be merged."),
    "branch_missing": (409, "The {which} branch {name!r} no longer exists."),
    "plan_failed": (
        409,
        "The merge plan could not be computed: {error}. It is asked for again, after a minute at first.",
    ),
    "plan_pending": (409, "The merge plan is being computed; merge once it is ready."),
    "plan_stale": (409, "{what}; planning again."),
    "changes_requested": (409, "Changes were requested by {users}; they must approve first."),
    "approvals_missing": (403, "The target {target!r} needs {required} approval(s); the request has {count}."),
    "cell_picks_stale": (
        409,
        "{count} cell pick(s) in {names} were made on values a head has changed since; pick those cells again.",
    ),
    "unresolved_conflicts": (409, "The merge has unresolved conflicts in {names}; resolve them in the request."),
    "checks_failed": (409, "Check(s) failed on the current heads: {names}."),
    "checks_pending": (409, "Required check(s) have not succeeded on the source head yet: {names}."),
}


def _blocker(code: str, **values: Any) -> dict[str, Any]:
    status, message = BLOCKERS[code]
    return {"code": code, "status": status, "message": message.format(**values)}


def review_effective(reviews: list[MergeRequestReview], *, source_head: str | None, author_id) -> tuple[list, list]:
    """(approved by, changes requested by): each reviewer's latest review that is not dismissed; an approval counts
    only on the source head it was given on, a request for changes stands until the reviewer approves."""
    latest: dict[int, MergeRequestReview] = {}
    for review in reviews:
        if review.dismissed_at is None:
            latest[review.reviewer_id] = review
    approved, changes = [], []
    for review in latest.values():
        if review.decision == MergeRequestReview.Decision.APPROVE:
            if review.source_head == source_head and review.reviewer_id != author_id:
                approved.append(review.reviewer.username)
        else:
            changes.append(review.reviewer.username)
    return sorted(approved), sorted(changes)


def merge_request_status(merge_request: MergeRequest, heads: dict[str, str | None] | None = None) -> MergeRequestStatus:
    heads = heads if heads is not None else merge_request_heads(merge_request)
    protection = branch_protection(catalog=merge_request.catalog, branch=merge_request.target)
    plan = merge_request.plan
    planning = merge_request.plan_job is not None and not merge_request.plan_job.is_finished
    stale = plan is None or merge_request.plan_heads != heads or plan.get("resolution") != resolution_of(merge_request)
    moved = plan is not None and merge_request.plan_heads != heads and None not in heads.values()
    reviews = list(merge_request.reviews.select_related("reviewer"))
    approved, changes = review_effective(reviews, source_head=heads["source"], author_id=merge_request.author_id)
    conflicts = [c["name"] for c in (plan or {}).get("conflicts", [])]
    unresolved = [c["name"] for c in (plan or {}).get("conflicts", []) if not c["resolved"]]
    status = MergeRequestStatus(
        heads=heads, stale=stale, planning=planning, moved=moved, protected=protection is not None,
        required_approvals=protection.required_approvals if protection else 0, approved_by=approved,
        changes_requested_by=changes, conflicts=conflicts, unresolved_conflicts=unresolved,
    )  # fmt: skip
    blockers = status.blockers
    if merge_request.state != MergeRequest.State.OPEN:
        blockers.append(_blocker("merge_request_not_open", state=merge_request.state))
    for which in ("source", "target"):
        if heads[which] is None:
            blockers.append(_blocker("branch_missing", which=which, name=getattr(merge_request, which)))
    plan_job = merge_request.plan_job
    if planning:
        blockers.append(_blocker("plan_pending"))
    elif (
        stale and plan_job is not None and plan_job.status in ("failed", "cancelled")
        and merge_request.plan_job_heads == heads  # a failed plan of older heads: the upkeep plans the new ones
    ):  # fmt: skip
        blockers.append(_blocker("plan_failed", error=plan_job.error_message or plan_job.status))
    elif stale:
        blockers.append(_blocker("plan_stale", what=(
            "The merge plan is not computed yet" if plan is None
            else "The branches moved since the merge plan was computed" if merge_request.plan_heads != heads
            else "The resolutions changed since the merge plan was computed"
        )))  # fmt: skip
    if changes:
        blockers.append(_blocker("changes_requested", users=", ".join(changes)))
    if len(approved) < status.required_approvals:
        blockers.append(
            _blocker("approvals_missing", target=merge_request.target, required=status.required_approvals,
                     count=len(approved))
        )  # fmt: skip
    stale_picks = {o["name"]: [p for p in o["keys"].get("stale_picks", []) if p["reason"] == "changed"]
                   for o in (plan or {}).get("objects", []) if o.get("keys")}  # fmt: skip
    if any(stale_picks.values()):
        names = ", ".join(name for name, picks in stale_picks.items() if picks)
        blockers.append(_blocker("cell_picks_stale", count=sum(map(len, stale_picks.values())), names=names))
    if unresolved:
        blockers.append(_blocker("unresolved_conflicts", names=", ".join(unresolved)))
    verdict = merge_request_checks(merge_request, heads, required=protection.required_checks if protection else [])
    status.checks.extend(check_run_dict(run) for run in verdict.runs)
    if verdict.failed:
        blockers.append(_blocker("checks_failed", names=", ".join(verdict.failed)))
    if verdict.pending:
        blockers.append(_blocker("checks_pending", names=", ".join(verdict.pending)))
    return status


def merge_request_checks(merge_request: MergeRequest, heads: dict[str, str | None], *, required: list[str]
                         ) -> ChecksVerdict:  # fmt: skip
    """The checks of a request on these heads: each SQL check's newest run on the merge of the two heads (made by
    the request's plan), and the external statuses posted for the source head, those `required` judged."""
    if heads["source"] is None or heads["target"] is None:
        return checks_verdict(runs=[])
    runs = runs_of_merge(catalog=merge_request.catalog, source_head=heads["source"], target_head=heads["target"])
    statuses = statuses_of(catalog=merge_request.catalog, commit=heads["source"])
    return checks_verdict(runs=runs, statuses=statuses, required=required)
