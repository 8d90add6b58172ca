import json
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import Q
from pytest_django.fixtures import validate_django_db
from rest_framework.test import APIClient

import tests.support.jobkinds  # noqa: F401  (registers the test job kinds in this process too)
from catalog_app.engine import session as spark_session_module
from lakeui import embedded_postgres
from lakeui.jobs.models import Job
from tests.support.worker import Worker

IDLE_TIMEOUT = 120
# How often a test looks again at a job it waits for (one small query): most jobs here take well under a second.
POLL_INTERVAL = 0.05


_workers: list[Worker] = []  # the session's workers, once a test has started them
_CALLED = pytest.StashKey[bool]()


# `make test` hands whole files to its processes (pytest-xdist's loadfile), the next file to a process as it nears
# the end of its last, and the run ends with its longest-running process. The longest files go first, so that no long
# file starts near the end while the other process has nothing left: xdist's own order (the files with the most
# tests first) put a two-minute file with few tests last. The seconds per file come from a run of the suite
# (tests/file_seconds.json, remade with `python -m tests.support.file_seconds report.xml` from pytest's
# --junitxml); a file it does not know yet counts as NEW_FILE_SECONDS.
FILE_SECONDS = json.loads((Path(__file__).parent / "file_seconds.json").read_text())
NEW_FILE_SECONDS = 30.0


def pytest_configure(config):
    if FILE_SECONDS and hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # xdist keeps the order of the collection, made below
    BaseDatabaseOperations.execute_sql_flush = _flush_retried


_execute_sql_flush = BaseDatabaseOperations.execute_sql_flush
FLUSH_TRIES = 5


def _flush_retried(self, sql_list):
    """The flush after a transactional test (one TRUNCATE of every table, which takes their locks one by one),
    tried again when the server ends it as a deadlock: the session's workers read several tables at once in their
    upkeep every few seconds (merge requests following their branches' heads), whatever test runs, and one such read
    can hold a table the TRUNCATE needs while it waits for one the TRUNCATE holds. The read goes on; the flush, run
    again at once, finds the tables free. Seen under load: the flush failed and the next test found the last one's
    rows."""
    for attempt in range(FLUSH_TRIES):
        try:
            return _execute_sql_flush(self, sql_list)
        except OperationalError as error:
            if attempt == FLUSH_TRIES - 1 or "deadlock detected" not in str(error):
                raise
            time.sleep(POLL_INTERVAL)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Under xdist, the longest files first (a stable sort: each file's tests keep their order); a single process
    keeps the files in their usual order."""
    if FILE_SECONDS and os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: -FILE_SECONDS.get(item.nodeid.split("::")[0], NEW_FILE_SECONDS))


@pytest.fixture(scope="session")
def _worker_process(django_db_setup, django_db_blocker):
    """The session's workers, as `make run` starts them: one for jobs (two processes), one for the interactive
    queue (the reads a person waits for)."""
    db, logs = dict(connection.settings_dict), Path(settings.VAR_DIR)
    jobs = Worker(db=db, log_path=logs / "worker.log")
    interactive = Worker(db=db, log_path=logs / "worker-interactive.log", concurrency=1,
                         queue=settings.LAKEUI_INTERACTIVE_QUEUE)  # fmt: skip
    try:
        for worker in (jobs, interactive):  # both start at once, then each is waited for
            _workers.append(worker.launch())
        for worker in (jobs, interactive):
            worker.ready()
        yield jobs
    finally:
        for worker in (interactive, jobs):
            if worker in _workers:
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
        time.sleep(POLL_INTERVAL)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The test process's own SparkSession, built by the engine exactly as a worker builds it."""
    warehouse = tmp_path_factory.mktemp("warehouse")
    config = spark_session_module.SparkConfig(warehouse=str(warehouse), extra=dict(settings.LAKEUI_SPARK_CONF))
    yield spark_session_module.get_or_create(config)
    spark_session_module.stop()


@pytest.fixture
def embedded_pgdata():
    """A data folder for an embedded PostgreSQL server of the test's own (lakeui/embedded_postgres.py), stopped and
    removed after it: under the var folder, since pytest's temporary folders are root's only, and run as root the
    server runs as a user of its own."""
    folder = Path(settings.VAR_DIR) / "embedded" / uuid.uuid4().hex[:8]
    yield folder
    embedded_postgres.stop(folder)
    shutil.rmtree(folder, ignore_errors=True)


def wait_for_job(job_id, timeout: float = 120) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        job = Job.objects.get(id=job_id)
        if job.is_finished or time.monotonic() > deadline:
            return job
        time.sleep(POLL_INTERVAL)


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
