"""The write strategies of docs/api.md#write-strategies on real Spark: rows, counts, pruning, operations and refusals.

Most tests run the load job's work in this process (as the worker would, see `tests.support.data.run_in_process`);
one goes end to end through the API and the real worker.
"""

from datetime import date, datetime
from decimal import Decimal

import pytest
from django.conf import settings
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from catalog_app.engine import loads_arrow
from catalog_app.models import Commit, DataFile, Operation
from catalog_app.services.data_changes import DataChange, data_change_commit, table_snapshot
from catalog_app.services.data_submit import table_data_submit
from catalog_app.services.tables import table_update
from lakeui.errors import ApplicationError
from lakeui.jobs.models import Job
from lakeui.jobs.registry import job_kind_get
from tests.conftest import wait_for_job
from tests.support.catalogs import COLUMNS, head, make_catalog, make_table, on
from tests.support.data import Progress, files_at, read, run_in_process, table_version

pytestmark = pytest.mark.django_db

SCHEMA = "id long, amount int, region string"
ROWS = [{"id": i, "amount": i * 10, "region": "eu" if i % 2 else "us"} for i in range(1, 9)]
LOADS_URL = "/api/v1/catalogs/{catalog}/refs/main/databases/sales/tables/orders/load"


def frame(spark, rows, schema=SCHEMA):
    return spark.createDataFrame([tuple(r.values()) if isinstance(r, dict) else r for r in rows], schema)


def two_segment_table(spark, **table_kwargs):
    """Rows 1-4 in one segment, 5-8 in another."""
    catalog = make_catalog()
    make_table(catalog, **table_kwargs)
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": ROWS[:4]})
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": ROWS[4:]})
    return catalog


def operations(catalog) -> list[tuple[str, dict]]:
    commit = Commit.objects.get(id=head(catalog))
    return [(op.op, op.details) for op in Operation.objects.filter(commit=commit).order_by("position")]


def segment_ids(details: dict) -> set[str]:
    return set(details["segments_touched"])


MODES = ["merge-on-read", "copy-on-write"]


@pytest.fixture(params=["here", "driver", "spark"])
def matching(request, settings, monkeypatch):
    """Key loads of up to LAKEUI_DRIVER_MATCH_ROWS rows match keys on the driver, larger ones in Spark jobs, and
    small ones of JSON rows or Parquet run here with no Spark job (`loads_arrow.ARROW_ROWS`): the tests of key
    strategies run all three ways."""
    if request.param == "spark":
        settings.LAKEUI_DRIVER_MATCH_ROWS = 0
    if request.param == "driver":
        monkeypatch.setattr(loads_arrow, "ARROW_ROWS", 0)
    return request.param


CHANGED = {"id": 2, "amount": -2, "region": "xx"}  # an existing key, in the first segment
NEW = {"id": 20, "amount": 200, "region": "eu"}  # a key above every segment's max


@pytest.mark.usefixtures("matching")
def test_insert_adds_only_new_keys(spark):
    catalog = two_segment_table(spark)
    result = run_in_process(spark, catalog, {"strategy": "insert", "key_columns": ["id"], "rows": [CHANGED, NEW]})
    assertDataFrameEqual(read(spark, catalog), frame(spark, [*ROWS, NEW]))
    assert (result["rows_inserted"], result["rows_updated"], result["strategy"]) == (1, 0, "insert")
    assert result["segments_read"] == 1  # key 20 is above both segments' max; key 2 sits in the first only
    assert [op for op, _ in operations(catalog)] == ["insert"]


@pytest.mark.usefixtures("matching")
@pytest.mark.parametrize("mode", MODES)
def test_update_changes_matched_rows_and_inserts_nothing(spark, mode):
    catalog = two_segment_table(spark, properties={"write.mode": mode})
    first, second = files_at(catalog).segments
    result = run_in_process(spark, catalog, {"strategy": "update", "key_columns": ["id"], "rows": [CHANGED, NEW]})
    assertDataFrameEqual(read(spark, catalog), frame(spark, [CHANGED if r["id"] == 2 else r for r in ROWS]))
    assert (result["rows_updated"], result["rows_inserted"]) == (1, 0)
    assert (result["segments_read"], result["segments_rewritten"]) == (1, 1 if mode == "copy-on-write" else 0)
    [(op, details)] = operations(catalog)
    assert op == "update"
    assert segment_ids(details) == {str(first.id)}
    live = files_at(catalog)
    assert second in live.segments  # the unaffected file stays referenced as it is
    assert (first in live.segments) == (mode == "merge-on-read")
    assert list(live.deltas) == ([first.id] if mode == "merge-on-read" else [])


@pytest.mark.usefixtures("matching")
@pytest.mark.parametrize("mode", MODES)
def test_upsert_updates_matched_keys_and_inserts_the_rest(spark, mode):
    catalog = two_segment_table(spark, properties={"write.mode": mode})
    before = head(catalog)
    result = run_in_process(spark, catalog, {"strategy": "upsert", "key_columns": ["id"], "rows": [CHANGED, NEW]})
    assertDataFrameEqual(read(spark, catalog), frame(spark, [*[CHANGED if r["id"] == 2 else r for r in ROWS], NEW]))
    assertDataFrameEqual(read(spark, catalog, before), frame(spark, ROWS))
    assert (result["rows_updated"], result["rows_inserted"], result["rows_deleted"]) == (1, 1, 0)
    (update, update_details), (insert, insert_details) = operations(catalog)
    assert (update, insert) == ("update", "insert")
    assert segment_ids(update_details) == {str(files_at(catalog, before).segments[0].id)}
    assert (update_details["rows_updated"], insert_details["rows_inserted"]) == (1, 1)
    assert update_details["strategy"] == insert_details["strategy"] == "upsert"
    assert not set(update_details["segments_added"]) & set(insert_details["segments_added"])


@pytest.mark.usefixtures("matching")
@pytest.mark.parametrize("mode", MODES)
def test_delete_insert_replaces_the_rows_of_incoming_keys(spark, mode):
    catalog = two_segment_table(spark, properties={"write.mode": mode})
    incoming = [CHANGED, {"id": 5, "amount": 0, "region": "eu"}, NEW]
    result = run_in_process(spark, catalog, {"strategy": "delete_insert", "key_columns": ["id"], "rows": incoming})
    assertDataFrameEqual(read(spark, catalog), frame(spark, [*[r for r in ROWS if r["id"] not in (2, 5)], *incoming]))
    assert (result["rows_deleted"], result["rows_inserted"], result["rows_updated"]) == (2, 3, 0)
    assert result["segments_rewritten"] == (2 if mode == "copy-on-write" else 0)
    (delete, delete_details), (insert, _) = operations(catalog)
    assert (delete, insert) == ("delete", "insert")
    assert len(delete_details["segments_touched"]) == 2


@pytest.mark.usefixtures("matching")
def test_incremental_keeps_the_newest_incoming_row_per_key(spark):
    catalog = make_catalog()
    make_table(catalog, columns=[*COLUMNS, {"name": "seen", "type": "int"}])
    run_in_process(
        spark, catalog, {"strategy": "append_only", "rows": [{"id": 1, "amount": 1, "region": "eu", "seen": 1}]}
    )
    rows = [
        {"id": 1, "amount": 10, "region": "old", "seen": 2},
        {"id": 1, "amount": 11, "region": "new", "seen": 3},
        {"id": 2, "amount": 20, "region": "a", "seen": None},
        {"id": 2, "amount": 21, "region": "b", "seen": 1},
    ]
    params = {"strategy": "incremental", "key_columns": ["id"], "watermark": "seen", "rows": rows}
    result = run_in_process(spark, catalog, params)
    schema = f"{SCHEMA}, seen int"
    assertDataFrameEqual(read(spark, catalog), frame(spark, [(1, 11, "new", 3), (2, 21, "b", 1)], schema))
    assert (result["rows_updated"], result["rows_inserted"]) == (1, 1)
    assert [op for op, _ in operations(catalog)] == ["update", "insert"]


@pytest.mark.usefixtures("matching")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("strategy", ["upsert", "incremental", "delete_insert", "scd2"])
def test_a_key_load_into_an_empty_table_inserts_every_row(spark, mode, strategy):
    """The first load of a pipeline: no segment to match, so every incoming row is new."""
    catalog = make_catalog()
    make_table(catalog, properties={"write.mode": mode})
    fields = {"watermark": "amount", "valid_from_column": "vf", "valid_to_column": "vt"}
    result = run_in_process(spark, catalog, {"strategy": strategy, "key_columns": ["id"], "rows": ROWS[:3], **fields})
    assert (result["rows_inserted"], result["rows_updated"], result["rows_deleted"]) == (3, 0, 0)
    assert sorted(r["id"] for r in read(spark, catalog).collect()) == [1, 2, 3]


@pytest.mark.parametrize("order", ["as_given", "reversed"])
def test_incremental_breaks_watermark_ties_the_same_way_whatever_the_order(spark, order):
    """Rows of one key tied on the watermark: the kept one does not depend on the order they come in (the
    smallest of the other columns wins)."""
    catalog = make_catalog()
    make_table(catalog)
    rows = [{"id": 1, "amount": amount, "region": region} for amount, region in [(5, "b"), (5, "a"), (7, "a")]]
    rows = rows if order == "as_given" else rows[::-1]
    params = {"strategy": "incremental", "key_columns": ["id"], "watermark": "amount", "rows": rows}
    run_in_process(spark, catalog, params)
    assertDataFrameEqual(read(spark, catalog), frame(spark, [(1, 7, "a")]))
    run_in_process(spark, catalog, {**params, "rows": [r for r in rows if r["amount"] == 5]})
    assertDataFrameEqual(read(spark, catalog), frame(spark, [(1, 5, "a")]))


@pytest.mark.usefixtures("matching")
def test_incremental_keeps_every_row_with_a_null_key_as_upsert_does(spark):
    catalog = make_catalog()
    make_table(catalog, columns=[{"name": "k", "type": "string"}, {"name": "amount", "type": "int"}])
    rows = [{"k": None, "amount": 1}, {"k": None, "amount": 2}, {"k": "a", "amount": 3}, {"k": "a", "amount": 4}]
    for strategy, rows_in, counts in [("incremental", rows[:3], (3, 0)), ("upsert", rows[:3], (2, 1)),
                                      ("incremental", rows, (2, 1))]:  # fmt: skip
        params = {"strategy": strategy, "key_columns": ["k"], "watermark": "amount", "rows": rows_in}
        result = run_in_process(spark, catalog, params)
        assert (result["rows_inserted"], result["rows_updated"]) == counts, strategy
    after = sorted((r["k"] or "", r["amount"]) for r in read(spark, catalog).collect())
    assert after == [("", 1), ("", 1), ("", 1), ("", 2), ("", 2), ("", 2), ("a", 4)]


def test_scd2_closes_and_opens_versions_over_three_loads(spark):
    catalog = make_catalog()
    make_table(catalog)
    params = {"strategy": "scd2", "key_columns": ["id"], "valid_from_column": "vf", "valid_to_column": "vt"}
    first = run_in_process(spark, catalog, {**params, "rows": ROWS[:2]})
    assert (first["rows_inserted"], first["rows_updated"]) == (2, 0)
    assert [op for op, _ in operations(catalog)] == ["alter_column", "alter_column", "insert"]
    assert [s.schema_version.columns[-1]["name"] for s in files_at(catalog).segments] == ["vt"]
    second = run_in_process(spark, catalog, {**params, "rows": [{**ROWS[0], "amount": 11}, ROWS[1], ROWS[2]]})
    assert (second["rows_updated"], second["rows_inserted"]) == (1, 2)  # id 1 changed, id 2 unchanged, id 3 new
    assert [op for op, _ in operations(catalog)] == ["update", "insert"]
    third = run_in_process(spark, catalog, {**params, "rows": [{**ROWS[0], "amount": 12}]})
    assert (third["rows_updated"], third["rows_inserted"]) == (1, 1)
    table = read(spark, catalog)
    history = table.filter("id = 1").orderBy(F.col("vf").asc_nulls_first()).collect()
    assert [r["amount"] for r in history] == [10, 11, 12]
    assert history[0]["vt"] == history[1]["vf"] and history[1]["vt"] == history[2]["vf"]
    assert history[2]["vt"] is None
    open_rows = table.filter("vt IS NULL").select("id", "amount", "region")
    assertDataFrameEqual(open_rows, frame(spark, [{**ROWS[0], "amount": 12}, ROWS[1], ROWS[2]]))
    assert table.count() == 5


def test_scd2_refuses_validity_columns_of_another_type(spark, user_client):
    catalog = make_catalog()
    make_table(catalog, columns=[*COLUMNS, {"name": "vf", "type": "string"}, {"name": "vt", "type": "timestamp"}])
    body = {"strategy": "scd2", "key_columns": ["id"], "valid_from_column": "vf", "valid_to_column": "vt", "rows": []}
    response = user_client.post(LOADS_URL.format(catalog=catalog.name), body, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_validity_columns")


def test_snapshot_replaces_only_the_incoming_partitions(spark):
    catalog = make_catalog()
    make_table(catalog, partition_by=["region"])
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": ROWS})
    run_in_process(spark, catalog, {"where": "id = 1"}, kind="table_delete")  # a delta file: 3 eu rows left
    us_files = [s for s in files_at(catalog).segments if s.partition_values == {"3": "us"}]
    incoming = [{"id": 100, "amount": 1, "region": "eu"}, {"id": 101, "amount": 2, "region": "apac"}]
    result = run_in_process(spark, catalog, {"strategy": "snapshot", "partition_column": "region", "rows": incoming})
    assertDataFrameEqual(read(spark, catalog), frame(spark, [*incoming, *[r for r in ROWS if r["region"] == "us"]]))
    assert (result["rows_inserted"], result["rows_deleted"], result["segments_read"]) == (2, 3, 0)
    assert [s.id for s in files_at(catalog).segments if s.partition_values == {"3": "us"}] == [s.id for s in us_files]
    [(op, details)] = operations(catalog)
    assert op == "overwrite"
    assert details["partitions"] == [{"region": "apac"}, {"region": "eu"}]


def test_partitions_of_any_value_get_files_of_their_own(spark):
    """Partition values too long for a folder name (or for Parquet to keep their min/max: 3,000 characters), and
    pairs of values that differ only in which column is NULL, each get files of their own with their values; the
    long one can then be overwritten alone."""
    long_a, long_b = "a" * 3000, "b" * 3000
    catalog = make_catalog()
    columns = [*COLUMNS, {"name": "zone", "type": "string"}]
    make_table(catalog, columns=columns, partition_by=["region", "zone"])
    rows = [
        {"id": 1, "amount": 1, "region": long_a, "zone": None}, {"id": 2, "amount": 2, "region": long_b, "zone": None},
        {"id": 3, "amount": 3, "region": "x", "zone": None}, {"id": 4, "amount": 4, "region": None, "zone": "x"},
    ]  # fmt: skip
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": rows})
    values = sorted((s.partition_values["3"] or "", s.partition_values["4"] or "") for s in files_at(catalog).segments)
    assert values == [("", "x"), (long_a, ""), (long_b, ""), ("x", "")]
    incoming = [{"id": 5, "amount": 5, "region": long_a, "zone": None}]
    run_in_process(spark, catalog, {"strategy": "snapshot", "partition_column": "region", "rows": incoming})
    assert sorted(r["id"] for r in read(spark, catalog).collect()) == [2, 3, 4, 5]


def test_a_null_partition_is_not_the_string_none(spark):
    catalog = make_catalog()
    make_table(catalog, partition_by=["region"])
    rows = [{"id": 1, "amount": 1, "region": "None"}, {"id": 2, "amount": 2, "region": None}]
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": [*rows, {"id": 3, "amount": 3, "region": "eu"}]})
    incoming = [{"id": 4, "amount": 4, "region": None}]
    result = run_in_process(spark, catalog, {"strategy": "snapshot", "partition_column": "region", "rows": incoming})
    assert result["rows_deleted"] == 1
    assert sorted(r["id"] for r in read(spark, catalog).collect()) == [1, 3, 4]
    run_in_process(spark, catalog, {"strategy": "full_refresh", "partitions": [{"region": "None"}], "rows": []})
    assert sorted(r["id"] for r in read(spark, catalog).collect()) == [3, 4]


def test_full_refresh_partitions_are_read_as_the_columns_types(spark):
    """A partition given as `"1.5"` for a decimal(10,2) column, or a timestamp with a space, finds the files of
    that partition (it is kept as the catalog keeps values); a value of another type is refused before any job."""
    catalog = make_catalog()
    columns = [*COLUMNS, {"name": "price", "type": "decimal(10,2)"}, {"name": "at", "type": "timestamp"}]
    make_table(catalog, columns=columns, partition_by=["price", "at"])
    rows = [
        {"id": 1, "price": "1.50", "at": "2024-01-01T10:00:00"}, {"id": 2, "price": "2", "at": "2024-01-01T10:00:00"},
    ]  # fmt: skip
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": rows})
    partitions = [{"price": 1.5, "at": "2024-01-01 11:00:00+01:00"}]
    new = [{"id": 3, "price": "1.5", "at": "2024-01-01T10:00:00"}]
    result = run_in_process(spark, catalog, {"strategy": "full_refresh", "partitions": partitions, "rows": new})
    assert (result["rows_deleted"], result["rows_inserted"]) == (1, 1)
    assert sorted(r["id"] for r in read(spark, catalog).collect()) == [2, 3]
    [(_, details)] = operations(catalog)
    assert details["partitions"] == [{"price": "1.50", "at": "2024-01-01T10:00:00"}]
    for bad in ([{"price": "x", "at": None}], []):
        with pytest.raises(ApplicationError) as refused:
            run_in_process(spark, catalog, {"strategy": "full_refresh", "partitions": bad, "rows": []})
        assert refused.value.code in ("invalid_partition_value", "invalid_input")


def test_a_partition_overwrite_waits_for_segments_written_before_partitioning_to_be_split(spark, user_client):
    """Rows loaded when the table was partitioned by region alone sit in files of several amounts once it is
    partitioned by region and amount: overwriting a partition cannot replace such a file, so it is refused (by the
    API, and by the worker for a job queued before) until compaction splits the files by partition."""
    catalog = make_catalog()
    make_table(catalog, partition_by=["region"])
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": ROWS})
    incoming = [{"id": 100, "amount": 1, "region": "eu"}]
    snapshot = {"strategy": "snapshot", "partition_column": "region", "rows": incoming}
    queued = table_data_submit(target=on(catalog), database="sales", table="orders", kind="table_load", params=snapshot)
    table_update(target=on(catalog), database="sales", name="orders", partition_by=["region", "amount"])
    before = head(catalog)
    refresh = {"strategy": "full_refresh", "partitions": [{"region": "eu", "amount": 1}], "rows": incoming}
    for body in (snapshot, refresh):
        response = user_client.post(LOADS_URL.format(catalog=catalog.name), body, format="json")
        assert (response.status_code, response.json()["code"]) == (409, "unsplit_segments"), response.json()
    with pytest.raises(ApplicationError) as refused:
        job_kind_get("table_load").handler(queued.params, Progress(str(queued.id)))
    assert (refused.value.status, refused.value.code) == (409, "unsplit_segments")
    assert head(catalog) == before
    compacted = run_in_process(spark, catalog, {}, kind="table_compact")
    assert (compacted["segments_read"], compacted["segments_written"]) == (2, len(ROWS))  # one amount per row
    assert all(set(s.partition_values) == {"2", "3"} for s in files_at(catalog).segments)
    run_in_process(spark, catalog, snapshot)
    assertDataFrameEqual(read(spark, catalog), frame(spark, [*incoming, *[r for r in ROWS if r["region"] == "us"]]))


@pytest.mark.usefixtures("matching")
def test_upsert_from_a_query_over_another_table(spark, user_client):
    """Through the API, as a user sends it; the job's work runs here."""
    catalog = two_segment_table(spark)
    make_table(catalog, table="staging")
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": [CHANGED, NEW]}, table="staging")
    params = {"strategy": "upsert", "key_columns": ["id"], "query": "SELECT * FROM sales.staging WHERE id < 10"}
    response = user_client.post(LOADS_URL.format(catalog=catalog.name), params, format="json")
    assert response.status_code == 202, response.json()
    job = Job.objects.get(id=response.json()["id"])
    assert job.params["query"] == params["query"]
    result = job_kind_get("table_load").handler(job.params, Progress(str(job.id)))
    assert (result["rows_updated"], result["rows_inserted"]) == (1, 0)
    assertDataFrameEqual(read(spark, catalog), frame(spark, [CHANGED if r["id"] == 2 else r for r in ROWS]))


@pytest.mark.usefixtures("matching")
@pytest.mark.parametrize("mode", MODES)
def test_a_query_is_read_once_so_a_nondeterministic_one_stays_consistent(spark, mode):
    """An upsert of half of the table's own rows, a half that moves with the clock (a query's current_timestamp()
    is taken anew by each Spark action that runs it). The key survey and the write must see the same half, else
    rows the survey matched lose their new version and the others keep two versions (199 times in 200)."""
    catalog = make_catalog()
    make_table(catalog, properties={"write.mode": mode})
    rows = [{"id": i, "amount": i, "region": "eu"} for i in range(1, 201)]
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": rows})
    moving = "(id * 7919 + unix_micros(current_timestamp())) % 200 < 100"  # 100 ids; which ones depends on the time
    query = f"SELECT id, amount + 1000 AS amount, region FROM sales.orders WHERE {moving}"
    result = run_in_process(spark, catalog, {"strategy": "upsert", "key_columns": ["id"], "query": query})
    after = {r["id"]: r["amount"] for r in read(spark, catalog).collect()}
    assert read(spark, catalog).count() == len(after) == 200
    assert result["rows_updated"] == sum(amount > 1000 for amount in after.values()) == 100


def test_a_query_naming_a_column_twice_is_refused(spark):
    catalog = two_segment_table(spark)
    before = head(catalog)
    query = "SELECT id, amount, region, amount AS AMOUNT FROM sales.orders"
    with pytest.raises(ApplicationError) as refused:
        run_in_process(spark, catalog, {"strategy": "upsert", "key_columns": ["id"], "query": query})
    assert refused.value.code == "duplicate_columns" and "amount" in refused.value.message
    assert head(catalog) == before


def test_upsert_from_an_uploaded_file_with_multipart_fields(spark, tmp_path, user_client):
    catalog = two_segment_table(spark)
    csv = tmp_path / "rows.csv"
    csv.write_text("id,amount,region\n2,-2,xx\n20,200,eu\n")
    with csv.open("rb") as upload:
        body = {"strategy": "upsert", "key_columns": ["id"], "file": upload}
        response = user_client.post(LOADS_URL.format(catalog=catalog.name), body, format="multipart")
    assert response.status_code == 202, response.json()
    job = Job.objects.get(id=response.json()["id"])
    assert job.params["key_columns"] == ["id"]
    result = job_kind_get("table_load").handler(job.params, Progress(str(job.id)))
    assert (result["rows_updated"], result["rows_inserted"]) == (1, 1)
    assertDataFrameEqual(read(spark, catalog), frame(spark, [*[CHANGED if r["id"] == 2 else r for r in ROWS], NEW]))


@pytest.mark.parametrize(("limit", "collected"), [(2, 0), (3, 1)])
def test_a_parquet_upload_over_the_driver_limit_is_matched_by_spark_without_collecting_keys(
    spark, tmp_path, user_client, settings, monkeypatch, limit, collected
):
    """The footer says the upload holds 3 rows: with a limit of 2 no key is collected (the load goes straight to
    Spark); with 3 they are. Both give the same rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from catalog_app.engine import keymatch

    settings.LAKEUI_DRIVER_MATCH_ROWS = limit
    calls = []
    real = keymatch.collect_keys
    monkeypatch.setattr(keymatch, "collect_keys", lambda *args: calls.append(args) or real(*args))
    catalog = two_segment_table(spark)
    rows = [CHANGED, NEW, {"id": 21, "amount": 210, "region": "us"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rows.parquet")
    with (tmp_path / "rows.parquet").open("rb") as upload:
        body = {"strategy": "upsert", "key_columns": ["id"], "file": upload}
        response = user_client.post(LOADS_URL.format(catalog=catalog.name), body, format="multipart")
    assert response.status_code == 202, response.json()
    job = Job.objects.get(id=response.json()["id"])
    result = job_kind_get("table_load").handler(job.params, Progress(str(job.id)))
    assert (result["rows_updated"], result["rows_inserted"], len(calls)) == (1, 2, collected)
    assertDataFrameEqual(
        read(spark, catalog), frame(spark, [*[CHANGED if r["id"] == 2 else r for r in ROWS], *rows[1:]])
    )


@pytest.mark.usefixtures("matching")
def test_duplicate_incoming_keys_fail_the_load_with_no_commit(spark):
    catalog = two_segment_table(spark)
    before, commits = head(catalog), Commit.objects.count()
    rows = [CHANGED, {**CHANGED, "amount": 3}, NEW]
    with pytest.raises(ApplicationError) as refused:
        run_in_process(spark, catalog, {"strategy": "upsert", "key_columns": ["id"], "rows": rows})
    assert refused.value.code == "duplicate_keys"
    assert refused.value.details == {"examples": [{"id": 2}]}
    assert (head(catalog), Commit.objects.count()) == (before, commits)


@pytest.mark.usefixtures("matching")
def test_upsert_into_twenty_segments_rewrites_only_the_two_holding_matched_keys(spark):
    """2,000 rows in 20 segments of 100 ids each; matched keys sit in segments 3 and 11, new keys lie above
    the maximum. Copy-on-write rewrites exactly those 2; merge-on-read rewrites none."""
    for mode in MODES:
        catalog = make_catalog(name=f"lake_{mode.replace('-', '_')}")
        make_table(catalog, properties={"write.mode": mode})
        _load_segments(spark, catalog, rows=2000, segments=20)
        segments = files_at(catalog).segments
        holding = {s.id for s in segments if s.stats["1"]["min"] in (300, 1100)}
        assert len(segments) == 20 and len(holding) == 2
        updates = [{"id": i, "amount": -1, "region": "new"} for i in [*range(300, 400, 20), *range(1100, 1200, 20)]]
        inserts = [{"id": 5000 + i, "amount": i, "region": "ins"} for i in range(10)]
        result = run_in_process(
            spark, catalog, {"strategy": "upsert", "key_columns": ["id"], "rows": updates + inserts}
        )
        assert (result["rows_updated"], result["rows_inserted"]) == (10, 10)
        assert result["segments_read"] == 2
        assert result["bytes_read"] == sum(s.size_bytes for s in segments if s.id in holding)
        live = files_at(catalog)
        untouched = [s for s in segments if s.id not in holding]
        assert all(s in live.segments for s in untouched)
        if mode == "copy-on-write":
            assert result["segments_rewritten"] == 2
            assert not any(s.id in holding for s in live.segments)
            assert not live.deltas
        else:
            assert result["segments_rewritten"] == 0
            assert all(s in live.segments for s in segments)
            assert set(live.deltas) == holding
        table = read(spark, catalog)
        assert table.count() == 2010
        assert table.filter("region = 'new'").count() == 10


@pytest.mark.usefixtures("matching")
@pytest.mark.parametrize("mode", MODES)
def test_a_second_upsert_of_the_same_keys_matches_only_their_live_rows(spark, mode):
    """The first upsert replaced key 2's row (a delta file or a rewritten segment); the second must match the
    row that replaced it, not the replaced one."""
    catalog = two_segment_table(spark, properties={"write.mode": mode})
    run_in_process(spark, catalog, {"strategy": "upsert", "key_columns": ["id"], "rows": [CHANGED, NEW]})
    again = [{**CHANGED, "amount": -3}, {**NEW, "amount": 201}]
    result = run_in_process(spark, catalog, {"strategy": "upsert", "key_columns": ["id"], "rows": again})
    assert (result["rows_updated"], result["rows_inserted"]) == (2, 0)
    assertDataFrameEqual(
        read(spark, catalog), frame(spark, [*[again[0] if r["id"] == 2 else r for r in ROWS], again[1]])
    )


@pytest.mark.usefixtures("matching")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("partitioned", ["from the start", "after the first load"])
def test_upsert_into_a_partitioned_table_writes_one_partition_per_file(spark, mode, partitioned):
    catalog = make_catalog()
    first = partitioned == "from the start"
    make_table(catalog, partition_by=["region"] if first else [], properties={"write.mode": mode})
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": ROWS})
    if not first:  # the first segment holds several regions
        table_update(target=on(catalog), database="sales", name="orders", partition_by=["region"])
    incoming = [{**CHANGED, "region": "us"}, {"id": 3, "amount": -3, "region": "apac"}, NEW]
    before = files_at(catalog).segments
    result = run_in_process(spark, catalog, {"strategy": "upsert", "key_columns": ["id"], "rows": incoming})
    assert (result["rows_updated"], result["rows_inserted"]) == (2, 1)
    expected = [*[r for r in ROWS if r["id"] not in (2, 3)], *incoming]
    assertDataFrameEqual(read(spark, catalog), frame(spark, expected))
    written = [s for s in files_at(catalog).segments if s not in before]
    assert len(written) == len(files_at(catalog).segments) - (0 if mode == "copy-on-write" else len(before))
    for segment in written:  # each file holds the one region its partition value names
        rows = {r["region"] for r in read_segment(spark, catalog, segment).collect()}
        assert rows <= {segment.partition_values["3"]}


def read_segment(spark, catalog, segment):
    _, version = table_version(catalog)
    snapshot = table_snapshot(
        catalog_id=str(catalog.id), branch="main", table_id=str(version.object_id), warehouse=settings.LAKEUI_WAREHOUSE
    )
    return snapshot.read(spark, [segment])


EVENTS = [
    {"name": "source", "type": "string", "nullable": False},
    {"name": "day", "type": "date"},
    {"name": "at", "type": "timestamp"},
    {"name": "price", "type": "decimal(10,2)"},
]


@pytest.mark.usefixtures("matching")
def test_json_rows_keep_timestamp_offsets_and_wide_decimals(spark):
    """A timestamp with a UTC offset is that instant (stored in UTC); a decimal(38, 10) takes all 38 digits."""
    catalog = make_catalog()
    columns = [*COLUMNS, {"name": "at", "type": "timestamp"}, {"name": "d", "type": "decimal(38,10)"}]
    make_table(catalog, columns=columns)
    wide = "1234567890123456789012345678.0123456789"
    rows = [
        {"id": 1, "at": "2000-01-01T00:59:59.999999+01:00", "d": wide},
        {"id": 2, "at": "2000-01-01T00:00:00", "d": "-1"},
        {"id": 3, "at": "1999-12-31T19:00:00-05:00", "d": 0.5},
    ]
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": rows})
    got = {r["id"]: (r["at"], r["d"]) for r in read(spark, catalog).collect()}
    assert got == {
        1: (datetime(1999, 12, 31, 23, 59, 59, 999999), Decimal(wide)),
        2: (datetime(2000, 1, 1), Decimal("-1")),
        3: (datetime(2000, 1, 1), Decimal("0.5")),
    }
    updated = {"strategy": "upsert", "key_columns": ["at"], "rows": [{"id": 4, "at": "2000-01-01T01:00:00+01:00"}]}
    result = run_in_process(spark, catalog, updated)
    assert (result["rows_updated"], result["rows_inserted"]) == (2, 0)  # the same instant as rows 2 and 3


def test_upsert_on_a_composite_key_of_string_date_and_timestamp_columns(spark):
    """Keys compared in their own types, each column of the key checked against each segment's range."""
    catalog = make_catalog()
    make_table(catalog, table="events", columns=EVENTS, properties={"write.mode": "copy-on-write"})
    first = [{"source": "eu", "day": "2024-01-05", "at": "2024-01-05T10:00:00", "price": "1.50"},
             {"source": "us", "day": "2024-01-06", "at": "2024-01-06T23:59:59.999999", "price": "2.00"}]  # fmt: skip
    second = [{"source": "eu", "day": "2024-03-01", "at": "2024-03-01T00:00:00", "price": "3.25"}]
    for rows in (first, second):
        run_in_process(spark, catalog, {"strategy": "append_only", "rows": rows}, table="events")
    incoming = [
        {**first[1], "price": "9.99"},  # matches the first segment's second row
        {**first[1], "at": "2024-01-06T23:59:59", "price": "5.00"},  # a microsecond off: a new key
        {**second[0], "source": "ap", "price": "0.10"},  # day and time in the second segment's range, source not
    ]
    params = {"strategy": "upsert", "key_columns": ["source", "day", "at"], "rows": incoming}
    result = run_in_process(spark, catalog, params, table="events")
    assert (result["rows_updated"], result["rows_inserted"], result["segments_read"]) == (1, 2, 1)
    expected = [
        (r["source"], date.fromisoformat(r["day"]), datetime.fromisoformat(r["at"]), Decimal(r["price"]))
        for r in [first[0], *second, *incoming]
    ]
    schema = "source string, day date, at timestamp, price decimal(10,2)"
    assertDataFrameEqual(read(spark, catalog, table="events"), spark.createDataFrame(expected, schema))


@pytest.mark.usefixtures("matching")
def test_upsert_matches_keys_in_segments_written_before_the_key_column_was_widened(spark):
    from catalog_app.services.tables import column_update

    catalog = make_catalog()
    make_table(catalog, columns=[{"name": "id", "type": "int", "nullable": False}, *COLUMNS[1:]])
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": ROWS[:4]})
    column_update(target=on(catalog), database="sales", table="orders", column="id", changes={"type": "long"})
    big = {"id": 2**40, "amount": 1, "region": "big"}
    result = run_in_process(spark, catalog, {"strategy": "upsert", "key_columns": ["id"], "rows": [CHANGED, big]})
    assert (result["rows_updated"], result["rows_inserted"]) == (1, 1)
    assertDataFrameEqual(read(spark, catalog), frame(spark, [*[CHANGED if r["id"] == 2 else r for r in ROWS[:4]], big]))


def _load_segments(spark, catalog, *, rows: int, segments: int) -> None:
    """A table of `rows` ids in `segments` files of consecutive ids, written by the engine in one commit."""
    version = table_version(catalog)[1]
    snapshot = table_snapshot(
        catalog_id=str(catalog.id), branch="main", table_id=str(version.object_id), warehouse=settings.LAKEUI_WAREHOUSE
    )
    data = spark.range(rows).select(
        F.col("id"), (F.col("id") % 1000).cast("int").alias("amount"), F.lit("old").alias("region")
    )
    written = snapshot.write(data.repartitionByRange(segments, "id"), tag="seed")
    job = Job.objects.create(kind="table_load", params={}, status=Job.Status.RUNNING, worker="test-process/seed")
    change = DataChange("insert", new_segments=written, counts={"rows_inserted": rows})
    data_change_commit(snapshot=snapshot, change=change, job=job, message="seed")


REFUSED = [
    ({"strategy": "upsert"}, "missing_key_columns"),
    ({"strategy": "insert", "key_columns": []}, "missing_key_columns"),
    ({"strategy": "update", "key_columns": ["id", "colour"]}, "unknown_key_column"),
    ({"strategy": "incremental", "key_columns": ["id"]}, "missing_watermark"),
    ({"strategy": "incremental", "key_columns": ["id"], "watermark": "when"}, "unknown_column"),
    ({"strategy": "scd2", "key_columns": ["id"], "valid_from_column": "vf"}, "missing_validity_columns"),
    ({"strategy": "snapshot"}, "missing_partition_column"),
    ({"strategy": "snapshot", "partition_column": "amount"}, "invalid_partition_column"),
    ({"strategy": "merge_everything"}, "invalid_strategy"),
]


@pytest.mark.parametrize(("body", "code"), REFUSED)
def test_missing_or_unknown_strategy_fields_are_a_400_that_changes_nothing(user_client, body, code):
    catalog = make_catalog()
    make_table(catalog, partition_by=["region"])
    before = head(catalog)
    response = user_client.post(LOADS_URL.format(catalog=catalog.name), {**body, "rows": ROWS[:1]}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, code), response.json()
    assert head(catalog) == before
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_upsert_through_the_api_and_the_worker(spark, user_client):
    catalog = make_catalog()
    make_table(catalog)
    url = LOADS_URL.format(catalog=catalog.name)
    first = user_client.post(url, {"strategy": "append_only", "rows": ROWS[:4]}, format="json")
    assert wait_for_job(first.json()["id"], timeout=240).status == "succeeded"
    body = {"strategy": "upsert", "key_columns": ["id"], "rows": [CHANGED, NEW], "message": "nightly upsert"}
    response = user_client.post(url, body, format="json")
    assert response.status_code == 202, response.json()
    job = wait_for_job(response.json()["id"], timeout=240)
    assert job.status == "succeeded", job.error_message
    assert job.result["strategy"] == "upsert"
    assert (job.result["rows_updated"], job.result["rows_inserted"], job.result["commit"]) == (1, 1, head(catalog))
    assertDataFrameEqual(read(spark, catalog), frame(spark, [*[CHANGED if r["id"] == 2 else r for r in ROWS[:4]], NEW]))
    assert Commit.objects.get(id=head(catalog)).message == "nightly upsert"
    assert DataFile.objects.filter(catalog=catalog, kind="delta").count() == 1


# --- the engine's transforms alone ------------------------------------------------------------------------


def test_key_survey_checks_each_incoming_key_against_each_segment_range(spark):
    from catalog_app.engine.segments import Column
    from catalog_app.engine.strategies import key_survey

    keys = spark.createDataFrame([(5, 1), (25, 0), (25, 1), (1000, 1)], "id long, flag int")  # 25 twice
    ranges = [("a", [1, 10]), ("b", [11, 20]), ("c", [21, 30]), ("d", [40, 50]), ("e", [0, 8])]  # 1000: above all
    survey = key_survey(spark, keys, [Column(1, "id", "long")], ranges, summed=["flag"])
    assert survey.segments == {"a", "c", "e"}  # not b or d, though both lie inside the batch's overall range 5..1000
    assert survey.repeated == [{"id": 25}]
    assert survey.sums == {"flag": 3}  # key 5 sits in two ranges (a and e) and still counts once


@pytest.mark.usefixtures("matching")
@pytest.mark.parametrize(
    ("csv", "code", "named"),
    [("id,amount,region\n2,lots,xx\n20,200,eu\n", "type_mismatch", "amount"),
     ("id,amount,region\n2,-2,xx\n,200,eu\n", "not_null_violation", "id")],
)  # fmt: skip
def test_a_key_load_checks_the_incoming_rows_in_its_first_pass(spark, tmp_path, user_client, csv, code, named):
    """Key strategies run the incoming rows' type and NOT NULL checks in the key survey's pass over them (no
    pass of their own): a row that does not fit still fails the load, naming the column, with no commit."""
    catalog = two_segment_table(spark)
    before, commits = head(catalog), Commit.objects.count()
    (tmp_path / "rows.csv").write_text(csv)
    with (tmp_path / "rows.csv").open("rb") as upload:
        body = {"strategy": "upsert", "key_columns": ["id"], "file": upload}
        response = user_client.post(LOADS_URL.format(catalog=catalog.name), body, format="multipart")
    job = Job.objects.get(id=response.json()["id"])
    with pytest.raises(ApplicationError) as refused:
        job_kind_get("table_load").handler(job.params, Progress(str(job.id)))
    assert refused.value.code == code and f"column {named!r}" in refused.value.message
    assert "schema: 1 " in refused.value.message  # the one row that does not fit
    assert (head(catalog), Commit.objects.count()) == (before, commits)


def test_scd2_rewrite_closes_changed_open_versions_only(spark):
    from catalog_app.engine.strategies import GROUP, scd2_rewrite

    now = datetime(2026, 1, 2)
    schema = "id long, v string, vf timestamp, vt timestamp, _segment string, _pos long"
    target = spark.createDataFrame(
        [(1, "a", None, None, "s", 0), (2, "b", None, None, "s", 1), (1, "old", None, datetime(2025, 1, 1), "s", 2)],
        schema,
    )
    incoming = spark.createDataFrame([(1, "a2", None, None), (2, "b", None, None), (3, "c", None, None)],
                                     "id long, v string, vf timestamp, vt timestamp")  # fmt: skip
    rewrite = scd2_rewrite(target, incoming, ["id"], ["id", "v", "vf", "vt"], valid_from="vf", valid_to="vt", now=now)
    assertDataFrameEqual(rewrite.removed, spark.createDataFrame([("s", 0)], "_segment string, _pos long"))
    expected = spark.createDataFrame(
        [(1, "a", None, now, "update"), (1, "a2", now, None, "insert"), (3, "c", now, None, "insert")],
        f"id long, v string, vf timestamp, vt timestamp, {GROUP} string",
    )
    assertDataFrameEqual(rewrite.rows, expected)
