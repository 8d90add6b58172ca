"""Data jobs that read the same table state and commit one after the other (issue 18): the second commits only if
nothing it depends on changed meanwhile. Two jobs are interleaved by hand here (read, read, commit, commit), so
each outcome is certain; tests/catalog_app/test_concurrent_jobs.py submits many at once to the real worker."""

import pytest
from django.conf import settings
from pyspark.sql import functions as F

from catalog_app.job_specs import TABLE_JOB_SPECS, LoadSpec
from catalog_app.models import Commit
from catalog_app.services.data_changes import CHANGES, data_change_commit, table_snapshot
from catalog_app.services.data_submit import table_data_submit
from catalog_app.services.load_changes import load_change
from lakeui.errors import ConflictError
from lakeui.jobs.models import Job
from tests.support.catalogs import head, make_catalog, make_table, on
from tests.support.data import claimed, read, run_in_process

pytestmark = pytest.mark.django_db

ROWS = [{"id": i, "amount": i * 10, "region": "eu"} for i in range(1, 5)]


def _prepared(spark, catalog, table, kind, params):
    """A job of `kind` submitted, its table read and its change planned on Spark, not committed yet."""
    job = table_data_submit(target=on(catalog), database="sales", table="orders", kind=kind, params=params)
    snapshot = table_snapshot(
        catalog_id=str(catalog.id), branch="main", table_id=str(table.object_id), warehouse=settings.LAKEUI_WAREHOUSE
    )
    if kind == "table_load":
        change = load_change(spark, snapshot, LoadSpec.from_params(job.params), tag=job.id.hex)
    else:
        change = CHANGES[kind](spark, snapshot, TABLE_JOB_SPECS[kind].from_params(job.params), tag=job.id.hex)
    return claimed(job.id), snapshot, change


def _both(spark, catalog, table, kind, first, second):
    """Plan two jobs on the same state, commit the first: the second's commit (or its refusal)."""
    a = _prepared(spark, catalog, table, kind, first)
    b = _prepared(spark, catalog, table, kind, second)
    data_change_commit(snapshot=a[1], change=a[2], job=a[0], message="first")
    return lambda: data_change_commit(snapshot=b[1], change=b[2], job=b[0], message="second")


def _ids(spark, catalog) -> list[int]:
    return sorted(r["id"] for r in read(spark, catalog).select("id").collect())


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
@pytest.mark.parametrize("key", [20, 2], ids=["new-key", "existing-key"])
def test_the_second_of_two_upserts_of_one_key_read_at_once_is_refused(spark, mode, key):
    catalog = make_catalog()
    table = make_table(catalog, primary_key=["id"], properties={"write.mode": mode})
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": ROWS})
    load = {"strategy": "upsert", "key_columns": ["id"]}
    second = _both(
        spark, catalog, table, "table_load",
        {**load, "rows": [{"id": key, "amount": 1, "region": "a"}]},
        {**load, "rows": [{"id": key, "amount": 2, "region": "b"}]},
    )  # fmt: skip
    before = head(catalog)
    with pytest.raises(ConflictError) as refused:
        second()
    assert refused.value.code == "concurrent_change"
    assert "'orders'" in refused.value.message
    assert head(catalog) == before
    assert _ids(spark, catalog) == sorted({1, 2, 3, 4, key})  # the key once, with the first load's row
    assert read(spark, catalog).where(F.col("id") == key).collect()[0]["amount"] == 1


def test_the_second_of_two_updates_of_one_row_read_at_once_is_refused(spark):
    catalog = make_catalog()
    table = make_table(catalog, primary_key=["id"])
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": ROWS})
    second = _both(
        spark, catalog, table, "table_update",
        {"where": "id = 3", "set": {"amount": "amount + 1"}}, {"where": "id = 3", "set": {"amount": "amount + 100"}},
    )  # fmt: skip
    with pytest.raises(ConflictError):
        second()
    assert _ids(spark, catalog) == [1, 2, 3, 4]
    assert read(spark, catalog).where(F.col("id") == 3).collect()[0]["amount"] == 31


def test_two_appends_into_a_table_without_a_primary_key_both_commit(spark):
    catalog = make_catalog()
    table = make_table(catalog)
    load = {"strategy": "append_only"}
    second = _both(spark, catalog, table, "table_load", {**load, "rows": ROWS[:2]}, {**load, "rows": ROWS[2:]})
    second()
    assert _ids(spark, catalog) == [1, 2, 3, 4]


def test_an_append_into_a_table_with_a_primary_key_after_another_is_refused(spark):
    catalog = make_catalog()
    table = make_table(catalog, primary_key=["id"])
    load = {"strategy": "append_only"}
    second = _both(spark, catalog, table, "table_load", {**load, "rows": ROWS[:2]}, {**load, "rows": ROWS[:2]})
    with pytest.raises(ConflictError):
        second()
    assert _ids(spark, catalog) == [1, 2]


def test_a_job_the_table_changed_under_re_plans_and_commits_on_the_new_state(spark):
    """The handler retries a refused commit from a fresh read: an upsert planned before another one committed
    still commits, once, as an update of the row the other inserted."""
    from lakeui.jobs.registry import job_kind_get
    from tests.support.data import Progress

    catalog = make_catalog()
    make_table(catalog, primary_key=["id"])
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": ROWS})
    load = {"strategy": "upsert", "key_columns": ["id"]}
    late = table_data_submit(
        target=on(catalog), database="sales", table="orders", kind="table_load",
        params={**load, "rows": [{"id": 20, "amount": 2, "region": "b"}]},
    )  # fmt: skip
    other = []

    class OtherCommitsFirst(Progress):  # the other job commits between the late one's first plan and its commit
        def report(self, percent: int, message: str = "") -> None:
            if message == "Committing" and not other:
                other.append(None)
                other[0] = run_in_process(spark, catalog, {**load, "rows": [{"id": 20, "amount": 1, "region": "a"}]})

    result = job_kind_get("table_load").handler(late.params, OtherCommitsFirst(str(late.id)))
    assert other[0]["rows_inserted"] == 1
    assert (result["rows_inserted"], result["rows_updated"]) == (0, 1)
    assert _ids(spark, catalog) == [1, 2, 3, 4, 20]
    assert read(spark, catalog).where(F.col("id") == 20).collect()[0]["amount"] == 2


def test_a_job_whose_claim_was_taken_over_never_commits(spark):
    """A delivery that was merely slow (its heartbeat went stale, the recovery loop sent the job again and another
    delivery claimed it) finds its claim gone at the commit: it stops and writes nothing; the other commits."""
    from lakeui.jobs.registry import ClaimLost, job_kind_get
    from tests.support.data import Progress

    catalog = make_catalog()
    make_table(catalog)
    before = head(catalog)
    job = table_data_submit(target=on(catalog), database="sales", table="orders", kind="table_load",
                            params={"strategy": "append_only", "rows": ROWS})  # fmt: skip

    class TakenOverBeforeCommit(Progress):
        def report(self, percent: int, message: str = "") -> None:
            if message == "Committing":
                Job.objects.filter(id=self.job_id).update(worker="another-delivery/abc")

    with pytest.raises(ClaimLost):
        job_kind_get("table_load").handler(job.params, TakenOverBeforeCommit(str(job.id)))
    assert head(catalog) == before
    assert not Commit.objects.filter(job=job).exists()
