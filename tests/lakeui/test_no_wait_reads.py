"""No web thread waits for a job (issue 37), the rest of it: a SELECT Spark answers (the API and the console), a
table's rows and a table's changed rows read by a worker (the API and the pages), and a check whose statement only
Spark can parse are answered at once with the job, while no worker serves the interactive queue (a request that
waited would hang until its timeout, and the job would not run). Once a real worker has run the job, the same read
(or the job) gives the answer. The web process is made unable to read the warehouse's files (as with credentials
only the workers hold), so a rows read must go to a worker; the workers read the real warehouse.
"""

import re

import pytest
from django.test import Client

from catalog_app.services.refs import branch_create
from checks_app.models import Check
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_send
from merge_app.services.sql import sql_job_result
from tests.conftest import wait_for_job
from tests.merge_app.test_no_wait import AT_ONCE, NoWorker, timed
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.merges import change, insert

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

SPARK_SELECT = "SELECT id, amount + 1 AS next FROM sales.orders ORDER BY id"  # an expression: not quick_sql's
# A join: outside quick_sql's subset, so only Spark's parser can tell which tables it reads.
JOINED = "SELECT o.id FROM sales.orders o JOIN sales.orders p ON o.id = p.id WHERE o.amount < 0"


@pytest.fixture
def lake(user):
    catalog = make_catalog(user=user)
    make_table(catalog)
    insert(catalog, [{"id": 1, "amount": 10, "region": "eu"}, {"id": 2, "amount": 20, "region": "us"}])
    return catalog


@pytest.fixture
def page_client(user):
    client = Client()
    client.force_login(user)
    return client


def unreadable_in_web(settings, tmp_path) -> None:
    """This process no longer finds the table's files (the workers, other processes, still do)."""
    settings.LAKEUI_WAREHOUSE = str(tmp_path / "not-the-warehouse")


def test_a_select_spark_answers_is_a_job_answered_at_once(lake, user_client, settings):
    queue = NoWorker(settings, "LAKEUI_INTERACTIVE_QUEUE")
    url = f"/api/v1/catalogs/{lake.name}/sql"
    response, took = timed(lambda: user_client.post(url, {"statement": SPARK_SELECT}, format="json"))
    assert response.status_code == 202 and took < AT_ONCE, (response.status_code, took)
    answer = response.json()
    assert (answer["kind"], answer["status"]) == ("sql_select", "queued")
    assert answer["sql"] == {"kind": "select", "ref": "main", "commit": head(lake)}

    job = queue.release(Job.objects.get(id=answer["id"]))
    assert job.status == "succeeded", job.error_message
    result = sql_job_result(job)
    assert (result["kind"], result["ref"], result["rows"]) == ("select", "main", [[1, 11], [2, 21]])


def test_a_query_spark_refuses_is_the_job_s_400(lake, user_client, settings):
    queue = NoWorker(settings, "LAKEUI_INTERACTIVE_QUEUE")
    url = f"/api/v1/catalogs/{lake.name}/sql"
    response = user_client.post(url, {"statement": "SELECT assert_true(false)"}, format="json")
    assert response.status_code == 202, response.json()
    job = queue.release(Job.objects.get(id=response.json()["id"]))
    assert (job.status, job.error_status, job.error_code) == ("failed", 400, "sql_error")


def test_the_console_follows_the_job_of_a_select(lake, page_client, settings):
    queue = NoWorker(settings, "LAKEUI_INTERACTIVE_QUEUE")
    page_client.get("/catalogs/lake/sql")
    token = page_client.cookies["csrftoken"].value
    form = {"statement": SPARK_SELECT, "csrfmiddlewaretoken": token}
    posted, took = timed(lambda: page_client.post("/catalogs/lake/sql", form))
    assert posted.status_code == 302 and took < AT_ONCE, (posted.status_code, took)
    job = Job.objects.get(kind="sql_select")
    assert posted.url.startswith(f"/catalogs/lake/sql?job={job.id}")
    running = page_client.get(posted.url).content.decode()
    assert "The statement runs as a job" in running and "data-reload" in running

    assert queue.release(job).status == "succeeded"
    shown = re.sub(r"\s+", " ", page_client.get(posted.url).content.decode())
    assert "The statement runs as a job" not in shown
    assert "2 rows at main" in shown and "<td>11</td>" in shown and "<td>21</td>" in shown


def test_a_rows_page_a_worker_reads_is_answered_at_once(lake, user_client, page_client, settings, tmp_path):
    unreadable_in_web(settings, tmp_path)
    queue = NoWorker(settings, "LAKEUI_INTERACTIVE_QUEUE")
    url = f"/api/v1/catalogs/{lake.name}/refs/main/databases/sales/tables/orders/rows"
    response, took = timed(lambda: user_client.get(url))
    assert response.status_code == 202 and took < AT_ONCE, (response.status_code, took)
    pending = response.json()
    assert (pending["complete"], pending["job"]["kind"], pending["job"]["status"]) == (False, "table_rows", "queued")
    assert user_client.get(url).json()["job"]["id"] == pending["job"]["id"]  # read again: the same job
    assert Job.objects.filter(kind="table_rows").count() == 1
    fragment = page_client.get("/catalogs/lake/browse/sales/orders/rows", {"ref": "main", "fragment": "1"})
    assert fragment.status_code == 200 and b"data-read-again" in fragment.content
    page_job = Job.objects.exclude(id=pending["job"]["id"]).get(kind="table_rows")  # the page's own page size

    assert queue.release(Job.objects.get(id=pending["job"]["id"])).status == "succeeded"
    job_send(str(page_job.id), page_job.kind)  # the page's job, parked on the unserved queue too
    assert wait_for_job(page_job.id, timeout=240).status == "succeeded"
    done = user_client.get(url)
    assert done.status_code == 200, done.json()
    assert (done.json()["count"], done.json()["rows"]) == (2, [[1, 10, "eu"], [2, 20, "us"]])
    shown = page_client.get("/catalogs/lake/browse/sales/orders/rows", {"ref": "main"}).content
    assert b"data-read-again" not in shown and b"<td>us</td>" in shown
    assert Job.objects.filter(kind="table_rows").count() == 2  # the finished jobs answer every later read


def test_changed_rows_a_worker_reads_are_answered_at_once(lake, user_client, page_client, settings, tmp_path):
    branch_create(catalog=lake, name="dev", source="main")
    change(lake, "table_update", {"set": {"amount": "-1"}, "where": "id = 1"}, branch="dev")
    unreadable_in_web(settings, tmp_path)
    queue = NoWorker(settings, "LAKEUI_INTERACTIVE_QUEUE")
    url = f"/api/v1/catalogs/{lake.name}/diff/rows"
    query = {"from": "main", "to": "dev", "table": "sales.orders"}
    response, took = timed(lambda: user_client.get(url, query))
    assert response.status_code == 202 and took < AT_ONCE, (response.status_code, took)
    pending = response.json()
    assert (pending["complete"], pending["job"]["kind"]) == (False, "table_diff")
    assert (pending["from"], pending["to"]) == (head(lake, "main"), head(lake, "dev"))
    page = page_client.get("/catalogs/lake/browse/sales/orders/data-diff", {"from": "main", "ref": "dev"})
    assert page.status_code == 200 and b"data-read-again" in page.content

    assert queue.release(Job.objects.get(id=pending["job"]["id"])).status == "succeeded"
    done = user_client.get(url, query)
    assert done.status_code == 200, done.json()
    assert (done.json()["counts"], done.json()["read_by"]) == ({"insert": 1, "update": 0, "delete": 1}, "worker")
    page = page_client.get("/catalogs/lake/browse/sales/orders/data-diff", {"from": "main", "ref": "dev"})
    assert b"data-read-again" not in page.content and b"1 row added" in page.content


def test_a_check_spark_parses_is_saved_by_its_job_answered_at_once(lake, user_client, settings):
    queue = NoWorker(settings, "LAKEUI_INTERACTIVE_QUEUE")
    url = f"/api/v1/catalogs/{lake.name}/checks"
    body = {"name": "joined", "branches": "main", "sql": JOINED}
    response, took = timed(lambda: user_client.post(url, body, format="json"))
    assert response.status_code == 202 and took < AT_ONCE, (response.status_code, took)
    assert (response.json()["kind"], response.json()["status"]) == ("check_statement", "queued")
    assert not Check.objects.filter(name="joined").exists()  # saved once its statement is found good

    job = queue.release(Job.objects.get(id=response.json()["id"]))
    assert job.status == "succeeded", job.error_message
    check = user_client.get(f"{url}/{job.result['check']}").json()
    assert (check["name"], check["tables"], check["version"]) == ("joined", ["sales.orders"], 1)


def test_a_check_statement_spark_refuses_saves_nothing(lake, user_client, settings):
    queue = NoWorker(settings, "LAKEUI_INTERACTIVE_QUEUE")
    url = f"/api/v1/catalogs/{lake.name}/checks"
    not_a_select = user_client.post(url, {"name": "x", "branches": "main", "sql": "DELETE FROM sales.orders"},
                                    format="json")  # fmt: skip
    assert (not_a_select.status_code, not_a_select.json()["code"]) == (400, "invalid_query")  # known at once
    missing = JOINED.replace("JOIN sales.orders", "JOIN sales.missing")
    response = user_client.post(url, {"name": "x", "branches": "main", "sql": missing}, format="json")
    assert response.status_code == 202, response.json()
    job = queue.release(Job.objects.get(id=response.json()["id"]))
    assert (job.status, job.error_code, job.error_status) == ("failed", "table_not_found", 400)
    assert not Check.objects.filter(name="x").exists()


def test_a_check_s_new_statement_spark_parses_changes_it_by_its_job(lake, user_client, settings):
    url = f"/api/v1/catalogs/{lake.name}/checks"
    made = user_client.post(url, {"name": "c", "branches": "main", "sql": "SELECT * FROM sales.orders"},
                            format="json")  # fmt: skip
    assert made.status_code == 201, made.json()  # quick_sql's subset: saved at once
    queue = NoWorker(settings, "LAKEUI_INTERACTIVE_QUEUE")
    patched = user_client.patch(f"{url}/{made.json()['id']}", {"sql": JOINED, "max_rows": 3}, format="json")
    assert patched.status_code == 202, patched.json()
    assert user_client.get(f"{url}/{made.json()['id']}").json()["version"] == 1  # unchanged until it has run
    assert queue.release(Job.objects.get(id=patched.json()["id"])).status == "succeeded"
    check = user_client.get(f"{url}/{made.json()['id']}").json()
    assert (check["sql"], check["max_rows"], check["version"]) == (JOINED, 3, 2)


def test_the_checks_form_goes_to_the_job_that_saves_a_check_spark_parses(lake, page_client, settings):
    queue = NoWorker(settings, "LAKEUI_INTERACTIVE_QUEUE")
    form = {"name": "joined", "branches": "main", "sql": JOINED, "max_rows": "0"}
    posted, took = timed(lambda: page_client.post("/catalogs/lake/checks", form))
    job = Job.objects.get(kind="check_statement")
    assert (posted.status_code, posted["Location"]) == (302, f"/jobs/{job.id}") and took < AT_ONCE
    assert not Check.objects.filter(name="joined").exists()
    assert queue.release(job).status == "succeeded"
    shown = page_client.get(f"/jobs/{job.id}").content.decode()
    check = Check.objects.get(name="joined")
    assert "Check saved (version 1)" in shown and f'href="/catalogs/lake/checks/{check.id}"' in shown
