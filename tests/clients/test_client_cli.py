"""The Python client and the `lakeui` command against a live server (the real HTTP stack, no mocks)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lakeui_client import Client, ConflictError, NotFound
from lakeui_client.errors import ApiError
from rest_framework.authtoken.models import Token

LAKEUI = str(Path(sys.executable).parent / "lakeui")


@pytest.fixture
def token(user):
    return Token.objects.get_or_create(user=user)[0].key


@pytest.fixture
def client(live_server, token):
    with_client = Client(url=live_server.url, token=token)
    yield with_client
    with_client.close()


def run(live_server, token, *args, home=None):
    env = {**os.environ, "LAKEUI_URL": live_server.url, "LAKEUI_TOKEN": token}
    if home:
        env = {k: v for k, v in env.items() if not k.startswith("LAKEUI_")} | {"HOME": str(home)}
        env["XDG_CONFIG_HOME"] = str(Path(home) / ".config")
    return subprocess.run([LAKEUI, *args], env=env, capture_output=True, text=True, timeout=400)


def test_client_typed_methods_and_errors(client):
    catalog = client.catalog_create("sales")
    assert catalog["name"] == "sales" and catalog["default_branch"] == "main"
    created = client.branch_create("sales", "dev")
    assert created["head"] == client.branch("sales", "main")["head"]
    assert {b["name"] for b in client.branches("sales")} == {"main", "dev"}
    with pytest.raises(NotFound) as missing:
        client.branch("sales", "nope")
    assert missing.value.status == 404 and missing.value.code
    with pytest.raises(ApiError) as duplicate:
        client.branch_create("sales", "dev")
    assert duplicate.value.code and duplicate.value.message
    assert duplicate.value.status in (400, 409)
    client.branch_delete("sales", "dev")
    assert [b["name"] for b in client.branches("sales")] == ["main"]


def test_client_without_token_is_refused_typed(live_server, client):
    client.catalog_create("sales")
    anonymous = Client(url=live_server.url, token=None)
    with pytest.raises(ApiError) as refused:
        anonymous.branches("sales")
    assert refused.value.status in (401, 403) and refused.value.code
    assert not isinstance(refused.value, ConflictError)


def test_cli_branch_tag_log_and_exit_codes(live_server, client, token):
    client.catalog_create("sales")
    made = run(live_server, token, "--json", "branch", "create", "sales", "dev")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["name"] == "dev"

    listed = run(live_server, token, "--json", "branch", "list", "sales")
    assert listed.returncode == 0 and {b["name"] for b in json.loads(listed.stdout)} == {"main", "dev"}
    assert "dev" in run(live_server, token, "branch", "list", "sales").stdout

    again = run(live_server, token, "branch", "create", "sales", "dev")
    assert again.returncode == 1 and "error" in again.stderr and again.stdout == ""

    tagged = run(live_server, token, "--json", "tag", "create", "sales", "v1", "main")
    assert tagged.returncode == 0, tagged.stderr
    assert [t["name"] for t in json.loads(run(live_server, token, "--json", "tag", "list", "sales").stdout)] == ["v1"]

    log = run(live_server, token, "--json", "log", "sales", "main")
    assert log.returncode == 0 and len(json.loads(log.stdout)) >= 1

    assert run(live_server, token, "branch", "delete", "sales", "dev").returncode == 0
    assert run(live_server, token, "branch", "delete", "sales", "dev").returncode == 1
    assert run(live_server, token, "branch", "create", "sales").returncode == 2
    assert run(live_server, token, "no-such-command").returncode == 2


def test_cli_login_writes_private_config(live_server, token, tmp_path, user):
    logged = run(live_server, token, "login", live_server.url, "--token", token, home=tmp_path)
    assert logged.returncode == 0, logged.stderr
    config = tmp_path / ".config" / "lakeui" / "config.json"
    assert config.stat().st_mode & 0o777 == 0o600
    assert json.loads(config.read_text()) == {"url": live_server.url, "token": token}
    Client(url=live_server.url, token=token).catalog_create("sales")
    listed = run(live_server, token, "--json", "branch", "list", "sales", home=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [b["name"] for b in json.loads(listed.stdout)] == ["main"]


COLUMNS = [{"name": "id", "type": "long", "nullable": False}, {"name": "amount", "type": "int"}]


def test_cli_load_merge_sql_and_job_failure(live_server, client, token, celery_worker, tmp_path):
    client.catalog_create("sales")
    client.database_create("sales", "main", "shop")
    client.table_create("sales", "main", "shop.orders", COLUMNS)
    client.branch_create("sales", "dev")
    data = tmp_path / "orders.csv"
    data.write_text("id,amount\n1,10\n2,20\n")
    loaded = run(live_server, token, "--json", "load", "sales", "dev", "shop.orders", str(data), "--strategy",
                 "upsert", "--key", "id")  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout)["status"] == "succeeded"

    dry = run(live_server, token, "--json", "merge", "sales", "dev", "--into", "main", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert client.sql("sales", "SELECT count(*) AS n FROM shop.orders", branch="main")["rows"] in ([[0]], [{"n": 0}])
    merged = run(live_server, token, "--json", "merge", "sales", "dev", "--into", "main")
    assert merged.returncode == 0, merged.stderr
    answer = run(live_server, token, "--json", "sql", "sales", "SELECT id, amount FROM shop.orders ORDER BY id")
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["rows"] in ([[1, 10], [2, 20]], [{"id": 1, "amount": 10}, {"id": 2, "amount": 20}])

    bad = tmp_path / "bad.csv"
    bad.write_text("id,amount\n,5\n")  # a NULL in a NOT NULL column: the job fails with the API's code
    refused = run(live_server, token, "load", "sales", "main", "shop.orders", str(bad), "--strategy", "append_only")
    assert refused.returncode == 1 and "error" in refused.stderr
