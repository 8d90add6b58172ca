"""REVERT COMMIT and CHERRY-PICK COMMIT (docs/merge-semantics.md#revert-and-cherry-pick): merges with a given base.

A cherry-pick merges a commit into a branch from the commit's parent: what the commit changed is replayed on the
branch, under the rule tables. A revert merges the commit's parent into the branch from the commit itself: what
the commit changed is changed back (each data operation undone by its inverse, files taken out and put back by
reference), and a later change of what it wrote is a conflict (note V*). A primary-key table is merged by key, as
in any merge. Each adds one commit with no second parent, or changes nothing (already picked, nothing to undo);
a range of picks is all or nothing. Both plan and write through the merge's own steps (`merge_plans.keys_compared`,
`merge_writer.MergeWriter`) and are logged as merges of their kind.

As a merge, a pick plans and writes before it takes the catalog's commit lock, and under it only checks the head
and commits (`commits_pick`): each commit of a range is planned on the result of the one before, and the whole range
commits or none of it.
"""

import time
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from catalog_app.engine.frames import cache_scope
from catalog_app.models import Catalog, Commit
from catalog_app.selectors.refs import commit_by_id, commit_chain, ref_resolve
from catalog_app.services.access import branch_write_check
from catalog_app.services.commits import commit_begin, commit_begin_detached, commit_publish
from lakeui.errors import ApplicationError, ConflictError
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_create
from merge_app.job_specs import PickSpec
from merge_app.models import Merge
from merge_app.selectors.diff import CHERRY_PICK, REVERT, ExplicitBase, MergeDiff, merge_diff_of, resolution_check
from merge_app.selectors.graph import CommitGraph
from merge_app.services.merge_logs import merge_conflict_error, merge_log
from merge_app.services.merge_plans import keys_compared
from merge_app.services.merge_writer import MergeWriter
from merge_app.services.merges import MESSAGE_KEPT_MOVING, PLANS, merge_commit, merge_recorded, merge_write

PICK_JOB = PickSpec.KIND
KINDS = (REVERT, CHERRY_PICK)
MAX_RANGE = 100  # commits one cherry-pick of a range applies


def pick_submit(
    *,
    catalog: Catalog,
    kind: str,
    branch: str,
    commit: str | None = None,
    start: str | None = None,
    end: str | None = None,
    user: AbstractBaseUser | None = None,
    resolution: dict | None = None,
) -> Job:
    """Check what needs no worker (the branch, the commits, the write permission) and queue the job. A revert
    takes one commit of the branch's history; a cherry-pick one commit of any ref, or the range `start..end` (the
    commits `end` reaches and `start` does not, as git's `rev-list start..end`)."""
    dest = ref_resolve(catalog=catalog, ref=branch)
    if dest.kind != "branch":
        raise ApplicationError("read_only_ref", f"{branch!r} is a {dest.kind}; a {_verb(kind)} needs a branch.")
    branch_write_check(catalog=catalog, branch=branch)
    commits = pick_commits(catalog=catalog, kind=kind, head=dest.commit, commit=commit, start=start, end=end)
    spec = PickSpec(
        catalog_id=str(catalog.id), kind=kind, branch=branch, commits=tuple(commits),
        resolution=resolution_check(resolution) if resolution else None,
    )  # fmt: skip
    return job_create(kind=spec.KIND, params=spec.to_params(), requested_by=user)


def pick_commits(
    *, catalog: Catalog, kind: str, head: Commit, commit: str | None, start: str | None, end: str | None
) -> list[str]:
    """The commits a revert or a cherry-pick applies, oldest first; bad input is a 400 naming the problem."""
    if kind not in KINDS:
        raise ApplicationError("invalid_input", f"kind is one of {KINDS}.")
    if (commit is None) == (start is None or end is None) or (kind == REVERT and commit is None):
        shape = "`commit`" if kind == REVERT else "`commit`, or `from` and `to` (a range)"
        raise ApplicationError("invalid_input", f"A {_verb(kind)} takes {shape}.")
    graph = CommitGraph(catalog.id)
    if commit is not None:
        picked = [ref_resolve(catalog=catalog, ref=commit).commit]
    else:
        upto = ref_resolve(catalog=catalog, ref=end).commit
        ids = graph.sides(upto.id, ref_resolve(catalog=catalog, ref=start).commit.id).source
        if not ids:
            raise ApplicationError("invalid_input", f"The range {start}..{end} holds no commit.")
        if len(ids) > MAX_RANGE:
            raise ApplicationError("invalid_input", f"A range picks at most {MAX_RANGE} commits ({len(ids)} given).")
        picked = [commit_by_id(commit_id) for commit_id in ids]
    for one in picked:
        if one.parent_id is None:
            raise ApplicationError("invalid_input", f"Commit {one.id[:12]} is the catalog's first: it has no parent.")
        if kind == CHERRY_PICK and one.merge_parent_id is not None:
            raise ApplicationError(
                "invalid_input",
                f"Commit {one.id[:12]} is a merge commit: merge its branch instead of cherry-picking it.",
            )
    if kind == REVERT and graph.sides(picked[0].id, head.id).source:
        raise ApplicationError(
            "invalid_input", f"Commit {picked[0].id[:12]} is not in the branch's history: only its own can be reverted."
        )
    return [one.id for one in picked]


@cache_scope()
def commits_pick(
    *,
    catalog: Catalog,
    kind: str,
    branch: str,
    commits: list[str],
    user: AbstractBaseUser | None = None,
    job: Job | None = None,
    resolution: dict | None = None,
) -> list[Merge]:
    """Apply each commit in turn, each planned on the head the previous one made; a conflict refuses the lot
    (409 `merge_conflict`, logged) and the branch stays as it was.

    As a merge does, everything that reads or writes data (the plan, the key comparison, the writer's files) runs
    before the catalog's commit lock is taken: each commit of the range is planned and written on a commit no
    branch points to yet (`commit_begin_detached`, metadata only while its lock is held), made after the previous
    one's. Under the lock the branch must still be at the head the range was planned on (else it is planned again);
    then it moves along those commits, all of them or none (`commit_publish`)."""
    for _ in range(PLANS):
        planned = _picks_planned(catalog, kind=kind, branch=branch, commits=commits, user=user, job=job,
                                 resolution=resolution)  # fmt: skip
        with transaction.atomic():
            done = _picks_published(catalog, planned, branch=branch, commits=commits, user=user, job=job)
        if done is not None:
            return done
    raise ConflictError("branch_moved", MESSAGE_KEPT_MOVING.format(source=commits[-1], target=branch, times=PLANS))


@dataclass(frozen=True)
class _Planned:
    """One commit of a range, planned and written where no branch points: its diff, its writer (None when there is
    nothing to write) and the commit it made (None if up to date)."""

    diff: MergeDiff
    writer: MergeWriter | None
    result: Commit | None
    started: float


def _picks_planned(catalog: Catalog, *, kind, branch, commits, user, job, resolution) -> list[_Planned]:
    """Plan and write each commit of the range on the result of the one before, outside the commit lock. A conflict
    refuses the lot (logged, 409 `merge_conflict`)."""
    head = ref_resolve(catalog=catalog, ref=branch).commit
    planned = []
    for commit_id in commits:
        started = time.monotonic()
        explicit = ExplicitBase(kind=kind, commit=commit_by_id(commit_id))
        source_head = explicit.source_head
        diff = merge_diff_of(
            catalog=catalog, source=explicit.commit.id, target=branch, source_head=source_head, target_head=head,
            source_chain=commit_chain(source_head), target_chain=commit_chain(head), resolution=resolution,
            explicit=explicit,
        )  # fmt: skip
        plan = keys_compared(diff)
        if not plan.diff.mergeable:
            merge = merge_log(plan.diff, status=Merge.Status.CONFLICT, user=user, job=job, log={"range": commits})
            raise merge_conflict_error(merge)
        writer = result = None
        if not plan.diff.up_to_date:
            writer = MergeWriter(plan.diff, key_runs=plan.key_runs)
            writer.prepare()
            with transaction.atomic():
                draft = commit_begin_detached(catalog=catalog, parent=head)
                result = merge_write(plan.diff, writer, draft, user=user, job=None, extra={})
            head = result
        planned.append(_Planned(plan.diff, writer, result, started))
    return planned


def _picks_published(catalog: Catalog, planned: list[_Planned], *, branch, commits, user, job) -> list[Merge] | None:
    """Under the commit lock: move the branch along the planned commits and log each pick, or None (nothing
    changed) if the branch is no longer at the head the range was planned on. A job makes one commit (the commit
    fenced by its claim): the range's last; the logs of the others name the job too."""
    draft = commit_begin(catalog=catalog, branch=branch)
    if draft.parent.id != planned[0].diff.target_head.id:
        return None  # the commits made for the old head are left to garbage collection
    done = []
    made = [one.result for one in planned if one.result is not None]
    for one in planned:
        if one.result is None:
            done.append(merge_commit(one.diff, None, draft, user=user, job=job, extra={}, started=one.started))
            continue
        last = one.result is made[-1]
        commit_publish(catalog=catalog, branch=branch, commit=one.result, job=job if last else None)
        done.append(merge_recorded(one.diff, one.writer, one.result, user=user, job=job, extra={}, started=one.started))
    Merge.objects.filter(id__in=[merge.id for merge in done]).update(job=job)
    return done


def pick_results(merges: list[Merge]) -> dict[str, Any]:
    """What a revert or cherry-pick job returns."""
    return {
        "merges": [str(merge.id) for merge in merges],
        "commits": [merge.commit_id for merge in merges if merge.commit_id],
        "status": "up_to_date" if all(merge.commit_id is None for merge in merges) else "merged",
    }


def _verb(kind: str) -> str:
    return "revert" if kind == REVERT else "cherry-pick"
