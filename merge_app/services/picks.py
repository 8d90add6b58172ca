"""REVERT COMMIT and CHERRY-PICK COMMIT (docs/merge-semantics.md#revert-and-cherry-pick): merges with a given base.

A cherry-pick merges a commit into a branch from the commit's parent: what the commit changed is replayed on the
branch, under the rule tables. A revert merges the commit's parent into the branch from the commit itself: what
the commit changed is changed back (each data operation undone by its inverse, files taken out and put back by
reference), and a later change of what it wrote is a conflict (note V*). A primary-key table is merged by key, as
in any merge. Each adds one commit with no second parent, or changes nothing (already picked, nothing to undo);
a range of picks is all or nothing. Both plan and write through the merge's own steps (`merges.keys_compared`,
`merges.MergeWriter`) and are logged as merges of their kind.

A pick holds the catalog's commit lock while it plans and writes (its work is the size of one commit): each
commit of a range is planned on the head the previous one made, and the whole range commits or none of it.
"""

import time
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from catalog_app.engine.frames import cache_scope
from catalog_app.models import Catalog, Commit
from catalog_app.selectors.refs import commit_by_id, commit_chain, ref_resolve
from catalog_app.services.access import branch_write_check
from catalog_app.services.commits import CommitDraft, commit_begin
from lakeui.errors import ApplicationError
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_create
from merge_app.models import Merge
from merge_app.selectors.diff import CHERRY_PICK, REVERT, ExplicitBase, merge_diff_of, resolution_check
from merge_app.selectors.graph import CommitGraph
from merge_app.services.merges import (
    MergeRefused,
    MergeWriter,
    keys_compared,
    merge_commit,
    merge_conflict_error,
    merge_log,
)

PICK_JOB = "commit_pick"
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
    params = {"catalog_id": str(catalog.id), "kind": kind, "branch": branch, "commits": commits}
    if resolution:
        params["resolution"] = resolution_check(resolution)
    return job_create(kind=PICK_JOB, params=params, requested_by=user)


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
    (409 `merge_conflict`, logged) and the branch stays as it was."""
    done = []
    try:
        with transaction.atomic():
            for index, commit_id in enumerate(commits):
                draft = commit_begin(catalog=catalog, branch=branch)
                explicit = ExplicitBase(kind=kind, commit=commit_by_id(commit_id))
                # A job makes one commit (the commit fenced by its claim): the range's last, in the same transaction
                # as the others; their logs name the job too.
                last = index == len(commits) - 1
                done.append(_pick(draft, explicit, branch=branch, user=user, job=job if last else None,
                                  resolution=resolution))  # fmt: skip
            Merge.objects.filter(id__in=[merge.id for merge in done]).update(job=job)
    except MergeRefused as refused:
        merge = merge_log(refused.diff, status=Merge.Status.CONFLICT, user=user, job=job, log={"range": commits})
        raise merge_conflict_error(merge) from None
    return done


def _pick(draft: CommitDraft, explicit: ExplicitBase, *, branch: str, user, job, resolution) -> Merge:
    started = time.monotonic()
    source_head = explicit.source_head
    diff = merge_diff_of(
        catalog=draft.catalog, source=explicit.commit.id, target=branch, source_head=source_head,
        target_head=draft.parent, source_chain=commit_chain(source_head), target_chain=draft.chain,
        resolution=resolution, explicit=explicit,
    )  # fmt: skip
    plan = keys_compared(diff)
    writer = None
    if plan.diff.mergeable and not plan.diff.up_to_date:
        writer = MergeWriter(plan.diff, key_runs=plan.key_runs)
        writer.prepare()
    return merge_commit(plan.diff, writer, draft, user=user, job=job, extra={}, started=started)


def pick_results(merges: list[Merge]) -> dict[str, Any]:
    """What a revert or cherry-pick job returns."""
    return {
        "merges": [str(merge.id) for merge in merges],
        "commits": [merge.commit_id for merge in merges if merge.commit_id],
        "status": "up_to_date" if all(merge.commit_id is None for merge in merges) else "merged",
    }


def _verb(kind: str) -> str:
    return "revert" if kind == REVERT else "cherry-pick"
