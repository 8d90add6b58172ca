"""The catalog REST API as a client uses it."""

import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.utils import timezone

from catalog_app.models import Commit, ObjectVersion

pytestmark = pytest.mark.django_db

API = "/api/v1/catalogs"
ORDERS = {
    "name": "orders",
    "columns": [
        {"name": "id", "type": "long", "nullable": False},
        {"name": "amount", "type": "int"},
        {"name": "day", "type": "date"},
    ],
    "partition_by": ["day"],
    "primary_key": ["id"],
    "properties": {"write.mode": "copy-on-write"},
}


@pytest.fixture
def lake(user_client):
    assert user_client.post(API, {"name": "lake", "description": "demo"}, format="json").status_code == 201
    assert user_client.post(f"{API}/lake/refs/main/databases", {"name": "sales"}, format="json").status_code == 201
    assert user_client.post(f"{API}/lake/refs/main/databases/sales/tables", ORDERS, format="json").status_code == 201
    return user_client


def ok(response, code=200):
    assert response.status_code == code, response.json()
    return response.json()


def refused(response, status, code):
    body = response.json()
    assert (response.status_code, body["code"]) == (status, code), body
    assert body["message"]
    return body


def test_catalog_create_list_get_delete(user_client):
    created = ok(user_client.post(API, {"name": "lake", "description": "d"}, format="json"), 201)
    assert created["default_branch"] == "main"
    assert [c["name"] for c in ok(user_client.get(API))["results"]] == ["lake"]
    assert [b["name"] for b in ok(user_client.get(f"{API}/lake/branches"))["results"]] == ["main"]
    refused(user_client.post(API, {"name": "lake"}, format="json"), 409, "name_exists")
    refused(user_client.post(API, {"name": "no spaces"}, format="json"), 400, "invalid_name")
    assert user_client.delete(f"{API}/lake").status_code == 204
    refused(user_client.get(f"{API}/lake"), 404, "catalog_not_found")


def test_table_lifecycle_through_the_api(lake):
    table_url = f"{API}/lake/refs/main/databases/sales/tables/orders"
    table = ok(lake.get(table_url))
    assert table["partition_by"] == ["day"]
    assert table["primary_key"] == ["id"]
    assert [(c["id"], c["name"], c["type"]) for c in table["columns"]] == [
        (1, "id", "long"),
        (2, "amount", "int"),
        (3, "day", "date"),
    ]
    ok(lake.post(f"{table_url}/columns", {"name": "note", "type": "string", "default": "n/a"}, format="json"), 201)
    widened = ok(lake.patch(f"{table_url}/columns/amount", {"type": "long", "name": "total"}, format="json"))
    assert [(c["id"], c["name"], c["type"]) for c in widened["columns"]][1] == (2, "total", "long")
    ok(lake.delete(f"{table_url}/columns/note"))
    renamed = ok(lake.patch(table_url, {"name": "purchases", "set_properties": {"owner": "bi"}}, format="json"))
    assert renamed["id"] == table["id"]
    history = ok(lake.get(f"{API}/lake/refs/main/databases/sales/tables/purchases/history"))
    assert [[op["op"] for op in v["operations"]] for v in history["versions"]] == [
        ["alter_name", "alter_properties"], ["alter_column"], ["alter_column", "alter_column"], ["alter_column"], ["create"],
    ]  # fmt: skip
    assert len(history["schema_versions"]) == 4
    assert all(version["visible"] for version in history["schema_versions"])
    commits = ok(lake.get(f"{API}/lake/refs/main/commits"))
    assert commits["count"] == 7  # catalog, database, table, 3 column changes, rename
    assert commits["results"][0]["message"] == "Alter table sales.purchases"
    assert commits["results"][0]["author"] == "alice"
    dropped = ok(lake.delete(f"{API}/lake/refs/main/databases/sales/tables/purchases"))
    assert ok(lake.get(f"{API}/lake/refs/main/commits"))["results"][0]["id"] == dropped["commit"]


def test_branches_tags_and_time_travel_through_the_api(lake):
    moment = timezone.now().isoformat()
    time.sleep(0.01)
    branch = ok(lake.post(f"{API}/lake/branches", {"name": "feature/q4", "from": "main"}, format="json"), 201)
    ok(lake.post(f"{API}/lake/tags", {"name": "v1.0", "ref": "main"}, format="json"), 201)
    ok(lake.post(f"{API}/lake/refs/feature/q4/databases", {"name": "scratch"}, format="json"), 201)
    ok(lake.patch(f"{API}/lake/refs/main/databases/sales", {"set_properties": {"team": "x"}}, format="json"))
    names = lambda ref, q="": [d["name"] for d in ok(lake.get(f"{API}/lake/refs/{ref}/databases{q}"))["results"]]  # noqa: E731
    assert names("feature/q4") == ["sales", "scratch"]
    assert names("main") == ["sales"]
    assert names("v1.0") == ["sales"]
    assert names(branch["head"]) == ["sales"]
    assert ok(lake.get(f"{API}/lake/refs/main/databases/sales"))["properties"] == {"team": "x"}
    assert ok(lake.get(f"{API}/lake/refs/main/databases/sales?at={moment.replace('+', '%2B')}"))["properties"] == {}
    from_time = ok(
        lake.post(f"{API}/lake/branches", {"name": "then", "from": "main", "at": moment}, format="json"), 201
    )
    assert from_time["head"] == branch["head"]
    ok(lake.get(f"{API}/lake/branches/feature/q4"))
    assert lake.delete(f"{API}/lake/branches/feature/q4").status_code == 204
    refused(lake.get(f"{API}/lake/refs/feature/q4/databases"), 404, "ref_not_found")


def test_views_shares_and_roles(lake):
    base = f"{API}/lake/refs/main"
    ok(
        lake.post(f"{base}/databases/sales/views", {"name": "big", "sql": "SELECT * FROM sales.orders"}, format="json"),
        201,
    )
    ok(lake.post(f"{base}/shares", {"name": "partners"}, format="json"), 201)
    ok(lake.post(f"{base}/roles", {"name": "analyst", "comment": "read only"}, format="json"), 201)
    assert [v["name"] for v in ok(lake.get(f"{base}/databases/sales/views"))["results"]] == ["big"]
    assert ok(lake.get(f"{base}/roles/analyst"))["state"] == {"comment": "read only"}
    refused(
        lake.post(f"{base}/databases/sales/views", {"name": "orders", "sql": "SELECT 1"}, format="json"),
        409,
        "name_exists",
    )
    ok(lake.delete(f"{base}/shares/partners"))
    assert ok(lake.get(f"{base}/shares"))["results"] == []


BAD_REQUESTS = [
    ("post", "refs/main/databases", {"name": "x;drop"}, 400, "invalid_name"),
    ("post", "refs/main/databases", {"name": "sales"}, 409, "name_exists"),
    ("post", "refs/v1/databases", {"name": "other"}, 400, "read_only_ref"),
    ("post", "refs/nope/databases", {"name": "other"}, 404, "branch_not_found"),
    ("get", "refs/nope/databases", None, 404, "ref_not_found"),
    ("get", "refs/main/databases?at=yesterday", None, 400, "invalid_timestamp"),
    ("get", "refs/main/databases?at=1999-01-01T00:00:00Z", None, 404, "no_commit_at"),
    ("patch", "refs/main/databases/sales/tables/orders/columns/id", {"type": "int"}, 400, "type_narrowing"),
    ("patch", "refs/main/databases/sales/tables/orders/columns/nope", {"type": "int"}, 404, "column_not_found"),
    ("post", "refs/main/databases/sales/tables/orders/columns", {"name": "c", "type": "uuid"}, 400, "unknown_type"),
    ("post", "refs/main/databases/sales/tables", {**ORDERS, "name": "t2", "partition_by": ["zz"]}, 400, "column_not_found"),
    ("post", "refs/main/databases/sales/tables", {"name": "t3"}, 400, "invalid_input"),
    ("post", "refs/main/databases/sales/tables", {"name": "t4", "columns": [{"name": "b", "type": "binary"}], "partition_by": ["b"]}, 400, "invalid_partition_column"),
    ("patch", "refs/main/databases/sales", {"unset_properties": ["nope"]}, 400, "property_not_set"),
    ("delete", "refs/main/databases/sales", None, 409, "database_not_empty"),
    ("delete", "branches/main", None, 400, "default_branch"),
    ("post", "branches", {"name": "../etc", "from": "main"}, 400, "invalid_name"),
    ("post", "branches", {"name": "v1", "from": "main"}, 409, "ref_exists"),
    ("post", "branches", {"name": "b", "from": "nowhere"}, 404, "ref_not_found"),
    ("post", "refs/main/databases/sales/tables/orders/columns", {"name": "c", "type": "int", "default": "x"}, 400, "invalid_default"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "body", "status", "code"), BAD_REQUESTS)
def test_bad_requests_are_refused_and_change_nothing(lake, method, path, body, status, code):
    ok(lake.post(f"{API}/lake/tags", {"name": "v1", "ref": "main"}, format="json"), 201)
    before = (Commit.objects.count(), ObjectVersion.objects.count(), ok(lake.get(f"{API}/lake/branches/main"))["head"])
    response = getattr(lake, method)(f"{API}/lake/{path}", body, format="json")
    refused(response, status, code)
    assert (
        Commit.objects.count(),
        ObjectVersion.objects.count(),
        ok(lake.get(f"{API}/lake/branches/main"))["head"],
    ) == before


def test_if_match_makes_a_stale_write_a_409(lake):
    head = ok(lake.get(f"{API}/lake/branches/main"))["head"]
    first = lake.post(f"{API}/lake/refs/main/databases", {"name": "a"}, format="json", HTTP_IF_MATCH=head)
    assert first.status_code == 201
    second = lake.post(f"{API}/lake/refs/main/databases", {"name": "b"}, format="json", HTTP_IF_MATCH=head)
    body = refused(second, 409, "branch_moved")
    assert body["details"]["head"] == first.json()["commit"]


def test_a_repeated_read_of_a_commit_is_a_304_and_a_branch_read_after_a_write_is_fresh(lake):
    table = f"{API}/lake/refs/main/databases/sales/tables/orders"
    first = lake.get(table)
    etag = first.headers["ETag"]
    again = lake.get(table, HTTP_IF_NONE_MATCH=etag)
    assert (again.status_code, again.headers["ETag"], again.content) == (304, etag, b"")
    assert (
        lake.get(f"{API}/lake/refs/main/databases/sales/tables/customers", HTTP_IF_NONE_MATCH=etag).status_code == 404
    )
    ok(lake.patch(table, {"set_properties": {"owner": "ops"}}, format="json"))  # main moves
    fresh = lake.get(table, HTTP_IF_NONE_MATCH=etag)
    assert fresh.status_code == 200 and fresh.headers["ETag"] != etag
    assert fresh.json()["properties"]["owner"] == "ops"
    commit = ok(lake.get(f"{API}/lake/branches/main"))["head"]
    pinned = lake.get(f"{API}/lake/refs/{commit}/databases/sales/tables/orders")
    assert lake.get(f"{API}/lake/refs/{commit}/databases/sales/tables/orders",
                    HTTP_IF_NONE_MATCH=pinned.headers["ETag"]).status_code == 304  # fmt: skip
    assert lake.get(f"{table}?at=2000-01-01T00:00:00Z", HTTP_IF_NONE_MATCH=etag).status_code != 304


def test_anonymous_cannot_read_or_write(api_client, lake):
    assert api_client.get(f"{API}/lake/refs/main/databases").status_code == 401
    assert api_client.post(API, {"name": "x"}, format="json").status_code == 401


def test_openapi_schema_has_no_warnings():
    run = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null"],
        cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
