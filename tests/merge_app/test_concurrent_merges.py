"""Merges submitted at once into one branch, run by the real worker (two processes) on real Spark: every merge
commits or is refused cleanly (a 409 code), and the target holds exactly the rows of the branches whose merge
committed: nothing lost, nothing doubled."""

import pytest

from catalog_app.services.data_submit import table_data_submit
from catalog_app.services.refs import branch_create
from lakeui.jobs.models import Job
from merge_app.services.merges import merge_submit
from tests.conftest import wait_for_job
from tests.support.catalogs import make_catalog, make_table, on
from tests.support.check import assert_consistent
from tests.support.data import read

pytestmark = pytest.mark.django_db(transaction=True)
MERGES = 16
CLEAN_REFUSALS = {"branch_moved", "merge_conflict"}


def rows(n: int) -> list[dict]:
    return [{"id": n * 10 + i, "amount": n, "region": "eu"} for i in range(3)]


def finished(jobs: list[Job]) -> list[Job]:
    return [wait_for_job(job.id, timeout=600) for job in jobs]


def branches_with_loads(catalog, table_of) -> None:
    """Branch b0..b15 off main, each loading its rows into table_of(n), all loads running at once."""
    for n in range(MERGES):
        branch_create(catalog=catalog, name=f"b{n}", source="main")
        if table_of(n) != "orders":
            make_table(catalog, branch=f"b{n}", table=table_of(n))
    loads = [
        table_data_submit(target=on(catalog, f"b{n}"), database="sales", table=table_of(n), kind="table_load",
                          params={"strategy": "append_only", "rows": rows(n)})
        for n in range(MERGES)
    ]  # fmt: skip
    assert [job.status for job in finished(loads)] == ["succeeded"] * MERGES


def merged_all(catalog) -> list[int]:
    """Submit the 16 merges into main at once; the branches whose merge committed."""
    jobs = finished([merge_submit(catalog=catalog, source=f"b{n}", target="main") for n in range(MERGES)])
    for job in jobs:
        assert job.status == "succeeded" or job.error_code in CLEAN_REFUSALS, (job.status, job.error_code)
    return [n for n, job in enumerate(jobs) if job.status == "succeeded"]


def ids(spark, catalog, table: str) -> list[int]:
    return sorted(r["id"] for r in read(spark, catalog, table=table).collect())


def test_concurrent_merges_of_separate_tables(spark, celery_worker):
    catalog = make_catalog()
    make_table(catalog)
    branches_with_loads(catalog, lambda n: f"t{n}")
    committed = merged_all(catalog)
    assert committed, "no merge committed"
    for n in committed:
        assert ids(spark, catalog, f"t{n}") == [r["id"] for r in rows(n)]
    assert_consistent(catalog.name)


def test_concurrent_merges_into_one_table(spark, celery_worker):
    catalog = make_catalog()
    make_table(catalog)
    branches_with_loads(catalog, lambda n: "orders")
    committed = merged_all(catalog)
    assert committed, "no merge committed"
    assert ids(spark, catalog, "orders") == sorted(r["id"] for n in committed for r in rows(n))
    assert_consistent(catalog.name)
