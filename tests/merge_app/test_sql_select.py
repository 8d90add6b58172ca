"""The SQL endpoint's SELECT over a ref's tables, on a real worker and real Spark."""

import time

import pytest
from django.utils import timezone

from catalog_app.services.refs import branch_create
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import load, run
from tests.support.sql import sql_answer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def sql(client, catalog, statement, **extra):
    return sql_answer(client, catalog, statement, **extra)  # a SELECT Spark answers: 202, its job followed


@pytest.fixture
def lake():
    catalog = make_catalog()
    make_table(catalog)
    load(catalog, [{"id": 1, "amount": 10, "region": "eu"}, {"id": 2, "amount": 20, "region": "us"}])
    return catalog


def test_select_reads_the_tables_of_the_ref(user_client, lake):
    branch_create(catalog=lake, name="dev", source="main")
    load(lake, [{"id": 3, "amount": 30, "region": "eu"}], branch="dev")
    statement = "SELECT region, sum(amount) AS total FROM sales.orders GROUP BY region ORDER BY region"
    main = sql(user_client, lake, statement)
    assert main.status_code == 200, main.json()
    assert main.json()["rows"] == [["eu", 10], ["us", 20]]
    assert [c["name"] for c in main.json()["columns"]] == ["region", "total"]
    dev = sql(user_client, lake, statement, branch="dev").json()
    assert dev["rows"] == [["eu", 40], ["us", 20]]


def test_time_travel_in_sql(user_client, lake):
    before_commit = head(lake)
    time.sleep(0.05)
    moment = timezone.now().strftime("%Y-%m-%d %H:%M:%S.%f")
    time.sleep(0.05)
    run(lake, "table_delete", {"where": "id = 1"})
    now = sql(user_client, lake, "SELECT id FROM sales.orders ORDER BY id").json()["rows"]
    then = sql(user_client, lake, f"SELECT id FROM sales.orders FOR TIMESTAMP AS OF '{moment}' ORDER BY id").json()
    at_commit = sql(
        user_client, lake, f"SELECT id FROM sales.orders FOR VERSION AS OF '{before_commit}' ORDER BY id"
    ).json()
    assert now == [[2]]
    assert then["rows"] == [[1], [2]]
    assert at_commit["rows"] == [[1], [2]]


@pytest.mark.parametrize(
    ("statement", "status", "code"),
    [
        ("SELEC id FROM sales.orders", 400, "unsupported_statement"),
        ("SELECT id FROM sales.orders WHERE id >", 400, "invalid_query"),
        ("SELECT java_method('java.lang.System', 'exit', 0)", 400, "invalid_query"),
        ("SELECT * FROM parquet.`/etc/passwd`", 400, "invalid_query"),
        ("SELECT 1; DROP TABLE sales.orders", 400, "invalid_query"),
        ("DROP TABLE sales.orders", 400, "unsupported_statement"),
        ("SELECT * FROM sales.nope", 404, "table_not_found"),
    ],
)
def test_bad_statements_are_refused(user_client, lake, statement, status, code):
    response = sql(user_client, lake, statement)
    body = response.json()
    assert (response.status_code, body["code"]) == (status, code), body
    if code == "invalid_query" and "WHERE" in statement:
        assert body["details"]["position"] == len(statement)  # the parse error is at the end of the input


def test_load_from_a_query_over_the_same_ref(spark, lake):
    from pyspark.testing import assertDataFrameEqual

    from tests.support.data import read

    make_table(lake, table="eu_orders")
    run(
        lake,
        "table_load",
        {"strategy": "append_only", "query": "SELECT * FROM sales.orders WHERE region = 'eu'"},
        table="eu_orders",
    )
    assertDataFrameEqual(
        read(spark, lake, table="eu_orders"),
        spark.createDataFrame([(1, 10, "eu")], "id long, amount int, region string"),
    )
