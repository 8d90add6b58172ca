"""The typed input of each merge_app job kind, as catalog_app/job_specs.py types the data jobs: stored in the job's
params (`to_params`) and read back by the worker (`from_params`, in job_kinds.py). What the input must be (a ref
that exists, a resolution of known choices, a branch one may write) is checked by the submit service before the
job is created; a spec only knows the shape. The params keep the names they had before the specs, so a job queued
by an older process still runs.
"""

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar


def _params(spec: Any) -> dict[str, Any]:
    """A spec's params: its fields, those left at None (optional and not given) left out."""
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if getattr(spec, f.name) is not None}


def _from(cls: type, params: Mapping[str, Any]) -> Any:
    return cls(**{f.name: params[f.name] for f in dataclasses.fields(cls) if f.name in params})


@dataclass(frozen=True)
class MergeSpec:
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

    def to_params(self) -> dict[str, Any]:
        return _params(self)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "MergeSpec":
        return _from(cls, params)


@dataclass(frozen=True)
class MergeRequestPlanSpec:
    """The dry-run merge of a merge request, whose report becomes the request's plan."""

    KIND: ClassVar[str] = "merge_request_plan"

    catalog_id: str
    merge_request_id: int
    resolution: dict[str, Any] | None = None

    def to_params(self) -> dict[str, Any]:
        return {**_params(self), "resolution": self.resolution}  # kept even when None: compared by the request

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "MergeRequestPlanSpec":
        return _from(cls, params)


@dataclass(frozen=True)
class KeysSpec:
    """The key comparison of two heads (commit ids) for the diff (services.diff_reads.keys_job_for): it makes the
    virtual base of a criss-cross history and stores each primary-key table's comparison."""

    KIND: ClassVar[str] = "merge_keys"

    catalog_id: str
    source: str
    target: str

    def to_params(self) -> dict[str, Any]:
        return _params(self)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "KeysSpec":
        return _from(cls, params)


@dataclass(frozen=True)
class PickSpec:
    """A revert or a cherry-pick (`kind`) of `commits` (ids, oldest first) onto `branch`."""

    KIND: ClassVar[str] = "commit_pick"

    catalog_id: str
    kind: str
    branch: str
    commits: tuple[str, ...]
    resolution: dict[str, Any] | None = None

    def to_params(self) -> dict[str, Any]:
        return {**_params(self), "commits": list(self.commits)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "PickSpec":
        return dataclasses.replace(_from(cls, params), commits=tuple(params["commits"]))


@dataclass(frozen=True)
class RestoreSpec:
    """RESTORE: the branch, or one table of it (`database` and `table`), to the commit `point`."""

    KIND: ClassVar[str] = "branch_restore"

    catalog_id: str
    branch: str
    point: str
    database: str | None = None
    table: str | None = None

    def to_params(self) -> dict[str, Any]:
        return _params(self)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "RestoreSpec":
        return _from(cls, params)


@dataclass(frozen=True)
class QueueSpec:
    """Work the merge queue of the branch `target`."""

    KIND: ClassVar[str] = "merge_queue"

    catalog_id: str
    target: str

    def to_params(self) -> dict[str, Any]:
        return _params(self)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "QueueSpec":
        return _from(cls, params)


MergeJobSpec = MergeSpec | MergeRequestPlanSpec | KeysSpec | PickSpec | RestoreSpec | QueueSpec
MERGE_JOB_SPECS: dict[str, type[MergeJobSpec]] = {
    spec.KIND: spec for spec in (MergeSpec, MergeRequestPlanSpec, KeysSpec, PickSpec, RestoreSpec, QueueSpec)
}
