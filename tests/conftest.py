import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Q
from pytest_django.fixtures import validate_django_db
from rest_framework.test import APIClient

import tests.support.jobkinds  # noqa: F401  (registers the test job kinds in this process too)
from catalog_app.engine import session as spark_session_module
from lakeui.jobs.models import Job
from tests.support.worker import Worker

IDLE_TIMEOUT = 120


_workers: list[Worker] = []  # the session's workers, once a test has started them
_CALLED = pytest.StashKey[bool]()


@pytest.fixture(scope="session")
def _worker_process(django_db_setup, django_db_blocker):
    """The session's workers, as `make run` starts them: one for jobs (two processes), one for the interactive
    queue (the reads a person waits for)."""
    db, logs = dict(connection.settings_dict), Path(settings.VAR_DIR)
    jobs = Worker(db=db, log_path=logs / "worker.log").start()
    _workers.append(jobs)
    interactive = Worker(db=db, log_path=logs / "worker-interactive.log", concurrency=1,
                         queue=settings.LAKEUI_INTERACTIVE_QUEUE)  # fmt: skip
    _workers.append(interactive.start())
    yield jobs
    for worker in (interactive, jobs):
        _workers.remove(worker)
        worker.stop()


@pytest.fixture
def celery_worker(_worker_process, transactional_db):
    """The session's real workers, on the test database; tests that use it get committed data. The jobs
    worker is returned; the interactive one runs beside it."""
    return _worker_process


def _transactional(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("django_db")
    return bool(marker and validate_django_db(marker)[0]) or bool(
        {"transactional_db", "live_server"} & set(item.fixturenames)
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    item.stash[_CALLED] = True  # its fixtures (the database among them) were set up
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Before any fixture is torn down, settle the worker: the jobs a transactional test left queued are
    cancelled (a worker that picks one up later finds it finished) and those it runs are awaited. Otherwise
    the database flush after the test races a job still writing, and the TRUNCATE deadlocks with it. Any
    transactional test can leave jobs behind, not only those that ask for `celery_worker`: a merge request
    queues its plan when it is saved. A test that never ran (skipped, an xfail not run, a setup that failed)
    has no database access to settle with, and left nothing behind."""
    if _workers and item.stash.get(_CALLED, False) and _transactional(item):
        _settle(_workers)
    return (yield)


def _settle(workers: list[Worker]) -> None:
    mine = Q()
    for worker in workers:
        mine |= Q(worker__startswith=f"{worker.name}@")
    running = Job.objects.filter(mine, status=Job.Status.RUNNING)
    deadline = time.monotonic() + IDLE_TIMEOUT
    while Job.objects.filter(status=Job.Status.QUEUED).update(status=Job.Status.CANCELLED) or running.exists():
        assert time.monotonic() < deadline, f"the worker is still busy after the test: {list(running.values('kind'))}"
        time.sleep(0.1)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The test process's own SparkSession, built by the engine exactly as a worker builds it."""
    warehouse = tmp_path_factory.mktemp("warehouse")
    yield spark_session_module.get_or_create(spark_session_module.SparkConfig(warehouse=str(warehouse)))
    spark_session_module.stop()


def wait_for_job(job_id, timeout: float = 120) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        job = Job.objects.get(id=job_id)
        if job.is_finished or time.monotonic() > deadline:
            return job
        time.sleep(0.2)


@pytest.fixture
def user(db):
    """alice, who owns (and so administers) the catalogs `make_catalog` builds; she may exist already."""
    alice, _ = get_user_model().objects.get_or_create(username="alice")
    alice.set_password("alice-password")
    alice.save()
    return alice


@pytest.fixture
def staff_user(db):
    return get_user_model().objects.create_user("root", password="root-password", is_staff=True)


@pytest.fixture
def api_client():
    return APIClient()


@pytest.fixture
def user_client(user):
    client = APIClient()
    client.force_authenticate(user)
    return client
