"""Jobs: created in the caller's transaction, enqueued after it commits, run once however often delivered.

A delivery claims its job with one conditional UPDATE (queued -> running, or running with a stale heartbeat ->
running again after a dead worker). A delivery that loses the claim while the job is alive elsewhere is a
duplicate: the task retries later and then finds the job finished. Only the holder of the current claim may
write progress or the outcome.
"""

import enum
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import close_old_connections, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from lakeui.celery import app as celery_app
from lakeui.errors import ApplicationError, ConflictError
from lakeui.jobs.models import Job, WorkerHeartbeat
from lakeui.jobs.registry import (
    ClaimLost,
    JobFailure,
    crash_point,
    job_failure_explained,
    job_kind_get,
    job_kind_interactive,
    job_upkeep_tasks,
)
from lakeui.jobs.selectors import job_answering, job_brief
from lakeui.lineage import ENDED, lineage_emit, lineage_told

logger = logging.getLogger(__name__)

# The Celery task that runs a job (lakeui/jobs/tasks.py). A message sent under the task's earlier name
# (catalog_app.tasks.run_job) is refused by the worker as unknown; job_recover sends its job again.
RUN_JOB_TASK = "lakeui.jobs.tasks.run_job"
MESSAGE_CANCELLED = "The job was cancelled."
HERE = "here"  # the worker of a job its caller answered itself (job_answered_by_caller)
MESSAGE_TIME_LIMIT = "The job ran past its time limit and was stopped."
# An interactive job that does not stop at its soft time limit (Python does not get control back) is killed this
# many seconds later; its worker process is replaced.
INTERACTIVE_HARD_LIMIT_AFTER = 30
# The error itself (it may quote SQL, file paths, internal names) goes to the worker's log only.
MESSAGE_INTERNAL = "The job failed with an unexpected error (a bug); the worker's log has the details of job {job}."
MESSAGE_ALREADY_FINISHED = "The job has already finished ({status})."
MESSAGE_UNSTORABLE_RESULT = (
    "The job's result holds a NUL character (U+0000) in a text value, which the metadata store cannot keep; "
    "leave it out (for a query, e.g. replace(value, char(0), ''))."
)


class JobOutcome(enum.Enum):
    RAN = "ran"
    ALREADY_FINISHED = "already_finished"
    BUSY = "busy"


class JobCancelled(Exception):
    pass


MESSAGE_WORKER_LOST = "The job was started {attempts} times without finishing (its worker died each time)."
MESSAGE_CANCELLED_WORKER_GONE = "The job was cancelled; its worker had stopped answering."


def job_create(*, kind: str, params: dict[str, Any], requested_by: AbstractBaseUser | None = None) -> Job:
    """Record a job and enqueue it once the surrounding transaction commits (never for a rolled-back one)."""
    job_kind_get(kind)
    job = Job.objects.create(
        kind=kind, params=params, requested_by=requested_by if requested_by and requested_by.is_authenticated else None
    )
    job_id = str(job.id)
    # robust: a broker that is down must not turn the caller's committed write into a 500; the job stays
    # queued and is visible as such.
    transaction.on_commit(lambda: job_send(job_id, kind), robust=True)
    return job


@transaction.atomic
def job_answered_by_caller(
    *,
    kind: str,
    params: dict[str, Any],
    answer: Callable[[Job], dict[str, Any]],
    requested_by: AbstractBaseUser | None = None,
) -> Job:
    """A job its caller ran itself (a read too small to be worth a worker's queue): recorded already succeeded, with
    `answer(job)` as its result, in one transaction with whatever `answer` writes (which may refer to the job), so
    whoever follows jobs sees it like any other. Nothing is sent; an error in `answer` leaves no job."""
    job_kind_get(kind)
    now = timezone.now()
    job = Job.objects.create(
        kind=kind, params=params, requested_by=requested_by if requested_by and requested_by.is_authenticated else None,
        status=Job.Status.RUNNING, worker=HERE, attempts=1, started_at=now, heartbeat_at=now,
    )  # fmt: skip
    job.result = answer(job)
    job.status, job.progress, job.finished_at = Job.Status.SUCCEEDED, 100, timezone.now()
    job.save(update_fields=["result", "status", "progress", "finished_at"])
    return job


def job_claim_held(*, job: Job) -> bool:
    """Whether this run of the job still holds its claim (running, on its worker), locking the job's row until the
    caller's transaction ends: a commit made with it cannot race a takeover of the job."""
    held = Job.objects.select_for_update().filter(id=job.id, worker=job.worker, status=Job.Status.RUNNING)
    return held.exists()


def job_checkpoint_save(*, job: Job, checkpoint: dict[str, Any] | None) -> None:
    """Keep what this run of the job has done so far for a later run of it (`Job.checkpoint`), should its worker
    die: saved in the caller's transaction, with whatever that transaction writes, and only while this run holds
    its claim (else `ClaimLost`, and the transaction rolls back)."""
    if not job_claim_held(job=job):
        raise ClaimLost()
    Job.objects.filter(id=job.id).update(checkpoint=checkpoint)
    job.checkpoint = checkpoint


def job_send(job_id: str, kind: str) -> None:
    """Send a job's message to its queue: the interactive one for a read a person waits for (served by workers of
    its own, never behind a long job), else the jobs queue."""
    if job_kind_interactive(kind):  # a read a person waits for: within its time budget, or stopped
        limit = settings.LAKEUI_INTERACTIVE_TIME_LIMIT
        limits = {"soft_time_limit": limit, "time_limit": limit + INTERACTIVE_HARD_LIMIT_AFTER}
        celery_app.send_task(RUN_JOB_TASK, args=[job_id], queue=settings.LAKEUI_INTERACTIVE_QUEUE, **limits)
        return
    # by name: the task module imports this one
    celery_app.send_task(RUN_JOB_TASK, args=[job_id], queue=settings.CELERY_TASK_DEFAULT_QUEUE)


@transaction.atomic
def job_cancel(*, job: Job) -> Job:
    """A queued job is cancelled at once; a running one at its next progress report."""
    job = Job.objects.select_for_update().get(id=job.id)
    if job.is_finished:
        raise ConflictError("job_finished", MESSAGE_ALREADY_FINISHED.format(status=job.status))
    stale_before = timezone.now() - timedelta(seconds=settings.LAKEUI_JOB_STALE_AFTER)
    worker_gone = job.status == Job.Status.RUNNING and (job.heartbeat_at is None or job.heartbeat_at < stale_before)
    if job.status == Job.Status.QUEUED or worker_gone:
        # A queued job never started, a running one whose heartbeat stopped has no worker to see the request:
        # both end now. A worker that comes back loses its claim (status is no longer running) at its next report.
        job.status = Job.Status.CANCELLED
        job.finished_at = timezone.now()
        job.error_code, job.error_message = "cancelled", MESSAGE_CANCELLED
    job.cancel_requested = True
    job.save()
    return job


def job_wait(job: Job, *, timeout: float, interval: float = 0.2) -> Job:
    """Poll until the job finishes or `timeout` seconds pass; returns the job as last read."""
    deadline = time.monotonic() + timeout
    while not job.is_finished and time.monotonic() < deadline:
        time.sleep(interval)
        job.refresh_from_db()
    return job


READ_FAILURE_KEPT_FOR = 60  # seconds a failed read job answers its input's reads; a read after that tries again


def job_read(*, kind: str, params: dict[str, Any], requested_by: AbstractBaseUser | None) -> dict[str, Any]:
    """A read a worker answers (at a commit: its answer never changes), for a web request that answers at once and
    never waits for the job (`job_for_read`): the job's result once it has succeeded; its refusal, raised with its
    status, once it has failed; until then `{"complete": False, "job": job_brief(job)}`, which the interfaces
    answer with 202 and their readers read again (docs/api.md#reads-a-worker-answers)."""
    job = job_for_read(kind=kind, params=params, requested_by=requested_by, failure_kept_for=READ_FAILURE_KEPT_FOR)
    if job.status == Job.Status.SUCCEEDED:
        return job.result
    if job.is_finished:
        details = job.result if isinstance(job.result, dict) else None
        raise ApplicationError(job.error_code or job.status, job.error_message, status=job.error_status or 500,
                               details=details)  # fmt: skip
    return read_pending(job)


def read_pending(job: Job) -> dict[str, Any]:
    """A read whose job has not finished: what its interface answers (202), to read again."""
    return {"complete": False, "job": job_brief(job)}


def read_is_pending(answer: dict[str, Any]) -> bool:
    return answer.get("complete") is False


def job_for_read(
    *, kind: str, params: dict[str, Any], requested_by: AbstractBaseUser | None, failure_kept_for: float
) -> Job:
    """The job that answers a read of `kind` with these params (a read at a commit, whose answer never changes), for a
    web request that answers at once and is read again until the job has finished: the newest that succeeded (its
    result is the answer), else the one queued or running, else one that failed less than `failure_kept_for` seconds
    ago (its failure is the answer; a read after that starts a new one), else a new one. However often a page
    polls, one job runs per input; two reads at the same instant may start two, which answer alike."""
    failed_since = timezone.now() - timedelta(seconds=failure_kept_for)
    found = job_answering(kind=kind, params=params, failed_since=failed_since)
    return found if found is not None else job_create(kind=kind, params=params, requested_by=requested_by)


def holds_nul(value: Any) -> bool:
    """Whether a JSON value holds a NUL character in a string (a key or a value): PostgreSQL's jsonb cannot."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(holds_nul(key) or holds_nul(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(holds_nul(item) for item in value)
    return False


@dataclass
class _Claim:
    """The right to run one job, held by one delivery; progress and outcome are written only under it."""

    job_id: str
    token: str

    def _update(self, **fields: Any) -> int:
        return Job.objects.filter(id=self.job_id, worker=self.token, status=Job.Status.RUNNING).update(**fields)

    def report(self, percent: int, message: str = "") -> None:
        fields = {"progress": max(0, min(100, percent)), "progress_message": message[:255]}
        if not self._update(**fields, heartbeat_at=timezone.now()):
            raise ClaimLost()
        if Job.objects.filter(id=self.job_id, cancel_requested=True).exists():
            raise JobCancelled()

    def heartbeat(self) -> None:
        self._update(heartbeat_at=timezone.now())

    def finish(
        self, status: str, *, result: Any = None, error_code: str = "", error_message: str = "", error_status=None
    ) -> None:
        if status != Job.Status.SUCCEEDED:  # a failure's message and details quote the input: keep them storable
            error_message = error_message.replace("\x00", "\\x00")
            result = None if holds_nul(result) else result
        fields: dict[str, Any] = {"status": status, "finished_at": timezone.now(), "result": result}
        fields.update(error_code=error_code, error_message=error_message, error_status=error_status)
        if status == Job.Status.SUCCEEDED:
            fields["progress"] = 100
        self._update(**fields)


class _Heartbeat(threading.Thread):
    def __init__(self, claim: _Claim, interval: float) -> None:
        super().__init__(daemon=True, name=f"job-heartbeat-{claim.job_id}")
        self.claim, self.interval, self.stopped = claim, interval, threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(self.interval):
                try:
                    self.claim.heartbeat()
                except Exception:  # a busy database must not end the heartbeat: try again next interval
                    logger.warning("Heartbeat of job %s failed; retrying", self.claim.job_id, exc_info=True)
        finally:
            connection.close()


def _claim(*, job_id: str, worker: str) -> _Claim | None:
    now = timezone.now()
    stale_before = now - timedelta(seconds=settings.LAKEUI_JOB_STALE_AFTER)
    token = f"{worker}/{uuid.uuid4().hex[:12]}"
    claimed = (
        Job.objects.filter(id=job_id)
        .filter(Q(status=Job.Status.QUEUED) | Q(status=Job.Status.RUNNING, heartbeat_at__lt=stale_before))
        .update(status=Job.Status.RUNNING, worker=token, heartbeat_at=now, attempts=F("attempts") + 1)
    )
    if not claimed:
        return None
    Job.objects.filter(id=job_id, started_at__isnull=True).update(started_at=now)
    return _Claim(job_id=job_id, token=token)


def job_execute(*, job_id: str, worker: str, limit_struck: Callable[[], bool] = lambda: False) -> JobOutcome:
    """Run the job if this delivery can claim it. Called by the Celery task, never inside a transaction, with
    whether the task's soft time limit has struck: an error raised once it has is the limit striking (py4j turns
    the SoftTimeLimitExceeded raised inside a call into the JVM into an error of its own)."""
    claim = _claim(job_id=job_id, worker=worker)
    if claim is None:
        job = Job.objects.filter(id=job_id).first()
        return JobOutcome.BUSY if job is not None and not job.is_finished else JobOutcome.ALREADY_FINISHED

    job = Job.objects.get(id=job_id)
    if job.attempts > settings.LAKEUI_JOB_MAX_ATTEMPTS:
        message = MESSAGE_WORKER_LOST.format(attempts=job.attempts - 1)
        claim.finish(Job.Status.FAILED, error_code="worker_lost", error_message=message)
        return JobOutcome.RAN
    heartbeat = _Heartbeat(claim, interval=max(1.0, settings.LAKEUI_JOB_STALE_AFTER / 4))
    heartbeat.start()
    lost = False
    try:
        lineage_emit(job=job, event_type="START")
        crash_point("before_run", job_id=job_id, attempts=job.attempts)
        result = job_kind_get(job.kind).handler(job.params, claim)
        crash_point("after_run", job_id=job_id, attempts=job.attempts)
    except ClaimLost:
        lost = True
        logger.warning("Job %s was taken over by another delivery; this run stops", job_id)
    except JobCancelled:
        claim.finish(Job.Status.CANCELLED, error_code="cancelled", error_message=MESSAGE_CANCELLED)
    except ApplicationError as exc:
        claim.finish(
            Job.Status.FAILED,
            error_code=exc.code,
            error_message=exc.message,
            result=exc.details,
            error_status=exc.status,
        )
    except SoftTimeLimitExceeded:
        claim.finish(Job.Status.FAILED, error_code="time_limit", error_message=MESSAGE_TIME_LIMIT, error_status=504)
    except Exception as exc:
        if limit_struck() or _caused_by(exc, SoftTimeLimitExceeded):  # struck inside a library that wrapped it (py4j)
            logger.warning("Job %s (%s) stopped at its time limit", job_id, job.kind, exc_info=True)
            claim.finish(Job.Status.FAILED, error_code="time_limit", error_message=MESSAGE_TIME_LIMIT, error_status=504)
            return JobOutcome.RAN
        logger.exception("Job %s (%s) failed", job_id, job.kind)  # the trace is in the log, the user gets a sentence
        failure = job_failure_explained(exc)
        if failure is None:
            failure = JobFailure("internal_error", MESSAGE_INTERNAL.format(job=job_id))
        claim.finish(Job.Status.FAILED, error_code=failure.code, error_message=failure.message)
    else:
        if holds_nul(result):  # PostgreSQL cannot keep it: a clear failure now, not a failed save retried forever
            claim.finish(Job.Status.FAILED, error_code="unstorable_result", error_message=MESSAGE_UNSTORABLE_RESULT,
                         error_status=400)  # fmt: skip
        else:
            claim.finish(Job.Status.SUCCEEDED, result=result)
    finally:
        heartbeat.stopped.set()
        heartbeat.join()
        if not lost and lineage_told(job.kind):
            _lineage_ended(job_id)
        close_old_connections()
    return JobOutcome.RAN


def _lineage_ended(job_id: str) -> None:
    """The OpenLineage event of the run's end (lakeui/lineage.py), as the job was finished."""
    job = Job.objects.filter(id=job_id).select_related("requested_by").first()
    if job is not None and job.status in ENDED:
        lineage_emit(job=job, event_type=ENDED[job.status])


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind) or any(isinstance(arg, kind) for arg in getattr(seen, "args", ())):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def job_recover() -> list[str]:
    """Send again the jobs that nobody will otherwise run; returns their ids. Called by every worker on a timer.

    - running with a heartbeat older than LAKEUI_JOB_STALE_AFTER: its worker died. It goes back to queued (so a
      cancel ends it at once and its old worker, should it wake up, loses its claim) and is sent again; one
      already started LAKEUI_JOB_MAX_ATTEMPTS times fails `worker_lost` instead.
    - queued longer than that and never claimed since it was created or last sent: its message was lost.
    Each step is a conditional UPDATE, so several workers recovering at once send a job at most once each, and
    a second delivery of a sent job loses the claim anyway.
    """
    now = timezone.now()
    stale_before = now - timedelta(seconds=settings.LAKEUI_JOB_STALE_AFTER)
    stale = Q(heartbeat_at__lt=stale_before) | Q(heartbeat_at__isnull=True)
    resend = _running_taken_back(Job.objects.filter(stale, status=Job.Status.RUNNING), stale, now)
    # A queued job's heartbeat_at is the time it was last sent again (null: only sent at creation).
    lost = Job.objects.filter(status=Job.Status.QUEUED).filter(
        Q(heartbeat_at__lt=stale_before) | Q(heartbeat_at__isnull=True, created_at__lt=stale_before)
    )
    for job in lost.only("id", "kind", "heartbeat_at", "created_at"):
        sent_before = Q(heartbeat_at=job.heartbeat_at) if job.heartbeat_at else Q(heartbeat_at__isnull=True)
        if Job.objects.filter(sent_before, id=job.id, status=Job.Status.QUEUED).update(heartbeat_at=now):
            logger.warning("Job %s stayed queued for %d s; sending it again", job.id, settings.LAKEUI_JOB_STALE_AFTER)
            resend.append(job)
    return _sent_again(resend)


def job_recover_restarted(*, node: str, run: str) -> list[str]:
    """Send again now the running jobs an earlier run of this worker node held (claimed as `<node>/<its run>/...`,
    not `<node>/<run>/...`): a node name is one worker's (Celery's rule), so that run is dead, and its jobs need not
    wait LAKEUI_JOB_STALE_AFTER for their heartbeat to go stale. Called as a worker becomes ready: a worker that a
    supervisor restarts under its name (`make run`, Docker's restart policy) takes its jobs back at once."""
    mine = Q(worker__startswith=f"{node}/") & ~Q(worker__startswith=f"{node}/{run}/")
    resend = _running_taken_back(Job.objects.filter(mine, status=Job.Status.RUNNING), mine, timezone.now())
    return _sent_again(resend)


def _running_taken_back(jobs, dead: Q, now) -> list[Job]:
    """Running `jobs` whose worker is dead (`dead` still holds when each is taken back): cancelled if that was
    asked, failed `worker_lost` if started LAKEUI_JOB_MAX_ATTEMPTS times, else queued again (a cancel then ends it
    at once, and its old worker, should it wake up, loses its claim). The ones to send again."""
    resend: list[Job] = []
    for job in jobs.only("id", "kind", "worker", "attempts", "heartbeat_at", "cancel_requested"):
        same = Job.objects.filter(dead, id=job.id, status=Job.Status.RUNNING, worker=job.worker)
        if job.cancel_requested:
            same.update(status=Job.Status.CANCELLED, finished_at=now, error_code="cancelled",
                        error_message=MESSAGE_CANCELLED_WORKER_GONE)  # fmt: skip
        elif job.attempts >= settings.LAKEUI_JOB_MAX_ATTEMPTS:
            message = MESSAGE_WORKER_LOST.format(attempts=job.attempts)
            if same.update(status=Job.Status.FAILED, finished_at=now, error_code="worker_lost", error_message=message):
                logger.warning("Job %s failed: its worker died %d times", job.id, job.attempts)
        elif same.update(status=Job.Status.QUEUED, worker="", heartbeat_at=now):
            logger.warning("Job %s lost its worker %s; sending it again", job.id, job.worker)
            resend.append(job)
    return resend


def _sent_again(jobs: list[Job]) -> list[str]:
    for job in jobs:
        try:
            job_send(str(job.id), job.kind)
        except Exception:  # a broker that is down: the job stays queued and is sent again on a later round
            logger.exception("Could not send job %s again", job.id)
    return [str(job.id) for job in jobs]


class JobRecoveryLoop(threading.Thread):
    """Runs `tasks` one after another every LAKEUI_JOB_RECOVER_EVERY seconds inside a worker process until stopped
    (a task that fails is logged and tried again next round). A worker runs two: the recovery (job_recover, then
    the registered upkeep, `registry.job_upkeep`) and its heartbeat (worker_beat) on a timer of its own, so an
    upkeep round slowed by a busy database never makes a live worker look dead to the health report."""

    def __init__(self, tasks: Callable[[], list[Callable[[], Any]]] | None = None, *, name: str = "job-recovery"):
        super().__init__(daemon=True, name=name)
        self.stopped = threading.Event()
        self.tasks = tasks or (lambda: [job_recover, *job_upkeep_tasks()])

    def run(self) -> None:
        while not self.stopped.wait(settings.LAKEUI_JOB_RECOVER_EVERY):
            for task in self.tasks():
                try:
                    task()
                except Exception:  # a busy or restarting database: try again next round
                    logger.warning("%s failed; retrying", getattr(task, "__name__", task), exc_info=True)
                finally:
                    connection.close()


# --- Worker heartbeats: what the public health report reads (lakeui.jobs.health) -------------------------------------
# A worker that no longer runs (killed, its host gone) leaves its rows; they are removed after this long.
HEARTBEAT_FORGET_AFTER = timedelta(days=1)


def _heartbeat_key(node: str, run: str, pid: int) -> str:
    return f"{node}/{run}/{pid}"


def worker_beat(*, node: str, run: str, kind: str, pids: list[int]) -> None:
    """In a worker's main process, on its heartbeat timer: its pool processes `pids` are alive now (a missing row is
    made again); the rows of its node that are not (an earlier run's, a pool process that exited) go, and so do
    rows no worker refreshed for HEARTBEAT_FORGET_AFTER."""
    now = timezone.now()
    mine = WorkerHeartbeat.objects.filter(node=node, run=run, pid__in=pids)
    seen = set(mine.values_list("pid", flat=True))
    mine.update(beat_at=now)
    identity = {"node": node, "run": run, "kind": kind, "hostname": socket.gethostname(), "beat_at": now}
    missing = [WorkerHeartbeat(process=_heartbeat_key(node, run, pid), pid=pid, **identity) for pid in pids
               if pid not in seen]  # fmt: skip
    # ignore_conflicts: the process recorded its Spark meanwhile (worker_spark_started)
    WorkerHeartbeat.objects.bulk_create(missing, ignore_conflicts=True)
    WorkerHeartbeat.objects.filter(node=node).exclude(run=run, pid__in=pids).delete()
    WorkerHeartbeat.objects.filter(beat_at__lt=now - HEARTBEAT_FORGET_AFTER).delete()


def worker_forget(*, node: str, run: str) -> None:
    """A worker stopping: its processes are gone now, not once their heartbeat is stale."""
    WorkerHeartbeat.objects.filter(node=node, run=run).delete()


def worker_spark_started(*, node: str, run: str, kind: str, version: str) -> None:
    """In a worker's pool process, when its SparkSession started: the health report shows its Spark warm."""
    pid = os.getpid()
    spark = {"spark_warm": True, "spark_version": version, "beat_at": timezone.now()}
    identity = {"node": node, "run": run, "pid": pid, "kind": kind, "hostname": socket.gethostname()}
    WorkerHeartbeat.objects.update_or_create(
        process=_heartbeat_key(node, run, pid), defaults=spark, create_defaults={**identity, **spark}
    )
