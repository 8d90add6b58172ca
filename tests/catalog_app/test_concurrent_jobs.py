"""Data jobs submitted at once into one table, run by the real worker (two processes) on real Spark: every job
commits or is refused cleanly (`concurrent_change`), and the table holds exactly what the committed jobs wrote,
in commit order: no key twice, no row lost."""

import pytest

from catalog_app.models import Commit
from catalog_app.services.data_submit import table_data_submit
from lakeui.jobs.models import Job
from tests.conftest import wait_for_job
from tests.support.catalogs import make_catalog, make_table, on
from tests.support.check import assert_consistent
from tests.support.data import load, read

pytestmark = pytest.mark.django_db(transaction=True)
JOBS = 16


def submit_all(catalog, kind, params_list):
    jobs = [
        table_data_submit(target=on(catalog), database="sales", table="orders", kind=kind, params=params)
        for params in params_list
    ]
    return [wait_for_job(job.id, timeout=600) for job in jobs]


def settled(jobs: list[Job]) -> list[Job]:
    """The jobs that committed, in commit order; every other one was refused with concurrent_change."""
    for job in jobs:
        assert job.status == "succeeded" or job.error_code == "concurrent_change", (job.status, job.error_code)
    committed = [job for job in jobs if job.status == "succeeded"]
    assert committed, "no job committed"
    return sorted(committed, key=lambda job: Commit.objects.get(job=job).seq)


def rows_by_id(spark, catalog):
    rows = [(r["id"], r["amount"]) for r in read(spark, catalog).collect()]
    ids = [i for i, _ in rows]
    assert len(ids) == len(set(ids)), f"a key is held twice: {sorted(ids)}"
    return dict(rows)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_concurrent_upserts_of_overlapping_keys_never_hold_a_key_twice(spark, celery_worker, mode):
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"], properties={"write.mode": mode})
    load(catalog, [{"id": i, "amount": 0, "region": "eu"} for i in range(4)])
    upserts = [
        {"strategy": "upsert", "key_columns": ["id"],
         "rows": [{"id": i, "amount": n + 1, "region": "eu"} for i in range(n, n + 6)]}
        for n in range(JOBS)
    ]  # fmt: skip
    committed = settled(submit_all(catalog, "table_load", upserts))
    expected = {i: 0 for i in range(4)}
    for job in committed:
        expected |= {row["id"]: row["amount"] for row in job.params["rows"]}
    assert rows_by_id(spark, catalog) == expected
    assert_consistent(catalog.name)


def test_concurrent_updates_of_one_row_apply_once_each(spark, celery_worker):
    catalog = make_catalog()
    make_table(catalog)
    load(catalog, [{"id": 1, "amount": 0, "region": "eu"}, {"id": 2, "amount": 0, "region": "eu"}])
    updates = [{"set": {"amount": "amount + 1"}, "where": "id = 1"}] * JOBS
    committed = settled(submit_all(catalog, "table_update", updates))
    assert rows_by_id(spark, catalog) == {1: len(committed), 2: 0}
    assert_consistent(catalog.name)


def test_concurrent_appends_all_commit(spark, celery_worker):
    catalog = make_catalog()
    make_table(catalog)
    appends = [
        {"strategy": "append_only", "rows": [{"id": n * 10 + i, "amount": n, "region": "eu"} for i in range(3)]}
        for n in range(JOBS)
    ]
    jobs = submit_all(catalog, "table_load", appends)
    assert [job.status for job in jobs] == ["succeeded"] * JOBS  # appends of given rows commute
    assert rows_by_id(spark, catalog) == {n * 10 + i: n for n in range(JOBS) for i in range(3)}
    assert_consistent(catalog.name)
