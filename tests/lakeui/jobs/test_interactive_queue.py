"""Reads a person waits for run on the interactive queue's own worker: never behind the long jobs of the jobs
worker."""

import time

import pytest

from catalog_app.services.tables import column_add
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_cancel, job_create
from tests.conftest import wait_for_job
from tests.support.catalogs import make_catalog, make_table, on
from tests.support.data import load
from tests.support.sql import sql_followed

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_select_answers_while_long_jobs_hold_every_jobs_worker_process(celery_worker, user_client):
    """A SELECT that Spark answers (an expression: outside catalog_app/engine/quick_sql.py's subset) is read by
    the interactive worker while both jobs worker processes are busy."""
    catalog = make_catalog()
    make_table(catalog)
    load(catalog, [{"id": 1, "amount": 10, "region": "eu"}, {"id": 2, "amount": 20, "region": "us"}])
    long_jobs = [job_create(kind="test.until_cancelled", params={"max_seconds": 300}) for _ in range(2)]
    try:
        deadline = time.monotonic() + 60
        while Job.objects.filter(id__in=[j.id for j in long_jobs], status=Job.Status.RUNNING).count() < 2:
            assert time.monotonic() < deadline, "the jobs worker's two processes did not both take a long job"
            time.sleep(0.1)
        statement = "SELECT id, amount + 1 AS next FROM sales.orders ORDER BY id"
        status, answer = sql_followed(user_client, catalog, statement, timeout=60)
        assert status == 200, answer
        assert answer["rows"] == [[1, 11], [2, 21]]
        read = Job.objects.filter(kind="sql_select").latest("created_at")
        holder = Job.objects.get(id=long_jobs[0].id).worker
        assert read.worker.split("@")[0] != holder.split("@")[0]  # another worker served it
        assert all(Job.objects.get(id=j.id).status == Job.Status.RUNNING for j in long_jobs)  # still holding
    finally:
        for job in long_jobs:
            job_cancel(job=Job.objects.get(id=job.id))
    assert {wait_for_job(j.id).status for j in long_jobs} == {Job.Status.CANCELLED}


def test_a_rows_page_in_the_current_schema_is_read_from_the_files_with_no_job(celery_worker, user_client):
    catalog = make_catalog()
    make_table(catalog)
    load(catalog, [{"id": 1, "amount": 10, "region": "eu"}, {"id": 2, "amount": 20, "region": "us"}])
    page = user_client.get(f"/api/v1/catalogs/{catalog.name}/refs/main/databases/sales/tables/orders/rows")
    assert page.status_code == 200, page.json()
    assert (page.json()["count"], page.json()["rows"]) == (2, [[1, 10, "eu"], [2, 20, "us"]])
    assert not Job.objects.filter(kind="table_rows").exists()
    # A segment written before a column was added is projected here too (reads.projected_arrow), with no job.
    column_add(target=on(catalog), database="sales", table="orders", spec={"name": "note", "type": "int", "default": 0})
    page = user_client.get(f"/api/v1/catalogs/{catalog.name}/refs/main/databases/sales/tables/orders/rows").json()
    assert page["rows"] == [[1, 10, "eu", 0], [2, 20, "us", 0]]
    assert not Job.objects.filter(kind="table_rows").exists()
