"""`lakeui mr resolve --cell` and `lakeui mr resolution`, and the client's methods, against a live server with real
workers: a conflicting cell picked from the command line, previewed, refused when the value does not fit, merged."""

import json
import time

import pytest

from tests.clients.test_client_cli import run

pytestmark = pytest.mark.django_db(transaction=True)

COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "amount", "type": "int"},
    {"name": "status", "type": "string"},
]


def preview(live_server, token) -> dict:
    """`lakeui --json mr resolution` once the plan is made for the heads and the resolution."""
    deadline = time.monotonic() + 180
    while True:
        shown = run(live_server, token, "--json", "mr", "resolution", "sales", "1")
        assert shown.returncode == 0, shown.stderr
        found = json.loads(shown.stdout)
        if found["current"] and not found["planning"]:
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.2)


def test_cli_picks_cells_previews_and_merges_them(live_server, client, token, celery_worker):
    client.catalog_create("sales")
    client.database_create("sales", "main", "shop")
    client.table_create("sales", "main", "shop.orders", COLUMNS, primary_key=["id"])
    client.load("sales", "main", "shop.orders", strategy="append_only", rows=[{"id": 1, "amount": 10, "status": "new"}])
    client.branch_create("sales", "dev")
    upsert = {"strategy": "upsert", "key_columns": ["id"]}
    client.load("sales", "dev", "shop.orders", rows=[{"id": 1, "amount": 11, "status": "paid"}], **upsert)
    client.load("sales", "main", "shop.orders", rows=[{"id": 1, "amount": 19, "status": "held"}], **upsert)
    client.merge_request_open("sales", "dev", "main", title="amounts")
    assert preview(live_server, token)["preview"]["unresolved"] == 1

    resolved = run(live_server, token, "mr", "resolve", "sales", "1", "--table", "shop.orders",
                   "--cell", "[1].amount=12", "--cell", "shop.orders[1].status=pick:source")  # fmt: skip
    assert resolved.returncode == 0, resolved.stderr
    found = preview(live_server, token)
    [key] = found["preview"]["keys"]
    assert {c: (v["base"], v["source"], v["target"], v["result"], v["rule"], v["by"]) for c, v in
            key["cells"].items()} == {"amount": (10, 11, 19, 12, "pick", "alice"),
                                      "status": ("new", "paid", "held", "paid", "pick", "alice")}  # fmt: skip
    shown = run(live_server, token, "mr", "resolution", "sales", "1")
    assert shown.returncode == 0 and "pick" in shown.stdout and "1 conflicting key" in shown.stdout, shown.stdout

    refused = run(live_server, token, "mr", "resolve", "sales", "1", "--cell", "shop.orders[1].amount=a lot")
    assert refused.returncode == 1 and "invalid_cell_pick" in refused.stderr, refused.stderr
    unusable = run(live_server, token, "mr", "resolve", "sales", "1", "--cell", "[1].amount=12")  # no table
    assert unusable.returncode == 2 and "--table" in unusable.stderr

    merged = run(live_server, token, "mr", "merge", "sales", "1")
    assert merged.returncode == 0, merged.stderr
    rows = client.sql("sales", "SELECT id, amount, status FROM shop.orders", branch="main")["rows"]
    assert [list(r.values()) if isinstance(r, dict) else r for r in rows] == [[1, 12, "paid"]]
    assert client.merge_request_resolution("sales", 1)["resolution"]["cells"]["shop.orders"]["[1]"]["amount"][
        "value"] == 12  # fmt: skip
