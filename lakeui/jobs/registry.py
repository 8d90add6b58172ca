"""Job kinds: a name and the function a worker runs for it.

A handler takes the job's parameters (plain JSON values) and a Progress, and returns the job's result (a JSON
object). It refuses with ApplicationError; anything else it raises fails the job as an internal error. A
handler must be safe to run again for the same job after a crash: the job id is in `progress.job_id`.
"""

import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from lakeui.errors import ApplicationError

logger = logging.getLogger(__name__)


def crash_point(point: str, *, job_id: str, attempts: int) -> None:
    """For the crash tests only: with LAKEUI_JOB_CRASH_AT=<point>, a job's first attempt SIGKILLs its worker's
    whole process group (pool, Spark JVM) at that point, exactly as a crash would. Unset in every real setup.
    The points: `before_run` (nothing written yet), `before_commit` (the job's files are written, its commit is
    not), `after_run` (committed, the job not yet marked finished)."""
    if os.environ.get("LAKEUI_JOB_CRASH_AT") == point and attempts == 1:
        logger.warning("LAKEUI_JOB_CRASH_AT=%s: killing this worker during job %s", point, job_id)
        os.killpg(os.getpgrp(), signal.SIGKILL)


class ClaimLost(Exception):
    """Another delivery took the job over (this one's heartbeat went stale): stop without writing anything."""


class Progress(Protocol):
    job_id: str

    def report(self, percent: int, message: str = "") -> None: ...


Handler = Callable[[dict[str, Any], Progress], dict[str, Any]]


@dataclass(frozen=True)
class JobKind:
    name: str
    handler: Handler
    interactive: bool = False  # a read a person waits for: sent to the interactive queue


_KINDS: dict[str, JobKind] = {}


def job_kind(name: str, *, interactive: bool = False) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        _KINDS[name] = JobKind(name=name, handler=handler, interactive=interactive)
        return handler

    return register


Upkeep = Callable[[], Any]
_UPKEEP: list[Upkeep] = []


def job_upkeep(task: Upkeep) -> Upkeep:
    """Register a function the workers' recovery loop runs every round (`LAKEUI_JOB_RECOVER_EVERY`): cheap upkeep
    that follows what moved without a signal from the write paths (merge requests whose branches moved are planned
    again, `merge_app.job_kinds`)."""
    _UPKEEP.append(task)
    return task


def job_upkeep_tasks() -> list[Upkeep]:
    return list(_UPKEEP)


@dataclass(frozen=True)
class JobFailure:
    """What a job's user is told of an unexpected exception: a code and a sentence (the trace goes to the log)."""

    code: str
    message: str


FailureExplainer = Callable[[BaseException], JobFailure | None]
_EXPLAINERS: list[FailureExplainer] = []


def job_failure_explainer(explain: FailureExplainer) -> FailureExplainer:
    """Register a function that names the failures it knows (e.g. the Spark engine's) and returns None for others."""
    _EXPLAINERS.append(explain)
    return explain


def job_failure_explained(exc: BaseException) -> JobFailure | None:
    return next((failure for explain in _EXPLAINERS if (failure := explain(exc)) is not None), None)


def job_kind_get(name: str) -> JobKind:
    try:
        return _KINDS[name]
    except KeyError:
        raise ApplicationError("unknown_job_kind", f"There is no job kind {name!r}.") from None


def job_kind_interactive(name: str) -> bool:
    """Whether jobs of this kind go to the interactive queue (a kind this process does not know does not)."""
    return name in _KINDS and _KINDS[name].interactive
