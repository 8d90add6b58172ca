"""The pages follow the reads a worker makes (issue 37: no web thread waits for a job), in real Chromium against a
live server and the real workers. The server is made unable to read the warehouse's files (as with credentials only
the workers hold), so the table page's rows and the Compare page's changed rows are read by a worker: the page
shows the job at once and reads again until the rows are there. The SQL console follows a SELECT Spark answers."""

import pytest
from playwright.sync_api import expect

from catalog_app.services.refs import branch_create
from lakeui.jobs.models import Job
from tests.frontend.test_browser import JOB_TIMEOUT, sign_in
from tests.support.catalogs import make_catalog, make_table
from tests.support.merges import change, insert

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def reads_run(kind: str) -> int:
    """How many jobs answered the page's reads of `kind`: one, however often the page read again; two when two of
    its reads came at the same instant, before either had made one (`job_for_read` allows it: they answer alike; CI
    met it once on Compare). A job per read again would be many."""
    count = Job.objects.filter(kind=kind, status="succeeded").count()
    assert 1 <= count <= 2, count
    return count


def test_pages_follow_the_reads_a_worker_makes(page, user, settings, tmp_path):
    catalog = make_catalog(user=user)
    make_table(catalog)
    insert(catalog, [{"id": 1, "amount": 10, "region": "eu"}, {"id": 2, "amount": 20, "region": "us"}])
    branch_create(catalog=catalog, name="dev", source="main")
    change(catalog, "table_update", {"set": {"amount": "-1"}, "where": "id = 1"}, branch="dev")
    settings.LAKEUI_WAREHOUSE = str(tmp_path / "elsewhere")  # the live server cannot read the files
    sign_in(page, "alice", "alice-password")

    # The table page: its rows box loads the page of rows, which a worker reads; the box reads again until done.
    page.goto("/catalogs/lake/browse/sales/orders?ref=dev")
    expect(page.locator("#rows table")).to_contain_text("-1", timeout=JOB_TIMEOUT)
    expect(page.locator("#rows")).to_contain_text("2 rows")
    expect(page.locator("#rows [data-read-again]")).to_have_count(0)
    reads_run("table_rows")

    # Compare: a table's changed rows load when it is opened, read by a worker too.
    page.goto("/catalogs/lake/compare?from=main&to=dev")
    details = page.locator("details[data-rows-url]").first
    if not details.evaluate("d => d.open"):
        details.locator("summary").click()
    expect(details.locator("tr.diff-insert")).to_contain_text("-1", timeout=JOB_TIMEOUT)  # no key: rows whole
    expect(details).to_contain_text("read by the worker")
    reads_run("table_diff")

    # The console: a SELECT Spark answers is a job; the console follows it and shows its rows.
    page.goto("/catalogs/lake/sql")
    page.locator("textarea[name=statement]").fill("SELECT id, amount * 2 AS twice FROM sales.orders ORDER BY id")
    page.get_by_role("button", name="Run").click()
    expect(page.locator("#result-title")).to_be_visible(timeout=JOB_TIMEOUT)
    expect(page.locator("table").last).to_contain_text("40")
    assert Job.objects.filter(kind="sql_select", status="succeeded").count() == 1
