"""Celery tasks: interfaces like views. They take ids, call a service, and own the retry policy."""

import functools
import logging
import signal
import threading
import uuid
from dataclasses import dataclass

import billiard
from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import celeryd_init, worker_ready, worker_shutdown
from django.conf import settings
from django.db import connection

from lakeui.jobs.services import (
    RUN_JOB_TASK,
    JobOutcome,
    JobRecoveryLoop,
    job_execute,
    job_recover_restarted,
    worker_beat,
    worker_forget,
)

logger = logging.getLogger(__name__)

# A duplicate delivery of a job that is alive elsewhere comes back until that job can have finished.
_DUPLICATE_RETRIES = settings.CELERY_TASK_TIME_LIMIT // max(1, settings.LAKEUI_JOB_STALE_AFTER) + 5


# Set when the task's soft time limit strikes. Billiard raises SoftTimeLimitExceeded from its SIGUSR1 handler wherever
# the task is; inside a call into the JVM, py4j turns it into an error of its own that names it nowhere (raised after
# its handler, no cause), so the strike itself is remembered.
_limit_struck = threading.Event()


def _soft_limit_strike(signum: int, frame: object) -> None:
    _limit_struck.set()
    raise SoftTimeLimitExceeded()


@shared_task(name=RUN_JOB_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=_DUPLICATE_RETRIES)
def run_job(self, job_id: str) -> str:
    worker = f"{self.request.hostname or 'worker'}/{RUN}"
    _limit_struck.clear()
    if threading.current_thread() is threading.main_thread():  # a pool process's task; billiard set its handler
        signal.signal(signal.SIGUSR1, _soft_limit_strike)
    outcome = job_execute(job_id=job_id, worker=worker, limit_struck=_limit_struck.is_set)
    if outcome is JobOutcome.BUSY:
        raise self.retry(countdown=settings.LAKEUI_JOB_STALE_AFTER)
    return outcome.value


_recovery: list[JobRecoveryLoop] = []
# This run of the worker (its pool processes inherit it): a job's claim is `<node name>/<RUN>/<claim>`.
RUN = uuid.uuid4().hex[:8]


@worker_ready.connect
def start_job_recovery(sender=None, **kwargs) -> None:
    """Every worker (any broker, embedded included) takes back at once the jobs an earlier run of its node held,
    then looks for jobs whose worker died or whose message was lost every round; on a timer of its own it writes the
    heartbeat of its pool processes, which the health report reads (first now, so that a worker shows up as it
    becomes ready)."""
    node = getattr(sender, "hostname", None)
    if node:
        try:
            job_recover_restarted(node=node, run=RUN)
            _beat(node)
        except Exception:  # a busy or restarting database: the recovery loop finds them once they are stale
            logger.warning("Taking back the jobs of this worker's earlier run failed", exc_info=True)
        finally:
            connection.close()
    loops = [JobRecoveryLoop()]
    if node:
        loops.append(JobRecoveryLoop(lambda: [functools.partial(_beat, node)], name="worker-heartbeat"))
    for loop in loops:
        loop.start()
        _recovery.append(loop)


def _beat(node: str) -> None:
    """The pool processes of this worker (prefork: billiard's children of this main process) are alive."""
    worker_beat(node=node, run=RUN, kind=worker_kind(), pids=sorted(p.pid for p in billiard.active_children()))


@worker_shutdown.connect
def stop_job_recovery(sender=None, **kwargs) -> None:
    while _recovery:
        _recovery.pop().stopped.set()
    node = getattr(sender, "hostname", None)
    if node:
        try:
            worker_forget(node=node, run=RUN)
        except Exception:  # the rows go stale instead
            logger.warning("Removing this worker's heartbeat failed", exc_info=True)
        finally:
            connection.close()


_kind: list[str] = []
_node: list[str] = []


@celeryd_init.connect
def note_worker_kind(sender=None, options=None, **kwargs) -> None:
    """Which worker this is, before its pool starts (its processes inherit it): LAKEUI_WORKER_KIND, else
    `interactive` for a worker that serves only the interactive queue; and its node name."""
    queues = (options or {}).get("queues") or []
    queues = queues.split(",") if isinstance(queues, str) else list(queues)
    interactive = [q.strip() for q in queues if q.strip()] == [settings.LAKEUI_INTERACTIVE_QUEUE]
    _kind[:] = [settings.LAKEUI_WORKER_KIND or ("interactive" if interactive else "jobs")]
    _node[:] = [sender] if isinstance(sender, str) and sender else []


def worker_kind() -> str:
    """`jobs` or `interactive`: the kind of worker this process belongs to (`jobs` outside a worker)."""
    return _kind[0] if _kind else settings.LAKEUI_WORKER_KIND or "jobs"


@dataclass(frozen=True)
class WorkerProcess:
    node: str
    run: str
    kind: str


def worker_process() -> WorkerProcess | None:
    """The worker this process belongs to (its node, run and kind), or None outside a worker (the web server)."""
    return WorkerProcess(_node[0], RUN, worker_kind()) if _node else None
