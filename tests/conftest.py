import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.test import APIClient

import tests.support.jobkinds  # noqa: F401  (registers the test job kinds in this process too)
from catalog_app.engine import session as spark_session_module
from catalog_app.models import Job
from tests.support.worker import Worker


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker):
    """One real worker for the session, on the test database. Tests that use it need committed data:
    mark them `django_db(transaction=True)`."""
    worker = Worker(db=dict(connection.settings_dict), log_path=Path(settings.VAR_DIR) / "worker.log").start()
    yield worker
    worker.stop()


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
