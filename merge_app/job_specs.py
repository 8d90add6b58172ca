"""The typed input of each merge_app job kind, as catalog_app/job_specs.py types the data jobs: stored in the job's
params (`to_params`) and read back by the worker (`from_params`, in job_kinds.py). What the input must be (a ref
that exists, a resolution of known choices, a branch one may write) is checked by the submit service before the
job is created; a spec only knows the shape. The params keep the names they had before the specs, so a job queued
by an older process still runs.
"""

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self


class _Spec:
    """A spec's params are its fields, those left at None (optional and not given) left out; read back by name."""

    def to_params(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Self:
        return cls(**{f.name: params[f.name] for f in dataclasses.fields(cls) if f.name in params})


@dataclass(frozen=True)
class MergeSpec(_Spec):
    """MERGE BRANCH (services.merges.merge_submit): `source` into the branch `target`, or a dry run of it.
    `expected_heads` ({source, target}) are the heads it was planned on; `merge_request` the request it merges
    (by id); `audit` the request's entries for the log; `override_checks` an admin's reason and name."""

    KIND: ClassVar[str] = "branch_merge"

    catalog_id: str
    source: str
    target: str
    dry_run: bool = False
    expected_heads: dict[str, str] | None = None
    resolution: dict[str, Any] | None = None
    merge_request: int | None = None
    audit: dict[str, Any] | None = None
    override_checks: dict[str, str] | None = None


@dataclass(frozen=True)
class MergeRequestPlanSpec(_Spec):
    """The dry-run merge of a merge request, whose report becomes the request's plan."""

    KIND: ClassVar[str] = "merge_request_plan"

    catalog_id: str
    merge_request_id: int
    resolution: dict[str, Any] | None = None

    def to_params(self) -> dict[str, Any]:
        return {**super().to_params(), "resolution": self.resolution}  # kept even when None: compared by the request


@dataclass(frozen=True)
class KeysSpec(_Spec):
    """The key comparison of two heads (commit ids) for the diff (services.diff_reads.keys_job_for): it makes the
    virtual base of a criss-cross history and stores each primary-key table's comparison."""

    KIND: ClassVar[str] = "merge_keys"

    catalog_id: str
    source: str
    target: str


@dataclass(frozen=True)
class PickSpec(_Spec):
    """A revert or a cherry-pick (`kind`) of `commits` (ids, oldest first) onto `branch`."""

    KIND: ClassVar[str] = "commit_pick"

    catalog_id: str
    kind: str
    branch: str
    commits: tuple[str, ...]
    resolution: dict[str, Any] | None = None

    def to_params(self) -> dict[str, Any]:
        return {**super().to_params(), "commits": list(self.commits)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Self:
        return dataclasses.replace(super().from_params(params), commits=tuple(params["commits"]))


@dataclass(frozen=True)
class RestoreSpec(_Spec):
    """RESTORE: the branch, or one table of it (`database` and `table`), to the commit `point`."""

    KIND: ClassVar[str] = "branch_restore"

    catalog_id: str
    branch: str
    point: str
    database: str | None = None
    table: str | None = None


@dataclass(frozen=True)
class QueueSpec(_Spec):
    """Work the merge queue of the branch `target`."""

    KIND: ClassVar[str] = "merge_queue"

    catalog_id: str
    target: str


MergeJobSpec = MergeSpec | MergeRequestPlanSpec | KeysSpec | PickSpec | RestoreSpec | QueueSpec
MERGE_JOB_SPECS: dict[str, type[MergeJobSpec]] = {
    spec.KIND: spec for spec in (MergeSpec, MergeRequestPlanSpec, KeysSpec, PickSpec, RestoreSpec, QueueSpec)
}
