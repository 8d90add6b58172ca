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


def test_a_consumer_follows_a_branch_through_a_subscription_with_the_client_and_the_cli(
    live_server, client, token, celery_worker
):
    client.catalog_create("sales")
    client.database_create("sales", "main", "shop")
    client.table_create("sales", "main", "shop.orders", COLUMNS, primary_key=["id"])
    made = client.subscription_create("sales", "index", "main", tables=["shop.orders"])
    assert (made["name"], made["tables"], made["lag_commits"]) == ("index", ["shop.orders"], 0)
    client.load("sales", "main", "shop.orders", strategy="append_only", rows=[{"id": i, "amount": i} for i in (1, 2)])
    batch = client.subscription_batch("sales", "index", page_size=1)  # two pages, one batch
    assert sorted((r["change"], r["key"]["id"]) for r in batch["records"]) == [("insert", 1), ("insert", 2)]
    assert client.subscription_batch("sales", "index")["ack"] == batch["ack"]  # not acknowledged: the same batch
    assert client.subscription_ack("sales", "index", batch["ack"])["cursor"] == batch["target"]
    with pytest.raises(ApiError) as twice:
        client.subscription_ack("sales", "index", batch["ack"])
    assert (twice.value.status, twice.value.code) == (409, "stale_ack")

    client.delete_rows("sales", "main", "shop.orders", where="id = 2")
    shown = run(live_server, token, "subscription", "read", "sales", "index", "--ack")
    assert shown.returncode == 0, shown.stderr
    assert "1 change(s)" in shown.stdout and "delete" in shown.stdout
    listed = run(live_server, token, "--json", "subscription", "list", "sales")
    assert [(s["name"], s["lag_commits"], s["pending_batch"]) for s in json.loads(listed.stdout)] == [
        ("index", 0, False)
    ]
    empty = run(live_server, token, "subscription", "read", "sales", "index")
    assert empty.returncode == 0 and "0 change(s)" in empty.stdout and "lakeui subscription ack" in empty.stdout
    stale = run(live_server, token, "subscription", "ack", "sales", "index", batch["ack"])
    assert stale.returncode == 1 and "stale_ack" in stale.stderr
    assert run(live_server, token, "subscription", "delete", "sales", "index").returncode == 0
    assert client.subscriptions("sales") == []
