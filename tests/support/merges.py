"""Helpers for merge tests: data changes run here on the test's Spark (the worker's code, in-process), merges
through the service, and reading what a branch holds."""

from catalog_app.selectors.objects import object_find
from catalog_app.selectors.refs import ref_resolve
from catalog_app.services.data_submit import table_data_submit
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_execute
from merge_app.models import Merge
from merge_app.services.merges import branch_merge
from tests.conftest import wait_for_job
from tests.support.catalogs import on


def change(catalog, kind, params, *, branch="main", database="sales", table="orders") -> Job:
    """Run a data job now, in this process (if a worker took it first, wait for that run)."""
    job = table_data_submit(target=on(catalog, branch), database=database, table=table, kind=kind, params=params)
    job_execute(job_id=str(job.id), worker="test-process")
    job = wait_for_job(job.id, timeout=240)
    assert job.status == "succeeded", f"{job.status}: {job.error_code} {job.error_message}"
    return job


def insert(catalog, rows, **kwargs) -> Job:
    return change(catalog, "table_load", {"strategy": "append_only", "rows": rows}, **kwargs)


def merge(catalog, source="dev", target="main", **kwargs) -> Merge:
    return branch_merge(catalog=catalog, source=source, target=target, **kwargs)


def table_at(catalog, ref="main", database="sales", table="orders"):
    """The table's version at a ref, or None if it has no such table."""
    chain = ref_resolve(catalog=catalog, ref=ref).chain
    db = object_find(chain, kind="database", name=database)
    return None if db is None else object_find(chain, kind="table", name=table, parent_id=db.object_id)
