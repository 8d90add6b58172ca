"""`job_read`: a read a worker answers, for a request that answers at once. One job per input however often it is
read: its result once it has succeeded, its refusal (with its status) for a while after it has failed, and until
then the job to follow (`{complete: false, job}`)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from lakeui.errors import ApplicationError
from lakeui.jobs.models import Job
from lakeui.jobs.services import READ_FAILURE_KEPT_FOR, job_read, read_is_pending

pytestmark = pytest.mark.django_db  # no commit: nothing is sent to a worker, the jobs stay as the test sets them

PARAMS = {"commit": "c1", "page": 1}


def read(params=PARAMS):
    return job_read(kind="test.echo", params=params, requested_by=None)


def finish(job: Job, status: str, *, ago: float = 0, **fields) -> None:
    Job.objects.filter(id=job.id).update(status=status, finished_at=timezone.now() - timedelta(seconds=ago), **fields)


def test_a_read_is_pending_with_its_job_and_read_again_follows_the_same_one():
    first = read()
    assert read_is_pending(first) and first["job"]["status"] == "queued"
    assert read()["job"]["id"] == first["job"]["id"]
    assert read({**PARAMS, "page": 2})["job"]["id"] != first["job"]["id"]  # another input: another job
    assert Job.objects.count() == 2


def test_the_succeeded_job_answers_every_later_read():
    job = Job.objects.get(id=read()["job"]["id"])
    finish(job, Job.Status.SUCCEEDED, ago=10 * 24 * 3600, result={"rows": [[1]]})
    assert read() == {"rows": [[1]]} and not read_is_pending(read())
    assert Job.objects.count() == 1


def test_a_failed_job_is_the_read_s_refusal_for_a_while_then_the_read_starts_again():
    job = Job.objects.get(id=read()["job"]["id"])
    finish(job, Job.Status.FAILED, error_code="sql_error", error_message="bad", error_status=400, result={"x": 1})
    with pytest.raises(ApplicationError) as refused:
        read()
    assert (refused.value.code, refused.value.status, refused.value.details) == ("sql_error", 400, {"x": 1})
    finish(job, Job.Status.FAILED, ago=READ_FAILURE_KEPT_FOR + 1)
    again = read()
    assert read_is_pending(again) and again["job"]["id"] != str(job.id)


def test_a_cancelled_read_is_started_again():
    job = Job.objects.get(id=read()["job"]["id"])
    finish(job, Job.Status.CANCELLED, error_code="cancelled")
    assert read()["job"]["id"] != str(job.id)
