from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from catalog_app.models import Job
from lakeui.errors import NotFoundError


def job_list(*, user: AbstractBaseUser) -> QuerySet[Job]:
    """The jobs a user may see: their own, or all of them for staff."""
    jobs = Job.objects.select_related("requested_by")
    return jobs if user.is_staff else jobs.filter(requested_by=user)


def job_get(*, user: AbstractBaseUser, job_id: str) -> Job:
    job = job_list(user=user).filter(id=job_id).first()
    if job is None:
        raise NotFoundError("job_not_found", f"There is no job {job_id}.")
    return job
