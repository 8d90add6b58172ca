"""`lakeui revert` and `lakeui cherry-pick`, and the client's methods, against a live server with real workers."""

import json

import pytest

from tests.clients.test_client_cli import COLUMNS, _commits, _ids, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_cli_cherry_pick_a_range_and_revert(live_server, client, token, celery_worker):
    client.catalog_create("sales")
    client.database_create("sales", "main", "shop")
    client.table_create("sales", "main", "shop.orders", COLUMNS)
    client.load("sales", "main", "shop.orders", strategy="append_only", rows=[{"id": 1, "amount": 10}])
    client.branch_create("sales", "dev")
    start = _commits(client, "dev")[0]["id"]
    for i in (2, 3):
        client.load("sales", "dev", "shop.orders", strategy="append_only", rows=[{"id": i, "amount": i * 10}])
    end = _commits(client, "dev")[0]["id"]

    picked = run(live_server, token, "--json", "cherry-pick", "sales", f"{start}..{end}", "--on", "main")
    assert picked.returncode == 0, picked.stderr
    result = json.loads(picked.stdout)["result"]
    assert result["status"] == "merged" and len(result["commits"]) == 2
    assert _ids(client, "main") == [1, 2, 3]
    assert [p["kind"] for p in client.cherry_picks("sales")] == ["cherry_pick", "cherry_pick"]

    reverted = run(live_server, token, "--json", "revert", "sales", result["commits"][0], "--on", "main")
    assert reverted.returncode == 0, reverted.stderr
    assert _ids(client, "main") == [1, 3]
    (logged,) = client.reverts("sales")
    assert logged["source"] == result["commits"][0] and logged["target"] == "main"

    # a commit of dev's is not in main's history: refused with its code, exit 1
    refused = run(live_server, token, "revert", "sales", end, "--on", "main")
    assert refused.returncode == 1 and "invalid_input" in refused.stderr
    assert run(live_server, token, "cherry-pick", "sales", f"{start}..", "--on", "main").returncode == 2
    client.cherry_pick("sales", "main", end)  # picked already: nothing more
    assert _ids(client, "main") == [1, 3]
