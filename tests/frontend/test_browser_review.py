"""Review shows the data, in real Chromium against a live server and the real worker: the diff page and a merge
request for a primary-key table and a table without a key changed on both sides show the changed rows and cells
(old -> new) each side made since the base, the conflicting key with base / source / target; the commit page and
the Compare page show their rows. Every page is checked for sideways scrolling at 768 px (screenshot)."""

import pytest
from playwright.sync_api import expect

from catalog_app.services.refs import tag_create
from merge_app.services.merge_requests import merge_request_open
from tests.frontend.conftest import screenshot
from tests.frontend.test_browser import JOB_TIMEOUT, sign_in
from tests.frontend.test_review import both_sides_changed
from tests.support.catalogs import head

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def table_card(page, name: str):
    return page.locator("section.card", has=page.get_by_role("heading", name=name))


def test_review_pages_show_the_changed_rows_in_the_browser(page, user):
    catalog = both_sides_changed(user)
    tag_create(catalog=catalog, name="v1", ref="main", created_by=user)
    sign_in(page, "alice", "alice-password")

    # The diff page: below each table's rule cells, the rows each side changed since the base.
    # The page answers at once, the key comparison running on the worker; it polls the job and reloads when done.
    page.goto("/catalogs/lake/diff?from=dev&to=main")
    orders = table_card(page, "Table sales.orders")
    expect(orders.locator(".key-conflict td.conflict-cell")).to_have_text(["-1", "99"], timeout=JOB_TIMEOUT)
    source = orders.locator("details.changed-rows", has_text="Source dev vs base")
    target = orders.locator("details.changed-rows", has_text="Target main vs base")
    expect(source.locator("td.cell-changed")).to_have_text("10 → -1")
    expect(target.locator("td.cell-changed")).to_have_text("10 → 99")
    expect(orders.locator(".key-conflict td.conflict-cell")).to_have_text(["-1", "99"])  # source, target
    events = table_card(page, "Table sales.events")
    expect(
        events.locator("details.changed-rows", has_text="Target main vs base").locator("tr.diff-insert")
    ).to_contain_text("7")
    dev_events = events.locator("details.changed-rows", has_text="Source dev vs base")
    expect(dev_events.locator("tr.diff-delete")).to_contain_text("10")
    expect(dev_events.locator("tr.diff-insert")).to_contain_text("-1")
    screenshot(page, "review-diff")

    # The merge request: the same rows beside the plan's rule cells, once its plan is computed.
    merge_request_open(catalog=catalog, source="dev", target="main", title="Amounts", author=user)
    page.goto("/catalogs/lake/merge-requests/1")
    expect(page.locator(".timeline")).to_contain_text("merge plan updated", timeout=JOB_TIMEOUT)
    orders = table_card(page, "Table sales.orders")
    expect(
        orders.locator("details.changed-rows", has_text="Target main vs base").locator("td.cell-changed")
    ).to_have_text("10 → 99")
    expect(page.locator(".key-conflict").first).to_contain_text("base")
    screenshot(page, "review-merge-request")

    # The commit page of dev's head (events: id 1 set to -1), from the log.
    page.goto("/catalogs/lake/log?ref=dev")
    expect(page.locator("table.grid")).to_contain_text("table update sales.events")
    page.get_by_role("link", name=head(catalog, "dev")[:12]).click()
    expect(page.get_by_role("heading", name=f"Commit {head(catalog, 'dev')[:12]}")).to_be_visible()
    rows = page.locator("details.changed-rows .rows-box")
    expect(rows.locator("tr.diff-delete")).to_contain_text("10")
    expect(rows.locator("tr.diff-insert")).to_contain_text("-1")
    screenshot(page, "review-commit")

    # Compare a tag with a branch: both tables; the first opened, the second loaded when opened.
    page.goto("/catalogs/lake/compare?from=v1&to=dev")
    expect(page.locator("section.compare-table")).to_have_count(2)
    events = table_card(page, "Table sales.events changed")
    expect(events.locator("tr.diff-delete")).to_have_count(2)  # v1 has 7 and the old id 1; dev has -1 instead
    expect(events.locator("tr.diff-delete").first).to_be_visible()
    orders = table_card(page, "Table sales.orders changed")
    expect(orders.locator("td.cell-changed")).to_have_count(0)  # not read until opened
    orders.locator("summary").click()
    expect(orders.locator("td.cell-changed")).to_have_text("99 → -1")
    screenshot(page, "review-compare")
