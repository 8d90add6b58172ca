"""The change feed through the client (`changes`, `changes_arrow`), the `lakeui changes` command and the PySpark
helper `read_changes`, against a live server with real workers."""

import json

import pytest
from lakeui_client.errors import ApiError
from lakeui_client.spark import read_changes

from tests.clients.test_client_cli import run

pytestmark = pytest.mark.django_db(transaction=True)

COLUMNS = [{"name": "id", "type": "long", "nullable": False}, {"name": "amount", "type": "int"}]


def two_refs(client):
    client.catalog_create("sales")
    client.database_create("sales", "main", "shop")
    client.table_create("sales", "main", "shop.orders", COLUMNS, primary_key=["id"])
    client.load("sales", "main", "shop.orders", strategy="append_only", rows=[{"id": i, "amount": i} for i in (1, 2)])
    client.branch_create("sales", "dev")
    client.load("sales", "dev", "shop.orders", strategy="upsert", key_columns=["id"],
                rows=[{"id": 1, "amount": 100}, {"id": 3, "amount": 3}])  # fmt: skip
    upserted = client.commits("sales", "dev")[0]["id"]
    client.delete_rows("sales", "dev", "shop.orders", where="id = 2")
    return upserted, client.commits("sales", "dev")[0]["id"]


def test_client_cli_and_spark_read_the_changes_between_two_refs(live_server, client, token, celery_worker, spark):
    upserted, deleted = two_refs(client)
    records = list(client.changes("sales", "main", "dev", page_size=2))  # two pages, pinned to the first's commits
    assert [(r["change"], r["key"], r["changed"], r["commit"]) for r in records] == [
        ("update", {"id": 1}, ["amount"], upserted), ("delete", {"id": 2}, [], deleted),
        ("insert", {"id": 3}, [], upserted),
    ]  # fmt: skip
    assert records[0]["before"] == {"id": 1, "amount": 1} and records[0]["after"] == {"id": 1, "amount": 100}
    arrow = client.changes_arrow("sales", "main", "dev", "shop.orders")
    assert arrow.column("_change").to_pylist() == ["update", "delete", "insert"]
    assert arrow.column("a:amount").to_pylist() == [100, None, 3]
    with pytest.raises(ApiError) as refused:
        client.changes_arrow("sales", "main", "dev", "shop.nope")
    assert refused.value.code == "table_not_found"

    printed = run(live_server, token, "--json", "changes", "sales", "--from", "main", "--to", "dev")
    assert printed.returncode == 0, printed.stderr
    assert [json.loads(line) for line in printed.stdout.splitlines()] == records
    shown = run(live_server, token, "changes", "sales", "--from", "main", "--to", "dev", "--table", "shop.orders")
    assert shown.returncode == 0, shown.stderr
    assert "3 change(s)" in shown.stdout and "changed" in shown.stdout and upserted[:12] in shown.stdout
    missing = run(live_server, token, "changes", "sales", "--from", "main", "--to", "nope")
    assert missing.returncode == 1 and "ref_not_found" in missing.stderr

    frame = read_changes(spark, client, "sales", "main", "dev", "shop.orders")
    got = sorted((r["_change"], r["b:id"], r["a:id"], r["a:amount"], r["_commit"]) for r in frame.collect())
    assert got == [("delete", 2, None, None, deleted), ("insert", None, 3, 3, upserted),
                   ("update", 1, 1, 100, upserted)]  # fmt: skip
