"""The health report: database, broker, worker and Spark, the last two proven by a real job on a worker (of kind
SPARK_CHECK, which the app that drives Spark registers: catalog_app/job_kinds.py)."""

from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from celery import current_app
from django.db import connection, transaction
from django.utils import timezone

from lakeui.jobs.models import Job
from lakeui.jobs.services import job_create, job_wait

SPARK_CHECK = "spark_check"

# Health calls share any unfinished check job (whatever its age), and a check that succeeded this recently is
# reused, so that polling the endpoint, with or without a worker up, cannot pile up Spark jobs.
REUSE_SUCCESS_FOR = timedelta(seconds=10)
POLL_INTERVAL = 0.25


@dataclass
class PartHealth:
    status: str  # ok | error | unavailable
    detail: str = ""
    info: dict[str, Any] = field(default_factory=dict)


def _check_database() -> PartHealth:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return PartHealth("ok", connection.vendor)
    except Exception as exc:
        return PartHealth("error", f"{type(exc).__name__}: {exc}")


def _check_broker() -> PartHealth:
    try:
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=3)
            return PartHealth("ok", conn.transport.driver_name)
    except Exception as exc:
        return PartHealth("error", f"{type(exc).__name__}: {exc}")


def _spark_check_job() -> Job:
    with transaction.atomic():
        checks = Job.objects.filter(kind=SPARK_CHECK).order_by("-created_at")
        unfinished = checks.filter(status__in=[Job.Status.QUEUED, Job.Status.RUNNING]).first()
        recent = checks.filter(status=Job.Status.SUCCEEDED, created_at__gte=timezone.now() - REUSE_SUCCESS_FOR).first()
        return unfinished or recent or job_create(kind=SPARK_CHECK, params={"rows": 1000})


def health_report(*, timeout: float) -> dict[str, Any]:
    parts = {"database": _check_database(), "broker": _check_broker()}
    if parts["database"].status == "ok" and parts["broker"].status == "ok":
        job = job_wait(_spark_check_job(), timeout=timeout, interval=POLL_INTERVAL)
        parts["worker"], parts["spark"] = _worker_and_spark(job, timeout)
    else:
        parts["worker"] = parts["spark"] = PartHealth("unavailable", "needs the database and the broker")
    ok = all(part.status == "ok" for part in parts.values())
    return {"status": "ok" if ok else "error", "parts": {name: asdict(part) for name, part in parts.items()}}


def _worker_and_spark(job: Job, timeout: float) -> tuple[PartHealth, PartHealth]:
    if job.status == Job.Status.QUEUED:
        missing = PartHealth("unavailable", f"no worker took the check job {job.id} within {timeout:.0f} s")
        return missing, PartHealth("unavailable", "needs a worker")
    worker = PartHealth("ok", job.worker.split("/")[0], {"job": str(job.id)})
    if job.status == Job.Status.SUCCEEDED:
        return worker, PartHealth("ok", f"Spark {job.result['spark_version']}", job.result)
    if job.status == Job.Status.RUNNING:
        return worker, PartHealth("unavailable", f"the Spark check job {job.id} is still running after {timeout:.0f} s")
    return worker, PartHealth("error", f"{job.error_code}: {job.error_message}")
