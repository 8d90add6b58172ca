"""`lakeui_client.spark`: the user's own SparkSession reads a table at any ref from the scan plan and writes a
DataFrame into a branch through a staged load, against a live server with the real worker (no mocks)."""

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.conf import settings
from lakeui_client import ApiError, Client, ConflictError, NotFound
from lakeui_client.errors import JobFailed
from lakeui_client.spark import read_table, write_table
from pyspark.sql import functions as F

from catalog_app.services.access import catalog_role_grant
from tests.support.catalogs import head, make_catalog, make_table

COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "amount", "type": "int"},
    {"name": "region", "type": "string"},
]


def api_rows(client: Client, ref: str, table: str, at: str | None = None) -> tuple[list[str], list[tuple]]:
    """The table's column names and rows as the rows API returns them, every page."""
    rows, page = [], 1
    while True:
        body = client.rows("lake", ref, table, page=page, page_size=1000, **({"at": at} if at else {}))
        rows += [tuple(row) for row in body["rows"]]
        if len(rows) >= body["count"] or not body["rows"]:
            return [c["name"] for c in body["columns"]], sorted(rows)
        page += 1


def frame_rows(frame) -> tuple[list[str], list[tuple]]:
    return frame.columns, sorted(tuple(row) for row in frame.collect())


def staged_files(job: dict) -> list[Path]:
    folder = Path(settings.LAKEUI_WAREHOUSE) / job["params"]["upload"]["path"]
    return list(folder.rglob("*")) if folder.exists() else []


def test_read_table_at_branch_tag_and_time_equals_the_api(client, celery_worker, spark):
    client.catalog_create("lake")
    client.database_create("lake", "main", "shop")
    no_table_yet = datetime.now(UTC).isoformat()
    time.sleep(0.05)
    client.table_create("lake", "main", "shop.orders", COLUMNS)
    for start in (0, 500):  # two loads: two segments
        rows = [{"id": i, "amount": i % 97, "region": "eu" if i % 3 else "us"} for i in range(start, start + 500)]
        client.load("lake", "main", "shop.orders", strategy="append_only", rows=rows)
    client.tag_create("lake", "v1", "main")
    before = datetime.now(UTC).isoformat()
    time.sleep(0.05)
    # A rename (files keep the old name: read by column id) and two deletes whose positions overlap.
    client.request("PATCH", f"{client._table('lake', 'main', 'shop.orders')}/columns/amount", json={"name": "total"})
    client.delete_rows("lake", "main", "shop.orders", where="id % 7 = 0")
    client.delete_rows("lake", "main", "shop.orders", where="id < 100")

    plan = client.table_scan("lake", "main", "shop.orders")
    assert [c["name"] for c in plan["columns"]] == ["id", "total", "region"]
    assert any(len(s["deletes"]) == 2 for s in plan["segments"])  # both deletes hit the first segment
    expected = [i for i in range(1000) if i % 7 and i >= 100]
    assert plan["row_count"] == len(expected)

    main = read_table(spark, client, "lake", "main", "shop.orders")
    assert frame_rows(main) == api_rows(client, "main", "shop.orders")
    assert sorted(r.id for r in main.select("id").collect()) == expected
    assert main.filter(F.col("id") == 101).first().total == 101 % 97

    tagged = read_table(spark, client, "lake", "v1", "shop.orders")
    assert frame_rows(tagged) == api_rows(client, "v1", "shop.orders")
    assert tagged.columns == ["id", "amount", "region"] and tagged.count() == 1000

    past = read_table(spark, client, "lake", "main", "shop.orders", at=before)
    assert frame_rows(past) == frame_rows(tagged) == api_rows(client, "main", "shop.orders", at=before)

    with pytest.raises(NotFound) as missing:
        read_table(spark, client, "lake", "main", "shop.orders", at=no_table_yet)
    assert missing.value.status == 404 and missing.value.code == "table_not_found"


def test_read_table_where_skips_the_files_the_plan_rules_out(client, celery_worker, spark):
    client.catalog_create("lake")
    client.database_create("lake", "main", "shop")
    client.table_create("lake", "main", "shop.orders", COLUMNS, partition_by=["region"])
    rows = [{"id": i, "amount": i, "region": ["eu", "us", "apac"][i % 3]} for i in range(300)]
    client.load("lake", "main", "shop.orders", strategy="append_only", rows=rows)
    everything = client.table_scan("lake", "main", "shop.orders")["segments"]
    assert len(everything) == 3  # one file per partition
    pruned = client.table_scan("lake", "main", "shop.orders", where="region = 'eu' AND id >= 150")["segments"]
    assert [list(s["partition_values"].values()) for s in pruned] == [["eu"]]
    eu = read_table(spark, client, "lake", "main", "shop.orders", where="region = 'eu' AND id >= 150")
    assert sorted(r.id for r in eu.collect()) == [i for i in range(150, 300) if i % 3 == 0]
    with pytest.raises(ApiError) as bad:
        client.table_scan("lake", "main", "shop.orders", where="nope = 1")
    assert bad.value.status == 400


def test_write_table_append_upsert_and_snapshot(client, celery_worker, spark):
    client.catalog_create("lake")
    client.database_create("lake", "main", "shop")
    client.table_create("lake", "main", "shop.events", COLUMNS, partition_by=["region"])
    client.branch_create("lake", "dev")

    def frame(ids, amount, region=None):
        rows = spark.range(*ids).select(
            F.col("id"), F.lit(amount).cast("int").alias("amount"),
            (F.lit(region) if region else F.when(F.col("id") % 2 == 0, "us").otherwise("eu")).alias("region"),
        )  # fmt: skip
        return rows

    n, half = 100_000, 50_000  # DataFrames of 100,000 rows
    appended = write_table(frame((0, n), 1), client, "lake", "dev", "shop.events")
    assert appended["status"] == "succeeded" and appended["result"]["rows_inserted"] == n
    assert appended["params"]["strategy"] == "append_only" and staged_files(appended) == []
    expected = {i: (1, "us" if i % 2 == 0 else "eu") for i in range(n)}

    upserted = write_table(frame((half, n + half), 7), client, "lake", "dev", "shop.events", "upsert", ["id"])
    assert (upserted["result"]["rows_updated"], upserted["result"]["rows_inserted"]) == (half, half)
    assert staged_files(upserted) == []
    expected |= {i: (7, "us" if i % 2 == 0 else "eu") for i in range(half, n + half)}

    snapshot = write_table(
        frame((2 * n, 2 * n + 100), 9, "eu"),
        client,
        "lake",
        "dev",
        "shop.events",
        "snapshot",
        partition_column="region",
    )
    eu_before = sum(1 for _, region in expected.values() if region == "eu")
    assert (snapshot["result"]["rows_deleted"], snapshot["result"]["rows_inserted"]) == (eu_before, 100)
    expected = {i: v for i, v in expected.items() if v[1] == "us"} | {i: (9, "eu") for i in range(2 * n, 2 * n + 100)}

    dev = read_table(spark, client, "lake", "dev", "shop.events")
    assert frame_rows(dev)[1] == sorted((i, *v) for i, v in expected.items())
    assert frame_rows(dev) == api_rows(client, "dev", "shop.events")
    assert read_table(spark, client, "lake", "main", "shop.events").count() == 0  # only the branch changed


def test_staged_load_breaking_the_schema_fails_clean(client, celery_worker, spark):
    client.catalog_create("lake")
    client.database_create("lake", "main", "shop")
    client.table_create("lake", "main", "shop.orders", COLUMNS)
    before = client.branch("lake", "main")["head"]

    no_id = spark.createDataFrame([(None, 1, "eu"), (2, 2, "us")], "id long, amount int, region string")
    with pytest.raises(JobFailed) as refused:
        write_table(no_id, client, "lake", "main", "shop.orders")
    assert refused.value.code == "not_null_violation" and "id" in refused.value.message
    assert staged_files(refused.value.job) == []

    text_amount = spark.createDataFrame([(1, "many", "eu")], "id long, amount string, region string")
    with pytest.raises(JobFailed) as mismatched:
        write_table(text_amount, client, "lake", "main", "shop.orders", "upsert", key_columns=["id"])
    assert mismatched.value.code == "type_mismatch" and "amount" in mismatched.value.message

    extra = spark.createDataFrame([(1, 1, "eu", 5)], "id long, amount int, region string, extra int")
    with pytest.raises(JobFailed) as unknown:
        write_table(extra, client, "lake", "main", "shop.orders")
    assert unknown.value.code == "unknown_column"

    assert client.branch("lake", "main")["head"] == before
    assert read_table(spark, client, "lake", "main", "shop.orders").count() == 0

    good = spark.createDataFrame([(1, 1, "eu")], "id long, amount int, region string")
    write_table(good, client, "lake", "main", "shop.orders", expected_head=before)  # the head it was based on
    moved = client.branch("lake", "main")["head"]
    with pytest.raises(ConflictError) as stale:
        write_table(good, client, "lake", "main", "shop.orders", expected_head=before)
    assert stale.value.status == 409 and stale.value.code == "branch_moved"
    assert client.branch("lake", "main")["head"] == moved
    assert read_table(spark, client, "lake", "main", "shop.orders").count() == 1


def test_staged_files_no_load_consumed_are_removed_by_gc(client, celery_worker, spark):
    client.catalog_create("lake")
    client.database_create("lake", "main", "shop")
    client.table_create("lake", "main", "shop.orders", COLUMNS)
    write_table(spark.createDataFrame([(1, 1, "eu")], "id long, amount int, region string"), client, "lake", "main",
                "shop.orders")  # fmt: skip
    staging = client.table_staging("lake", "main", "shop.orders")
    spark.range(10).write.parquet(staging["uri"])  # written, never loaded
    time.sleep(2)
    gc = client.wait(client.request("POST", "catalogs/lake/gc", json={"grace_hours": 0.0003})["id"])
    assert any(path.startswith(staging["path"] + "/") for path in gc["result"]["removed"])
    assert not list(Path(staging["uri"]).rglob("*.parquet"))
    assert frame_rows(read_table(spark, client, "lake", "main", "shop.orders"))[1] == [(1, 1, "eu")]


# --- the endpoints through DRF's client: permissions and bad input (no worker needed) -----------------------


@pytest.fixture
def lake(user, django_user_model):
    catalog = make_catalog("lake")
    make_table(catalog, columns=COLUMNS)
    for name, role in (("bob", "viewer"), ("erin", "editor")):
        django_user_model.objects.create_user(name)
        catalog_role_grant(catalog=catalog, username=name, role=role, granted_by=user)
    django_user_model.objects.create_user("carol")  # no role in the catalog
    return catalog


TABLE = "/api/v1/catalogs/lake/refs/{ref}/databases/sales/tables/orders"


def as_user(api_client, django_user_model, name):
    api_client.force_authenticate(django_user_model.objects.get(username=name))
    return api_client


def test_scan_plan_and_staging_permissions(lake, api_client, django_user_model):
    viewer = as_user(api_client, django_user_model, "bob")
    plan = viewer.get(TABLE.format(ref="main") + "/scan")
    assert plan.status_code == 200, plan.json()
    body = plan.json()
    assert [(c["id"], c["name"], c["type"]) for c in body["columns"]] == [
        (1, "id", "long"), (2, "amount", "int"), (3, "region", "string"),
    ]  # fmt: skip
    assert body["segments"] == [] and body["row_count"] == 0
    assert body["warehouse"] == settings.LAKEUI_WAREHOUSE and body["base"] == f"{lake.id}/{body['table_id']}"

    refused = viewer.post(TABLE.format(ref="main") + "/staging")
    assert refused.status_code == 403 and refused.json()["code"] == "role_required"
    refused = viewer.post(TABLE.format(ref="main") + "/load", {"strategy": "append_only", "staged": "0" * 32})
    assert refused.status_code == 403

    outsider = as_user(api_client, django_user_model, "carol")
    assert outsider.get(TABLE.format(ref="main") + "/scan").status_code == 404

    editor = as_user(api_client, django_user_model, "erin")
    staging = editor.post(TABLE.format(ref="main") + "/staging")
    assert staging.status_code == 201, staging.json()
    staged = staging.json()
    assert staged["path"] == f"{lake.id}/staging/{staged['id']}"
    assert staged["uri"] == f"{settings.LAKEUI_WAREHOUSE}/{staged['path']}"
    assert not Path(staged["uri"]).exists()  # the client's Spark job writes it


def test_staged_load_bad_input_is_a_400(lake, api_client, django_user_model):
    editor = as_user(api_client, django_user_model, "erin")
    head_before = head(lake)
    staged = editor.post(TABLE.format(ref="main") + "/staging").json()["id"]

    def load(ref="main", **body):
        return editor.post(TABLE.format(ref=ref) + "/load", {"strategy": "append_only", **body}, format="json")

    for bad in ("../../etc", "0" * 31, f"{staged}/.."):
        answer = load(staged=bad)
        assert answer.status_code == 400 and answer.json()["code"] == "invalid_staging", bad
    empty = load(staged=staged)  # nothing written there yet
    assert empty.status_code == 400 and empty.json()["code"] == "staging_empty"
    tag = editor.post("/api/v1/catalogs/lake/tags", {"name": "v1", "ref": "main"}, format="json")
    assert tag.status_code == 201
    on_tag = editor.post(TABLE.format(ref="v1") + "/staging")
    assert on_tag.status_code == 400 and on_tag.json()["code"] == "read_only_ref"
    missing = editor.post("/api/v1/catalogs/lake/refs/main/databases/sales/tables/nope/staging")
    assert missing.status_code == 404
    assert head(lake) == head_before
