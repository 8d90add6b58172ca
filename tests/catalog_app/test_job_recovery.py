"""Jobs whose worker died or whose message was lost: found by the workers' recovery loop and run again."""

import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from catalog_app.models import Commit, Job
from catalog_app.services import job_recover
from catalog_app.tasks import run_job
from tests.conftest import wait_for_job
from tests.support.worker import Worker

worker_db = pytest.mark.django_db(transaction=True)


def _stale(settings) -> timezone.datetime:
    return timezone.now() - timedelta(seconds=settings.LAKEUI_JOB_STALE_AFTER + 5)


@worker_db
def test_running_job_of_a_dead_worker_is_sent_again_and_runs_once(celery_worker, settings, tmp_path):
    marker = tmp_path / "runs.txt"
    job = Job.objects.create(kind="test.count", params={"path": str(marker)}, status=Job.Status.RUNNING,
                             heartbeat_at=_stale(settings), worker="dead/abc", attempts=1)  # fmt: skip
    assert str(job.id) in job_recover()
    job = wait_for_job(job.id, timeout=60)
    assert (job.status, job.attempts, job.result) == (Job.Status.SUCCEEDED, 2, {"runs": 1})
    assert marker.read_text().count("run ") == 1


@worker_db
def test_queued_job_whose_message_was_lost_is_sent_again(celery_worker, settings, tmp_path):
    marker = tmp_path / "runs.txt"
    job = Job.objects.create(kind="test.count", params={"path": str(marker)})  # never sent: a lost message
    Job.objects.filter(id=job.id).update(created_at=_stale(settings))
    assert job_recover() == [str(job.id)]
    assert job_recover() == []  # just sent: not sent again before another LAKEUI_JOB_STALE_AFTER
    job = wait_for_job(job.id, timeout=60)
    assert job.status == Job.Status.SUCCEEDED
    assert marker.read_text().count("run ") == 1


@pytest.mark.django_db
def test_job_whose_worker_died_too_often_fails_worker_lost(settings):
    job = Job.objects.create(kind="test.echo", status=Job.Status.RUNNING, heartbeat_at=_stale(settings),
                             worker="dead/abc", attempts=settings.LAKEUI_JOB_MAX_ATTEMPTS)  # fmt: skip
    assert job_recover() == []
    job.refresh_from_db()
    assert (job.status, job.error_code) == (Job.Status.FAILED, "worker_lost")
    assert job.finished_at is not None


@pytest.mark.django_db
def test_live_and_young_jobs_are_left_alone(settings):
    running = Job.objects.create(kind="test.echo", status=Job.Status.RUNNING, heartbeat_at=timezone.now(),
                                 worker="live/abc", attempts=1)  # fmt: skip
    queued = Job.objects.create(kind="test.echo")
    cancelled = Job.objects.create(kind="test.echo", status=Job.Status.CANCELLED, heartbeat_at=_stale(settings))
    assert job_recover() == []
    for job, status in ((running, Job.Status.RUNNING), (queued, Job.Status.QUEUED), (cancelled, "cancelled")):
        job.refresh_from_db()
        assert job.status == status
    assert running.worker == "live/abc"


@pytest.mark.django_db
def test_cancel_of_a_job_whose_worker_is_gone_ends_it_at_once(settings, user, user_client):
    job = Job.objects.create(kind="test.echo", status=Job.Status.RUNNING, heartbeat_at=_stale(settings),
                             worker="dead/abc", attempts=1, requested_by=user)  # fmt: skip
    response = user_client.post(f"/api/v1/jobs/{job.id}/cancel")
    assert response.status_code == 202
    assert response.json()["status"] == "cancelled"
    job.refresh_from_db()
    assert (job.status, job.error_code) == (Job.Status.CANCELLED, "cancelled")


@pytest.mark.django_db
def test_cancel_of_a_job_whose_worker_is_alive_waits_for_the_worker(user, user_client):
    job = Job.objects.create(kind="test.echo", status=Job.Status.RUNNING, heartbeat_at=timezone.now(),
                             worker="live/abc", attempts=1, requested_by=user)  # fmt: skip
    assert user_client.post(f"/api/v1/jobs/{job.id}/cancel").status_code == 202
    job.refresh_from_db()
    assert (job.status, job.cancel_requested) == (Job.Status.RUNNING, True)


@worker_db
def test_job_of_a_worker_killed_by_sigkill_finishes_on_a_new_worker(tmp_path):
    """A real worker (its own queue, so the suite's worker cannot take the job) is SIGKILLed with its whole
    process group while the job runs; a new worker's recovery loop runs the job again."""
    env = {"LAKEUI_QUEUE": f"lakeui-crash-{uuid.uuid4().hex[:8]}"}
    db = dict(connection.settings_dict)
    marker = tmp_path / "runs.txt"
    first = Worker(db=db, log_path=tmp_path / "first.log", concurrency=1, env=env).start()
    try:
        job = Job.objects.create(kind="test.count", params={"path": str(marker), "sleep": 60})
        run_job.apply_async(args=[str(job.id)], queue=env["LAKEUI_QUEUE"])
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert time.monotonic() < deadline, first.log()[-4000:]
            time.sleep(0.1)
    finally:
        first.kill()
    Job.objects.filter(id=job.id).update(params={"path": str(marker), "sleep": 0})  # the second run is quick
    killed_at = time.monotonic()
    second = Worker(db=db, log_path=tmp_path / "second.log", concurrency=1, env=env).start()
    try:
        job = wait_for_job(job.id, timeout=settings.LAKEUI_JOB_STALE_AFTER * 2 + 60)
        assert job.status == Job.Status.SUCCEEDED, second.log()[-4000:]
        assert time.monotonic() - killed_at < settings.LAKEUI_JOB_STALE_AFTER * 2 + 60
        assert job.attempts == 2
        assert Path(marker).read_text().count("run ") == 2  # the killed run and the one that finished
    finally:
        second.stop()


ROWS = [{"id": i, "amount": i % 100, "region": f"r{i % 7}"} for i in range(3000)]
LOAD = ("table_load", {"strategy": "append_only", "rows": ROWS}, list(range(3000)))
DELETE = ("table_delete", {"where": "id % 3 = 0"}, [i for i in range(3000) if i % 3])


@pytest.mark.parametrize(
    ("crash_at", "change"),
    [("before_run", LOAD), ("after_run", LOAD), ("after_run", DELETE)],
    ids=["load-before_run", "load-after_run", "delete-after_run"],
)
def test_change_whose_worker_is_killed_ends_once_with_exactly_its_rows(
    crash_at, change, transactional_db, spark, tmp_path, monkeypatch
):
    """The worker (its process group, Spark JVM included) is SIGKILLed while the load runs, or after the load's
    commit but before the job is marked finished; a new worker finishes it: one new commit, each row once."""
    from django.db import transaction

    from catalog_app.services.data_jobs import table_data_submit
    from tests.support.catalogs import head, make_catalog, make_table, on
    from tests.support.data import read, run_here

    env = {"LAKEUI_QUEUE": f"lakeui-crash-{uuid.uuid4().hex[:8]}"}
    db = dict(connection.settings_dict)
    catalog = make_catalog()
    make_table(catalog)
    kind, params, expected_ids = change
    if kind != "table_load":  # the rows to change, loaded in this process
        run_here(spark, catalog, {"strategy": "append_only", "rows": ROWS})
    before = head(catalog)
    first = Worker(db=db, log_path=tmp_path / "first.log", concurrency=1, env={**env, "LAKEUI_JOB_CRASH_AT": crash_at})
    first.start()
    # The submit's message goes to this test's worker only: the suite's worker (running for earlier tests) must
    # not take the job, or the crash hook never fires.
    monkeypatch.setattr(run_job, "delay", lambda job_id: run_job.apply_async(args=[job_id], queue=env["LAKEUI_QUEUE"]))
    try:
        with transaction.atomic():
            job = table_data_submit(target=on(catalog), database="sales", table="orders", kind=kind, params=params)
        first.process.wait(timeout=240)  # the crash hook kills it
    finally:
        first.kill()
    assert Job.objects.get(id=job.id).status == Job.Status.RUNNING, first.log()[-4000:]
    killed_at = time.monotonic()
    second = Worker(db=db, log_path=tmp_path / "second.log", concurrency=1, env=env).start()
    try:
        job = wait_for_job(job.id, timeout=settings.LAKEUI_JOB_STALE_AFTER * 2 + 180)
        assert job.status == Job.Status.SUCCEEDED, (job.error_code, job.error_message, second.log()[-4000:])
        assert time.monotonic() - killed_at < settings.LAKEUI_JOB_STALE_AFTER * 2 + 180
        assert job.attempts == 2
    finally:
        second.stop()
    new_head = Commit.objects.get(id=head(catalog))
    assert (new_head.parent_id, new_head.job_id) == (before, job.id)  # exactly one new commit, the job's
    got = read(spark, catalog).orderBy("id").collect()
    assert [r["id"] for r in got] == expected_ids
