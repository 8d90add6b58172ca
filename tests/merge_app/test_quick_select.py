"""A SELECT of the SQL console and an SQL check on a small table are answered without a Spark job (quick_sql over
the rows read in the process), with the answer Spark gives; a larger table, or a statement outside the subset, goes
to Spark as before."""

import pytest
from django.test import override_settings

from catalog_app.selectors.refs import ref_resolve
from checks_app.models import Check, CheckRun
from checks_app.services.checks import checks_run
from lakeui.jobs.models import Job
from tests.support.catalogs import make_catalog, make_table
from tests.support.data import load
from tests.support.sql import sql_answer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]
GROUPED = "SELECT region, count(*), sum(amount) AS total FROM sales.orders GROUP BY region ORDER BY region"


def sql(client, catalog, statement):
    return sql_answer(client, catalog, statement)  # a SELECT Spark answers: 202, its job followed


@pytest.fixture
def lake():
    catalog = make_catalog()
    make_table(catalog)
    rows = [{"id": i, "amount": None if i % 5 == 0 else i, "region": ["eu", "us", None][i % 3]} for i in range(40)]
    load(catalog, rows)
    return catalog


def test_a_console_select_on_a_small_table_needs_no_job(user_client, lake):
    jobs = Job.objects.count()
    here = sql(user_client, lake, GROUPED)
    assert here.status_code == 200, here.json()
    assert Job.objects.count() == jobs  # answered in the web process
    with override_settings(LAKEUI_QUICK_SQL_ROWS=39):  # one row short: Spark on the interactive worker
        spark = sql(user_client, lake, GROUPED)
    assert Job.objects.filter(kind="sql_select").count() == 1
    assert here.json() == spark.json()
    assert here.json()["columns"] == [
        {"name": "region", "type": "string"}, {"name": "count(1)", "type": "bigint"},
        {"name": "total", "type": "bigint"}]  # fmt: skip
    assert here.json()["rows"][0] == [None, 13, 260 - 5 - 20 - 35]  # ids 2, 5, ..., 38; amounts of 5, 20, 35 NULL
    truncated = user_client.post(f"/api/v1/catalogs/{lake.name}/sql", {"statement": "SELECT id FROM sales.orders",
                                                                       "limit": 5}, format="json").json()  # fmt: skip
    assert (len(truncated["rows"]), truncated["truncated"]) == (5, True)


def test_what_quick_sql_does_not_take_goes_to_spark_with_its_errors(user_client, lake):
    wrong = sql(user_client, lake, "SELECT region, count(*) FROM sales.orders")  # not grouped
    assert (wrong.status_code, wrong.json()["code"]) == (400, "invalid_query")
    missing = sql(user_client, lake, "SELECT id FROM sales.nope")
    assert (missing.status_code, missing.json()["code"]) == (404, "table_not_found")
    assert Job.objects.filter(kind="sql_select").count() == 2


def test_a_check_on_a_small_table_is_judged_without_spark(lake, user):
    """`checks_run` is given no Spark session: a check quick_sql answers never asks for one."""
    commit = ref_resolve(catalog=lake, ref="main").commit
    failing = Check.objects.create(catalog=lake, name="no_nulls", branches="main", max_rows=0, created_by=user,
                                   sql="SELECT id, region FROM sales.orders WHERE amount IS NULL ORDER BY id",
                                   tables=["sales.orders"])  # fmt: skip
    passing = Check.objects.create(catalog=lake, name="positive", branches="main", max_rows=0, created_by=user,
                                   sql="SELECT id FROM sales.orders WHERE amount < 0", tables=["sales.orders"])  # fmt: skip
    runs = checks_run(_no_spark, catalog=lake, checks=[failing, passing], commit=commit)
    assert [run.state for run in runs] == [CheckRun.State.FAILURE, CheckRun.State.SUCCESS]
    assert runs[0].row_count == 8 and runs[0].failing_rows[:2] == [[0, "eu"], [5, None]]
    assert runs[0].columns == [{"name": "id", "type": "bigint"}, {"name": "region", "type": "string"}]


def _no_spark():
    raise AssertionError("a check on a small table asked for Spark")
