"""The health reports (docs/operations.md#health).

The public one answers at once from what the workers keep: the database, the broker, and for each kind of worker
(jobs, interactive) whether a process of it is alive (its heartbeat, `WorkerHeartbeat`, written by its worker every
LAKEUI_JOB_RECOVER_EVERY on a timer of its own, is fresher than LAKEUI_JOB_STALE_AFTER: the age at which a job's
worker counts as dead) and whether its Spark has started. It waits for nothing a client can make slow: anyone may
call it, as often as they like.

The deep one, for signed-in users, also proves Spark by a real job (of kind SPARK_CHECK, which the app that drives
Spark registers: catalog_app/job_kinds.py) on the interactive worker. Callers share one check job: an unfinished
one (whatever its age) or one that succeeded moments ago is reused, so at most one runs at a time and polling
cannot pile them up. It waits for the job at most DEEP_WAIT_MAX seconds, then answers with the job to wait for.
"""

import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from lakeui.jobs.models import Job, WorkerHeartbeat
from lakeui.jobs.selectors import worker_heartbeats
from lakeui.jobs.services import job_create, job_wait

SPARK_CHECK = "spark_check"
WORKER_KINDS = ("jobs", "interactive")

# A check that succeeded this recently is reused (an unfinished one always is).
REUSE_SUCCESS_FOR = timedelta(seconds=10)
POLL_INTERVAL = 0.25
# The longest the deep check holds a web thread waiting for its job (LAKEUI_HEALTH_TIMEOUT, capped to this).
DEEP_WAIT_MAX = 5.0
# The public report is made at most this often per web process; callers meanwhile share the last one (a flood of
# anonymous calls costs one database query and one broker connection a second, not one each).
PUBLIC_REPORT_FOR = 1.0
# Only one request at a time looks for a reusable check job or makes one (PostgreSQL; SQLite serialises writes).
CHECK_LOCK = 5_804_217


@dataclass
class PartHealth:
    status: str  # ok | error | unavailable | pending (the deep check's job has not finished)
    detail: str = ""
    info: dict[str, Any] = field(default_factory=dict)


def _check_database() -> PartHealth:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return PartHealth("ok", "postgresql")
    except Exception as exc:
        return PartHealth("error", f"{type(exc).__name__}: {exc}")


def _check_broker() -> PartHealth:
    try:
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=3)
            return PartHealth("ok", conn.transport.driver_name)
    except Exception as exc:
        return PartHealth("error", f"{type(exc).__name__}: {exc}")


def _process(row: WorkerHeartbeat) -> dict[str, Any]:
    return {
        "hostname": row.hostname, "node": row.node, "pid": row.pid, "started_at": row.started_at.isoformat(),
        "beat_at": row.beat_at.isoformat(), "spark_warm": row.spark_warm, "spark_version": row.spark_version or None,
    }  # fmt: skip


def _worker_part(kind: str, rows: list[WorkerHeartbeat], alive_after, *, detailed: bool) -> PartHealth:
    """A kind of worker: alive if a process of it beat since `alive_after`; its Spark warm if one of those has.
    Where and which processes (hosts, pids) only `detailed`, for signed-in callers."""
    alive = [row for row in rows if row.beat_at >= alive_after]
    within = settings.LAKEUI_JOB_STALE_AFTER
    if not alive:
        last = max(rows, key=lambda row: row.beat_at, default=None)
        seen = f"; last seen {last.beat_at.isoformat()}" if last else ""
        seen += f" on {last.hostname}" if last and detailed else ""
        detail = f"no {kind} worker is alive: none has written a heartbeat in the last {within} s{seen}"
        return PartHealth("unavailable", detail, {"alive": False, "processes_alive": 0, "spark_warm": False})
    warm = [row for row in alive if row.spark_warm]
    hosts = f" on {', '.join(sorted({row.hostname for row in alive}))}" if detailed else ""
    spark = (
        f"Spark {warm[0].spark_version} warm in {len(warm)} of {len(alive)}"
        if warm
        else "Spark not started yet (the first job starts it)"
    )
    info: dict[str, Any] = {
        "alive": True, "processes_alive": len(alive), "spark_warm": bool(warm),
        "spark_version": warm[0].spark_version if warm else None,
    }  # fmt: skip
    if detailed:
        info["processes"] = [_process(row) for row in alive]
    return PartHealth("ok", f"{len(alive)} process(es) alive{hosts}; {spark}", info)


def _report(parts: dict[str, PartHealth]) -> dict[str, Any]:
    ok = all(part.status in ("ok", "pending") for part in parts.values())
    return {"status": "ok" if ok else "error", "parts": {name: asdict(part) for name, part in parts.items()}}


def _public_parts(*, detailed: bool = False) -> dict[str, PartHealth]:
    parts = {"database": _check_database(), "broker": _check_broker()}
    for name, part in parts.items():
        if part.status != "ok" and not detailed:  # its error may name hosts and ports: for signed-in callers only
            part.detail = f"the {name} does not answer (the deep check, /api/v1/health/deep, says why)"
    if parts["database"].status != "ok":
        for kind in WORKER_KINDS:
            parts[f"{kind}_worker"] = PartHealth("unavailable", "needs the database")
        return parts
    rows = list(worker_heartbeats())
    alive_after = timezone.now() - timedelta(seconds=settings.LAKEUI_JOB_STALE_AFTER)
    for kind in WORKER_KINDS:
        mine = [row for row in rows if row.kind == kind]
        parts[f"{kind}_worker"] = _worker_part(kind, mine, alive_after, detailed=detailed)
    return parts


_public_lock = threading.Lock()
_public_last: list[tuple[float, dict[str, Any]]] = []  # (when it was made, monotonic; the report)


def health_report() -> dict[str, Any]:
    """The public report: `{status, parts: {database, broker, jobs_worker, interactive_worker}}`, from state only;
    the one made in this process less than PUBLIC_REPORT_FOR ago, if any. One request at a time makes a new one;
    the others meanwhile answer with the last one rather than wait (only the first ever waits for it)."""
    last = _public_last[0] if _public_last else None
    if last is not None and time.monotonic() - last[0] < PUBLIC_REPORT_FOR:
        return last[1]
    if not _public_lock.acquire(blocking=last is None):
        return last[1]
    try:
        if _public_last and _public_last[0] is not last:  # made by another request while this one waited
            return _public_last[0][1]
        _public_last[:] = [(time.monotonic(), _report(_public_parts()))]
        return _public_last[0][1]
    finally:
        _public_lock.release()


def _spark_check_job() -> Job:
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHECK_LOCK])
        checks = Job.objects.filter(kind=SPARK_CHECK).order_by("-created_at")
        unfinished = checks.filter(status__in=[Job.Status.QUEUED, Job.Status.RUNNING]).first()
        recent = checks.filter(status=Job.Status.SUCCEEDED, created_at__gte=timezone.now() - REUSE_SUCCESS_FOR).first()
        return unfinished or recent or job_create(kind=SPARK_CHECK, params={"rows": 1000})


def health_deep(*, wait: float) -> tuple[dict[str, Any], bool]:
    """The public report and a `spark` part proven by the shared check job, waited for at most `wait` seconds
    (capped to DEEP_WAIT_MAX), with each worker's processes; and whether that job is still unfinished (the caller
    asks again)."""
    parts = _public_parts(detailed=True)
    if parts["database"].status != "ok" or parts["broker"].status != "ok":
        parts["spark"] = PartHealth("unavailable", "needs the database and the broker")
        return _report(parts), False
    job = job_wait(_spark_check_job(), timeout=min(max(wait, 0.0), DEEP_WAIT_MAX), interval=POLL_INTERVAL)
    parts["spark"] = _spark_part(job, interactive_alive=parts["interactive_worker"].status == "ok")
    return _report(parts), not job.is_finished


def _spark_part(job: Job, *, interactive_alive: bool) -> PartHealth:
    info = {"job": str(job.id), "job_status": job.status}
    if job.status == Job.Status.SUCCEEDED:
        return PartHealth("ok", f"Spark {job.result['spark_version']} ran a job on {job.worker.split('/')[0]}",
                          {**info, **job.result})  # fmt: skip
    if job.status in (Job.Status.QUEUED, Job.Status.RUNNING):
        waiting = "" if interactive_alive else "; no interactive worker is alive to run it"
        detail = f"the Spark check job {job.id} is {job.status}{waiting}: ask again for its outcome"
        return PartHealth("pending", detail, info)
    return PartHealth("error", f"{job.error_code}: {job.error_message}", info)
