"""MERGE BRANCH (docs/merge-semantics.md): plan once, then write exactly one commit on the target.

Every merge workflow (merge-request plans, dry runs, merges; the diff page and the API diff through
`services/diff_reads.py`, which answers at once and leaves the key comparison to a job) plans with `merge_plan`:
the base, each side's changes, the verdicts and the key comparison of primary-key tables, in one plan that nothing
changes once made. A merge then does the data work the plan asks for (key merges, deletes in
segments that mix partitions) before it takes the catalog's commit lock; under the lock it only checks that both
heads are still the planned ones (else it plans again) and commits, so no commit can slip in between its decision
and its commit and no Spark job runs while writers wait. It either refuses with its conflicts and changes nothing
(the refusal is logged), or adds one commit whose second parent is the source head. Only metadata is written for
tables without a primary key: data files are taken over by reference (zero-copy), never copied or rewritten. The
one exception is a source partition overwrite meeting target segments that mix partitions: delete files drop the
overwritten partitions' rows from them.
"""

import dataclasses
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from catalog_app.engine import dml, dml_here
from catalog_app.engine.frames import cache_scope
from catalog_app.engine.keymatch import write_position_deltas
from catalog_app.engine.reads import read_segments
from catalog_app.engine.segments import Column, SegmentRead
from catalog_app.engine.warehouse import Warehouse
from catalog_app.engine.writes import write_deltas
from catalog_app.models import Catalog, Commit, DataFile, ObjectKind, Operation, Role, SchemaVersion
from catalog_app.selectors.access import catalog_with_role, role_at_least
from catalog_app.selectors.objects import schema_histories, schema_version_ids
from catalog_app.selectors.refs import commit_by_id, ref_resolve
from catalog_app.selectors.table_files import NO_FILES, FileRow
from catalog_app.services.access import branch_write_check
from catalog_app.services.commits import (
    CommitDraft,
    commit_begin,
    commit_begin_detached,
    commit_publish,
    rows_insert,
)
from catalog_app.spark import spark_session
from checks_app.selectors import check_run_dict, checks_guarding, checks_verdict
from checks_app.services.checks import checks_error, checks_run
from lakeui.errors import ApplicationError, ConflictError
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_create
from lakeui.memory import gc_paused
from merge_app import states
from merge_app.models import Merge, VirtualBase
from merge_app.plan import files as files_plan
from merge_app.plan.files import FilePlan
from merge_app.rules import DML, LEAVE_OUT, SOURCE_WINS, TARGET_WINS, Op
from merge_app.selectors.diff import (
    REVERT,
    BasesNotMerged,
    MergeDiff,
    ObjectDiff,
    diff_as_dict,
    merge_diff,
    merge_diff_again,
    overwritten_partitions,
    resolution_check,
    virtual_base_key,
)
from merge_app.services import keys
from merge_app.services.events import merge_event_emit

MERGE_JOB = "branch_merge"
MESSAGE_CONFLICT = "The merge of {source!r} into {target!r} has {count} conflicting object(s); nothing was merged."
MESSAGE_MOVED = "{which} {ref!r} has moved since the merge was planned: its head is {head}."
MESSAGE_BASES_CONFLICT = "The merge bases ({bases}) of this criss-cross history conflict with each other. "
MESSAGE_KEPT_MOVING = "{source!r} or {target!r} moved each time the merge was planned ({times} times); try again."
KEY_MERGE_POSITION = -1  # the position a key merge's operation names in the source head (it has none of its own)
PLANS = 3  # a merge whose heads moved while it planned plans again this many times


@dataclass(frozen=True)
class MergePlan:
    """Everything a merge decides, made once by `merge_plan`: the base, each side's changes, the verdicts, the key
    comparison of primary-key tables changed on both sides and so the files (`diff`); in a worker, also the
    comparisons' rows, which the merge writes (`key_runs`). Nothing changes it once made."""

    diff: MergeDiff
    key_runs: Mapping[uuid.UUID, keys.KeyRun] = field(default_factory=dict)


def merge_plan(
    *,
    catalog: Catalog,
    source: str,
    target: str,
    resolution: dict | None = None,
    expected_heads: dict[str, str] | None = None,
    in_worker: bool = False,
) -> MergePlan:
    """The one plan step of merge-request plans, dry runs and merges (and, through `merge_diff_read`, of the diff
    page and the API diff). Primary-key tables changed on both sides are compared by key: here on Spark when this
    process is a worker (`in_worker`: the merge needs the rows). Elsewhere nothing waits for a worker: a table whose
    comparison is stored for these heads takes it, one not compared yet stays pending, and a criss-cross history
    whose virtual base is not made yet raises `BasesNotMerged` (`merge_diff_read` answers both with the job that
    makes them). Raises `branch_moved` when a head is not the expected one."""
    diff = merge_diff_with_bases(catalog=catalog, source=source, target=target, resolution=resolution,
                                 in_worker=in_worker)  # fmt: skip
    _check_heads(diff, expected_heads)
    if in_worker:
        return keys_compared(diff)
    return MergePlan(diff)


def keys_compared(diff: MergeDiff) -> MergePlan:
    """In a worker: the plan of a diff, its primary-key tables changed on both sides compared by key on Spark."""
    if not any(obj.key_mode for obj in diff.objects):
        return MergePlan(diff)
    runs = keys.key_runs(spark_session(), diff)
    return MergePlan(merge_diff_again(diff, {table_id: run.compared() for table_id, run in runs.items()}), runs)


def merge_diff_with_bases(
    *, catalog: Catalog, source: str, target: str, resolution: dict | None, in_worker: bool
) -> MergeDiff:
    """The diff of two refs; in a criss-cross history their merge bases are merged into one virtual base first
    (`bases_merge`) when this process is a worker. Elsewhere a virtual base not made yet raises `BasesNotMerged`:
    the web never waits for the worker that makes it (`merge_diff_read`)."""
    try:
        return merge_diff(catalog=catalog, source=source, target=target, resolution=resolution)
    except BasesNotMerged as unmerged:
        if not in_worker:
            raise
        bases_merge(catalog=catalog, bases=unmerged.bases)
    return merge_diff(catalog=catalog, source=source, target=target, resolution=resolution)


def bases_merge(*, catalog: Catalog, bases: list[str]) -> Commit:
    """The virtual base of several merge bases, as git's recursive strategy makes it: the bases merged into one
    another in turn (each merge planned as any merge, and through virtual bases of its own if it has several), into
    a commit no branch points to. Made once per set of bases (`VirtualBase`). A key the bases conflict on is left
    out of it (LEAVE_OUT): each side's row of that key is then a change of its own, which the merge takes where
    only one side has it or both have the same row, and is a conflict of the merge otherwise, settled like any
    other. Any other conflict between the bases is a conflict of the merge (409 `merge_conflict`, naming them)."""
    key = virtual_base_key(bases)
    known = VirtualBase.objects.filter(catalog=catalog, bases=key).first()
    if known is not None:
        return known.commit
    current = commit_by_id(bases[0])
    for other in bases[1:]:
        plan = merge_plan(catalog=catalog, source=other, target=current.id, resolution={"default": LEAVE_OUT},
                          in_worker=True)  # fmt: skip
        if not plan.diff.mergeable:
            merge = merge_log(plan.diff, status=Merge.Status.CONFLICT, user=None, job=None, dry_run=True,
                         log={"virtual_base_of": bases})  # fmt: skip
            error = merge_conflict_error(merge)
            error.message = MESSAGE_BASES_CONFLICT.format(bases=", ".join(b[:12] for b in bases)) + error.message
            raise error
        writer = None
        if not plan.diff.up_to_date:
            writer = MergeWriter(plan.diff, key_runs=plan.key_runs)
            writer.prepare()
        with transaction.atomic():
            draft = commit_begin_detached(catalog=catalog, parent=current)
            if writer is not None:
                writer.apply(draft)
            message = f"Virtual merge base: {other[:12]} merged into {current.id[:12]}"
            current = draft.commit(author=None, message=message, merge_parent=plan.diff.source_head)
    virtual, _ = VirtualBase.objects.get_or_create(catalog=catalog, bases=key, defaults={"commit": current})
    return virtual.commit


def merge_submit(
    *,
    catalog: Catalog,
    source: str,
    target: str,
    dry_run: bool = False,
    user: AbstractBaseUser | None = None,
    expected_heads: dict[str, str] | None = None,
    resolution: dict | None = None,
    via_merge_request: int | None = None,
    audit: dict[str, Any] | None = None,
    override_checks: str | None = None,
) -> Job:
    """Check what needs no worker and queue the merge job. A merge into a protected branch is refused here (403
    `branch_protected`) unless it is a merge request's (`via_merge_request`); dry runs write nothing and pass.
    `override_checks` (a reason; admins only) lets the merge through failed checks, logged with the reason."""
    src = ref_resolve(catalog=catalog, ref=source)
    dest = ref_resolve(catalog=catalog, ref=target)
    if dest.kind != "branch":
        raise ApplicationError("read_only_ref", f"{target!r} is a {dest.kind}; a merge target must be a branch.")
    if src.commit.id == dest.commit.id and source == target:
        raise ApplicationError("invalid_input", "A branch cannot be merged into itself.")
    if not dry_run:
        branch_write_check(catalog=catalog, branch=target, via_merge_request=via_merge_request)
    params = {"catalog_id": str(catalog.id), "source": source, "target": target, "dry_run": dry_run}
    if expected_heads:
        params["expected_heads"] = expected_heads
    if resolution:
        params["resolution"] = resolution_check(resolution)
    if via_merge_request is not None:
        params["merge_request"] = via_merge_request
    if audit:
        params["audit"] = audit
    if override_checks is not None:
        params["override_checks"] = checks_override(catalog=catalog, user=user, reason=override_checks)
    return job_create(kind=MERGE_JOB, params=params, requested_by=user)


def checks_override(*, catalog: Catalog, user: AbstractBaseUser | None, reason: object) -> dict[str, str]:
    """An admin's override of failed checks, with the reason the audit log keeps."""
    if user is None or not role_at_least(catalog_with_role(user=user, name=catalog.name)[1], Role.ADMIN):
        raise ApplicationError("role_required", "Only an admin of the catalog may override failed checks.", status=403)
    if not isinstance(reason, str) or not reason.strip() or len(reason) > 1000:
        raise ApplicationError("invalid_input", "An override of failed checks needs a reason (1 to 1000 characters).",
                               details={"field": "override_checks"})  # fmt: skip
    return {"reason": reason.strip(), "by": user.username}


@cache_scope()
@gc_paused()  # one step: the collector, resumed between its parts, walked the whole diff again each time (0.5-1.6 s)
def branch_merge(
    *,
    catalog: Catalog,
    source: str,
    target: str,
    dry_run: bool = False,
    user: AbstractBaseUser | None = None,
    job: Job | None = None,
    expected_heads: dict[str, str] | None = None,
    resolution: dict | None = None,
    via_merge_request: int | None = None,
    audit: dict[str, Any] | None = None,
    on_merged: Callable[[Merge], None] | None = None,
    override: dict[str, str] | None = None,
) -> Merge:
    """Merge `source` (any ref) into the branch `target`. Raises ConflictError `merge_conflict` (logged) when the
    rule tables refuse it and the resolution does not settle it.

    A merge request's merge passes `via_merge_request` (it may write a protected branch), `audit` (entries for the
    log: the request's number and approvers, and `resolution_choices`, who chose each resolution and when, which
    name the chooser of each resolution applied), and `on_merged`, run inside the merge's transaction once the
    merge is logged, so the request and the merge commit together or not at all."""
    started = time.monotonic()
    extra = dict(audit or {})
    refs = {"catalog": catalog, "source": source, "target": target, "resolution": resolution}
    guards = checks_guarding(catalog=catalog, branch=target)
    if dry_run:
        plan = merge_plan(**refs, expected_heads=expected_heads, in_worker=True)
        diff = plan.diff
        status = Merge.Status.CONFLICT if not diff.mergeable else Merge.Status.PLANNED
        if guards and diff.mergeable and not diff.up_to_date:  # what the checks would say of this merge's result
            writer = MergeWriter(diff, key_runs=plan.key_runs)
            writer.prepare()
            _checked(diff, writer, guards, user=user, job=job, extra=extra, override=None, dry_run=True)
        return merge_log(diff, status=status, user=user, job=job, dry_run=True, timings=_since(started), log=extra)
    # Everything that reads or writes data runs before the commit lock is taken: the plan (with the key comparison
    # of primary-key tables, kept even if the merge is refused), the files the merge writes and, when checks guard
    # the target, the merge's result committed where no branch points and judged by them (write-audit-publish).
    # Under the lock the merge only checks that both heads are still the planned ones and commits (or moves the
    # target to the judged result); if one moved, it plans again.
    if override:  # an admin's override holds for every failed check, SQL or external (the request's re-check)
        extra["checks_overridden"] = {**override, "checks": []}
    for _ in range(PLANS):
        plan = merge_plan(**refs, expected_heads=expected_heads, in_worker=True)
        planned, writer, result = plan.diff, None, None
        if planned.mergeable and not planned.up_to_date:
            writer = MergeWriter(planned, key_runs=plan.key_runs)
            writer.prepare()
            if guards:
                result = _checked(
                    planned, writer, guards, user=user, job=job, extra=extra, override=override, dry_run=False
                )
        try:
            with transaction.atomic():
                if result is None:
                    draft = commit_begin(catalog=catalog, branch=target, via_merge_request=via_merge_request)
                    target_head = draft.parent.id
                else:
                    published = commit_publish(catalog=catalog, branch=target, commit=result, job=job,
                                               via_merge_request=via_merge_request)  # fmt: skip
                    target_head = planned.target_head.id if published else None
                src = ref_resolve(catalog=catalog, ref=source)
                if (src.commit.id, target_head) != (planned.source_head.id, planned.target_head.id):
                    raise _Moved
                if result is None:
                    merge = merge_commit(planned, writer, draft, user=user, job=job, extra=extra, started=started)
                else:
                    merge = merge_recorded(planned, writer, result, user=user, job=job, extra=extra, started=started)
                if on_merged is not None:
                    on_merged(merge)
                return merge
        except _Moved:
            continue  # files the writer wrote for the old heads are orphans for garbage collection
        except MergeRefused as refused:
            merge = merge_log(refused.diff, status=Merge.Status.CONFLICT, user=user, job=job, timings=_since(started),
                         log=extra)  # fmt: skip
            raise merge_conflict_error(merge) from None
    raise ConflictError("branch_moved", MESSAGE_KEPT_MOVING.format(source=source, target=target, times=PLANS))


def merge_commit(
    diff: MergeDiff, writer: "MergeWriter | None", draft: CommitDraft, *, user, job, extra, started
) -> Merge:
    """Under the commit lock, on the planned heads: refuse, log an up-to-date merge, or stage and commit."""
    if not diff.mergeable:
        raise MergeRefused(diff)
    if diff.up_to_date:
        return merge_log(diff, status=Merge.Status.UP_TO_DATE, user=user, job=job, timings=_since(started), log=extra)
    commit = merge_write(diff, writer, draft, user=user, job=job, extra=extra)
    return merge_recorded(diff, writer, commit, user=user, job=job, extra=extra, started=started)


def merge_write(diff: MergeDiff, writer: "MergeWriter", draft: CommitDraft, *, user, job, extra) -> Commit:
    """Stage the planned merge on `draft` and commit it."""
    writer.apply(draft)
    chooser = user.username if user is not None and user.is_authenticated else None
    writer.log["resolutions"] = [
        {**entry, **_chosen(entry, extra.get("resolution_choices"), chooser)} for entry in diff.resolution_log
    ]
    if diff.explicit is None:
        message, merge_parent = f"Merge {diff.source} into {diff.target}", diff.source_head
    else:  # a revert or a cherry-pick: one commit on the target, with no second parent (git makes them so)
        verb = "Revert" if diff.explicit.kind == REVERT else "Cherry-pick"
        message = f"{verb} {diff.explicit.commit.id[:12]}: {diff.explicit.commit.message}"[:500]
        merge_parent = None
    return draft.commit(author=user, message=message, merge_parent=merge_parent, job=job)


def merge_recorded(diff: MergeDiff, writer: "MergeWriter", commit: Commit, *, user, job, extra, started) -> Merge:
    """Log a merge whose commit is on the target, and tell listeners."""
    merge = merge_log(diff, status=Merge.Status.MERGED, user=user, job=job, commit=commit,
                      log={**writer.log, **extra}, timings=_since(started))  # fmt: skip
    merge_event_emit(merge)
    return merge


def _checked(diff: MergeDiff, writer: "MergeWriter", guards: list, *, user, job, extra, override, dry_run) -> Commit:
    """The merge's result committed where no branch points (after the target head, with the source head as second
    parent) and judged by the checks guarding the target (docs/merge-semantics.md#merge-checks); the runs go into
    the audit log (`extra`). Refused with 409 `checks_failed` (logged, nothing merged) when a check that is not
    advisory fails, unless an admin overrides it with a reason (`override`: reason and by, logged)."""
    with transaction.atomic():
        draft = commit_begin_detached(catalog=diff.catalog, parent=diff.target_head)
        result = merge_write(diff, writer, draft, user=user, job=None, extra=extra)
    runs = checks_run(spark_session, catalog=diff.catalog, checks=guards, commit=result,
                      source_head=diff.source_head.id, target_head=diff.target_head.id, job=job, user=user)  # fmt: skip
    verdict = checks_verdict(runs=runs)
    extra["checks"] = [check_run_dict(run) for run in runs]
    extra["checked_result"] = result.id
    if override:  # the SQL checks this attempt overrode (none, if they passed)
        extra["checks_overridden"] = {**override, "checks": verdict.failed}
    elif verdict.failed and not dry_run:
        raise checks_failed_error(
            merge_log(diff, status=Merge.Status.CHECKS_FAILED, user=user, job=job, log={**writer.log, **extra})
        )
    return result


def checks_failed_error(merge: Merge) -> ConflictError:
    """The refusal of a merge logged as `checks_failed` (again, for a job delivered twice)."""
    runs = merge.log.get("checks", [])
    failed = [run["name"] for run in runs if not run["advisory"] and run["state"] in ("failure", "error")]
    details = {"merge": str(merge.id), "result": merge.log.get("checked_result")}
    return checks_error(failed=failed, pending=[], runs=runs, target=merge.target, details=details)


def merge_result_checked(
    *, catalog: Catalog, source: str, onto: Commit, target: str, resolution: dict | None, user, job, audit: dict
) -> Merge:
    """The merge queue's preparation of one entry (merge_app/services/queue.py): `source` merged onto `onto` (the
    target's head, or the unpublished result of the entries ahead), the result written where no branch points and
    judged by the SQL checks guarding the branch `target`, which it names. Nothing is published: returns the logged
    plan (a dry run, `log.checked_result` the judged commit); raises `merge_conflict` or `checks_failed` (logged),
    or `nothing_to_merge`."""
    started = time.monotonic()
    plan = merge_plan(catalog=catalog, source=source, target=onto.id, resolution=resolution, in_worker=True)
    diff, extra = dataclasses.replace(plan.diff, target=target), dict(audit)  # named by the branch it will move
    if not diff.mergeable:
        merge = merge_log(diff, status=Merge.Status.CONFLICT, user=user, job=job, timings=_since(started), log=extra)
        raise merge_conflict_error(merge)
    if diff.up_to_date:
        raise ConflictError("nothing_to_merge", f"{source!r} has nothing to merge into {target!r}.")
    writer = MergeWriter(diff, key_runs=plan.key_runs)
    writer.prepare()
    guards = checks_guarding(catalog=catalog, branch=target)
    _checked(diff, writer, guards, user=user, job=job, extra=extra, override=None, dry_run=False)
    return merge_log(diff, status=Merge.Status.PLANNED, user=user, job=job, dry_run=True,
                     log={**writer.log, **extra}, timings=_since(started))  # fmt: skip


def _chosen(entry: dict, choices: list[dict] | None, merger: str | None) -> dict[str, Any]:
    """Who chose an applied resolution, and when: the latest choice recorded in a merge request at the entry's
    scope (the key, its table, or the default), or the user who ran the merge."""
    scope = entry.get("scope")

    def matches(choice: dict) -> bool:
        if choice["scope"] != scope:
            return False
        if scope == "key":
            return choice.get("table") == entry.get("object") and choice.get("key") == entry.get("key_id")
        return scope == "default" or choice.get("table") == entry.get("object")

    for choice in reversed(choices or []):
        if matches(choice):
            return {"chosen_by": choice["by"], "chosen_at": choice["at"]}
    return {"chosen_by": merger}


class _Moved(Exception):
    """A head moved between planning and the commit lock."""


class MergeRefused(Exception):
    def __init__(self, diff: MergeDiff) -> None:
        self.diff = diff


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


def _check_heads(diff: MergeDiff, expected: dict[str, str] | None) -> None:
    for which, ref, head in (("source", diff.source, diff.source_head), ("target", diff.target, diff.target_head)):
        wanted = (expected or {}).get(which)
        if wanted and not head.id.startswith(wanted):
            message = MESSAGE_MOVED.format(which=which.capitalize(), ref=ref, head=head.id)
            raise ConflictError("branch_moved", message, details={which: head.id})


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _since(started: float) -> dict[str, int]:
    return {"total_ms": _ms(time.monotonic() - started)}


def merge_log(diff: MergeDiff, *, status, user, job, dry_run=False, commit=None, log=None, timings=None) -> Merge:
    kind = diff.explicit.kind if diff.explicit else Merge.Kind.MERGE
    merge = Merge(
        kind=kind, catalog=diff.catalog, source=diff.source, target=diff.target, source_head=diff.source_head.id,
        target_head=diff.target_head.id, base=diff.base.id, commit=commit, dry_run=dry_run, status=status,
        requested_by=user if user is not None and user.is_authenticated else None, job=job,
        report=diff_as_dict(diff), log=log or {}, timings=timings or {},
    )  # fmt: skip
    # With COPY even as one row: the log of a merge of 10,000 tables is 13 MB of JSON, which an INSERT sends quoted
    # into its text for the server to parse again (0.3-0.6 s, against 0.05 s).
    rows_insert(Merge, [merge], copy_from=1)
    return merge


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


# --- writing the merge ------------------------------------------------------------------------------------


@dataclass
class MergeWriter:
    """Writes a planned merge: `prepare` reads the three sides' files and does the Spark work (key merges, deletes
    in mixed segments), writing files only; `apply` stages the commit on a draft whose parent is the planned target
    head (the same files, so the prepared work holds)."""

    diff: MergeDiff
    key_runs: Mapping = field(default_factory=dict)  # primary-key tables: their key comparison (services/keys.py)
    log: dict[str, Any] = field(
        default_factory=lambda: {
            "objects": [],
            "discarded_operations": [],
            "superseded_operations": [],
            "schema_versions": {"invisible": [], "discarded": []},
            "files": [],
            "files_removed": [],  # the target's files the merge took out (the file plan's `removed`)
        }
    )
    # object id -> a key merge's written files, or a file-replayed table's plan and the delete files written for it
    prepared: dict = field(default_factory=dict)
    restored: dict = field(default_factory=dict)  # object id -> segment id -> the delete files a revert put back with

    @gc_paused()
    def prepare(self) -> None:
        """The files of the tables it merges, as the diff read them or read now (plain values: `FileRow`), the
        target's schema history and the schema versions the source's commits made, then the data work."""
        self.merging = [obj for obj in self.diff.objects if obj.merges and obj.resolution != TARGET_WINS]
        self.hows = {obj.object_id: _how(obj) for obj in self.merging}
        tables = [obj for obj in self.merging if obj.kind == ObjectKind.TABLE and not obj.source.dropped]
        named = {t.object_id: files for t in tables
                 if (files := files_plan.files_named(t, self.hows[t.object_id][0])) is not None}  # fmt: skip
        whole = [obj.object_id for obj in tables if obj.object_id not in named]
        read = self.diff.files
        self.files = {side: read.of(side, whole) | read.named(side, named) for side in ("base", "source", "target")}
        table_ids = [obj.object_id for obj in tables]
        self.target_schemas = schema_version_ids(read.chains["target"], table_ids=table_ids)
        self.source_schemas = schema_histories(read.chains["source"], table_ids=table_ids,
                                               commit_ids=self.diff.source_commits)  # fmt: skip
        self.source_commits = set(self.diff.source_commits)
        for obj in self.merging:
            how = self.hows[obj.object_id][0]
            if obj.kind != ObjectKind.TABLE or how in ("dropped", "taken_from_source", "rows_taken", "rows_kept"):
                continue
            if how == "merged_by_key":
                run = self.key_runs[obj.object_id]
                choices = {c["key_id"]: c["choice"] for c in obj.keys["choices"] if "key_id" in c}
                self.prepared[obj.object_id] = keys.replay(
                    spark_session(), run.sides, run.result, run.only, choices, tag=f"merge-{uuid.uuid4().hex}"
                )
            else:
                plan = self._file_plan(obj)
                self.prepared[obj.object_id] = (
                    plan,
                    self._mixed_deletes(obj, plan.kept, plan.partitions),
                    self._put_back(obj, plan.put_back),
                )

    @gc_paused()
    def apply(self, draft: CommitDraft) -> None:
        self.draft = draft
        for obj in self.diff.objects:
            if obj.merges and obj.resolution == TARGET_WINS:
                self.log["objects"].append(
                    {"kind": obj.kind, "object_id": str(obj.object_id), "name": obj.name, "how": "kept_target",
                     "verdict": obj.verdict, "operations": []}
                )  # fmt: skip
        for obj in self.merging:
            self._object(obj)

    def _object(self, obj: ObjectDiff) -> None:
        how, state, name, parent_id = self.hows[obj.object_id]  # decided in prepare
        new_schema = None
        if obj.kind == ObjectKind.TABLE and not obj.source.dropped:
            if how == "merged_by_key":
                self._merge_by_key(obj)
            elif how in ("taken_from_source", "rows_taken"):
                self._take_source_files(obj)
            elif how != "rows_kept":
                self._table_files(obj)
            if how == "created" or state["columns"] != obj.target.state["columns"]:
                new_schema = state["columns"]
        self.draft.put(
            kind=obj.kind, object_id=obj.object_id, name=name, parent_id=parent_id, state=state,
            dropped=obj.source.dropped, new_schema=new_schema,
        )  # fmt: skip
        replayed = self._operations(obj, how)
        if obj.source_wins and obj.source_wins.superseded:
            self._superseded(obj)
        self.log["objects"].append(
            {"kind": obj.kind, "object_id": str(obj.object_id), "name": obj.name, "how": how, "verdict": obj.verdict,
             "operations": [op.op for op in replayed]}
        )  # fmt: skip

    def _operations(self, obj: ObjectDiff, how: str) -> list[Op]:
        """Record the source's operations this merge replays on the target; log the discarded ones. A table merged
        by key records its data change itself (`_merge_by_key`): only its DDL operations are replayed here."""
        discarded = {pair.source: pair for pair in obj.discarded}
        if how == "created":
            create = next((op for op in obj.source_operations if op.op == "create"), None)
            details = {"name": obj.source.name, **obj.source.state, **(self._origin(create) if create else {})}
            self.draft.operation(object_id=obj.object_id, kind=obj.kind, op="create", details=details)
        replayed = []
        for index, op in enumerate(obj.source_operations):
            if op.op == "create" or (how in ("merged_by_key", "rows_kept") and op.op in DML):
                continue
            pair = discarded.get(index)
            if pair is not None:
                self.log["discarded_operations"].append(
                    {"object": obj.name, "object_id": str(obj.object_id), "op": op.op, "commit": op.commit,
                     "note": pair.decided.note, "reason": pair.decided.reason,
                     "files": list(pair.decided.discarded)}
                )  # fmt: skip
                if set(pair.decided.discarded) >= op.added:
                    continue  # discarded whole; else only some of its files (a merge-on-read delete, A5)
            details = {k: v for k, v in op.details.items() if k != "deltas_on"} | self._origin(op)
            if self.restored.get(obj.object_id):
                details["put_back"] = {**details.get("put_back", {}), **self.restored[obj.object_id]}
            self.draft.operation(object_id=obj.object_id, kind=obj.kind, op=op.op, details=details)
            replayed.append(op)
        return replayed

    def _origin(self, op: Op) -> dict[str, Any]:
        """What a replayed operation records of the operation it replays, so that later merges count it once
        (docs/merge-semantics.md#which-changes-a-merge-replays, `merge_app.selectors.diff._operations`). A
        cherry-pick's operation is its own commit's, picked from another (`picked_from`: a later merge of the other
        does not replay it again); a revert's undoing operation is the revert's own."""
        explicit = self.diff.explicit
        if explicit is None:
            return {"merged_from": op.commit, "origin_position": op.position}
        if explicit.kind == REVERT:
            return {}
        return {"picked_from": list(op.identity)}

    def _superseded(self, obj: ObjectDiff) -> None:
        """Record the target operations a table's `source_wins` superseded, so that no later merge counts them as
        a change of the target's (docs/merge-semantics.md#which-changes-a-merge-replays)."""
        ops = [obj.target_operations[index] for index in obj.source_wins.superseded]
        details = {"choice": SOURCE_WINS, "superseded": [[op.commit, op.position] for op in ops]}
        self.draft.operation(object_id=obj.object_id, kind=obj.kind, op=Operation.Op.RESOLVE, details=details)
        self.log["superseded_operations"] += [
            {"object": obj.name, "object_id": str(obj.object_id), "op": op.op, "commit": op.commit} for op in ops
        ]

    # --- table data: which files the target keeps, takes over and drops ----------------------------------

    def _file_plan(self, obj: ObjectDiff) -> FilePlan:
        """Which files the target drops, keeps and takes over for a table replayed by file (`plan.files`)."""
        base, src, dest = (
            self.files[side].get(obj.object_id, NO_FILES).by_id() for side in ("base", "source", "target")
        )
        overwrites = [overwritten_partitions(op, obj.object_id) for op in files_plan.replayed_overwrites(obj)]
        return files_plan.object_file_plan(obj, base=base, source=src, target=dest, overwrites=overwrites)

    def _take_source_files(self, obj: ObjectDiff) -> None:
        """The target's files of the table become the source's, by reference: `source_wins` for a whole table
        without a key, or a primary-key table whose rows only the source changed since the base (its state is the
        merge's rows, whatever operations made it)."""
        src, dest = (self.files[side].get(obj.object_id, NO_FILES).by_id() for side in ("source", "target"))
        self._remove(obj, [dest[fid] for fid in sorted(set(dest) - set(src))])
        self._take_over(obj, [f for fid, f in src.items() if fid not in dest])

    def _remove(self, obj: ObjectDiff, removed: list[FileRow]) -> None:
        """Take the target's files out, and log each."""
        for file in removed:
            self.draft.remove_file(file)
            self.log["files_removed"].append(
                {"object": obj.name, "kind": file.kind, "id": str(file.id), "path": file.path, "rows": file.row_count}
            )

    def _table_files(self, obj: ObjectDiff) -> None:
        plan, written, put_back = self.prepared[obj.object_id]  # planned on the same files before the commit lock
        deltas = self._add_written(obj, written, DataFile.Kind.DELTA)
        if deltas:  # the target's rows of overwritten partitions in its segments that mix partitions
            details = {
                "deltas_added": [str(d.id) for d in deltas], "segments_touched": [str(d.segment_id) for d in deltas],
                "rows_deleted": sum(d.row_count for d in deltas), "reason": "overwritten_partitions_in_mixed_segments",
            }  # fmt: skip
            self.draft.operation(object_id=obj.object_id, kind=obj.kind, op="delete", details=details)
        self._remove(obj, plan.removed)
        taken = [f for p in plan.put_back for f in [p.segment, *(p.masks or [])]]
        self._take_over(obj, [*plan.added, *taken])
        # Recorded with the revert's undo (`_operations`): a later merge of it takes each segment with its delete
        # file where the target holds the segment in no version, and neither where it does.
        masks = self._add_written(obj, put_back, DataFile.Kind.DELTA)
        written = {str(m.segment_id): [str(m.id)] for m in masks}
        self.restored[obj.object_id] = {str(p.segment.id): written.get(str(p.segment.id), []) for p in plan.put_back
                                        if p.masks is None}  # fmt: skip

    def _put_back(self, obj: ObjectDiff, put_back: list[files_plan.PutBack]) -> list:
        """The delete files that leave live, of each segment a revert puts back on a target that holds it in no
        version (`plan.files.PutBack`), only the rows the reverted commit removed from it (read here with pyarrow)."""
        if not put_back:
            return []
        warehouse, base = Warehouse(settings.LAKEUI_WAREHOUSE), f"{self.diff.catalog.id}/{obj.object_id}"
        columns = [Column.from_dict(c) for c in obj.merged_state["columns"]]
        masks = {}
        for found in put_back:
            if found.masks is not None:
                continue  # written by the revert a merge replays
            segment = _segment_read(found.segment, found.source_deltas)
            rewrites = [_segment_read(f, []) for f in found.rewrites]
            after = [d.path for d in found.base_deltas] if found.in_place else None
            try:
                removed = dml_here.positions_removed(warehouse, segment, columns, after=after, rewrites=rewrites)
            except dml_here.Unsupported as exc:
                raise ApplicationError(
                    "revert_unsupported",
                    f"The rows this revert brings back into {obj.name!r} could not be read ({exc}).",
                ) from None
            mask = np.setdiff1d(np.arange(found.segment.row_count, dtype=np.int64), removed)
            if len(mask):
                masks[str(found.segment.id)] = pa.array(mask, pa.int64())
        return write_position_deltas(warehouse, base, masks, tag=f"revert-{uuid.uuid4().hex}")

    def _mixed_deletes(self, obj: ObjectDiff, kept: list[FileRow], partitions: list[dict[str, Any]]) -> list:
        """The target's own segments that mix partitions (written before the table was partitioned by the source
        overwrite's columns) cannot be dropped whole: the rows of the overwritten `partitions` in them get delete
        files (written here, on Spark), recorded as a `delete` of the merge commit."""
        target = self.files["target"].get(obj.object_id, NO_FILES)
        ids = {column_id for partition in partitions for column_id in partition}
        mixed = {s.id for s in target.unsplit(ids)} & {f.id for f in kept}
        if not mixed:
            return []
        columns = [Column.from_dict(c) for c in obj.merged_state["columns"]]
        reads = [r for r in target.reads() if uuid.UUID(r.id) in mixed]
        warehouse, base = Warehouse(settings.LAKEUI_WAREHOUSE), f"{self.diff.catalog.id}/{obj.object_id}"
        rows = read_segments(spark_session(), warehouse, base, columns, reads, positions=True)
        hit = dml.positions_matching(rows, dml.rows_in_partitions(partitions, columns))
        return write_deltas(warehouse, base, hit, tag=f"merge-{uuid.uuid4().hex}")

    def _add_written(self, obj: ObjectDiff, written: list, kind: str) -> list[DataFile]:
        """Files the merge wrote for `obj` (`engine.segments.WrittenFile`s): added to the commit, and logged."""
        files = [self._written(obj.object_id, w, kind) for w in written]
        for file in files:
            self.draft.add_file(file)
            entry = {"object": obj.name, "kind": file.kind, "id": str(file.id), "path": file.path,
                     "rows": file.row_count, "bytes": file.size_bytes, "written_by_merge": True}  # fmt: skip
            if file.segment_id is not None:
                entry["segment"] = str(file.segment_id)
            self.log["files"].append(entry)
        return files

    def _written(self, table_id, written, kind: str) -> DataFile:
        """A file the merge wrote; a segment gets the schema its table has after this commit (CommitDraft)."""
        return DataFile(
            catalog=self.diff.catalog, table_id=table_id, kind=kind, path=written.path, row_count=written.row_count,
            size_bytes=written.size_bytes, stats=written.stats, partition_values=written.partition_values,
            segment_id=uuid.UUID(written.segment_id) if written.segment_id else None,
        )  # fmt: skip

    def _merge_by_key(self, obj: ObjectDiff) -> None:
        """A primary-key table: write the merged rows of the keys that change, and delete files for the old ones."""
        segments, deltas, figures, touched = self.prepared[obj.object_id]
        new_segments = self._add_written(obj, segments, DataFile.Kind.SEGMENT)
        new_deltas = self._add_written(obj, deltas, DataFile.Kind.DELTA)
        details = {
            "segments_added": [str(f.id) for f in new_segments], "deltas_added": [str(f.id) for f in new_deltas],
            "segments_removed": [], "deltas_removed": [], "segments_touched": [str(s.id) for s in touched],
            "by_key": obj.keys and {k: v for k, v in obj.keys.items() if k not in ("listed", "choices")},
            **figures,
            # The rows it writes replay the source's changes of the table, all at once: under the source head, so
            # that a later merge whose base holds that head does not bring them back a second time.
            "merged_from": self.diff.source_head.id, "origin_position": KEY_MERGE_POSITION,
        }  # fmt: skip
        op = "update" if figures["rows_replaced"] else "insert"
        self.draft.operation(object_id=obj.object_id, kind=obj.kind, op=op, details=details)

    def _take_over(self, obj: ObjectDiff, added: list[FileRow]) -> None:
        """Make `added` live on the target by reference. A segment written with a schema version the target's
        history lacks reads with an invisible copy of it (4.5); src versions no merged segment uses are discarded."""
        history = self.target_schemas.get(obj.object_id, set())
        copies: dict[int, SchemaVersion] = {}
        for file in added:
            version, visible = None, None
            if file.kind == DataFile.Kind.SEGMENT:
                version = file.schema_version
                if version.id in history:
                    visible = version.visible
                else:
                    if version.id not in copies:
                        copies[version.id] = self.draft.schema_copy(version)
                    version, visible = copies[version.id], False
            self.draft.add_file(file, new=False, schema_version=version, schema_visible=visible)
            self.log["files"].append(
                {"object": obj.name, "kind": file.kind, "id": str(file.id), "path": file.path, "rows": file.row_count,
                 "bytes": file.size_bytes, "schema_visible": visible}
            )  # fmt: skip
        for version in self.source_schemas.get(obj.object_id, []):
            if version.commit_id not in self.source_commits or not version.visible:
                continue
            entry = {"object": obj.name, "source_version": version.id, "columns": [c["name"] for c in version.columns]}
            key = "invisible" if version.id in copies else "discarded"
            self.log["schema_versions"][key].append(entry)


def _segment_read(segment: FileRow, deltas: list[FileRow]) -> SegmentRead:
    columns = tuple(Column.from_dict(c) for c in segment.schema_version.columns)
    return SegmentRead(id=str(segment.id), path=segment.path, columns=columns, deltas=tuple(d.path for d in deltas))


def _how(obj: ObjectDiff) -> tuple[str, dict[str, Any], str, Any]:
    """How the merge writes an object (`plan.files.how`), and its state, name and parent after the merge."""
    src, how = obj.source, files_plan.how(obj, source_wins=SOURCE_WINS)
    if how == "dropped":
        return how, obj.target.state, obj.target.name, obj.target.parent_id
    if how in ("created", "taken_from_source"):
        return how, dict(src.state), src.name, src.parent_id
    name = states.name_merge(obj.base.name, src.name, obj.target.name)
    return how, dict(obj.merged_state), name, obj.target.parent_id
