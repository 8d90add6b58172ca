"""The Python client and the `lakeui` command against a live server (the real HTTP stack, no mocks)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import lakeui_client
import pytest
from django.contrib.auth import get_user_model
from lakeui_client import API_VERSION, Client, ConflictError, JobConflict, NotFound, VersionMismatch, VersionWarning
from lakeui_client.client import version_problem
from lakeui_client.errors import ApiError, PermissionDenied
from rest_framework.authtoken.models import Token

from lakeui.api.version import API_VERSION as SERVER_API_VERSION

LAKEUI = str(Path(sys.executable).parent / "lakeui")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
CLIENT_SRC = str(Path(lakeui_client.__file__).parents[1])  # the CLI runs the client these tests import


def run(live_server, token, *args, home=None, color=False, columns=200):
    env = {**os.environ, "LAKEUI_URL": live_server.url, "LAKEUI_TOKEN": token}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [CLIENT_SRC, os.environ.get("PYTHONPATH")]))
    env |= {"FORCE_COLOR": "1", "COLUMNS": str(columns)} if color else {"COLUMNS": str(columns)}
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
    assert run(live_server, token, "tag", "delete", "sales", "v1").returncode == 0
    gone = run(live_server, token, "tag", "delete", "sales", "v1")
    assert gone.returncode == 1 and "tag_not_found" in gone.stderr

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


def test_client_with_no_arguments_uses_the_saved_login_and_the_environment_wins(
    live_server, token, tmp_path, user, monkeypatch
):
    """`Client()` connects with what `lakeui login` saved (its error says to run it); `LAKEUI_URL` and
    `LAKEUI_TOKEN` still win over the saved login, and `url=`/`token=` over both."""
    monkeypatch.delenv("LAKEUI_URL", raising=False)
    monkeypatch.delenv("LAKEUI_TOKEN", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    with pytest.raises(lakeui_client.LakeUIError, match="run `lakeui login URL`"):
        Client()
    logged = run(live_server, token, "login", live_server.url, "--token", token, home=tmp_path)
    assert logged.returncode == 0, logged.stderr

    with Client() as saved:
        assert saved.url == live_server.url
        saved.catalog_create("sales")
        assert [b["name"] for b in saved.branches("sales")] == ["main"]

    monkeypatch.setenv("LAKEUI_TOKEN", "not-a-token")  # the environment's token wins over the saved one
    with Client() as wrong, pytest.raises(ApiError) as refused:
        wrong.branches("sales")
    assert refused.value.status == 401
    with Client(token=token) as given:  # and an argument over both
        assert [b["name"] for b in given.branches("sales")] == ["main"]

    monkeypatch.setenv("LAKEUI_URL", "http://127.0.0.1:9")  # the environment's URL wins too
    assert Client().url == "http://127.0.0.1:9"


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
    waited = run(live_server, token, "--json", "job", "wait", json.loads(loaded.stdout)["id"])
    assert waited.returncode == 0 and json.loads(waited.stdout)["result"]["rows_inserted"] == 2, waited.stderr
    assert run(live_server, token, "job", "wait", "00000000-0000-0000-0000-000000000000").returncode == 1

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


def test_client_checks_the_server_api_version(live_server, client, token):
    assert API_VERSION == SERVER_API_VERSION  # the client is released with the API it speaks
    client.catalogs()
    assert client.server_version == SERVER_API_VERSION

    class NextMajor(Client):
        api_version = "2.0"  # a client of the next API: /api/v2/ does not exist here

    with pytest.raises(VersionMismatch, match=r"speaks API 1\.0, older than API 2\.0 .*upgrade the server"):
        NextMajor(url=live_server.url, token=None).catalogs()

    class NextMinor(Client):
        api_version = "1.9"  # same paths, but calls the server may not have yet

    newer = NextMinor(url=live_server.url, token=token)
    with pytest.warns(VersionWarning, match=r"speaks API 1\.0, older than API 1\.9"):
        assert newer.catalogs() == []
    assert version_problem("1.3", "1.0") == (False, VERSION_NEWER)
    assert version_problem("0.9", "1.0")[0] is True and version_problem(None, "1.0")[0] is False


VERSION_NEWER = "the server speaks API 1.3, newer than API 1.0 which this client understands; upgrade lakeui-client"


def _commits(client, ref):
    return client.commits("sales", ref)  # newest first


def _ids(client, ref):
    rows = client.sql("sales", "SELECT id FROM shop.orders ORDER BY id", branch=ref)["rows"]
    return [row[0] if isinstance(row, list) else row["id"] for row in rows]


def test_cli_diff_merge_resolutions_and_restore(live_server, client, token, celery_worker):
    """delete (dev) x insert (main) is a conflict: the diff shows it red with its cell, the merge is refused with a
    JobConflict carrying `merge_conflict`, and --target-wins merges it keeping main's table."""
    client.catalog_create("sales")
    client.database_create("sales", "main", "shop")
    client.table_create("sales", "main", "shop.orders", COLUMNS)
    client.load(
        "sales", "main", "shop.orders", strategy="append_only", rows=[{"id": 1, "amount": 10}, {"id": 2, "amount": 20}]
    )
    client.branch_create("sales", "dev")
    before_delete = _commits(client, "dev")[0]
    client.delete_rows("sales", "dev", "shop.orders", where="id = 1")
    client.load("sales", "main", "shop.orders", strategy="append_only", rows=[{"id": 3, "amount": 30}])

    shown = run(live_server, token, "diff", "sales", "dev", color=True)  # --into defaults to main
    assert shown.returncode == 0, shown.stderr
    text = ANSI.sub("", shown.stdout)
    assert "1 changed object(s), 1 conflict(s)" in text and "shop.orders: rule table 4.3" in text, text
    assert re.search(r"delete x insert\s+│ conflict\s+│ conflict", text), text
    assert "\x1b[1;31mconflict" in shown.stdout  # bold red, as the UI's cell-conflict
    report = json.loads(run(live_server, token, "--json", "diff", "sales", "dev", "--into", "main").stdout)
    (orders,) = report["objects"]
    assert [(p["row"], p["column"], p["cell"], p["verdict"]) for p in orders["pairs"]] == [
        ("delete", "insert", "conflict", "conflict")
    ]

    rows = run(live_server, token, "diff", "sales", "dev", "--into", "main", "--table", "shop.orders")
    assert rows.returncode == 0, rows.stderr  # what merging dev brings to main: dev deleted 1 since the ancestor
    assert "shop.orders from the ancestor to dev: 0 added, 1 deleted, 0 changed" in rows.stdout, rows.stdout
    assert re.search(r"deleted\s+│ 1\s+│ 10\s", rows.stdout), rows.stdout

    # Any two refs, every table, row by row; and, without a terminal, full values however narrow the columns.
    client.tag_create("sales", "before", before_delete["id"])
    both = run(live_server, token, "diff", "--rows", "sales", "before", "dev", columns=30)
    assert both.returncode == 0, both.stderr
    assert "from before to dev: 1 changed table(s)" in both.stdout, both.stdout
    assert "shop.orders from before to dev: 0 added, 1 deleted, 0 changed" in both.stdout
    assert re.search(r"deleted\s+│ 1\s+│ 10\s", both.stdout) and "…" not in both.stdout
    logged = run(live_server, token, "log", "sales", "dev", columns=30)
    assert _commits(client, "dev")[0]["id"] in logged.stdout and "…" not in logged.stdout, logged.stdout
    as_json = json.loads(run(live_server, token, "--json", "diff", "--rows", "sales", "before", "dev").stdout)
    assert [(t["table"], t["counts"]) for t in as_json] == [("shop.orders", {"insert": 0, "update": 0, "delete": 1})]

    with pytest.raises(JobConflict) as refused:
        client.merge("sales", "dev", "main")
    assert isinstance(refused.value, ConflictError) and refused.value.status == 409
    assert refused.value.code == "merge_conflict" and refused.value.details
    cli_refused = run(live_server, token, "merge", "sales", "dev", "--into", "main")
    assert cli_refused.returncode == 1 and "error: merge_conflict: " in cli_refused.stderr
    as_json = run(live_server, token, "--json", "merge", "sales", "dev", "--into", "main")
    assert as_json.returncode == 1 and as_json.stdout == ""
    refusal = json.loads(as_json.stderr)
    assert refusal["code"] == "merge_conflict" and refusal["status"] == 409 and refusal["details"]
    assert (
        run(live_server, token, "merge", "sales", "dev", "--into", "main", "--source-wins", "--target-wins").returncode
        == 2
    )
    # Column rules go through as the resolution's (`--column`); they settle cells of primary-key tables only.
    ruled = run(live_server, token, "merge", "sales", "dev", "--into", "main", "--column", "shop.orders.amount=least")
    assert ruled.returncode == 1 and "column_rules_keyless" in ruled.stderr, ruled.stderr
    assert (
        run(live_server, token, "merge", "sales", "dev", "--into", "main", "--column", "amount=least").returncode == 2
    )
    kept = run(live_server, token, "--json", "merge", "sales", "dev", "--into", "main", "--target-wins")
    assert kept.returncode == 0, kept.stderr
    assert _ids(client, "main") == [1, 2, 3]

    restored = run(
        live_server,
        token,
        "--json",
        "restore",
        "sales",
        "dev",
        "--table",
        "shop.orders",
        "--commit",
        before_delete["id"],
    )
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["status"] == "succeeded" and _ids(client, "dev") == [1, 2]
    assert run(live_server, token, "restore", "sales", "dev").returncode == 2  # neither --commit nor --at
    both = run(live_server, token, "restore", "sales", "dev", "--commit", "x", "--at", "2026-01-01T00:00:00Z")
    assert both.returncode == 2 and "exactly one" in both.stderr

    deleted_at = _commits(client, "dev")[1]["created_at"]  # the delete's commit, before the restore
    client.restore("sales", "dev", at=deleted_at)
    assert _ids(client, "dev") == [2]
    with pytest.raises(NotFound) as missing:
        client.restore("sales", "dev", commit="0123456789abcdef")
    assert missing.value.status == 404 and missing.value.code


def test_cli_merge_request_review_and_merge(live_server, client, token, celery_worker):
    client.catalog_create("sales")
    client.database_create("sales", "main", "shop")
    client.table_create("sales", "main", "shop.orders", COLUMNS)
    client.branch_create("sales", "feature")
    client.load("sales", "feature", "shop.orders", strategy="append_only", rows=[{"id": 4, "amount": 40}])
    bob = get_user_model().objects.create_user("bob", password="bob-password")
    bob_token = Token.objects.create(user=bob).key
    client.role_grant("sales", "bob", "approver")

    opened = run(live_server, token, "--json", "mr", "open", "sales", "feature", "--into", "main", "--title", "Add 4")
    assert opened.returncode == 0, opened.stderr
    request = json.loads(opened.stdout)
    assert request["number"] == 1 and request["state"] == "open" and request["status"]["mergeable"]
    listed = run(live_server, token, "mr", "list", "sales")
    assert listed.returncode == 0 and "Add 4" in listed.stdout

    own = run(live_server, token, "mr", "approve", "sales", "1")
    assert own.returncode == 1 and "self_approval" in own.stderr
    with pytest.raises(PermissionDenied) as self_approval:
        client.merge_request_approve("sales", 1)
    assert self_approval.value.code == "self_approval" and self_approval.value.status == 403

    asked = run(live_server, bob_token, "--json", "mr", "request-changes", "sales", "1", "--comment", "why 4?")
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["decision"] == "request_changes"
    blocked = run(live_server, token, "mr", "merge", "sales", "1")
    assert blocked.returncode == 1 and "changes_requested" in blocked.stderr
    assert run(live_server, bob_token, "mr", "approve", "sales", "1", "--comment", "ok").returncode == 0

    shown = run(live_server, token, "mr", "show", "sales", "1")
    assert shown.returncode == 0, shown.stderr
    assert "!1 Add 4 (feature into main): open" in shown.stdout and "bob: approve ok" in shown.stdout
    assert "mergeable, approved by bob (0 required), 0 conflicting object(s)" in shown.stdout
    merged = run(live_server, token, "--json", "mr", "merge", "sales", "1")
    assert merged.returncode == 0, merged.stderr
    assert json.loads(merged.stdout)["status"] == "succeeded"
    assert client.merge_request("sales", 1)["state"] == "merged" and _ids(client, "main") == [4]
    assert [r["number"] for r in client.merge_requests("sales", state="merged")] == [1]
