"""REVERT COMMIT and CHERRY-PICK COMMIT (docs/merge-semantics.md#revert-and-cherry-pick): merges with a given base.

A cherry-pick merges a commit into a branch from the commit's parent: what the commit changed is replayed on the
branch, under the rule tables. A revert merges the commit's parent into the branch from the commit itself: what
the commit changed is changed back (each data operation undone by its inverse, files taken out and put back by
reference), and a later change of what it wrote is a conflict (note V*). A primary-key table is merged by key, as
in any merge. Each adds one commit with no second parent, or changes nothing (already picked, nothing to undo);
a range of picks is all or nothing. Both plan with the merge's own step (`merge_plans.keys_compared`) and go
through the merge pipeline (`pipeline.MergeRun`: prepare, result, publish), logged as merges of their kind.

As a merge, a pick plans and writes before it takes the catalog's commit lock, and under it only checks the head
and commits (`commits_pick`): each commit of a range is planned on the result of the one before, and the whole range
commits or none of it.
"""

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from catalog_app.engine.frames import cache_scope
from catalog_app.models import Catalog, Commit
from catalog_app.selectors.refs import commit_by_id, commit_chain, ref_resolve
from catalog_app.services.access import branch_write_check
from catalog_app.services.commits import commit_begin
from lakeui.errors import ApplicationError, ConflictError
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_create
from merge_app.job_specs import PickSpec
from merge_app.models import Merge
from merge_app.plan.records import CHERRY_PICK, REVERT
from merge_app.selectors.diff import (
    ExplicitBase,
    MergeDiff,
    merge_diff_of,
    resolution_check,
    resolution_columns_check,
)
from merge_app.selectors.graph import CommitGraph
from merge_app.services.merge_plans import keys_compared
from merge_app.services.merges import ATTEMPTS, MESSAGE_KEPT_MOVING
from merge_app.services.pipeline import MergeMoved, MergeRun, Prepared

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
    resolution = resolution_check(resolution) if resolution else None
    # Column rules name columns of the branch's tables or of the commits'.
    resolution_columns_check(catalog=catalog, refs=[*commits[-1:], branch], resolution=resolution)
    spec = PickSpec(
        catalog_id=str(catalog.id), kind=kind, branch=branch, commits=tuple(commits), resolution=resolution
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
    for _ in range(ATTEMPTS):
        planned = _picks_planned(catalog, kind=kind, branch=branch, commits=commits, user=user, job=job,
                                 resolution=resolution)  # fmt: skip
        try:
            with transaction.atomic():
                return _picks_published(catalog, planned, branch=branch, job=job)
        except MergeMoved:
            continue  # the commits made for the old head are left to garbage collection
    raise ConflictError("branch_moved", MESSAGE_KEPT_MOVING.format(source=commits[-1], target=branch, times=ATTEMPTS))


@dataclass(frozen=True)
class _PickPrepared:
    """One commit of a range on its way through the merge pipeline: its diff and run, and its result committed
    where no branch points with its plan logged (None if up to date)."""

    diff: MergeDiff
    run: MergeRun
    prepared: Prepared | None


def _picks_planned(catalog: Catalog, *, kind, branch, commits, user, job, resolution) -> list[_PickPrepared]:
    """Plan, prepare and commit each commit of the range on the result of the one before, outside the commit lock,
    each result's plan logged. A conflict refuses the lot (logged, 409 `merge_conflict`)."""
    head = ref_resolve(catalog=catalog, ref=branch).commit
    planned = []
    for commit_id in commits:
        run = MergeRun(user=user, job=job)
        explicit = ExplicitBase(kind=kind, commit=commit_by_id(commit_id))
        source_head = explicit.source_head
        diff = merge_diff_of(
            catalog=catalog, source=explicit.commit.id, target=branch, source_head=source_head, target_head=head,
            source_chain=commit_chain(source_head), target_chain=commit_chain(head), resolution=resolution,
            explicit=explicit,
        )  # fmt: skip
        compared = keys_compared(diff)
        diff = compared.diff
        if not diff.mergeable:
            raise run.refused(diff, log={"range": commits})
        writer, prepared = run.writer(diff, compared.key_runs), None
        if writer is not None:
            head = run.result(diff, writer, parent=head)
            prepared = run.prepared(diff, writer, head, checkpoint=False)
        planned.append(_PickPrepared(diff, run, prepared))
    return planned


def _picks_published(catalog: Catalog, planned: list[_PickPrepared], *, branch, job) -> list[Merge]:
    """Under the commit lock: move the branch along the planned results, each published as any merge is
    (`MergeRun.publish`), and log the picks that were up to date; `MergeMoved` (nothing changed) if the branch is no
    longer at the head the range was planned on. Each publish is fenced by the job's claim; the job's one commit is
    the range's last, and the logs of the others name the job too."""
    draft = commit_begin(catalog=catalog, branch=branch)
    if draft.parent.id != planned[0].diff.target_head.id:
        raise MergeMoved
    made = [one for one in planned if one.prepared is not None]
    done = [
        one.run.commit(one.diff, None, draft) if one.prepared is None
        else one.run.publish(one.prepared, commit_of_job=one is made[-1])
        for one in planned
    ]  # fmt: skip
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
