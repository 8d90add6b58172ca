"""The Iceberg REST events endpoint (docs/iceberg.md#events): a plain HTTP client (httpx, against the live server)
with a viewer's bearer token follows a branch across a merge, page by page with the continuation token it was given,
each commit's catalog operations as events; a filter by operation type; a token it was not given is a 400, no token
a 401."""

import httpx
import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from catalog_app.services.access import catalog_role_grant
from catalog_app.services.refs import branch_create
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.merges import insert, merge

pytestmark = pytest.mark.django_db(transaction=True)


def operations(answer) -> list[tuple]:
    found = []
    for event in answer["events"]:
        operation = event["operation"]
        named = operation.get("identifier") or operation.get("namespace") or operation.get("merged-commit")
        found.append((event["request-id"], operation["operation-type"], str(named)))
    return found


def test_a_client_follows_a_branch_across_a_merge(user, live_server):
    catalog = make_catalog()
    make_table(catalog)  # a commit that creates namespace sales, one that creates sales.orders
    created = head(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    insert(catalog, [{"id": 1, "amount": 10, "region": "eu"}], branch="dev")
    merge(catalog, source="dev", target="main")
    merged = head(catalog)
    viewer = get_user_model().objects.create_user("vera")
    catalog_role_grant(catalog=catalog, username="vera", role="viewer", granted_by=user)
    bearer = {"Authorization": f"Bearer {Token.objects.create(user=viewer).key}"}
    http = httpx.Client(base_url=live_server.url, headers=bearer, timeout=60)
    url = "/iceberg/lake/main/v1/events"

    seen, token, pages = [], None, 0
    while True:
        answer = http.post(url, json={"page-size": 1, **({"continuation-token": token} if token else {})})
        assert answer.status_code == 200, answer.content
        body = answer.json()
        seen += operations(body)
        pages += 1
        token = body["continuation-token"]
        if token is None:
            break
        assert body["events"] and body["highest-processed-timestamp-ms"] > 0
    assert pages >= 3
    table = str({"namespace": ["sales"], "name": "orders"})
    assert (created, "create-table", table) in seen
    assert seen[-2:] == [(merged, "update-table", table), (merged, "x-lakeui-merge", head(catalog, "dev"))]
    assert seen.index((created, "create-table", table)) < len(seen) - 2  # oldest first
    every = http.post(url, json={"page-size": 1000}).json()["events"]
    assert [(e["event-count"], e["actor"]) for e in every if e["request-id"] == merged] == [(2, None)] * 2

    only = http.post(url, json={"operation-types": ["update-table"]}).json()
    assert [op[1] for op in operations(only)] == ["update-table"]
    dev = http.post("/iceberg/lake/dev/v1/events", json={}).json()
    assert [op[1] for op in operations(dev)][-1] == "update-table"  # dev's load: its own branch's history
    for body in ({"continuation-token": "x"}, {"page-size": 0}, {"page-size": "1"}):
        refused = http.post(url, json=body)
        assert refused.status_code == 400 and refused.json()["error"]["type"] == "BadRequestException", body
    assert httpx.post(live_server.url + url, json={}).status_code == 401
    assert "POST /v1/{prefix}/events" in http.get("/iceberg/lake/main/v1/config").json()["endpoints"]
