"""The Iceberg REST catalog's reads against a live server, read by pyiceberg's RestCatalog (and DuckDB over
pyiceberg's Arrow): every table of a catalog built for the test, at a branch, a tag, a commit id and a past
timestamp, equals what the rows API gives."""

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pytest
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from lakeui_client import Client
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError, RESTError
from pyiceberg.types import IntegerType
from rest_framework.authtoken.models import Token

from catalog_app.models import Catalog

COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "amount", "type": "int"},
    {"name": "region", "type": "string"},
]
TYPES = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "flag", "type": "boolean"},
    {"name": "small", "type": "int"},
    {"name": "ratio", "type": "float"},
    {"name": "score", "type": "double"},
    {"name": "price", "type": "decimal(10,2)"},
    {"name": "name", "type": "string"},
    {"name": "blob", "type": "binary"},
    {"name": "day", "type": "date"},
    {"name": "at", "type": "timestamp"},
]


@pytest.fixture
def token(user):
    return Token.objects.get_or_create(user=user)[0].key


@pytest.fixture
def client(live_server, token):
    with_client = Client(url=live_server.url, token=token, timeout=600)  # a loaded machine starts Spark slowly
    yield with_client
    with_client.close()


def iceberg(live_server, token: str, ref: str, catalog: str = "lake") -> RestCatalog:
    return RestCatalog("lake", uri=f"{live_server.url}/iceberg/{catalog}/{quote(ref, safe='')}", token=token)


def api_rows(client: Client, ref: str, table: str, at: str | None = None) -> tuple[list[str], list[tuple]]:
    """The table's column names and rows as the rows API returns them (JSON values), every page."""
    rows, page = [], 1
    while True:
        body = client.rows("lake", ref, table, page=page, page_size=1000, **({"at": at} if at else {}))
        rows += [tuple(row) for row in body["rows"]]
        if len(rows) >= body["count"] or not body["rows"]:
            return [c["name"] for c in body["columns"]], sorted(rows, key=repr)
        page += 1


def json_rows(table: pa.Table) -> tuple[list[str], list[tuple]]:
    """Arrow rows as the rows API writes them in JSON (catalog_app.engine.types.json_value)."""
    from catalog_app.engine.types import json_value

    rows = [tuple(json_value(v) for v in row.values()) for row in table.to_pylist()]
    return table.column_names, sorted(rows, key=repr)


def iceberg_rows(catalog: RestCatalog, table: str, **scan) -> tuple[list[str], list[tuple]]:
    return json_rows(catalog.load_table(table).scan(**scan).to_arrow())


def arrow_rows(client: Client, ref: str, table: str, at: str | None = None) -> tuple[list[str], list[tuple]]:
    """The client's own Arrow read (lakeui_client.arrow) from the scan plan, straight from the warehouse."""
    return json_rows(client.read_arrow("lake", ref, table, at=at))


def same_everywhere(client: Client, catalog: RestCatalog, ref: str, table: str) -> tuple[list[str], list[tuple]]:
    """The rows API's answer, which pyiceberg over the Iceberg catalog and the client's read_arrow both give."""
    expected = api_rows(client, ref, table)
    assert iceberg_rows(catalog, table) == expected, (ref, table, "pyiceberg")
    assert arrow_rows(client, ref, table) == expected, (ref, table, "read_arrow")
    return expected


def test_every_ref_reads_as_the_rows_api(live_server, client, token, celery_worker):
    client.catalog_create("lake")
    client.database_create("lake", "main", "shop")
    client.table_create("lake", "main", "shop.orders", COLUMNS)
    for start in (0, 300):  # two segments
        rows = [{"id": i, "amount": i % 97, "region": "eu" if i % 3 else "us"} for i in range(start, start + 300)]
        client.load("lake", "main", "shop.orders", strategy="append_only", rows=rows)
    client.tag_create("lake", "v1", "main")
    before = datetime.now(UTC).isoformat()
    time.sleep(0.05)
    # merge-on-read: two deletes (overlapping positions) and an update
    client.delete_rows("lake", "main", "shop.orders", where="id % 7 = 0")
    client.delete_rows("lake", "main", "shop.orders", where="id < 50")
    client.update_rows("lake", "main", "shop.orders", set={"amount": "amount + 1000"}, where="id BETWEEN 100 AND 110")
    after_deletes = client.commits("lake", "main")[0]["id"]
    # schema evolution: rename, add with a default, widen, drop
    client.column_update("lake", "main", "shop.orders", "amount", name="total")
    client.column_add("lake", "main", "shop.orders", name="channel", type="string", default="web")
    client.column_update("lake", "main", "shop.orders", "total", type="long")
    client.load("lake", "main", "shop.orders", strategy="append_only",
                rows=[{"id": 1000 + i, "total": i, "region": "apac", "channel": "shop"} for i in range(5)])  # fmt: skip
    client.column_delete("lake", "main", "shop.orders", "region")
    client.column_add("lake", "main", "shop.orders", name="qty", type="int", nullable=False, default=1)  # NOT NULL
    client.branch_create("lake", "feature/x", source="main")
    client.delete_rows("lake", "feature/x", "shop.orders", where="id >= 1000")

    main = iceberg(live_server, token, "main")
    assert main.list_namespaces() == [("shop",)]
    assert main.list_tables("shop") == [("shop", "orders")]
    table = main.load_table("shop.orders")
    assert [f.field_id for f in table.schema().fields] == [c["id"] for c in client.columns("lake", "main",
                                                                                            "shop.orders")]  # fmt: skip
    columns, rows = same_everywhere(client, main, "main", "shop.orders")
    assert columns == ["id", "total", "channel", "qty"] and {r[3] for r in rows} == {1}
    assert table.schema().find_field("qty").required and table.schema().find_field("qty").initial_default == 1
    assert ("web" in {r[2] for r in rows}) and ("shop" in {r[2] for r in rows})  # the default in older segments

    # a branch whose name holds '/', a tag, a commit id, and the snapshot log (time travel)
    feature = iceberg(live_server, token, "feature/x")
    assert len(same_everywhere(client, feature, "feature/x", "shop.orders")[1]) == len(rows) - 5
    tagged = iceberg(live_server, token, "v1")
    assert len(same_everywhere(client, tagged, "v1", "shop.orders")[1]) == 600
    by_commit = iceberg(live_server, token, after_deletes)
    same_everywhere(client, by_commit, after_deletes, "shop.orders")

    snapshots = table.snapshots()
    assert len(snapshots) == len(client.history("lake", "main", "shop.orders")["versions"])
    past = table.snapshot_as_of_timestamp(int(datetime.fromisoformat(before).timestamp() * 1000))
    expected = api_rows(client, "main", "shop.orders", at=before)
    assert iceberg_rows(main, "shop.orders", snapshot_id=past.snapshot_id)[1] == expected[1]
    assert arrow_rows(client, "main", "shop.orders", at=before) == expected

    # DuckDB over pyiceberg's Arrow
    duckdb = pytest.importorskip("duckdb")
    connection = duckdb.connect()
    connection.register("orders", table.scan().to_arrow())
    counted = connection.execute("SELECT count(*), sum(total) FROM orders").fetchone()
    assert counted == (len(rows), sum(r[1] for r in rows))

    # a change after the metadata was written: never served stale
    client.delete_rows("lake", "main", "shop.orders", where="id = 1001")
    assert len(same_everywhere(client, main, "main", "shop.orders")[1]) == len(rows) - 1

    # segments and delete files taken over by a merge, then a restore of the table to an older commit
    client.merge("lake", "feature/x", "main")
    assert not any(r[0] >= 1000 for r in same_everywhere(client, main, "main", "shop.orders")[1])
    client.restore("lake", "main", table="shop.orders", commit=after_deletes)
    restored = same_everywhere(client, main, "main", "shop.orders")
    assert restored == api_rows(client, after_deletes, "shop.orders")
    assert main.load_table("shop.orders").schema().find_field("amount").field_type == IntegerType()


def test_types_partitions_primary_keys_and_compaction(live_server, client, token, celery_worker):
    client.catalog_create("lake")
    client.database_create("lake", "main", "kinds")
    client.table_create("lake", "main", "kinds.every", TYPES, partition_by=["day"])
    rows = [
        {"id": i, "flag": i % 2 == 0, "small": i, "ratio": i / 4, "score": i / 3, "price": f"{i}.25",
         "name": f"n{i}", "blob": "AAE=", "day": f"2026-01-0{1 + i % 3}", "at": f"2026-01-01T00:00:0{i % 10}Z"}
        for i in range(30)
    ] + [{"id": 99, "flag": None, "small": None, "ratio": None, "score": None, "price": None, "name": None,
          "blob": None, "day": None, "at": None}]  # fmt: skip
    client.load("lake", "main", "kinds.every", strategy="append_only", rows=rows)
    client.table_create("lake", "main", "kinds.keyed", COLUMNS, primary_key=["id"],
                        properties={"write.mode": "copy-on-write"})  # fmt: skip
    client.load("lake", "main", "kinds.keyed", strategy="append_only",
                rows=[{"id": i, "amount": i, "region": "eu"} for i in range(20)])  # fmt: skip
    client.load("lake", "main", "kinds.keyed", strategy="upsert", key_columns=["id"],
                rows=[{"id": i, "amount": -i, "region": "us"} for i in range(15, 25)])  # fmt: skip
    client.delete_rows("lake", "main", "kinds.keyed", where="id < 3")  # copy-on-write: a rewrite
    client.load("lake", "main", "kinds.every", strategy="append_only", rows=rows[:3])
    client.delete_rows("lake", "main", "kinds.every", where="id = 1")
    client.compact("lake", "main", "kinds.every")

    main = iceberg(live_server, token, "main")
    every = main.load_table("kinds.every")
    assert [f.source_id for f in every.spec().fields] == [9]
    for name in ("kinds.every", "kinds.keyed"):
        same_everywhere(client, main, "main", name)
    assert len(iceberg_rows(main, "kinds.keyed")[1]) == 22
    # a widening Iceberg has no promotion for (int to double): refused with a clear error, read by LakeUI's readers
    client.table_create("lake", "main", "kinds.wide", COLUMNS)
    client.load("lake", "main", "kinds.wide", strategy="append_only", rows=[{"id": 1, "amount": 7, "region": "eu"}])
    client.column_update("lake", "main", "kinds.wide", "amount", type="double")
    with pytest.raises(RESTError) as refused:
        main.load_table("kinds.wide")
    assert "widened from int to double" in str(refused.value)
    assert client.read_arrow("lake", "main", "kinds.wide").to_pylist() == [{"id": 1, "amount": 7.0, "region": "eu"}]

    # a filter pushed down to pyiceberg's scan reads the partition it names
    eu_day = main.load_table("kinds.every").scan(row_filter="day = '2026-01-02'").to_arrow()
    assert sorted(eu_day.column("id").to_pylist()) == sorted(
        r["id"] for r in rows + rows[:3] if r["day"] == "2026-01-02" and r["id"] != 1
    )


def test_roles_errors_and_unserved_endpoints(live_server, client, token, user):
    client.catalog_create("lake")
    client.database_create("lake", "main", "shop")
    client.table_create("lake", "main", "shop.orders", COLUMNS)
    base = f"{live_server.url}/iceberg/lake/main/v1"
    headers = {"Authorization": f"Bearer {token}"}
    config = requests.get(f"{base}/config", headers=headers).json()
    assert "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}" in config["endpoints"]
    assert (
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}" in config["endpoints"]
    )  # writes: test_iceberg_writes

    main = iceberg(live_server, token, "main")
    with pytest.raises(NoSuchTableError):
        main.load_table("shop.nope")
    with pytest.raises(NoSuchNamespaceError):
        main.list_tables("nope")
    assert main.table_exists("shop.orders") and not main.table_exists("shop.nope")
    assert main.namespace_exists("shop") and not main.namespace_exists("nope")
    assert main.list_namespaces("shop") == []
    assert main.load_namespace_properties("shop") == {}
    missing = requests.get(f"{base}/namespaces/shop/tables/nope", headers=headers)
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "NoSuchTableException" and missing.json()["error"]["code"] == 404

    # views and metrics are not served: Iceberg's not-supported error, never a 500
    for method, path in [("GET", "namespaces/shop/views"), ("POST", "namespaces/shop/tables/orders/metrics"),
                         ("POST", "namespaces/shop/views")]:  # fmt: skip
        answer = requests.request(method, f"{base}/{path}", headers=headers, json={})
        assert answer.status_code == 406, (method, path, answer.text)
        assert answer.json()["error"]["type"] == "UnsupportedOperationException"

    # no token, a wrong token, and a reader of another catalog
    assert requests.get(f"{base}/namespaces").status_code == 401
    assert requests.get(f"{base}/namespaces", headers={"Authorization": "Bearer nope"}).status_code == 401
    bob = get_user_model().objects.create_user("bob")
    bob_token = Token.objects.create(user=bob).key
    refused = requests.get(f"{base}/namespaces/shop/tables/orders", headers={"Authorization": f"Bearer {bob_token}"})
    assert refused.status_code == 404 and "error" in refused.json()
    catalog_role_grant_for(client, "bob", "viewer")
    allowed = requests.get(f"{base}/namespaces/shop/tables/orders", headers={"Authorization": f"Bearer {bob_token}"})
    assert allowed.status_code == 200 and allowed.json()["metadata"]["format-version"] == 2
    unknown_ref = requests.get(f"{live_server.url}/iceberg/lake/nope/v1/namespaces", headers=headers)
    assert unknown_ref.status_code == 404 and unknown_ref.json()["error"]["code"] == 404


def catalog_role_grant_for(client: Client, username: str, role: str) -> None:
    client.request("POST", "catalogs/lake/roles", json={"user": username, "role": role})


def test_metadata_written_once_per_state_and_reused(live_server, client, token, celery_worker):
    client.catalog_create("lake")
    client.database_create("lake", "main", "shop")
    client.table_create("lake", "main", "shop.orders", COLUMNS)
    for start in range(0, 40, 10):
        client.load("lake", "main", "shop.orders", strategy="append_only",
                    rows=[{"id": i, "amount": i, "region": "eu"} for i in range(start, start + 10)])  # fmt: skip
    main = iceberg(live_server, token, "main")
    table = main.load_table("shop.orders")
    root = Path(table.metadata_location).parent.parent
    catalog_id = Catalog.objects.get(name="lake").id
    folder = Path(settings.LAKEUI_WAREHOUSE) / str(catalog_id) / table.metadata.properties["lakeui.table-id"]
    assert root == (folder / "iceberg").resolve()  # a folder of its own beside the table's data, named by ids
    manifests = {p.name for p in (root / "manifests").iterdir()}
    assert len([m for m in manifests if m.endswith("-m.avro")]) == 4  # one per commit that added segments
    assert main.load_table("shop.orders").metadata_location == table.metadata_location
    client.load("lake", "main", "shop.orders", strategy="append_only",
                rows=[{"id": 100, "amount": 1, "region": "us"}])  # fmt: skip
    again = main.load_table("shop.orders")
    assert again.metadata_location != table.metadata_location
    new = {p.name for p in (root / "manifests").iterdir()} - manifests
    assert len(new) == 1  # the new commit's segment: one manifest, the rest reused

    # garbage collection keeps the Iceberg metadata (no commit references it, later states reuse it)
    old = time.time() - 2 * 3600
    for path in root.rglob("*"):
        os.utime(path, (old, old))
    collected = client.wait(client.request("POST", "catalogs/lake/gc", json={"grace_hours": 1})["id"])
    assert collected["status"] == "succeeded"
    assert {p.name for p in (root / "manifests").iterdir()} == manifests | new
    assert len(main.load_table("shop.orders").scan().to_arrow()) == 41
