"""The diff as the web reads it (the diff page, the API diff, `diff/keys`): answered at once, never by waiting
for a job. A merge's own plan is `services.merge_plans.merge_plan`, made in a worker.

The metadata diff is made here; what it needs a worker for (the key comparison of primary-key tables changed on
both sides, the virtual base of a criss-cross history) is served as stored for these heads, or, while not stored
yet, marked pending with the key comparison job to follow. That job is started once per pair of heads, however
many pages and polls read the diff meanwhile.
"""

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from catalog_app.models import Catalog, Commit
from catalog_app.selectors.refs import ref_resolve
from lakeui.jobs.models import Job
from lakeui.jobs.selectors import job_brief, job_started_for
from lakeui.jobs.services import job_create
from lakeui.memory import gc_paused
from merge_app.job_specs import KeysSpec
from merge_app.selectors.diff import BasesNotMerged, MergeDiff, diff_as_dict, merge_diff
from merge_app.services.keys import KEYS_JOB

# A finished key comparison job is reused this long (its failure shown, not started again at once by the page that
# reloads when it ends); after that a read that still finds the comparison missing starts a new one.
KEYS_JOB_REUSED_FOR = 60


@dataclass(frozen=True)
class DiffSide:
    """A side of a diff read: the ref as asked for, and its head."""

    name: str
    commit: Commit


@dataclass(frozen=True)
class DiffRead:
    """What the diff page and the API diff answer at once: the diff as far as it is known (None while the virtual
    base of a criss-cross history is not made: only the heads and the bases are known), and the key comparison job
    to follow while primary-key tables are pending (`job`, None once the diff is complete)."""

    source: DiffSide
    target: DiffSide
    diff: MergeDiff | None
    bases: list[str] = field(default_factory=list)
    job: Job | None = None

    @property
    def complete(self) -> bool:
        return self.diff is not None and not self.diff.pending

    def as_dict(self) -> dict[str, Any]:
        """The diff report (`diff_as_dict`) with `complete` and the job to follow (`job_brief`), or null."""
        job = {"job": job_brief(self.job) if self.job is not None else None, "complete": self.complete}
        if self.diff is not None:
            return {**diff_as_dict(self.diff), **job}
        return {
            "source": {"ref": self.source.name, "head": self.source.commit.id},
            "target": {"ref": self.target.name, "head": self.target.commit.id},
            "base": None, "bases": self.bases, "virtual_base": True, "mergeable": False, "up_to_date": False,
            "resolution": {}, "counts": {"objects": 0, "conflicts": 0, "discarded": 0}, "objects": [], **job,
        }  # fmt: skip


def merge_diff_read(*, catalog: Catalog, source: str, target: str, user: AbstractBaseUser | None) -> DiffRead:
    """The diff of the diff page and the API diff, answered at once: no web thread waits for a job. What is stored
    for these heads is served as it is; primary-key tables not compared by key yet are pending, and a criss-cross
    history whose virtual base is not made yet has no objects yet. Both come with the key comparison job of these
    heads (`keys_job_for`), which makes the virtual base and stores the comparisons: a read once it has finished
    is the whole diff."""
    try:
        diff = merge_diff(catalog=catalog, source=source, target=target)
    except BasesNotMerged as unmerged:
        heads = [ref_resolve(catalog=catalog, ref=ref).commit for ref in (source, target)]
        job = keys_job_for(catalog=catalog, source_head=heads[0].id, target_head=heads[1].id, user=user)
        src, dest = DiffSide(source, heads[0]), DiffSide(target, heads[1])
        return DiffRead(source=src, target=dest, diff=None, bases=unmerged.bases, job=job)
    src, dest = DiffSide(diff.source, diff.source_head), DiffSide(diff.target, diff.target_head)
    if not diff.pending:
        return DiffRead(source=src, target=dest, diff=diff)
    job = keys_job_for(catalog=catalog, source_head=diff.source_head.id, target_head=diff.target_head.id, user=user)
    return DiffRead(source=src, target=dest, diff=diff, job=job)


@gc_paused()  # the diff's objects are freed before the collector resumes, which so never walks them (0.3 s of 10,000)
def merge_diff_report(*, catalog: Catalog, source: str, target: str, user: AbstractBaseUser | None) -> dict[str, Any]:
    """`merge_diff_read` as the API answers it (`DiffRead.as_dict`)."""
    return merge_diff_read(catalog=catalog, source=source, target=target, user=user).as_dict()


def keys_job_for(*, catalog: Catalog, source_head: str, target_head: str, user: AbstractBaseUser | None) -> Job:
    """The key comparison job of these heads: the one started already (queued or running, or finished less than
    KEYS_JOB_REUSED_FOR seconds ago), else a new one on the interactive worker. Started once per pair of heads
    however many pages and polls read the diff meanwhile; two reads at the same instant may start two, the second
    of which finds the comparison stored and does nothing."""
    params = KeysSpec(catalog_id=str(catalog.id), source=source_head, target=target_head).to_params()
    recent = timezone.now() - timedelta(seconds=KEYS_JOB_REUSED_FOR)
    found = job_started_for(kind=KEYS_JOB, params=params, finished_since=recent)
    return found if found is not None else job_create(kind=KEYS_JOB, params=params, requested_by=user)
