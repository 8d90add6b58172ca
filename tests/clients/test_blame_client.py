"""Provenance through the client (`blame`, `key_history`) and the `lakeui blame` command, against a live server
with real workers, read with an API token."""

import json

import pytest
from lakeui_client.errors import ApiError

from tests.clients.test_client_cli import run

pytestmark = pytest.mark.django_db(transaction=True)

COLUMNS = [{"name": "id", "type": "long", "nullable": False}, {"name": "amount", "type": "int"}]


def test_client_and_cli_blame_a_table_and_one_key(live_server, client, token, celery_worker):
    client.catalog_create("sales")
    client.database_create("sales", "main", "shop")
    client.table_create("sales", "main", "shop.orders", COLUMNS, primary_key=["id"])
    client.load("sales", "main", "shop.orders", strategy="append_only", rows=[{"id": i, "amount": i} for i in (1, 2)])
    loaded = client.commits("sales", "main")[0]["id"]
    client.branch_create("sales", "dev")
    client.load("sales", "dev", "shop.orders", strategy="upsert", key_columns=["id"], rows=[{"id": 2, "amount": 20}])
    upserted = client.commits("sales", "dev")[0]["id"]
    client.merge("sales", "dev", "main")
    merged = client.commits("sales", "main")[0]["id"]

    found = client.blame("sales", "main", "shop.orders")
    assert found["count"] == 2 and found["commit"] == merged
    by_key = {r["key"]["id"]: r["cells"] for r in found["results"]}
    assert by_key[1]["amount"] == {"commit": loaded, "chain": [], "resolution": False, "settled_by": None}
    assert (by_key[2]["amount"]["commit"], by_key[2]["amount"]["chain"]) == (upserted, [] if merged == upserted else
                                                                              [merged])  # fmt: skip
    assert client.blame("sales", "main", "shop.orders", key=2)["results"] == [found["results"][1]]
    history = client.key_history("sales", "main", "shop.orders", [2])
    assert [(v["change"], v["commit"], v["row"]["amount"]) for v in history["versions"]] == [
        ("update", upserted, 20), ("insert", loaded, 2),
    ]  # fmt: skip
    with pytest.raises(ApiError) as refused:
        client.blame("sales", "main", "shop.orders", key=[7])
    assert refused.value.code == "key_not_found"

    printed = run(live_server, token, "--json", "blame", "sales", "main", "shop.orders")
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout)["results"] == found["results"]
    shown = run(live_server, token, "blame", "sales", "main", "shop.orders", "--key", "[2]")
    assert shown.returncode == 0, shown.stderr
    assert upserted[:12] in shown.stdout and "amount" in shown.stdout and "dev" in shown.stdout
    versions = run(live_server, token, "blame", "sales", "main", "shop.orders", "--key", "2", "--history")
    assert versions.returncode == 0, versions.stderr
    assert loaded[:12] in versions.stdout and upserted[:12] in versions.stdout
    missing = run(live_server, token, "blame", "sales", "main", "shop.nope")
    assert missing.returncode == 1 and "table_not_found" in missing.stderr
