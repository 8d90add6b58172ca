"""`lakeui retention show|set|preview|expire` and the client's methods, against a live server with real workers."""

import json

import pytest
from lakeui_client.errors import ApiError

from tests.clients.test_client_cli import COLUMNS, _commits, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_cli_retention_rules_preview_and_expiry(live_server, client, token, celery_worker):
    client.catalog_create("sales")
    client.database_create("sales", "main", "shop")
    client.table_create("sales", "main", "shop.orders", COLUMNS)
    for i in range(1, 5):
        client.load("sales", "main", "shop.orders", strategy="append_only", rows=[{"id": i, "amount": i}])
    point = _commits(client, "main")[1]["id"]
    client.restore("sales", "main", commit=point)  # an audit log naming a commit that will expire
    history = _commits(client, "main")  # newest first

    assert json.loads(run(live_server, token, "--json", "retention", "show", "sales").stdout) == []
    previewed = run(live_server, token, "--json", "retention", "preview", "sales", "main=2c")
    assert previewed.returncode == 0, previewed.stderr
    plan = json.loads(previewed.stdout)
    (main,) = plan["refs"]
    assert main["expiring"] == [c["id"] for c in history[2:]] and main["oldest_kept"]["commit"] == history[1]["id"]
    assert client.retention("sales") == []  # a preview of proposed rules saves nothing

    assert run(live_server, token, "retention", "set", "sales", "main=2x").returncode == 2  # a bad rule
    saved = run(live_server, token, "--json", "retention", "set", "sales", "scratch/*=3d,10c", "main=2c")
    assert saved.returncode == 0, saved.stderr
    assert client.retention("sales") == [
        {"pattern": "scratch/*", "keep_days": 3, "keep_commits": 10},
        {"pattern": "main", "keep_days": None, "keep_commits": 2},
    ]
    expired = run(live_server, token, "--json", "retention", "expire", "sales")
    assert expired.returncode == 0, expired.stderr
    assert json.loads(expired.stdout)["commits_expiring"] == len(history) - 2
    assert client.retention_preview("sales")["commits_expiring"] == 0  # nothing more to expire
    with pytest.raises(ApiError) as gone:
        client.rows("sales", history[3]["id"], "shop.orders")
    assert (gone.value.status, gone.value.code) == (410, "history_expired")
    assert gone.value.details["oldest_kept"]["commit"] == history[1]["id"]
    (restored,) = client.restores("sales")
    assert client.restore_log("sales", restored["id"])["expired_commits"] == [point]  # the log is kept, and says so
    shown = run(live_server, token, "retention", "preview", "sales")
    assert shown.returncode == 0 and "0 commits expire" in shown.stdout
