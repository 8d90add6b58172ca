"""Cell picks in real Chromium against a live server and the real worker: a reviewer settles three conflicting cells
of a primary-key table on the merge request page by clicking a value and typing one, the page shows the merged
cells the new plan computes, and the merge writes exactly those values (docs/merge-semantics.md#cell-picks)."""

import pytest
from playwright.sync_api import expect

from lakeui.jobs.models import Job
from merge_app.models import MergeRequest
from merge_app.services.merge_requests import merge_request_open
from tests.conftest import wait_for_job
from tests.frontend.conftest import screenshot
from tests.frontend.test_browser import JOB_TIMEOUT, sign_in
from tests.merge_app.test_column_rules import TABLE, TARGET, both_changed_catalog, row, rows_at, typed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def cell(page, key_id: str, column: str):
    return page.get_by_role("table", name=f"Cells of key {key_id}").locator(f'tr[data-column="{column}"]')


def test_a_reviewer_clicks_and_types_three_cells_and_the_merge_carries_them(spark, page, user):
    catalog = both_changed_catalog(spark)  # dev and main both changed every value cell of keys 1-3; key 4 deleted
    opened = merge_request_open(catalog=catalog, source="dev", target="main", title="Orders", author=user)
    sign_in(page, "alice", "alice-password")
    page.goto(f"/catalogs/{catalog.name}/merge-requests/{opened.number}")
    expect(page.locator(".timeline")).to_contain_text("merge plan updated", timeout=JOB_TIMEOUT)
    expect(cell(page, "[1]", "status").locator("td.merged")).to_have_text("stands")

    # The table's other conflicts by the target's values; three cells by hand: a click on the source's status of
    # key 1, a click on the base's amount of key 3, a note typed for key 2.
    page.locator(f'select[name="table:{TABLE}"]').select_option("target_wins")
    cell(page, "[1]", "status").locator('input[value="source"]').check()
    cell(page, "[3]", "amount").locator('input[value="base"]').check()
    cell(page, "[2]", "note").get_by_role("textbox").fill("typed in the browser")
    page.get_by_role("button", name="Save resolutions").click()
    expect(page.locator(".msg-success")).to_contain_text("Resolutions saved")

    # The page reloads when the new plan is made: the merged cells are the picks.
    expect(cell(page, "[1]", "status").locator("td.merged")).to_have_text('"shipped" (pick)', timeout=JOB_TIMEOUT)
    expect(cell(page, "[3]", "amount").locator("td.merged")).to_have_text("300 (pick)")
    expect(cell(page, "[2]", "note").locator("td.merged")).to_have_text('"typed in the browser" (pick)')
    expect(cell(page, "[1]", "amount").locator("td.merged")).to_have_text("107 (target_wins)")
    expect(cell(page, "[1]", "status").locator('input[value="source"]')).to_be_checked()
    expect(cell(page, "[2]", "note").get_by_role("textbox")).to_have_value("typed in the browser")
    expect(page.locator(".timeline")).to_contain_text(f"{TABLE} key [1] cell status: source")
    expect(page.locator(".timeline")).to_contain_text(f'{TABLE} key [2] cell note: "typed in the browser"')
    screenshot(page, "review-cell-picks")

    page.get_by_role("button", name=f"Merge !{opened.number} into main").click()
    page.wait_for_url("**/jobs/*")  # the merge job's page
    merged = MergeRequest.objects.get(id=opened.id)
    assert wait_for_job(merged.merge_job_id).status == Job.Status.SUCCEEDED
    merged.refresh_from_db()
    # The merge's commit page shows the cells it settled, each pick with who made it.
    page.goto(f"/catalogs/{catalog.name}/commits/{merged.merge.commit_id}")
    picked = page.locator("table.settled-cells tr", has_text="pick")
    expect(picked).to_have_count(3)
    expect(picked.filter(has_text="note")).to_contain_text('"typed in the browser"')
    expect(picked.filter(has_text="status")).to_contain_text("alice")
    assert rows_at(spark, catalog, "main") == {
        1: typed({**TARGET[1], "status": "shipped"}),
        2: typed({**row(2, "held", 207, "20.50", "01-10", "typed in the browser", 18, region="sx")}),
        3: typed({**TARGET[3], "amount": 300}),
        4: typed(TARGET[4]),
    }
