"""The client's and the `lakeui check ...` / `lakeui mr check ...` commands' merge checks against a live server and
the real workers (docs/api.md#merge-checks): a check kept by the catalog refuses a merge that fails it (the target
unchanged), shows the rows it found, an external status a CI system posts gates a protected branch's merge request,
and an admin's override with a reason merges and is kept in the audit log."""

import json
import re

import pytest
from django.contrib.auth import get_user_model
from lakeui_client import Client, JobConflict, PermissionDenied
from lakeui_client.errors import ApiError, ConflictError
from rest_framework.authtoken.models import Token

from tests.clients.test_client_cli import COLUMNS, _ids, run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

NEGATIVE = "SELECT id, amount FROM shop.orders WHERE amount < 0"
REASON = "negative amounts are refunds"


@pytest.fixture
def bob_token(user):
    """bob, an editor of `sales` once `lake` granted it: he merges, but neither keeps checks nor overrides them."""
    return Token.objects.create(user=get_user_model().objects.create_user("bob")).key


def lake(client) -> None:
    """sales: shop.orders holds 1 and 2 on main; dev adds 3 with a negative amount."""
    client.catalog_create("sales")
    client.database_create("sales", "main", "shop")
    client.table_create("sales", "main", "shop.orders", COLUMNS)
    client.load("sales", "main", "shop.orders", strategy="append_only",
                rows=[{"id": 1, "amount": 10}, {"id": 2, "amount": 20}])  # fmt: skip
    client.branch_create("sales", "dev")
    client.load("sales", "dev", "shop.orders", strategy="append_only", rows=[{"id": 3, "amount": -5}])
    client.role_grant("sales", "bob", "editor")


def merge_of(client, job_id: str) -> dict:
    """The audit log of the merge a job made."""
    (found,) = [m for m in client.merges("sales") if m["job"] == job_id]
    return client.merge_log("sales", found["id"])


def test_client_keeps_runs_and_is_refused_by_checks(live_server, client, bob_token):
    lake(client)
    with pytest.raises(ApiError) as bad:
        client.check_create("sales", "no deletes", "main", "DELETE FROM shop.orders WHERE amount < 0")
    assert (bad.value.status, bad.value.code) == (400, "invalid_query") and bad.value.message
    with pytest.raises(ApiError) as missing:
        client.check_create("sales", "no deletes", "main", "SELECT * FROM shop.missing")
    assert missing.value.code == "table_not_found"
    made = client.check_create("sales", "no negative amounts", "main", NEGATIVE)
    assert (made["tables"], made["max_rows"], made["advisory"], made["version"]) == (["shop.orders"], 0, False, 1)
    assert client.check("sales", made["id"]) == made
    assert client.check_update("sales", made["id"], max_rows=1)["version"] == 2  # a new bound: a new version
    assert client.check_update("sales", made["id"], max_rows=0)["version"] == 3
    assert [c["name"] for c in client.checks("sales")] == ["no negative amounts"]
    with Client(url=live_server.url, token=bob_token) as bob:
        assert [c["id"] for c in bob.checks("sales")] == [made["id"]]  # everyone reads them
        with pytest.raises(PermissionDenied) as denied:
            bob.check_create("sales", "mine", "main", NEGATIVE)
        assert denied.value.code == "role_required"

    failed = client.check_run("sales", made["id"], "dev")
    assert (failed["state"], failed["row_count"], failed["commit"]) == (
        "failure",
        1,
        client.branch("sales", "dev")["head"],
    )
    assert [c["name"] for c in failed["columns"]] == ["id", "amount"] and failed["failing_rows"] == [[3, -5]]
    passed = client.check_run("sales", made["id"], "main")
    assert (passed["state"], passed["row_count"], passed["failing_rows"]) == ("success", 0, [])
    assert [(r["id"], r["state"]) for r in client.check_runs("sales", made["id"])] == [
        (passed["id"], "success"), (failed["id"], "failure"),
    ]  # fmt: skip
    assert client.check_run_get("sales", failed["id"])["failing_rows"] == [[3, -5]]
    queued = client.check_run("sales", made["id"], "dev", wait=False)
    assert client.wait(queued["id"])["result"]["state"] == "failure"

    main_before = client.branch("sales", "main")["head"]
    with pytest.raises(JobConflict) as refused:
        client.merge("sales", "dev", "main")
    assert (refused.value.status, refused.value.code) == (409, "checks_failed")
    assert "no negative amounts" in refused.value.message
    [judged] = refused.value.details["checks"]
    assert (judged["name"], judged["state"], judged["row_count"]) == ("no negative amounts", "failure", 1)
    assert client.check_run_get("sales", judged["id"])["failing_rows"] == [[3, -5]]  # judged on the merge's result
    assert client.branch("sales", "main")["head"] == main_before and _ids(client, "main") == [1, 2]
    assert [(m["status"], m["commit"]) for m in client.merges("sales")] == [("checks_failed", None)]

    with Client(url=live_server.url, token=bob_token) as bob, pytest.raises(PermissionDenied) as not_admin:
        bob.merge("sales", "dev", "main", override_checks=REASON)
    assert not_admin.value.code == "role_required" and client.branch("sales", "main")["head"] == main_before
    merged = client.merge("sales", "dev", "main", override_checks=REASON)
    assert merged["status"] == "succeeded" and _ids(client, "main") == [1, 2, 3]
    log = merge_of(client, merged["id"])
    assert log["status"] == "merged" and log["commit"] == client.branch("sales", "main")["head"]
    assert log["log"]["checks_overridden"] == {"reason": REASON, "by": "alice", "checks": ["no negative amounts"]}

    client.check_delete("sales", made["id"])
    assert client.checks("sales") == []


@pytest.mark.usefixtures("bob_token")
def test_cli_check_commands_and_a_refused_merge(live_server, client, token):
    lake(client)
    bad = run(live_server, token, "check", "create", "sales", "no deletes", "--branches", "main",
              "--sql", "DELETE FROM shop.orders")  # fmt: skip
    assert bad.returncode == 1 and bad.stdout == "" and "error: invalid_query: " in bad.stderr, bad.stderr
    made = run(live_server, token, "--json", "check", "create", "sales", "no negative amounts", "--branches", "main",
               "--sql", NEGATIVE)  # fmt: skip
    assert made.returncode == 0, made.stderr
    check = json.loads(made.stdout)
    assert (check["name"], check["sql"], check["tables"]) == ("no negative amounts", NEGATIVE, ["shop.orders"])
    listed = run(live_server, token, "check", "list", "sales", columns=40)  # uncut without a terminal
    assert listed.returncode == 0 and NEGATIVE in listed.stdout and "…" not in listed.stdout, listed.stdout
    assert re.search(r"│ no negative amounts\s+│ main\s+│ 0\s+│ false\s+│ 1\s+│ shop\.orders\s+│", listed.stdout)
    assert json.loads(run(live_server, token, "--json", "check", "show", "sales", str(check["id"])).stdout) == check

    tried = run(live_server, token, "check", "run", "sales", str(check["id"]), "--ref", "dev")
    assert tried.returncode == 0, tried.stderr
    dev = client.branch("sales", "dev")["head"]
    assert f"no negative amounts: failure, 1 row(s) on {dev}" in tried.stdout, tried.stdout
    assert "failing rows" in tried.stdout and re.search(r"│ 3\s+│ -5\s+│", tried.stdout), tried.stdout
    ok = run(live_server, token, "--json", "check", "run", "sales", str(check["id"]), "--ref", "main")
    assert ok.returncode == 0 and json.loads(ok.stdout)["state"] == "success", ok.stderr
    runs = json.loads(run(live_server, token, "--json", "check", "runs", "sales", str(check["id"])).stdout)
    assert [r["state"] for r in runs] == ["success", "failure"]
    shown = run(live_server, token, "check", "runs", "sales", str(check["id"]))
    assert runs[1]["id"] in shown.stdout and "failure" in shown.stdout, shown.stdout
    again = run(live_server, token, "check", "run-show", "sales", runs[1]["id"])
    assert again.returncode == 0 and re.search(r"│ 3\s+│ -5\s+│", again.stdout), again.stdout

    main_before = client.branch("sales", "main")["head"]
    refused = run(live_server, token, "merge", "sales", "dev", "--into", "main")
    assert refused.returncode == 1 and "error: checks_failed: " in refused.stderr, refused.stderr
    assert re.search(r"no negative amounts: failure, 1 row\(s\), run [0-9a-f-]{36}", refused.stderr), refused.stderr
    as_json = run(live_server, token, "--json", "merge", "sales", "dev", "--into", "main")
    refusal = json.loads(as_json.stderr)
    assert as_json.returncode == 1 and (refusal["code"], refusal["status"]) == ("checks_failed", 409)
    assert [r["name"] for r in refusal["details"]["checks"]] == ["no negative amounts"]
    assert client.branch("sales", "main")["head"] == main_before and _ids(client, "main") == [1, 2]

    merged = run(live_server, token, "--json", "merge", "sales", "dev", "--into", "main", "--override-checks", REASON)
    assert merged.returncode == 0, merged.stderr
    assert json.loads(merged.stdout)["status"] == "succeeded" and _ids(client, "main") == [1, 2, 3]
    log = merge_of(client, json.loads(merged.stdout)["id"])["log"]
    assert log["checks_overridden"] == {"reason": REASON, "by": "alice", "checks": ["no negative amounts"]}

    advisory = run(live_server, token, "--json", "check", "update", "sales", str(check["id"]), "--advisory")
    assert advisory.returncode == 0 and json.loads(advisory.stdout)["advisory"] is True, advisory.stderr
    assert run(live_server, token, "check", "update", "sales", str(check["id"])).returncode == 2  # nothing to change
    assert run(live_server, token, "check", "delete", "sales", str(check["id"])).returncode == 0
    gone = run(live_server, token, "check", "show", "sales", str(check["id"]))
    assert gone.returncode == 1 and "check_not_found" in gone.stderr


def test_cli_external_check_gates_a_protected_branch(live_server, client, token, bob_token):
    lake(client)
    client.role_grant("sales", "bob", "approver")  # bob is the CI system's user: statuses need an approver
    protected = run(live_server, token, "--json", "branch", "protect", "sales", "main", "--approvals", "0",
                    "--required-check", "ci/build")  # fmt: skip
    assert protected.returncode == 0, protected.stderr
    assert json.loads(protected.stdout)["required_checks"] == ["ci/build"]
    assert re.search(r'main\s+│ 0\s+│ \["ci/build"\]', run(live_server, token, "branch", "protections", "sales").stdout)
    not_admin = run(live_server, bob_token, "branch", "protect", "sales", "dev")
    assert not_admin.returncode == 1 and "role_required" in not_admin.stderr, not_admin.stderr
    client.check_create("sales", "no negative amounts", "main", NEGATIVE)
    opened = client.merge_request_open("sales", "dev", "main", "Add 3")
    number = str(opened["number"])
    main_before = client.branch("sales", "main")["head"]
    dev = client.branch("sales", "dev")["head"]

    listed = run(live_server, token, "mr", "checks", "sales", number)
    assert listed.returncode == 0 and re.search(r"sql\s+│ no negative amounts\s+│ failure", listed.stdout), (
        listed.stdout
    )
    refused = run(live_server, bob_token, "mr", "merge", "sales", number)
    assert refused.returncode == 1 and "error: checks_failed: " in refused.stderr, refused.stderr

    # A CI system reports on the source head: pending blocks, even an admin's override.
    stale = run(live_server, bob_token, "mr", "check", "sales", number, "--name", "ci/build", "--state", "success",
                "--head", "0" * 32)  # fmt: skip
    assert stale.returncode == 1 and "branch_moved" in stale.stderr
    headless = run(live_server, bob_token, "mr", "check", "sales", number, "--name", "ci/build", "--state", "success")
    assert headless.returncode == 2 and "--head" in headless.stderr  # a status names the head it tested
    own = run(live_server, token, "mr", "check", "sales", number, "--name", "ci/build", "--state", "success",
              "--head", dev)  # fmt: skip
    assert own.returncode == 1 and "self_status" in own.stderr, own.stderr  # not the request's author
    pending = run(live_server, bob_token, "--json", "mr", "check", "sales", number, "--name", "ci/build",
                  "--state", "pending", "--url", "https://ci.example/builds/7", "--description", "building",
                  "--head", dev[:12])  # fmt: skip
    assert pending.returncode == 0, pending.stderr
    posted = json.loads(pending.stdout)
    assert (posted["name"], posted["state"], posted["commit"], posted["url"]) == (
        "ci/build", "pending", dev, "https://ci.example/builds/7",
    )  # fmt: skip
    waits = run(live_server, token, "mr", "merge", "sales", number, "--override-checks", REASON)
    assert waits.returncode == 1 and "error: checks_pending: " in waits.stderr, waits.stderr
    with pytest.raises(ConflictError) as blocked:
        client.merge_request_merge("sales", int(number), override_checks=REASON)
    assert blocked.value.code == "checks_pending" and "ci/build" in blocked.value.message
    assert client.branch("sales", "main")["head"] == main_before

    with Client(url=live_server.url, token=bob_token) as ci:
        ci.merge_request_check_post("sales", int(number), "ci/build", "success", "https://ci.example/builds/7",
                                    "green", head=dev)  # fmt: skip
    assert {c["name"]: c["state"] for c in client.merge_request_checks("sales", int(number))} == {
        "no negative amounts": "failure", "ci/build": "success",
    }  # fmt: skip
    shown = run(live_server, token, "mr", "show", "sales", number)
    assert "check ci/build: success green https://ci.example/builds/7" in shown.stdout, shown.stdout
    assert "check no negative amounts: failure, 1 row(s)" in shown.stdout
    assert "checks_pending" not in shown.stdout and "checks_failed" in shown.stdout, shown.stdout
    still = run(live_server, bob_token, "mr", "merge", "sales", number)  # the SQL check still fails
    assert still.returncode == 1 and "error: checks_failed: " in still.stderr, still.stderr
    assert client.branch("sales", "main")["head"] == main_before

    merged = run(live_server, token, "--json", "mr", "merge", "sales", number, "--override-checks", REASON)
    assert merged.returncode == 0, merged.stderr
    assert json.loads(merged.stdout)["status"] == "succeeded"
    assert client.merge_request("sales", int(number))["state"] == "merged" and _ids(client, "main") == [1, 2, 3]
    log = merge_of(client, json.loads(merged.stdout)["id"])["log"]
    assert log["checks_overridden"]["reason"] == REASON and log["checks_overridden"]["by"] == "alice"
