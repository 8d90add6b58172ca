"""Merge requests (docs/api.md#merge-requests): open, plan, review, resolve, merge, close.

The plan is a dry-run merge run as a job when the request opens and again whenever a head has moved. Heads move
through many write paths, and no signal drives domain flow here, so the request is brought up to date by
polling: `merge_request_refresh` compares the branches' heads with the heads the plan was computed on, asks for a
new plan when they differ (or when the plan for these heads failed, after a wait that doubles, `_plan_retry_wait`),
closes a request whose source was merged into its target by other means, and writes down the dismissal of approvals
given on an older source head. It runs for every open request whose branches moved in each round of the job
workers' upkeep (`merge_requests_follow_heads`, every LAKEUI_JOB_RECOVER_EVERY seconds) and in the writes that need
current heads (a merge, "merge when ready", a change of resolutions, a reopen); never in a read: a GET of a request
answers with the plan as it is and says that it is for older heads (`merge_request_status`: `moved`,
`plan_stale`), and starts no job and writes no row. The merge itself is the merge engine's job (`branch_merge`),
run with the plan's heads as `expected_heads`, so a branch that moves after the checks makes the job refuse with
`branch_moved`; the request becomes `merged` in the merge's own transaction.
"""

import re
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from catalog_app.models import Catalog
from catalog_app.names import COMMIT_ID_PREFIX
from catalog_app.selectors.access import branch_protection
from catalog_app.selectors.refs import branch_heads, commits_newest_time
from catalog_app.services.commits import catalog_lock
from checks_app.models import CheckRun
from checks_app.services.checks import status_post
from lakeui.errors import ApplicationError, ConflictError
from lakeui.jobs.models import Job
from lakeui.jobs.selectors import job_by_id
from lakeui.jobs.services import job_create
from merge_app.job_specs import MergeRequestPlanSpec
from merge_app.models import Merge, MergeRequest, MergeRequestEvent, MergeRequestReview
from merge_app.plan.objects import SIDES
from merge_app.plan.resolutions import cell_picks_shape
from merge_app.plan.rules import CHOICES
from merge_app.selectors.diff import resolution_check, resolution_columns_check
from merge_app.selectors.graph import CommitGraph
from merge_app.selectors.merge_requests import (
    merge_request_heads,
    merge_request_status,
    plan_key_conflict,
    report_plan,
    resolution_of,
)
from merge_app.services.events import merge_request_event_emit
from merge_app.services.merges import checks_override, merge_submit

MESSAGE_SELF_STATUS = "The author of a merge request cannot post its check statuses: a CI system or a reviewer does."
PLAN_JOB = MergeRequestPlanSpec.KIND
PLAN_RETRY_AFTER = timedelta(seconds=60)
PLAN_RETRY_MAX = timedelta(hours=6)
TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}\.[A-Za-z_][A-Za-z0-9_]{0,62}")
MAX_KEY_LENGTH = 1000

MESSAGE_NOT_OPEN = "Merge request {number} is {state}."
MESSAGE_SELF_APPROVAL = "You opened this merge request; another user must approve it."
MESSAGE_EXISTS = "Merge request {number} already asks to merge {source!r} into {target!r}."
MESSAGE_QUEUE_REQUIRED = "{target!r} takes merge requests only through its merge queue: queue the request instead."
MESSAGE_NO_BRANCH = "There is no branch {name!r} in catalog {catalog!r}; a merge request needs two branches."


def _user(user: AbstractBaseUser | None) -> AbstractBaseUser | None:
    return user if user is not None and user.is_authenticated else None


def _event(merge_request: MergeRequest, kind: str, actor: AbstractBaseUser | None, **details: Any) -> None:
    MergeRequestEvent.objects.create(merge_request=merge_request, kind=kind, actor=_user(actor), details=details)
    merge_request_event_emit(merge_request, kind, _user(actor), details)  # webhooks (merge_app/services/events.py)


def _locked(merge_request: MergeRequest) -> MergeRequest:
    return (
        MergeRequest.objects.select_for_update(of=("self",))
        .select_related("catalog", "plan_job")
        .get(id=merge_request.id)
    )


def _refuse_if_not_open(merge_request: MergeRequest) -> None:
    if merge_request.state != MergeRequest.State.OPEN:
        raise ConflictError(
            "merge_request_not_open",
            MESSAGE_NOT_OPEN.format(number=merge_request.number, state=merge_request.state),
            details={"state": merge_request.state},
        )


def _refuse_duplicate(merge_request: MergeRequest) -> None:
    other = (
        MergeRequest.objects.filter(
            catalog_id=merge_request.catalog_id, source=merge_request.source, target=merge_request.target,
            state=MergeRequest.State.OPEN,
        ).exclude(id=merge_request.id).first()
    )  # fmt: skip
    if other is not None:
        raise ConflictError(
            "merge_request_exists",
            MESSAGE_EXISTS.format(number=other.number, source=other.source, target=other.target),
            details={"number": other.number},
        )


def _plan_request(merge_request: MergeRequest, heads: dict[str, str | None], user: AbstractBaseUser | None) -> Job:
    """Queue a dry-run merge of the request (enqueued when the caller's transaction commits)."""
    spec = MergeRequestPlanSpec(
        catalog_id=str(merge_request.catalog_id), merge_request_id=merge_request.id,
        resolution=resolution_of(merge_request),
    )  # fmt: skip
    job = job_create(kind=spec.KIND, params=spec.to_params(), requested_by=_user(user))
    merge_request.plan_job, merge_request.plan_job_heads = job, heads
    merge_request.save(update_fields=["plan_job", "plan_job_heads", "updated_at"])
    return job


def _dismiss_stale_approvals(merge_request: MergeRequest, source_head: str | None, *, reason: str, actor=None) -> int:
    """Write down that approvals given on another source head (or before `reason`) no longer count."""
    stale = MergeRequestReview.objects.filter(
        merge_request=merge_request, decision=MergeRequestReview.Decision.APPROVE, dismissed_at__isnull=True
    )
    if reason == "source_moved":
        stale = stale.exclude(source_head=source_head)
    reviewers = sorted({review.reviewer.username for review in stale.select_related("reviewer")})
    count = stale.update(dismissed_at=timezone.now(), dismissed_reason=reason)
    if count:
        _event(merge_request, "approvals_dismissed", actor, reason=reason, reviewers=reviewers,
               source_head=source_head)  # fmt: skip
    return count


@transaction.atomic
def merge_request_open(
    *, catalog: Catalog, source: str, target: str, title: str, description: str = "", author: AbstractBaseUser
) -> MergeRequest:
    if source == target:
        raise ApplicationError("invalid_input", "The source and the target must be different branches.")
    if not title.strip():
        raise ApplicationError("invalid_input", "A merge request needs a title.", details={"field": "title"})
    catalog = catalog_lock(catalog=catalog)  # numbers requests one at a time
    merge_request = MergeRequest(
        catalog=catalog, source=source, target=target, title=title.strip(), description=description,
        author=_user(author),
    )  # fmt: skip
    heads = merge_request_heads(merge_request)
    for which in ("source", "target"):
        if heads[which] is None:
            raise ApplicationError(
                "branch_not_found", MESSAGE_NO_BRANCH.format(name=getattr(merge_request, which), catalog=catalog.name),
                status=404,
            )  # fmt: skip
    _refuse_duplicate(merge_request)
    merge_request.number = (MergeRequest.objects.filter(catalog=catalog).aggregate(n=Max("number"))["n"] or 0) + 1
    merge_request.save()
    _event(merge_request, "opened", author, source=source, target=target, heads=heads)
    _plan_request(merge_request, heads, author)
    return merge_request


def _needs_plan(merge_request: MergeRequest, heads: dict[str, str | None]) -> bool:
    """Whether the plan is behind the heads or the resolutions and no plan job for them is queued, running or done
    (a plan job that failed or was cancelled is asked for again after PLAN_RETRY_AFTER)."""
    resolution = resolution_of(merge_request)
    if heads == merge_request.plan_heads and (merge_request.plan or {}).get("resolution") == resolution:
        return False
    job = merge_request.plan_job
    if job is None or heads != merge_request.plan_job_heads:
        return True
    if MergeRequestPlanSpec.from_params(job.params).resolution != resolution:
        return True
    if job.status in (Job.Status.FAILED, Job.Status.CANCELLED):
        return job.finished_at is None or timezone.now() - job.finished_at > _plan_retry_wait(job, heads)
    return False


def _plan_retry_wait(job: Job, heads: dict[str, str | None]) -> timedelta:
    """How long after a plan job for these heads failed it is asked for again: PLAN_RETRY_AFTER, or as long as the
    heads had stood when that job was asked for, so a plan that keeps failing is asked for after 1, 1, 2, 4, ...
    minutes, never more than PLAN_RETRY_MAX apart, not once a minute while the request stays open."""
    since = commits_newest_time(commit for commit in heads.values() if commit)
    stood = job.created_at - since if since is not None else PLAN_RETRY_AFTER
    return min(max(PLAN_RETRY_AFTER, stood), PLAN_RETRY_MAX)


def merge_request_refresh(*, merge_request: MergeRequest, user: AbstractBaseUser | None) -> MergeRequest:
    """Bring an open request up to date with its branches (see the module's docstring). Cheap when nothing moved:
    one query for the heads. For the upkeep and the writes only: it may start a plan job and write rows, which no
    read may (a GET shows the request as it is, `merge_request_status`)."""
    if merge_request.state != MergeRequest.State.OPEN:
        return merge_request
    heads = merge_request_heads(merge_request)
    if None not in heads.values() and heads != merge_request.plan_heads:
        merged_by = _merged_elsewhere(merge_request, heads)
        if merged_by is not None:
            return _close_as_merged(merge_request, merged_by)
    needs_plan = None not in heads.values() and _needs_plan(merge_request, heads)
    has_stale_approvals = MergeRequestReview.objects.filter(
        merge_request=merge_request, decision=MergeRequestReview.Decision.APPROVE, dismissed_at__isnull=True
    ).exclude(source_head=heads["source"])
    if None in heads.values() or not (needs_plan or has_stale_approvals.exists()):
        return merge_request
    with transaction.atomic():
        locked = _locked(merge_request)
        if locked.state == MergeRequest.State.OPEN:
            _dismiss_stale_approvals(locked, heads["source"], reason="source_moved")
            if _needs_plan(locked, heads):
                _plan_request(locked, heads, user)
    return MergeRequest.objects.select_related("catalog", "author", "merged_by", "merge", "plan_job", "merge_job").get(
        id=merge_request.id
    )


def merge_requests_follow_heads() -> None:
    """Bring up to date now every open request whose branches moved since its plan was last asked for (a plan job
    for the current heads), or whose plan for them failed a while ago (`_needs_plan`): the new plan's dry run
    compares the keys of the tables both sides changed, so the diff and review pages of the new heads find the
    comparison stored instead of starting it when a page asks. The job workers run this every round of their upkeep
    (`merge_app.job_kinds`, every LAKEUI_JOB_RECOVER_EVERY seconds); reads of a request never do. One query for the
    open requests and one for each catalog's branch heads."""
    requests = list(MergeRequest.objects.filter(state=MergeRequest.State.OPEN).select_related("plan_job"))
    by_catalog: dict = {}
    for merge_request in requests:
        by_catalog.setdefault(merge_request.catalog_id, []).append(merge_request)
    for catalog_id, open_requests in by_catalog.items():
        names = {name for mr in open_requests for name in (mr.source, mr.target)}
        heads = branch_heads(catalog_id=catalog_id, names=list(names))
        for merge_request in open_requests:
            now = merge_request_heads(merge_request, heads)
            if None in now.values():
                continue
            if now != merge_request.plan_job_heads or _needs_plan(merge_request, now):
                merge_request_refresh(merge_request=merge_request, user=None)


def _merged_elsewhere(merge_request: MergeRequest, heads: dict[str, str | None]) -> str | None:
    """The merge commit on the target that brought the source's head in by other means (SQL `MERGE BRANCH`, the
    API, another request), if the source has nothing left to merge because of it; else None. A branch with no
    commit of its own has nothing to merge either, but was never merged: it stays open."""
    graph = CommitGraph(merge_request.catalog_id)
    sides = graph.sides(heads["source"], heads["target"])
    if sides.source:
        return None
    for commit_id in reversed(sides.target):  # newest first
        node = graph.node(commit_id)
        if node.merge_parent is None or node.parent is None:
            continue
        brought = node.merge_parent == heads["source"] or not graph.sides(heads["source"], node.merge_parent).source
        # ... and not on the target already before that merge (then the source had nothing of its own).
        if brought and graph.sides(heads["source"], node.parent).source:
            return commit_id
    return None


@transaction.atomic
def _close_as_merged(merge_request: MergeRequest, commit_id: str) -> MergeRequest:
    locked = _locked(merge_request)
    if locked.state != MergeRequest.State.OPEN:
        return locked
    merge = Merge.objects.filter(commit_id=commit_id).first()
    locked.state, locked.merged_at = MergeRequest.State.MERGED, timezone.now()
    if merge is not None and not MergeRequest.objects.filter(merge=merge).exists():
        locked.merge, locked.merged_by = merge, merge.requested_by
    locked.save()
    _event(locked, "merged_elsewhere", None, commit=commit_id, merge=str(merge.id) if merge else None)
    return locked


def _asked_at(merge: Merge) -> datetime:
    """When a plan was asked for: its job's creation (the request's resolutions and heads then), not when its dry
    run was recorded (at its end), which a job asked for later may do first."""
    return merge.job.created_at if merge.job_id is not None else merge.created_at


@transaction.atomic
def merge_request_plan_store(*, merge_request_id: int, merge: Merge, resolution: dict[str, Any]) -> MergeRequest:
    """Record a dry run's plan on the request, unless the plan there was asked for later (plan jobs run side by side
    and may start and finish in any order) or it is this very plan (the job delivered again)."""
    merge_request = (
        MergeRequest.objects.select_for_update(of=("self",)).select_related("plan_merge__job").get(id=merge_request_id)
    )
    current = merge_request.plan_merge
    if current is not None and (current.id == merge.id or _asked_at(current) > _asked_at(merge)):
        return merge_request
    plan = report_plan(merge.report)
    plan["merge"], plan["resolution"] = str(merge.id), resolution
    merge_request.plan, merge_request.plan_heads, merge_request.plan_merge = plan, plan["heads"], merge
    merge_request.save(update_fields=["plan", "plan_heads", "plan_merge", "updated_at"])
    _event(
        merge_request, "plan_updated", None, merge=str(merge.id), heads=plan["heads"], mergeable=plan["mergeable"],
        conflicts=[conflict["name"] for conflict in plan["conflicts"] if not conflict.get("resolved")],
        resolved=[conflict["name"] for conflict in plan["conflicts"] if conflict.get("resolved")],
    )  # fmt: skip
    # A plan made after the source was merged by other means finds nothing to merge at the heads the upkeep would
    # have closed the request at (`merge_request_refresh` checks only heads that moved since the plan): close it here.
    merged_by = _merged_elsewhere(merge_request, plan["heads"]) if plan["up_to_date"] else None
    return merge_request if merged_by is None else _close_as_merged(merge_request, merged_by)


@transaction.atomic
def merge_request_review(
    *, merge_request: MergeRequest, reviewer: AbstractBaseUser, decision: str, comment: str = ""
) -> MergeRequestReview:
    merge_request = _locked(merge_request)
    _refuse_if_not_open(merge_request)
    if decision not in MergeRequestReview.Decision.values:
        raise ApplicationError("invalid_input", f"decision must be one of {MergeRequestReview.Decision.values}.")
    if decision == MergeRequestReview.Decision.APPROVE and merge_request.author_id == reviewer.pk:
        raise ApplicationError("self_approval", MESSAGE_SELF_APPROVAL, status=403)
    heads = merge_request_heads(merge_request)
    if None in heads.values():
        raise ConflictError("branch_missing", "A branch of the merge request no longer exists.", details=heads)
    _dismiss_stale_approvals(merge_request, heads["source"], reason="source_moved")
    review = MergeRequestReview.objects.create(
        merge_request=merge_request, reviewer=reviewer, decision=decision, comment=comment,
        source_head=heads["source"], target_head=heads["target"],
    )  # fmt: skip
    _event(merge_request, "reviewed", reviewer, decision=decision, comment=comment, source_head=heads["source"])
    return review


def _resolutions_checked(resolutions: Any, merge_request: MergeRequest) -> dict[str, Any]:
    """{"default": choice, "tables": {"db.t": choice | {"choice": choice, "columns": {column: rule}}}, "keys":
    {"db.t": {key: choice}}}; every part optional. A column rule of null takes the column's rule back. Given back
    with the column rules apart (`"columns": {"db.t": {column: rule | None}}`, as `resolution_check` gives them),
    checked against the request's tables (`resolution_columns_check`)."""

    def bad(message: str) -> ApplicationError:
        return ApplicationError("invalid_resolution", message, details={"choices": list(CHOICES)})

    if not isinstance(resolutions, dict) or not set(resolutions) <= {"default", "tables", "keys", "columns", "cells"}:
        raise bad("resolutions must be an object with `default`, `tables`, `keys`, `columns` and/or `cells`.")
    if "default" in resolutions and resolutions["default"] not in CHOICES:
        raise bad(f"default must be one of {CHOICES}.")
    tables = resolutions.get("tables", {})
    if not isinstance(tables, dict):
        raise bad("tables must map `db.table` names to a choice.")
    for name, choice in tables.items():
        if not TABLE_NAME.fullmatch(name) or (not isinstance(choice, dict) and choice not in CHOICES):
            raise bad(f"tables[{name!r}] must name a table as `db.table` and choose one of {CHOICES}.")
    columns = resolutions.get("columns", {})
    if not isinstance(columns, dict):
        raise bad("columns must map `db.table` names to {column: rule}.")
    for name in columns:
        if not TABLE_NAME.fullmatch(name):
            raise bad(f"columns[{name!r}] must name a table as `db.table`.")
    keys = resolutions.get("keys", {})
    if not isinstance(keys, dict):
        raise bad("keys must map `db.table` names to {key: choice}.")
    for name, choices in keys.items():
        if not TABLE_NAME.fullmatch(name) or not isinstance(choices, dict):
            raise bad(f"keys[{name!r}] must name a table as `db.table` and map keys to choices.")
        for key, choice in choices.items():
            if len(key) > MAX_KEY_LENGTH or choice not in CHOICES:
                raise bad(f"keys[{name!r}][{key[:40]!r}] must choose one of {CHOICES}.")
    # Column rules taken back (null) are kept apart from those checked.
    given = {**resolutions, "tables": dict(tables), "columns": dict(columns)}
    removed: dict[str, list[str]] = {}
    for name, choice in tables.items():
        if isinstance(choice, dict) and isinstance(choice.get("columns"), dict):
            rules = dict(choice["columns"])
            removed.setdefault(name, []).extend(c for c, rule in rules.items() if rule is None)
            given["tables"][name] = {**choice, "columns": {c: r for c, r in rules.items() if r is not None}}
    for name, rules in given["columns"].items():
        if isinstance(rules, dict):
            removed.setdefault(name, []).extend(c for c, rule in rules.items() if rule is None)
            given["columns"][name] = {c: r for c, r in rules.items() if r is not None}
    given.pop("cells", None)
    checked = resolution_check(given)
    resolution_columns_check(catalog=merge_request.catalog, refs=[merge_request.source, merge_request.target],
                             resolution=checked)  # fmt: skip
    columns = {name: dict(rules) for name, rules in checked.get("columns", {}).items()}
    for name, taken_back in removed.items():
        columns.setdefault(name, {}).update(dict.fromkeys(taken_back))
    cells = _cells_checked(merge_request, resolutions["cells"]) if "cells" in resolutions else {}
    return {**checked, "columns": columns, "cells": cells}


def _cells_checked(merge_request: MergeRequest, cells: Any) -> dict[str, dict[str, dict[str, dict | None]]]:
    """A reviewer's cell picks (`{"db.t": {key id: {column: {"pick": side} | {"value": v} | null}}}`, null taking a
    pick back), each with the three values of the cell it is made on (`inputs`): the cell as it conflicts in the
    plan at the request's current heads. A pick is made on what the reviewer sees, so there must be such a plan
    (409 `plan_pending` while it is computed), the key must be in conflict there, on that cell (409
    `cell_not_in_conflict`), and a typed value must fit the column (400 `invalid_cell_pick`)."""
    if not isinstance(cells, dict) or not all(
        isinstance(keys, dict) and all(isinstance(columns, dict) for columns in keys.values())
        for keys in cells.values()
    ):
        raise ApplicationError("invalid_cell_pick", "`cells` maps a table to {key id: {column: pick}}.")
    picks = {table: {key: dict(columns) for key, columns in keys.items()} for table, keys in cells.items()}
    made = cell_picks_shape(_picks_made(picks))
    current = merge_request.plan and merge_request.plan_heads == merge_request_heads(merge_request)
    if any(columns for keys in made.values() for columns in keys.values()) and not current:
        raise ConflictError("plan_pending", "The merge plan for the current heads is being computed: pick the cells "
                            "again once the review shows it.")  # fmt: skip
    for table, keys in made.items():
        for key_id, columns in keys.items():
            conflict = plan_key_conflict(merge_request, table, key_id)
            for column, pick in columns.items():
                if (
                    conflict is None
                    or column not in conflict["cells"]
                    or None in (conflict["source"], conflict["target"])
                ):
                    raise ConflictError(
                        "cell_not_in_conflict",
                        f"Cell {column!r} of key {key_id} of {table!r} is not in conflict at the request's heads: "
                        "only conflicting cells of a primary-key table are picked.",
                        details={"table": table, "key_id": key_id, "column": column},
                    )  # fmt: skip
                inputs = {row: None if conflict[row] is None else conflict[row][column] for row in SIDES}
                picks[table][key_id][column] = {**pick, "inputs": inputs}
    resolution_columns_check(catalog=merge_request.catalog, refs=[merge_request.source, merge_request.target],
                             resolution={"cells": _picks_made(picks)})  # fmt: skip
    return picks


def _picks_made(picks: dict[str, dict[str, dict[str, dict | None]]]) -> dict[str, dict[str, dict[str, dict]]]:
    """The picks given, without those taken back (null)."""
    return {table: {key: {column: pick for column, pick in columns.items() if pick is not None}
                    for key, columns in keys.items()} for table, keys in picks.items()}  # fmt: skip


def _resolutions_apply(merge_request: MergeRequest, given: dict[str, Any], user: AbstractBaseUser) -> list[dict]:
    """Apply the choices that change something; each is recorded with who chose it and when."""
    cells = merge_request.resolutions.get("cells", {})
    current = {
        "default": merge_request.resolutions.get("default", "fail"),
        "tables": dict(merge_request.resolutions.get("tables", {})),
        "keys": {name: dict(keys) for name, keys in merge_request.resolutions.get("keys", {}).items()},
        "columns": {name: dict(rules) for name, rules in merge_request.resolutions.get("columns", {}).items()},
        "cells": {name: {key: dict(picked) for key, picked in keys.items()} for name, keys in cells.items()},
        "schema": {name: dict(given) for name, given in merge_request.resolutions.get("schema", {}).items()},
        "chosen": list(merge_request.resolutions.get("chosen", [])),
    }
    at, by = timezone.now().isoformat(), user.get_username()
    changed = []
    if "default" in given and given["default"] != current["default"]:
        current["default"] = given["default"]
        changed.append({"scope": "default", "choice": given["default"], "by": by, "at": at})
    for name, choice in given.get("tables", {}).items():
        if current["tables"].get(name) != choice:
            current["tables"][name] = choice
            changed.append({"scope": "table", "table": name, "choice": choice, "by": by, "at": at})
    for name, choices in given.get("keys", {}).items():
        for key, choice in choices.items():
            if current["keys"].get(name, {}).get(key) != choice:
                current["keys"].setdefault(name, {})[key] = choice
                changed.append({"scope": "key", "table": name, "key": key, "choice": choice, "by": by, "at": at})
    for name, rules in given.get("columns", {}).items():
        for column, rule in rules.items():
            if current["columns"].get(name, {}).get(column) != rule:
                if rule is None:
                    current["columns"].get(name, {}).pop(column, None)
                else:
                    current["columns"].setdefault(name, {})[column] = rule
                changed.append({"scope": "column", "table": name, "column": column, "choice": rule, "by": by,
                                "at": at})  # fmt: skip
    current["columns"] = {name: rules for name, rules in current["columns"].items() if rules}
    for name, settlements in given.get("schema", {}).items():
        for column, settlement in settlements.items():
            if current["schema"].get(name, {}).get(column) != settlement:
                current["schema"].setdefault(name, {})[column] = settlement
                changed.append({"scope": "schema", "table": name, "column": column, "choice": settlement, "by": by,
                                "at": at})  # fmt: skip
    for name, keys in given.get("cells", {}).items():
        for key, columns in keys.items():
            for column, pick in columns.items():
                held = current["cells"].setdefault(name, {}).setdefault(key, {})
                if pick is None and column in held:
                    held.pop(column)
                elif pick is not None and _made(held.get(column)) != pick:
                    held[column] = {**pick, "by": by, "at": at}
                else:
                    continue
                choice = {k: v for k, v in (pick or {}).items() if k in ("pick", "value")} or None
                changed.append({"scope": "cell", "table": name, "key": key, "column": column, "choice": choice,
                                "by": by, "at": at})  # fmt: skip
    kept = {name: {key: held for key, held in keys.items() if held} for name, keys in current["cells"].items()}
    current["cells"] = {name: keys for name, keys in kept.items() if keys}
    current["chosen"].extend(changed)
    merge_request.resolutions = current
    return changed


def _made(pick: dict | None) -> dict | None:
    """A recorded pick as it was made (without who made it and when)."""
    return None if pick is None else {k: v for k, v in pick.items() if k not in ("by", "at")}


def _changes_the_merge(merge_request: MergeRequest, changed: list[dict]) -> bool:
    """Whether choices just made can change what the merge does, judged on the current plan: a choice for a table
    (or a key of one) the plan finds no conflict in, or a default when the plan has no conflict, changes nothing,
    so the approvals given stay. A plan behind the heads is not trusted: then any choice counts as a change."""
    plan = merge_request.plan or {}
    if not plan or merge_request.plan_heads != merge_request_heads(merge_request):
        return True
    if any(choice["scope"] == "cell" for choice in changed):  # a pick is a change of the request, always
        return True
    in_conflict = {conflict["name"] for conflict in plan.get("conflicts", [])}
    for choice in changed:
        if choice["scope"] == "default" and in_conflict:
            return True
        if choice["scope"] in ("table", "key", "column", "schema") and choice.get("table") in in_conflict:
            return True
    return False


def _active_approvers(merge_request: MergeRequest) -> list[str]:
    approvals = MergeRequestReview.objects.filter(
        merge_request=merge_request, decision=MergeRequestReview.Decision.APPROVE, dismissed_at__isnull=True
    ).select_related("reviewer")
    return sorted({review.reviewer.username for review in approvals})


@transaction.atomic
def merge_request_update(
    *,
    merge_request: MergeRequest,
    user: AbstractBaseUser,
    title: str | None = None,
    description: str | None = None,
    state: str | None = None,
    resolutions: dict[str, Any] | None = None,
) -> MergeRequest:
    """Edit the title and description, close or reopen, and choose conflict resolutions. A choice that can change
    the merge's result dismisses the approvals given so far (reviewers approved the merge as it was to be resolved
    then); one that changes no conflict of the plan keeps them (`_changes_the_merge`)."""
    merge_request = _locked(merge_request)
    edited = {}
    if title is not None and title.strip() != merge_request.title:
        if not title.strip():
            raise ApplicationError("invalid_input", "A merge request needs a title.", details={"field": "title"})
        merge_request.title = edited["title"] = title.strip()
    if description is not None and description != merge_request.description:
        merge_request.description = edited["description"] = description
    if edited:
        _event(merge_request, "edited", user, **edited)
    if resolutions is not None:
        _refuse_if_not_open(merge_request)
        changed = _resolutions_apply(merge_request, _resolutions_checked(resolutions, merge_request), user)
        if changed:
            _event(merge_request, "resolutions_changed", user, choices=changed)
            if _changes_the_merge(merge_request, changed):
                _dismiss_stale_approvals(merge_request, None, reason="resolutions_changed", actor=user)
            else:
                kept = _active_approvers(merge_request)
                if kept:
                    _event(merge_request, "approvals_kept", user, reviewers=kept)
    if state is not None and state != merge_request.state:
        if merge_request.state == MergeRequest.State.MERGED or state not in ("open", "closed"):
            raise ConflictError(
                "invalid_state_change", f"A {merge_request.state} request cannot become {state!r}.",
                details={"state": merge_request.state},
            )  # fmt: skip
        if state == MergeRequest.State.CLOSED:
            merge_request.state, merge_request.closed_at = state, timezone.now()
            _event(merge_request, "closed", user)
        else:
            _refuse_duplicate(merge_request)
            merge_request.state, merge_request.closed_at = state, None
            _event(merge_request, "reopened", user)
    merge_request.save()
    if merge_request.state == MergeRequest.State.OPEN and (state is not None or resolutions is not None):
        # A new plan for the resolutions or the reopened request, once this change is committed.
        transaction.on_commit(lambda: merge_request_refresh(merge_request=merge_request, user=user))
    return merge_request


def merge_request_merge(
    *, merge_request: MergeRequest, user: AbstractBaseUser, override_checks: str | None = None
) -> Job:
    """Check that nothing stands in the way and queue the merge (202). Refused with the first blocker's code (409,
    or 403 `approvals_missing`), all blockers in the details; a stale request gets a new plan on the way. An admin
    may override failed checks with a reason (`override_checks`), which the audit log keeps."""
    if override_checks is not None:
        checks_override(catalog=merge_request.catalog, user=user, reason=override_checks)
    protection = branch_protection(catalog=merge_request.catalog, branch=merge_request.target)
    if protection is not None and protection.require_queue:
        raise ConflictError("queue_required", MESSAGE_QUEUE_REQUIRED.format(target=merge_request.target))
    merge_request = merge_request_refresh(merge_request=merge_request, user=user)  # commits on its own
    with transaction.atomic():
        merge_request = _locked(merge_request)
        if merge_request.merge_job_id is not None and not job_by_id(merge_request.merge_job_id).is_finished:
            raise ConflictError("merge_in_progress", "The request's merge is already queued or running.",
                                details={"job": str(merge_request.merge_job_id)})  # fmt: skip
        status = merge_request_status(merge_request)
        overridden = {"checks_failed"} if override_checks is not None else set()
        blockers = [blocker for blocker in status.blockers if blocker["code"] not in overridden]
        if blockers:
            first = blockers[0]
            raise ApplicationError(first["code"], first["message"], status=first["status"],
                                   details={"blockers": blockers})  # fmt: skip
        resolution = resolution_of(merge_request)
        audit = merge_request_audit(merge_request, status)
        job = merge_submit(
            catalog=merge_request.catalog, source=merge_request.source, target=merge_request.target, user=user,
            expected_heads=merge_request.plan_heads, via_merge_request=merge_request.id, resolution=resolution,
            audit=audit, override_checks=override_checks,
        )  # fmt: skip
        merge_request.merge_job = job
        merge_request.save(update_fields=["merge_job", "updated_at"])
        _event(merge_request, "merge_started", user, job=str(job.id), heads=merge_request.plan_heads)
    return job


def merge_request_audit(merge_request: MergeRequest, status) -> dict[str, Any]:
    """What a request's merge adds to its audit log: the request, its approvers, who chose each resolution."""
    return {
        "resolution_choices": merge_request.resolutions.get("chosen", []),
        "merge_request": {
            "number": merge_request.number, "title": merge_request.title,
            "author": merge_request.author.username if merge_request.author else None,
            "approved_by": status.approved_by, "required_approvals": status.required_approvals,
        },
    }  # fmt: skip


def merge_request_merged(*, merge_request_id: int, merge: Merge) -> None:
    """Runs inside the merge's transaction (branch_merge's `on_merged`): the request and its merge commit
    together."""
    merge_request = MergeRequest.objects.select_for_update().get(id=merge_request_id)
    _recheck(merge_request, merge)
    merge_request.state, merge_request.merge, merge_request.merged_at = (
        MergeRequest.State.MERGED, merge, timezone.now()
    )  # fmt: skip
    merge_request.merged_by = merge.requested_by
    merge_request.save()
    _event(merge_request, "merged", merge.requested_by, merge=str(merge.id), commit=merge.commit_id,
           status=merge.status)  # fmt: skip


def _recheck(merge_request: MergeRequest, merge: Merge) -> None:
    """On the worker, against the heads it commits: the approvals, requests for changes and required external
    checks as they are now (an approval dismissed or a status turned to failure since the merge was queued stops
    it; the SQL checks ran on this very result). Raises the first blocker; the merge's transaction rolls back."""
    heads = {"source": merge.source_head, "target": merge.target_head}
    status = merge_request_status(merge_request, heads)
    wanted = {"changes_requested", "approvals_missing", "checks_pending"}
    if merge.log.get("checks_overridden") is None:
        wanted.add("checks_failed")
    for blocker in status.blockers:
        if blocker["code"] in wanted:
            raise ApplicationError(blocker["code"], blocker["message"], status=blocker["status"])


def merge_request_status_post(
    *, merge_request: MergeRequest, user: AbstractBaseUser, name: str, state: str, head: str, url: str = "",
    description: str = "",
) -> CheckRun:  # fmt: skip
    """An external check's status for the request's source head, as a CI system reports a commit status: for the
    head it tested (`head`, the id or a prefix of at least 8 characters; a status for an older head is a 409
    `branch_moved`, so a build of an earlier push never counts for a later one). Posted by an approver of the
    catalog (the API asks for the role: a CI system's user has it), never by the request's author, who could
    otherwise pass the checks a protected branch requires of their own change."""
    if merge_request.author_id is not None and merge_request.author_id == user.pk:
        raise ApplicationError("self_status", MESSAGE_SELF_STATUS, status=403)
    if not COMMIT_ID_PREFIX.fullmatch(head or ""):
        raise ApplicationError("invalid_input", "head is the source head's id (8 to 32 hex digits).",
                               details={"field": "head"})  # fmt: skip
    source = merge_request_heads(merge_request)["source"]
    if source is None:
        raise ConflictError("branch_missing", f"The source branch {merge_request.source!r} no longer exists.")
    if not source.startswith(head):
        raise ConflictError("branch_moved", f"The source head is {source}, not {head}.", details={"head": source})
    return status_post(catalog=merge_request.catalog, commit=source, name=name, state=state, url=url,
                       description=description, user=user)  # fmt: skip
