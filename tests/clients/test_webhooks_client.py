"""The client's and the `lakeui webhook ...` command's webhook calls against a live server and a real worker, which
delivers to a local HTTP server; the client's signature check is the one docs/api.md#webhooks tells receivers to do."""

import json
import time

import pytest
from django.contrib.auth import get_user_model
from lakeui_client import Client, PermissionDenied, webhook_signature_valid
from lakeui_client.errors import ApiError
from rest_framework.authtoken.models import Token

from tests.clients.test_client_cli import run
from tests.support.webhooks import Receiver

SECRET = "a-secret-for-the-cli-tests"


def _delivered(client, catalog, webhook_id, count=1, timeout=30) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        found = client.webhook_deliveries(catalog, webhook_id)
        if (len(found) >= count and all(d["status"] != "pending" for d in found)) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@pytest.mark.usefixtures("celery_worker")
def test_client_manages_webhooks_and_redelivers(live_server, client):
    client.catalog_create("sales")
    with Receiver() as receiver:
        made = client.webhook_create("sales", receiver.url, ["branch.created"])
        secret = made["secret"]  # made by the server, shown this once
        assert client.webhook("sales", made["id"]).keys() == made.keys() - {"secret"}
        assert [w["id"] for w in client.webhooks("sales")] == [made["id"]]
        client.branch_create("sales", "dev")
        [first] = _delivered(client, "sales", made["id"])
        assert (first["event"], first["status"], first["response_status"]) == ("branch.created", "succeeded", 200)
        detail = client.webhook_delivery("sales", made["id"], first["id"])
        assert detail["payload"]["data"]["branch"] == "dev" and len(detail["attempts_log"]) == 1
        again = client.webhook_redeliver("sales", made["id"], first["id"])
        assert again["redelivery_of"] == first["id"]
        assert [d["status"] for d in _delivered(client, "sales", made["id"], count=2)] == ["succeeded"] * 2
        received = receiver.wait_for(2)
    for request in received:
        assert webhook_signature_valid(secret, request.body, request.headers["x-lakeui-signature"])
        assert not webhook_signature_valid("another-secret", request.body, request.headers["x-lakeui-signature"])
        assert not webhook_signature_valid(secret, request.body + b" ", request.headers["x-lakeui-signature"])
    assert client.webhook_update("sales", made["id"], active=False)["active"] is False
    client.webhook_delete("sales", made["id"])
    assert client.webhooks("sales") == []
    with pytest.raises(ApiError) as refused:
        client.webhook_create("sales", "http://169.254.169.254/latest/meta-data/", ["*"], SECRET)
    assert (refused.value.status, refused.value.code) == (400, "webhook_target_refused")


@pytest.mark.usefixtures("celery_worker")
def test_cli_webhook_commands(live_server, client, token, user):
    client.catalog_create("sales")
    with Receiver(answers=[500]) as receiver:
        made = run(live_server, token, "--json", "webhook", "create", "sales", receiver.url,
                   "--event", "branch.created", "--event", "branch.deleted", "--secret", SECRET)  # fmt: skip
        assert made.returncode == 0, made.stderr
        hook = json.loads(made.stdout)
        assert hook["events"] == ["branch.created", "branch.deleted"] and "secret" not in hook
        listed = run(live_server, token, "webhook", "list", "sales")
        assert listed.returncode == 0 and receiver.url in listed.stdout and SECRET not in listed.stdout
        client.branch_create("sales", "dev")
        [delivery] = _delivered(client, "sales", hook["id"])
        shown = run(live_server, token, "webhook", "deliveries", "sales", str(hook["id"]))
        assert shown.returncode == 0 and "branch.created" in shown.stdout and "succeeded" in shown.stdout
        one = run(live_server, token, "--json", "webhook", "delivery", "sales", str(hook["id"]), delivery["id"])
        assert [a["status"] for a in json.loads(one.stdout)["attempts_log"]] == [500, 200]
        again = run(live_server, token, "--json", "webhook", "redeliver", "sales", str(hook["id"]), delivery["id"])
        assert again.returncode == 0 and json.loads(again.stdout)["event"] == "branch.created"
        _delivered(client, "sales", hook["id"], count=2)
    off = run(live_server, token, "--json", "webhook", "update", "sales", str(hook["id"]), "--inactive")
    assert off.returncode == 0 and json.loads(off.stdout)["active"] is False
    refused = run(live_server, token, "webhook", "update", "sales", str(hook["id"]), "--url", "http://10.0.0.1/")
    assert refused.returncode == 1 and "webhook_target_refused" in refused.stderr
    bob = get_user_model().objects.create_user("bob")
    client.role_grant("sales", "bob", "approver")
    bob_token = Token.objects.create(user=bob).key
    denied = run(live_server, bob_token, "webhook", "list", "sales")
    assert denied.returncode == 1 and "role_required" in denied.stderr
    with pytest.raises(PermissionDenied), Client(url=live_server.url, token=bob_token) as bobs:
        bobs.webhooks("sales")
    assert run(live_server, token, "webhook", "delete", "sales", str(hook["id"])).returncode == 0
    assert client.webhooks("sales") == []
