"""Helpers for table data tests: run data jobs through the real worker, read tables with the engine."""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from pyspark.sql import DataFrame

import catalog_app.job_kinds  # noqa: F401  (registers the production job kinds in this process)
from catalog_app.engine.reads import read_segments
from catalog_app.engine.warehouse import Warehouse
from catalog_app.models import ObjectKind
from catalog_app.selectors.objects import object_get
from catalog_app.selectors.refs import ref_resolve
from catalog_app.selectors.table_files import table_columns, table_files
from catalog_app.services.data_submit import table_data_submit
from lakeui.jobs.models import Job
from lakeui.jobs.registry import job_kind_get
from tests.conftest import wait_for_job
from tests.support.catalogs import on


def run(catalog, kind, params, *, branch="main", database="sales", table="orders", expect="succeeded") -> Job:
    job = table_data_submit(target=on(catalog, branch), database=database, table=table, kind=kind, params=params)
    job = wait_for_job(job.id, timeout=240)
    assert job.status == expect, f"{job.status}: {job.error_code} {job.error_message}"
    return job


def claimed(job_id) -> Job:
    """The job claimed by this process as a worker's delivery claims it: its commit is fenced by the claim. Its
    heartbeat is set a day ahead (this process beats no heartbeat): no worker's recovery loop takes it over, nor
    claims it from a message its submit sent (a transactional test's submit sends one)."""
    heartbeat = timezone.now() + timedelta(days=1)
    running = {"status": Job.Status.RUNNING, "worker": f"test-process/{job_id}", "heartbeat_at": heartbeat}
    Job.objects.filter(id=job_id).update(**running)
    return Job.objects.select_related("requested_by").get(id=job_id)


class Progress:
    """What a job handler reports progress to, for a job run in the test process (which claims it)."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        claimed(job_id)

    def report(self, percent: int, message: str = "") -> None:
        pass


def run_in_process(
    spark, catalog, params, *, kind="table_load", branch="main", database="sales", table="orders"
) -> dict:
    """Submit a data job (the API's checks, nothing enqueued in a test transaction) and do its work in this
    process as a worker would, on this process's SparkSession (`spark`): the job's result. A refusal raises
    ApplicationError."""
    job = table_data_submit(target=on(catalog, branch), database=database, table=table, kind=kind, params=params)
    result = job_kind_get(kind).handler(job.params, Progress(str(job.id)))
    Job.objects.filter(id=job.id).update(status=Job.Status.SUCCEEDED, result=result, finished_at=timezone.now())
    return result


def load(catalog, rows, **kwargs) -> Job:
    return run(catalog, "table_load", {"strategy": "append_only", "rows": rows}, **kwargs)


def table_version(catalog, ref="main", database="sales", table="orders", at=None):
    chain = ref_resolve(catalog=catalog, ref=ref, at=at).chain
    db = object_get(chain, kind=ObjectKind.DATABASE, name=database)
    return chain, object_get(chain, kind=ObjectKind.TABLE, name=table, parent_id=db.object_id)


def read(spark, catalog, ref="main", database="sales", table="orders") -> DataFrame:
    """The table's rows at a ref, read in this process with the engine (as a worker reads them)."""
    chain, version = table_version(catalog, ref, database, table)
    files = table_files(chain, table_id=version.object_id)
    base = f"{catalog.id}/{version.object_id}"
    return read_segments(spark, Warehouse(settings.LAKEUI_WAREHOUSE), base, table_columns(version), files.reads())


def files_at(catalog, ref="main", database="sales", table="orders"):
    chain, version = table_version(catalog, ref, database, table)
    return table_files(chain, table_id=version.object_id)
