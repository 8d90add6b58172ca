from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from lakeui.errors import NotFoundError
from lakeui.jobs.models import Job


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
