"""Celery tasks: interfaces like views. They take ids, call a service, and own the retry policy."""

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings

from lakeui.jobs.services import RUN_JOB_TASK, JobOutcome, JobRecoveryLoop, job_execute

# A duplicate delivery of a job that is alive elsewhere comes back until that job can have finished.
_DUPLICATE_RETRIES = settings.CELERY_TASK_TIME_LIMIT // max(1, settings.LAKEUI_JOB_STALE_AFTER) + 5


@shared_task(name=RUN_JOB_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=_DUPLICATE_RETRIES)
def run_job(self, job_id: str) -> str:
    outcome = job_execute(job_id=job_id, worker=self.request.hostname or "worker")
    if outcome is JobOutcome.BUSY:
        raise self.retry(countdown=settings.LAKEUI_JOB_STALE_AFTER)
    return outcome.value


_recovery: list[JobRecoveryLoop] = []


@worker_ready.connect
def start_job_recovery(**kwargs) -> None:
    """Every worker (any broker, embedded included) looks for jobs whose worker died or whose message was lost."""
    loop = JobRecoveryLoop()
    loop.start()
    _recovery.append(loop)


@worker_shutdown.connect
def stop_job_recovery(**kwargs) -> None:
    while _recovery:
        _recovery.pop().stopped.set()
