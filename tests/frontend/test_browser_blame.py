"""The blame in real Chromium against a live server: from the table page to its blame, a row's provenance panel
opened, its chain's merge request followed; the key's history. Checked for sideways scrolling at 768 px."""

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from catalog_app.services.refs import branch_create
from lakeui.jobs.services import job_execute
from merge_app.services.merge_requests import merge_request_merge, merge_request_review
from tests.conftest import wait_for_job
from tests.frontend.conftest import screenshot
from tests.frontend.test_blame_pages import planned_request, upsert
from tests.frontend.test_browser import sign_in
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.merges import insert

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def test_the_blame_of_a_table_in_the_browser(page, user):
    bob, _ = get_user_model().objects.get_or_create(username="bob")
    catalog = make_catalog(user=user)
    make_table(catalog, primary_key=["id"])
    insert(catalog, [{"id": 1, "amount": 10, "region": "eu"}])
    branch_create(catalog=catalog, name="dev", source="main")
    upsert(catalog, [{"id": 9, "amount": 90, "region": "a very long region name " * 4}], branch="dev")
    written = head(catalog, "dev")
    request = planned_request(catalog, "dev", user, "order 9")
    merge_request_review(merge_request=request, reviewer=bob, decision="approve")
    request.refresh_from_db()
    job = merge_request_merge(merge_request=request, user=user)
    job_execute(job_id=str(job.id), worker="test-process")
    assert wait_for_job(job.id).status == "succeeded"
    sign_in(page, "alice", "alice-password")

    page.goto("/catalogs/lake/browse/sales/orders?ref=main")
    page.get_by_role("link", name="Blame: who wrote each value").click()
    expect(page.get_by_role("heading", name="Blame of sales.orders at main")).to_be_visible()
    row = page.locator('tr.blame-row[data-key="[9]"]')
    expect(row.locator("a.blame-cell")).to_have_count(3)
    merged = head(catalog)
    tooltip = re.compile(rf"^commit {written[:12]} by no one on dev, [-0-9: ]+; then merge {merged[:12]} \(!1\)$")
    expect(row.locator("a.blame-cell").first).to_have_attribute("title", tooltip)
    panel = page.locator('tr.blame-row[data-key="[9]"] + tr.blame-chain-row details.blame-panel')
    panel.get_by_text("Provenance of id = 9").click()
    expect(panel).to_contain_text("approved by bob")
    screenshot(page, "blame")
    panel.get_by_role("link", name="!1").click()
    expect(page.get_by_role("heading", name="!1")).to_be_visible()

    page.go_back()
    page.locator('tr.blame-row[data-key="[9]"]').get_by_role("link", name="history", exact=True).click()
    expect(page.locator("tr[data-change]")).to_have_count(1)
    expect(page.locator('tr[data-change="insert"]')).to_contain_text(written[:12])
    screenshot(page, "blame-key-history")
