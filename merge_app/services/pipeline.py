"""The one pipeline every merge goes through (docs/architecture.md#the-path-of-a-merge): a merge (`merges.py`), the
merge queue's preparation and publish of an entry (`merges.merge_result_checked`, `queue.py`), each commit of a
revert or a cherry-pick (`picks.py`) and each step of a virtual base (`merge_plans.bases_merge`).

A caller plans (`merge_plans.merge_plan`, or a pick's plan with its given base), then runs its `MergeRun` step by
step: `refused` (a plan the rules refuse, logged), `prepare` (the writer's reads and data work, before any lock),
`result` (the planned merge committed where no branch points), `prepared` (that result's plan logged, and kept as
the job's checkpoint), and `publish`, the one publish of a merge: under the commit lock, the target moved to the
result by compare-and-swap of both heads, fenced by the job's claim, and the logged plan made the audit log. A
merge that wrote no data and has no checks commits on the target itself, under the lock (`commit`), as one
metadata-only commit costs less than a result and its publish.
"""

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from catalog_app.engine.warehouse import Warehouse, files_missing
from catalog_app.models import Commit
from catalog_app.selectors.refs import commit_by_id, ref_resolve
from catalog_app.services.commits import CommitDraft, commit_begin, commit_begin_detached, commit_publish
from catalog_app.spark import spark_session
from checks_app.selectors import check_run_dict, checks_verdict
from checks_app.services.checks import checks_error, checks_run
from lakeui.errors import ConflictError
from lakeui.jobs.models import Job
from lakeui.jobs.registry import ClaimLost
from lakeui.jobs.services import job_checkpoint_save, job_claim_held
from merge_app.models import Merge
from merge_app.plan.records import REVERT
from merge_app.selectors.diff import MergeDiff
from merge_app.services.events import merge_event_emit
from merge_app.services.merge_logs import merge_conflict_error, merge_log, merge_log_row
from merge_app.services.merge_writer import MergeWriter

PREPARED = "merge_prepared"  # the job checkpoint of a merge whose result is prepared (`MergeRun.prepared`)


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A merge's result committed where no branch points (`result`), with the files it wrote (`written`), and its
    plan logged (`merge`: a planned dry run naming the result until it is published, then the merge's audit log)."""

    merge: Merge
    result: Commit
    written: list[str]

    def checkpoint(self) -> dict[str, Any]:
        return {PREPARED: {"merge": str(self.merge.id), "result": self.result.id, "written": self.written}}


class MergeMoved(Exception):
    """A head (the target's or the source's) moved between planning and the commit lock: nothing was published."""


class MergeRefused(Exception):
    def __init__(self, diff: MergeDiff) -> None:
        self.diff = diff


@dataclasses.dataclass
class MergeRun:
    """One merge on its way through the pipeline: who runs it (`user`, `job`), what its audit log gets besides the
    plan (`extra`), and when it started (its timings)."""

    user: AbstractBaseUser | None = None
    job: Job | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    started: float = dataclasses.field(default_factory=time.monotonic)

    def timings(self) -> dict[str, int]:
        return {"total_ms": _ms(time.monotonic() - self.started)}

    def refused(self, diff: MergeDiff, *, dry_run: bool = False, log: dict[str, Any] | None = None) -> ConflictError:
        """A plan the rules refuse: logged as a conflict (with `log`, else the run's `extra`), and the 409
        `merge_conflict` to raise."""
        merge = merge_log(diff, status=Merge.Status.CONFLICT, user=self.user, job=self.job, dry_run=dry_run,
                          timings=self.timings(), log=self.extra if log is None else log)  # fmt: skip
        return merge_conflict_error(merge)

    def writer(self, diff: MergeDiff, key_runs: Mapping) -> MergeWriter | None:
        """The writer of a mergeable plan with its files written, outside any lock (key merges, delete files); None
        when there is nothing to write (refused or up to date)."""
        if not diff.mergeable or diff.up_to_date:
            return None
        writer = MergeWriter(diff, key_runs=key_runs)
        writer.write_files()
        return writer

    def result(
        self, diff: MergeDiff, writer: MergeWriter | None, *, parent: Commit | None = None, message: str | None = None
    ) -> Commit:
        """The planned merge committed where no branch points: on `parent` (the target head it was planned on,
        unless a pick of a range puts it on the result of the one before), the source head its second parent
        (none for a revert or a cherry-pick)."""
        with transaction.atomic():
            draft = commit_begin_detached(catalog=diff.catalog, parent=parent or diff.target_head)
            return self.write(diff, writer, draft, message=message)

    def checked(
        self, diff: MergeDiff, writer: MergeWriter, guards: list, *, override: dict | None, dry_run: bool = False
    ) -> Commit:
        """The merge's result committed where no branch points (after the target head, with the source head as
        second parent) and judged by the checks guarding the target (docs/merge-semantics.md#merge-checks); the runs
        go into the audit log (`extra`). Refused with 409 `checks_failed` (logged, nothing merged) when a check that
        is not advisory fails, unless an admin overrides it with a reason (`override`: reason and by, logged)."""
        result = self.result(diff, writer)
        runs = checks_run(spark_session, catalog=diff.catalog, checks=guards, commit=result,
                          source_head=diff.source_head.id, target_head=diff.target_head.id, job=self.job,
                          user=self.user)  # fmt: skip
        verdict = checks_verdict(runs=runs)
        self.extra["checks"] = [check_run_dict(one) for one in runs]
        self.extra["checked_result"] = result.id
        if override:  # the SQL checks this attempt overrode (none, if they passed)
            self.extra["checks_overridden"] = {**override, "checks": verdict.failed}
        elif verdict.failed and not dry_run:
            log = {**writer.log, **self.extra}
            raise checks_failed_error(
                merge_log(diff, status=Merge.Status.CHECKS_FAILED, user=self.user, job=self.job, log=log)
            )
        return result

    def prepared(self, diff: MergeDiff, writer: MergeWriter, result: Commit, *, checkpoint: bool = True) -> Prepared:
        """The result's plan logged with what it will publish (a planned dry run naming it) and, for a job, kept as
        its checkpoint (`checkpoint`), so that a later run of it publishes the result as it is (`resumed`)."""
        with transaction.atomic():
            merge = merge_log(diff, status=Merge.Status.PLANNED, user=self.user, job=None, dry_run=True,
                              commit=result, log={**writer.log, **self.extra}, timings=self.timings())  # fmt: skip
            prepared = Prepared(merge, result, writer.written())
            if checkpoint and self.job is not None:
                job_checkpoint_save(job=self.job, checkpoint=prepared.checkpoint())
        return prepared

    def publish(
        self,
        prepared: Prepared,
        *,
        via_merge_request: int | None = None,
        on_merged: Callable[[Merge], None] | None = None,
        log: dict[str, Any] | None = None,
        timings: dict[str, int] | None = None,
        commit_of_job: bool = True,
    ) -> Merge:
        """The one publish of a merge: `merge_published`, fenced by this run's job's claim."""
        return merge_published(prepared, job=self.job, via_merge_request=via_merge_request, on_merged=on_merged,
                               timings=timings or self.timings(), log=log, commit_of_job=commit_of_job)  # fmt: skip

    def resumed(self, *, via_merge_request: int | None, on_merged: Callable[[Merge], None] | None) -> Merge | None:
        """A run of a merge job whose earlier run died after it prepared its result (`prepared`): that result
        published as it is, with no Spark and no plan, if neither head moved since it was planned and every file it
        wrote is still there; otherwise it is discarded and None (the merge plans again), as when nothing was
        prepared."""
        found = ((self.job.checkpoint or {}) if self.job is not None else {}).get(PREPARED)
        if found is None:
            return None
        merge = Merge.objects.filter(id=found["merge"], status=Merge.Status.PLANNED, job=None).first()
        prepared = Prepared(merge, commit_by_id(found["result"]), found["written"]) if merge is not None else None
        if prepared is None or files_missing(Warehouse(settings.LAKEUI_WAREHOUSE), prepared.written):
            self.discarded()
            return None
        timings = {**merge.timings, "resumed_ms": self.timings()["total_ms"]}
        try:
            return self.publish(prepared, via_merge_request=via_merge_request, on_merged=on_merged, timings=timings)
        except MergeMoved:
            self.discarded()
            return None

    def discarded(self) -> None:
        """A prepared result that will not be published: the job forgets it. It stays what it is, a commit no branch
        points to, logged by its plan (a planned dry run naming it), as a checked result whose target moved does."""
        if self.job is not None and self.job.checkpoint is not None:
            with transaction.atomic():
                job_checkpoint_save(job=self.job, checkpoint=None)

    def committed(
        self, diff: MergeDiff, writer: MergeWriter | None, *, via_merge_request: int | None,
        on_merged: Callable[[Merge], None] | None,
    ) -> Merge:  # fmt: skip
        """A merge with nothing prepared committed on the target itself, in one transaction under the commit lock, if
        both heads are still the planned ones (else `MergeMoved`, nothing changed): `commit`, then `on_merged`."""
        with transaction.atomic():
            draft = commit_begin(catalog=diff.catalog, branch=diff.target, via_merge_request=via_merge_request)
            src = ref_resolve(catalog=diff.catalog, ref=diff.source)
            if (src.commit.id, draft.parent.id) != (diff.source_head.id, diff.target_head.id):
                raise MergeMoved
            merge = self.commit(diff, writer, draft)
            if on_merged is not None:
                on_merged(merge)
            return merge

    def commit(self, diff: MergeDiff, writer: MergeWriter | None, draft: CommitDraft) -> Merge:
        """Under the commit lock, on the planned heads: refuse (`MergeRefused`), log an up-to-date merge, or stage
        and commit on the target, the audit log written with the commit's rows (made while the database stores
        them)."""
        if not diff.mergeable:
            raise MergeRefused(diff)
        if diff.up_to_date:
            return merge_log(diff, status=Merge.Status.UP_TO_DATE, user=self.user, job=self.job,
                             timings=self.timings(), log=self.extra)  # fmt: skip
        logged: list[Merge] = []

        def audit_log(commit: Commit) -> Merge:
            row = merge_log_row(diff, status=Merge.Status.MERGED, user=self.user, job=self.job, commit=commit,
                                log={**writer.log, **self.extra}, timings=self.timings())  # fmt: skip
            logged.append(row)
            return logged[0]

        self.write(diff, writer, draft, job=self.job, also=audit_log)
        merge_event_emit(logged[0])
        return logged[0]

    def write(
        self, diff: MergeDiff, writer: MergeWriter | None, draft: CommitDraft, *, job: Job | None = None,
        message: str | None = None, also=None,
    ) -> Commit:  # fmt: skip
        """Stage the planned merge on `draft` and commit it (`job`: the job whose commit it is, on a branch;
        `also`: a row written with the commit, its audit log). A revert or a cherry-pick has no second parent (git
        makes them so)."""
        if writer is not None:
            writer.apply(draft)
            chooser = self.user.username if self.user is not None and self.user.is_authenticated else None
            writer.log["resolutions"] = [
                {**entry, **_chosen(entry, self.extra.get("resolution_choices"), chooser)}
                for entry in diff.resolution_log
            ]
        if diff.explicit is None:
            merge_parent = diff.source_head
            message = message or f"Merge {diff.source} into {diff.target}"
        else:
            verb = "Revert" if diff.explicit.kind == REVERT else "Cherry-pick"
            merge_parent = None
            message = message or f"{verb} {diff.explicit.commit.id[:12]}: {diff.explicit.commit.message}"[:500]
        return draft.commit(author=self.user, message=message, merge_parent=merge_parent, job=job, also=also)


def merge_published(
    prepared: Prepared, *, job, via_merge_request, on_merged, timings, log: dict[str, Any] | None = None,
    commit_of_job: bool = True,
) -> Merge:  # fmt: skip
    """The one publish of a merge (a merge's, a merge request's, the merge queue's, a pick's): in one transaction,
    under the commit lock, the target moved to the prepared result by compare-and-swap if it is still at the
    result's parent and the source at the planned head (a revert's or a cherry-pick's source is a commit: it does
    not move) (else `MergeMoved`, nothing changed), only while `job` holds its claim (else `ClaimLost`), and the
    logged plan made the merge's audit log (with `log`'s entries added). The published commit becomes the job's
    (`commit_of_job`) unless the job makes several (the merge queue's, a range of picks but its last)."""
    merge = prepared.merge
    with transaction.atomic():
        published = commit_publish(catalog=merge.catalog, branch=merge.target, commit=prepared.result,
                                   job=job if commit_of_job else None, via_merge_request=via_merge_request)  # fmt: skip
        moved = merge.kind == Merge.Kind.MERGE and (
            ref_resolve(catalog=merge.catalog, ref=merge.source).commit.id != merge.source_head
        )
        if not published or moved:
            raise MergeMoved
        if job is not None and not commit_of_job and not job_claim_held(job=job):
            raise ClaimLost()  # as commit_publish fences the commit it makes the job's
        merge.status, merge.dry_run, merge.job, merge.timings = Merge.Status.MERGED, False, job, timings
        merge.commit, merge.log = prepared.result, {**merge.log, **(log or {})}
        merge.save(update_fields=["status", "dry_run", "job", "timings", "commit", "log"])
        merge_event_emit(merge)
        if on_merged is not None:
            on_merged(merge)
    return merge


def _chosen(entry: dict, choices: list[dict] | None, merger: str | None) -> dict[str, Any]:
    """Who chose an applied resolution, and when: the latest choice recorded in a merge request at the entry's
    scope (the cell, the key, the column, its table, or the default), or the user who ran the merge."""
    scope = entry.get("scope")

    def matches(choice: dict) -> bool:
        if choice["scope"] != scope:
            return False
        if scope == "key":
            return choice.get("table") == entry.get("object") and choice.get("key") == entry.get("key_id")
        if scope in ("column", "schema"):
            return choice.get("table") == entry.get("object") and choice.get("column") == entry.get("column")
        if scope == "cell":
            return (choice.get("table"), choice.get("key"), choice.get("column")) == (
                entry.get("object"), entry.get("key_id"), entry.get("column"))  # fmt: skip
        return scope == "default" or choice.get("table") == entry.get("object")

    for choice in reversed(choices or []):
        if matches(choice):
            return {"chosen_by": choice["by"], "chosen_at": choice["at"]}
    return {"chosen_by": merger}


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def checks_failed_error(merge: Merge) -> ConflictError:
    """The refusal of a merge logged as `checks_failed` (again, for a job delivered twice)."""
    runs = merge.log.get("checks", [])
    failed = [run["name"] for run in runs if not run["advisory"] and run["state"] in ("failure", "error")]
    details = {"merge": str(merge.id), "result": merge.log.get("checked_result")}
    return checks_error(failed=failed, pending=[], runs=runs, target=merge.target, details=details)
