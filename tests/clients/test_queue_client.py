"""The client's and `lakeui mr queue` merge queue against a live server and the real workers (docs/merge-queue.md):
a branch protected with `--require-queue` refuses a request's direct merge, takes it through the queue, and the
CLI shows the request's place and the branch's line."""

import json
import re
import time

import pytest
from django.contrib.auth import get_user_model
from lakeui_client import Client
from lakeui_client.errors import ApiError
from rest_framework.authtoken.models import Token

from tests.clients.test_client_cli import COLUMNS, run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def test_cli_queues_a_request_into_a_branch_that_requires_the_queue(live_server, client, token):
    tokens = {
        name: Token.objects.create(user=get_user_model().objects.create_user(name)).key for name in ("bob", "carol")
    }
    client.catalog_create("sales")
    client.database_create("sales", "main", "shop")
    client.table_create("sales", "main", "shop.orders", COLUMNS)
    client.branch_create("sales", "dev")
    client.load("sales", "dev", "shop.orders", strategy="append_only", rows=[{"id": 1, "amount": 10}])
    client.role_grant("sales", "bob", "editor")
    client.role_grant("sales", "carol", "approver")
    protected = run(live_server, token, "--json", "branch", "protect", "sales", "main", "--require-queue")
    assert protected.returncode == 0 and json.loads(protected.stdout)["require_queue"] is True, protected.stderr

    with (
        Client(url=live_server.url, token=tokens["bob"]) as bob,
        Client(url=live_server.url, token=tokens["carol"]) as carol,
    ):
        number = bob.merge_request_open("sales", "dev", "main", "load orders")["number"]
        refused = run(live_server, tokens["bob"], "mr", "queue", "sales", str(number))
        assert refused.returncode == 1 and "approvals_missing" in refused.stderr + refused.stdout
        carol.merge_request_approve("sales", number)
        with pytest.raises(ApiError) as direct:
            bob.merge_request_merge("sales", number)
        assert direct.value.code == "queue_required"

        queued = run(live_server, tokens["bob"], "--json", "mr", "queue", "sales", str(number))
        assert queued.returncode == 0, queued.stderr
        assert json.loads(queued.stdout)["position"] == 1
        deadline = time.monotonic() + 300
        while bob.merge_request_queue_entry("sales", number)["state"] != "merged":
            assert time.monotonic() < deadline, bob.merge_request_queue_entry("sales", number)
            time.sleep(0.5)
        shown = run(live_server, tokens["bob"], "mr", "queue", "sales", "--branch", "main")
        assert shown.returncode == 0 and "load orders" in shown.stdout and "merged" in shown.stdout
        assert "null" not in shown.stdout, shown.stdout  # a merged entry has no position: a dash, as in the UI
        assert re.search(r"│ - +│ " + str(number) + r" +│ load orders", shown.stdout), shown.stdout
        assert bob.merge_request("sales", number)["state"] == "merged"
        assert bob.branch_queue("sales", "main")["entries"] == []
        again = run(live_server, tokens["bob"], "mr", "queue", "sales", str(number), "--leave")
        assert again.returncode == 1 and "not_queued" in again.stderr + again.stdout
