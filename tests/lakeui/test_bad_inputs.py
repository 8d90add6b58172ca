"""The corpus of bad inputs from issue 18: each is a 4xx with a JSON `{code, message}`, and changes nothing."""

import json

import pytest
from django.test import override_settings

from catalog_app.engine import sql
from catalog_app.models import Catalog, Commit, ObjectVersion
from lakeui.jobs.models import Job
from tests.support.catalogs import make_catalog, make_table

pytestmark = pytest.mark.django_db

API = "/api/v1/catalogs"
TABLE = f"{API}/lake/refs/main/databases/sales/tables/orders"


def _state() -> tuple:
    return (Catalog.objects.count(), Commit.objects.count(), ObjectVersion.objects.count(), Job.objects.count())


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# (method, path, raw JSON body or None, status, code)
CORPUS = [
    ("get", f"{API}/la%00ke", None, 400, "invalid_input"),
    ("get", f"{API}/lake/refs/ma%00in/databases", None, 400, "invalid_input"),
    ("get", f"{API}/lake/refs/main/databases?at=%00", None, 400, "invalid_input"),
    ("get", f"{API}?na%00me=x", None, 400, "invalid_input"),
    ("get", f"{API}/lake/refs/main/databases?at=%ED%A0%80", None, 400, "invalid_timestamp"),
    ("post", API, json.dumps({"name": "la\x00ke"}), 400, "parse_error"),
    ("post", API, json.dumps({"name": "lake2", "description": "a\x00b"}), 400, "parse_error"),
    ("post", API, '{"name": "\\ud800"}', 400, "parse_error"),
    ("post", API, '{"name": "lake3", "description": "\\udfff"}', 400, "parse_error"),
    ("post", API, _nested(100_000), 400, "parse_error"),
    ("post", API, '{"name": "lake4", "description": ' + _nested(100) + "}", 400, "parse_error"),
    ("post", f"{TABLE}/load", json.dumps({"strategy": "append", "rows": [{"id": 1}] * 200_000}), 413,
     "payload_too_large"),
    ("post", f"{TABLE}/load", json.dumps({"strategy": "append", "rows": [{"region": "x" * 1000}] * 20_000}), 413,
     "payload_too_large"),
    ("get", f"{API}/lake/refs/main/databases?at=0000-01-01T00:00:00Z", None, 400, "invalid_timestamp"),
    ("get", f"{API}/lake/refs/main/databases?at=2024-01-01T00:00:00%2B99:00", None, 400, "invalid_timestamp"),
    ("get", f"{API}/lake/refs/main/databases?at=0001-01-01T00:00:00%2B01:00", None, 400, "invalid_timestamp"),
    ("get", f"{API}/lake/refs/main/databases?at=9999-12-31T23:59:59-01:00", None, 400, "invalid_timestamp"),
    ("get", f"{API}/lake/refs/main/databases?at=2024-02-30T00:00:00Z", None, 400, "invalid_timestamp"),
    ("get", f"{TABLE}/rows?page=99999999999999999999", None, 400, "invalid_input"),
    ("get", f"{TABLE}/rows?page=1000001&page_size=10", None, 400, "invalid_input"),
    ("get", f"{TABLE}/rows?page=" + "9" * 5000, None, 400, "invalid_input"),
    ("get", f"{API}?page=99999999999999999999", None, 404, "not_found"),
]  # fmt: skip


@pytest.fixture
def lake(user):
    catalog = make_catalog()
    make_table(catalog)
    return catalog


@pytest.mark.parametrize(("method", "path", "body", "status", "code"), CORPUS, ids=lambda v: str(v)[:60])
@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=4 * 1024 * 1024, LAKEUI_MAX_ROWS=100_000)
def test_bad_input_is_a_4xx_with_a_code(user_client, lake, method, path, body, status, code):
    before = _state()
    kwargs = {"data": body, "content_type": "application/json"} if body is not None else {}
    response = getattr(user_client, method)(path, **kwargs)
    assert response.status_code == status, response.content[:500]
    answer = response.json()
    assert answer["code"] == code
    assert answer["message"] and "java." not in answer["message"]
    assert _state() == before


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT session_user()",
        "SELECT current_user()",
        "SELECT user()",
        "SELECT SESSION_USER",
        "SELECT CURRENT_USER",
        "SELECT id FROM sales.orders WHERE region = session_user()",
        "SELECT " + "(" * 2000 + "1" + ")" * 2000,
    ],
    ids=lambda v: v[:40],
)
def test_sql_checker_refuses_user_functions_and_deep_nesting(spark, statement):
    def frame_of(reference):
        return spark.createDataFrame([(1, "eu")], "id long, region string")

    with pytest.raises(sql.SqlError) as refused:
        sql.run_select(spark, statement, sql.table_references(spark, statement), frame_of)
    assert "java." not in refused.value.message and "\tat " not in refused.value.message


def test_sql_checker_keeps_a_column_named_user(spark):
    statement = "SELECT user FROM sales.orders"
    frame = sql.run_select(
        spark,
        statement,
        sql.table_references(spark, statement),
        lambda _: spark.createDataFrame([("ann",)], "user string"),
    )
    assert [row.user for row in frame.collect()] == ["ann"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
@pytest.mark.parametrize(
    "statement",
    [
        "SELECT aes_decrypt(unhex('00112233'), '0000111122223333')",
        "SELECT xpath_string('<!DOCTYPE a [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><a>&e;</a>', 'a')",
        "SELECT assert_true(false)",
    ],
    ids=lambda v: v[7:25],
)
def test_a_query_that_throws_in_spark_is_a_400_sql_error(user_client, user, statement):
    catalog = make_catalog()
    before = _state()
    response = user_client.post(f"{API}/{catalog.name}/sql", {"statement": statement}, format="json")
    assert response.status_code == 400, response.content[:500]
    body = response.json()
    assert body["code"] in {"sql_error", "invalid_query"}  # invalid_query: Spark already throws while planning
    assert "java." not in body["message"] and "\tat " not in body["message"]
    assert _state()[:3] == before[:3]  # no catalog, commit or object changed (the read itself is a job)
