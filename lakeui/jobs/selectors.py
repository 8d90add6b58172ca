from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q, QuerySet

from lakeui.errors import NotFoundError
from lakeui.jobs.models import Job, WorkerHeartbeat


def job_list(*, user: AbstractBaseUser, status: str | None = None) -> QuerySet[Job]:
    """The jobs a user may see: their own, or all of them for staff; those in `status` if given."""
    jobs = Job.objects.select_related("requested_by")
    jobs = jobs if user.is_staff else jobs.filter(requested_by=user)
    return jobs.filter(status=status) if status else jobs


def job_of_run(job_id: str) -> Job:
    """The job a handler runs (Progress.job_id), with who asked for it."""
    return Job.objects.select_related("requested_by").get(id=job_id)


def job_by_id(job_id: object) -> Job:
    return Job.objects.get(id=job_id)


def job_get(*, user: AbstractBaseUser, job_id: str) -> Job:
    job = job_list(user=user).filter(id=job_id).first()
    if job is None:
        raise NotFoundError("job_not_found", f"There is no job {job_id}.")
    return job


def _with_params(kind: str, params: dict[str, Any]) -> QuerySet[Job]:
    return Job.objects.filter(kind=kind, **{f"params__{name}": value for name, value in params.items()})


def job_started_for(*, kind: str, params: dict[str, Any], finished_since: datetime) -> Job | None:
    """The newest job of `kind` whose params hold these values, not finished or finished since `finished_since`:
    one already started for the same input, to follow instead of starting another."""
    same = _with_params(kind, params).filter(Q(finished_at__isnull=True) | Q(finished_at__gte=finished_since))
    return same.order_by("-created_at").first()


def job_answering(*, kind: str, params: dict[str, Any], failed_since: datetime) -> Job | None:
    """The job of `kind` whose params hold these values that answers a read of them: the newest that succeeded,
    else the newest not finished, else the newest that failed since `failed_since` (a cancelled one answers
    nothing: a read after it starts again)."""
    same = _with_params(kind, params).order_by("-created_at")
    return (
        same.filter(status=Job.Status.SUCCEEDED).first()
        or same.filter(finished_at__isnull=True).first()
        or same.filter(status=Job.Status.FAILED, finished_at__gte=failed_since).first()
    )


def job_brief(job: Job) -> dict[str, Any]:
    """A job as a read that follows it shows it: its state, and why it failed."""
    return {
        "id": str(job.id), "kind": job.kind, "status": job.status, "progress": job.progress,
        "progress_message": job.progress_message, "error_code": job.error_code, "error_message": job.error_message,
        "error_status": job.error_status,
    }  # fmt: skip


def job_of_kind(*, job_id: object, kind: str, params: dict[str, Any]) -> Job | None:
    """The job `job_id` if it is of `kind` and its params hold these values (a job a page shares by its input)."""
    return _with_params(kind, params).filter(id=job_id).first()


def worker_heartbeats() -> QuerySet[WorkerHeartbeat]:
    """Every worker process's heartbeat, live or stale, by kind and node."""
    return WorkerHeartbeat.objects.order_by("kind", "node", "pid")
