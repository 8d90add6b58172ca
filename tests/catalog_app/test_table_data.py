"""Table data on real Spark through the real worker: DML, reads at any ref, schema evolution, bad input, GC."""

import os
import time
from pathlib import Path

import pytest
from django.conf import settings
from pyspark.sql import types as T
from pyspark.testing import assertDataFrameEqual

from catalog_app.models import Commit, DataFile
from catalog_app.services.refs import branch_create
from catalog_app.services.tables import column_add, column_update, table_update
from lakeui.errors import ApplicationError
from tests.support.catalogs import head, make_catalog, make_table, on
from tests.support.data import files_at, load, read, run
from tests.support.reads import read_followed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

SCHEMA = "id long, amount int, region string"
ROWS = [{"id": i, "amount": i * 10, "region": "eu" if i % 2 else "us"} for i in range(1, 9)]


def expected(spark, rows, schema=SCHEMA):
    return spark.createDataFrame([tuple(row.values()) if isinstance(row, dict) else row for row in rows], schema)


def two_segment_table(**table_kwargs):
    """A table with rows 1-4 in one segment and 5-8 in another."""
    catalog = make_catalog()
    make_table(catalog, **table_kwargs)
    load(catalog, ROWS[:4])
    load(catalog, ROWS[4:])
    return catalog


def test_insert_is_visible_at_the_new_commit_only(spark):
    catalog = make_catalog()
    make_table(catalog)
    before = head(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    job = load(catalog, ROWS)
    assert job.result["rows_inserted"] == 8
    assert job.result["commit"] == head(catalog)
    assertDataFrameEqual(read(spark, catalog), expected(spark, ROWS))
    assert read(spark, catalog, before).count() == 0
    assert read(spark, catalog, "dev").count() == 0
    segment = files_at(catalog).segments[0]
    assert segment.path.startswith(f"{catalog.id}/{segment.table_id}/data/")
    assert segment.stats["1"] == {"min": 1, "max": 8, "nulls": 0}
    assert segment.schema_version_id is not None


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_delete_gives_the_same_rows_in_both_modes(spark, mode):
    catalog = two_segment_table(properties={"write.mode": mode})
    segments_before, before = files_at(catalog).segments, head(catalog)
    branch_create(catalog=catalog, name="other", source="main")
    job = run(catalog, "table_delete", {"where": "id IN (2, 3)"})
    assert (job.result["rows_deleted"], job.result["segments_read"]) == (2, 1)  # ids 5-8 ruled out by min/max
    assertDataFrameEqual(read(spark, catalog), expected(spark, [r for r in ROWS if r["id"] not in (2, 3)]))
    assertDataFrameEqual(read(spark, catalog, before), expected(spark, ROWS))
    assertDataFrameEqual(read(spark, catalog, "other"), expected(spark, ROWS))
    after = files_at(catalog)
    if mode == "copy-on-write":
        # Only the segment holding rows 2 and 3 was rewritten; the other is still the same file.
        assert job.result["segments_rewritten"] == 1
        assert segments_before[1] in after.segments
        assert segments_before[0] not in after.segments
        assert not after.deltas
    else:
        assert job.result["segments_rewritten"] == 0
        assert after.segments == segments_before
        assert list(after.deltas) == [segments_before[0].id]


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_update_gives_the_same_rows_in_both_modes(spark, mode):
    catalog = two_segment_table(properties={"write.mode": mode})
    before = head(catalog)
    job = run(catalog, "table_update", {"set": {"amount": "amount + 1", "region": "upper(region)"}, "where": "id >= 7"})
    assert (job.result["rows_updated"], job.result["segments_read"]) == (2, 1)
    assertDataFrameEqual(read(spark, catalog, before), expected(spark, ROWS))
    rows = [dict(r, amount=r["amount"] + 1, region=r["region"].upper()) if r["id"] >= 7 else r for r in ROWS]
    assertDataFrameEqual(read(spark, catalog), expected(spark, rows))
    assert job.result["segments_rewritten"] == (1 if mode == "copy-on-write" else 0)


def test_a_row_updated_again_and_again_is_read_from_its_live_segments_only(spark):
    """Each merge-on-read update leaves a segment whose one delta file deletes its only row; later updates skip it
    (their cost does not grow with the row's history). A NOT NULL column set to NULL is still refused, though only
    the assigned columns are checked."""
    catalog = two_segment_table()
    for amount in range(1, 5):
        job = run(catalog, "table_update", {"set": {"amount": f"amount + {amount}"}, "where": "id = 2"})
        # the loaded segment of rows 1-4 (row 2 deleted, its statistics unchanged) and the last update's
        assert (job.result["rows_updated"], job.result["segments_read"]) == (1, 1 if amount == 1 else 2)
    assert len(files_at(catalog).segments) == 6  # the two loaded, four updates' (three of them emptied)
    rows = [dict(r, amount=r["amount"] + 10) if r["id"] == 2 else r for r in ROWS]
    assertDataFrameEqual(read(spark, catalog), expected(spark, rows))
    before = head(catalog)
    job = run(catalog, "table_update", {"set": {"id": "NULL"}, "where": "id = 2"}, expect="failed")
    assert job.error_code == "not_null_violation" and head(catalog) == before


@pytest.mark.parametrize("where", ["id > 8", "region IS NULL", "id = 9 OR amount < 10"])
def test_a_predicate_every_segment_rules_out_reads_nothing_and_commits_nothing(spark, where):
    catalog = two_segment_table()
    before = head(catalog)
    job = run(catalog, "table_delete", {"where": where})
    assert (job.result["commit"], job.result["rows_deleted"], job.result["segments_read"]) == (None, 0, 0)
    assert head(catalog) == before
    assertDataFrameEqual(read(spark, catalog), expected(spark, ROWS))


def test_overlapping_delta_files_are_subtracted_once(spark, user_client):
    catalog = two_segment_table()
    run(catalog, "table_delete", {"where": "id <= 2"})
    run(catalog, "table_delete", {"where": "id >= 2 AND id <= 3"})  # overlaps the first on row 2
    assert len(files_at(catalog).deltas[files_at(catalog).segments[0].id]) == 2
    assertDataFrameEqual(read(spark, catalog), expected(spark, [r for r in ROWS if r["id"] > 3]))
    page = read_followed(
        user_client, f"/api/v1/catalogs/{catalog.name}/refs/main/databases/sales/tables/orders/rows?page_size=3"
    )
    assert page.status_code == 200, page.json()
    assert page.json()["count"] == 5
    assert page.json()["rows"] == [[4, 40, "us"], [5, 50, "eu"], [6, 60, "us"]]


def test_nan_and_infinities_load_and_read_back(user_client):
    """JSON has no NaN: the segment keeps no min/max for the column, and the rows API names them as Spark does."""
    catalog = make_catalog()
    make_table(catalog, columns=[{"name": "id", "type": "long"}, {"name": "f", "type": "double"}])
    values = "VALUES (1L, CAST('NaN' AS DOUBLE)), (2L, CAST('Infinity' AS DOUBLE)), (3L, -CAST('Infinity' AS DOUBLE))"
    run(catalog, "table_load", {"strategy": "append_only", "query": f"SELECT * FROM {values} AS t(id, f)"})
    segments = files_at(catalog).segments
    assert not any("2" in s.stats for s in segments) and all("1" in s.stats for s in segments)
    page = read_followed(user_client, f"/api/v1/catalogs/{catalog.name}/refs/main/databases/sales/tables/orders/rows")
    assert page.status_code == 200, page.content
    assert sorted(page.json()["rows"]) == [[1, "NaN"], [2, "Infinity"], [3, "-Infinity"]]


def test_the_first_and_last_timestamps_read_back(user_client):
    """PySpark's collect cannot make a datetime of 0001-01-01 00:00 (through local time); the rows API reads
    through Arrow."""
    catalog = make_catalog()
    make_table(catalog, columns=[{"name": "id", "type": "long"}, {"name": "at", "type": "timestamp"}])
    rows = [{"id": 1, "at": "0001-01-01T00:00:00"}, {"id": 2, "at": "9999-12-31T23:59:59.999999"}]
    run(catalog, "table_load", {"strategy": "append_only", "rows": rows})
    page = read_followed(user_client, f"/api/v1/catalogs/{catalog.name}/refs/main/databases/sales/tables/orders/rows")
    assert page.status_code == 200, page.content
    assert page.json()["rows"] == [[1, "0001-01-01T00:00:00"], [2, "9999-12-31T23:59:59.999999"]]


def test_full_refresh_replaces_the_table_and_partitions(spark):
    catalog = make_catalog()
    make_table(catalog, partition_by=["region"])
    load(catalog, ROWS)
    assert {tuple(s.partition_values.values()) for s in files_at(catalog).segments} == {("eu",), ("us",)}
    us_files = [s for s in files_at(catalog).segments if s.partition_values == {"3": "us"}]
    new_eu = [{"id": 100, "amount": 1, "region": "eu"}]
    job = run(catalog, "table_load", {"strategy": "full_refresh", "rows": new_eu, "partitions": [{"region": "eu"}]})
    assert (job.result["rows_inserted"], job.result["rows_deleted"]) == (1, 4)
    assertDataFrameEqual(read(spark, catalog), expected(spark, [*new_eu, *[r for r in ROWS if r["region"] == "us"]]))
    assert all(s in files_at(catalog).segments for s in us_files)  # the other partition's files are untouched
    run(catalog, "table_load", {"strategy": "full_refresh", "rows": ROWS[:1]})
    assertDataFrameEqual(read(spark, catalog), expected(spark, ROWS[:1]))


def test_compaction_changes_no_row(spark):
    catalog = two_segment_table()
    run(catalog, "table_delete", {"where": "id = 5"})
    before = read(spark, catalog).collect()
    job = run(catalog, "table_compact", {})
    after = files_at(catalog)
    assert len(after.segments) == 1
    assert not after.deltas
    assert job.result["segments_read"] == 2
    assertDataFrameEqual(read(spark, catalog), spark.createDataFrame(before, SCHEMA))


def test_reads_follow_schema_evolution_by_column_id(spark):
    catalog = make_catalog()
    make_table(catalog)
    load(catalog, ROWS[:2])
    target = on(catalog)
    column_update(
        target=target, database="sales", table="orders", column="amount", changes={"name": "total", "type": "long"}
    )
    column_add(
        target=target, database="sales", table="orders", spec={"name": "note", "type": "string", "default": "n/a"}
    )
    column_add(target=target, database="sales", table="orders", spec={"name": "extra", "type": "double"})
    load(catalog, [{"id": 3, "total": 2**40, "region": "eu", "note": "new", "extra": 1.5}])
    schema = "id long, total long, region string, note string, extra double"
    assertDataFrameEqual(
        read(spark, catalog),
        spark.createDataFrame(
            [(1, 10, "eu", "n/a", None), (2, 20, "us", "n/a", None), (3, 2**40, "eu", "new", 1.5)], schema
        ),
    )
    assert read(spark, catalog).schema["total"].dataType == T.LongType()


BAD_ROWS = [
    ([{"id": 1, "colour": "red"}], "unknown_column"),
    ([{"id": "one", "amount": 1}], "type_mismatch"),
    ([{"id": 1, "amount": 2**40}], "type_mismatch"),
    ([{"amount": 1}], "not_null_violation"),
    ([{"id": None}], "not_null_violation"),
]


@pytest.mark.parametrize(("rows", "code"), BAD_ROWS)
def test_bad_rows_fail_the_job_and_commit_nothing(rows, code):
    catalog = make_catalog()
    make_table(catalog)
    before, commits = head(catalog), Commit.objects.count()
    job = run(catalog, "table_load", {"strategy": "append_only", "rows": rows}, expect="failed")
    assert job.error_code == code
    assert (head(catalog), Commit.objects.count()) == (before, commits)
    assert not DataFile.objects.exists()


def test_bad_uploaded_file_fails_the_job(tmp_path, user_client):
    catalog = make_catalog()
    make_table(catalog)
    csv = tmp_path / "rows.csv"
    csv.write_text("id,amount,region\n1,10,eu\n2,lots,us\n")
    url = f"/api/v1/catalogs/{catalog.name}/refs/main/databases/sales/tables/orders/load"
    with csv.open("rb") as upload:
        response = user_client.post(url, {"strategy": "append_only", "file": upload}, format="multipart")
    assert response.status_code == 202, response.json()
    from tests.conftest import wait_for_job

    job = wait_for_job(response.json()["id"], timeout=240)
    assert (job.status, job.error_code) == ("failed", "type_mismatch")
    assert "amount" in job.error_message


def test_good_uploaded_file_loads(spark, tmp_path, user_client):
    catalog = make_catalog()
    make_table(catalog)
    path = tmp_path / "rows.parquet"
    spark.createDataFrame([(1, 5, "eu")], "id long, amount int, region string").coalesce(1).write.parquet(str(path))
    file = next(path.glob("*.parquet"))
    url = f"/api/v1/catalogs/{catalog.name}/refs/main/databases/sales/tables/orders/load"
    with file.open("rb") as upload:
        response = user_client.post(
            url, {"strategy": "append_only", "file": upload, "format": "parquet"}, format="multipart"
        )
    from tests.conftest import wait_for_job

    job = wait_for_job(response.json()["id"], timeout=240)
    assert job.status == "succeeded", job.error_message
    assertDataFrameEqual(read(spark, catalog), expected(spark, [(1, 5, "eu")]))


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"where": "colour = 'red'"}, "invalid_predicate"),
        ({"where": "1; DROP TABLE x"}, "invalid_predicate"),
        ({"where": ""}, "invalid_input"),
    ],
)
def test_bad_predicates_are_refused_before_any_job(user_client, body, code):
    catalog = make_catalog()
    make_table(catalog)
    url = f"/api/v1/catalogs/{catalog.name}/refs/main/databases/sales/tables/orders/delete"
    response = user_client.post(url, body, format="json")
    assert (response.status_code, response.json()["code"]) == (400, code)
    from lakeui.jobs.models import Job

    assert not Job.objects.exists()


def test_not_null_column_without_default_is_refused_on_a_non_empty_table():
    catalog = make_catalog()
    make_table(catalog)
    load(catalog, ROWS[:1])
    before = head(catalog)
    with pytest.raises(ApplicationError) as refused:
        column_add(
            target=on(catalog), database="sales", table="orders", spec={"name": "x", "type": "int", "nullable": False}
        )
    assert refused.value.code == "not_null_without_default"
    assert head(catalog) == before


def test_concurrent_schema_change_fails_the_data_job_cleanly(spark):
    """A load whose table schema changes while it runs commits nothing (checked at commit time)."""
    from catalog_app.services.data_changes import DataChange, data_change_commit, table_snapshot
    from lakeui.errors import ConflictError

    catalog = make_catalog()
    table = make_table(catalog)
    snapshot = table_snapshot(
        catalog_id=str(catalog.id), branch="main", table_id=str(table.object_id), warehouse=settings.LAKEUI_WAREHOUSE
    )
    table_update(target=on(catalog), database="sales", name="orders", set_properties={"a": "b"})  # not a schema change
    column_add(target=on(catalog), database="sales", table="orders", spec={"name": "n", "type": "int"})
    before = head(catalog)
    with pytest.raises(ConflictError) as refused:
        data_change_commit(snapshot=snapshot, change=DataChange("insert"), job=None, message="x")
    assert refused.value.code == "concurrent_change"
    assert head(catalog) == before


def test_gc_removes_orphans_and_keeps_every_referenced_file():
    catalog = make_catalog()
    make_table(catalog)
    load(catalog, ROWS[:4])
    branch_create(catalog=catalog, name="dev", source="main")
    load(catalog, ROWS[4:], branch="dev")
    run(catalog, "table_delete", {"where": "id = 1"})  # main gets a delta file
    warehouse = Path(settings.LAKEUI_WAREHOUSE)
    table_dir = warehouse / str(catalog.id) / str(files_at(catalog).segments[0].table_id)
    orphan = table_dir / "data" / "failed-job" / "part-0.parquet"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"left by a killed job")
    fresh_orphan = table_dir / "data" / "running-job" / "part-0.parquet"
    fresh_orphan.parent.mkdir(parents=True)
    fresh_orphan.write_bytes(b"a job still running")
    old = time.time() - 2 * 3600
    for path in table_dir.rglob("*"):
        if path.is_file() and path != fresh_orphan:
            os.utime(path, (old, old))
    from lakeui.jobs.services import job_create
    from tests.conftest import wait_for_job

    refused = wait_for_job(job_create(kind="catalog_gc", params={"catalog_id": str(catalog.id), "grace_seconds": 0}).id)
    assert (refused.status, refused.error_code) == ("failed", "invalid_grace_period")
    job = wait_for_job(job_create(kind="catalog_gc", params={"catalog_id": str(catalog.id), "grace_seconds": 3600}).id)
    assert job.status == "succeeded", job.error_message
    assert not orphan.exists()
    assert fresh_orphan.exists()
    for data_file in DataFile.objects.filter(catalog=catalog):
        assert (warehouse / data_file.path).exists(), data_file.path
    assert job.result["files_removed"] >= 1
