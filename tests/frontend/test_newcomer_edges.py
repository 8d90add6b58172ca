"""The pages' rough edges a newcomer met on the tour (issue 52), in real Chromium against a live server and the
real worker: a diff into a protected branch offers a merge request, not a merge it would refuse; a merge request
offers "Merge when ready" and the review buttons only when they can succeed, and says why not otherwise; the merge
queue is linked from the catalog page and from its branch; and the demo's tour, whose `sales.orders` has a key,
shows the upsert's `old → new` cells with the same counts on the job, the diff and the merge request."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import expect

from catalog_app.services.access import catalog_role_grant, protected_branch_create
from catalog_app.services.refs import branch_create
from merge_app.services.merge_requests import merge_request_open, merge_request_review
from tests.frontend.conftest import Console, screenshot
from tests.frontend.test_browser import JOB_TIMEOUT, finished_job, rows, sign_in
from tests.support.catalogs import make_catalog, make_table
from tests.support.data import load

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def catalog_with_a_feature(user):
    """main holds ids 1 and 2; feature adds id 3 (a clean merge); bob is an approver."""
    catalog = make_catalog(user=user)
    make_table(catalog)
    load(catalog, rows(1, 2))
    branch_create(catalog=catalog, name="feature", source="main")
    load(catalog, rows(3), branch="feature")
    get_user_model().objects.create_user("bob", password="bob-password")
    catalog_role_grant(catalog=catalog, username="bob", role="approver", granted_by=user)
    return catalog


def test_a_diff_into_a_protected_branch_offers_a_merge_request_not_a_merge(page, user):
    catalog = catalog_with_a_feature(user)
    sign_in(page, "alice", "alice-password")

    # Unprotected, the diff page offers the merge.
    page.goto("/catalogs/lake/diff?from=feature&to=main")
    expect(page.locator("#summary-title + p")).to_contain_text("Mergeable.")
    expect(page.get_by_role("button", name="Merge feature into main")).to_be_enabled()
    expect(page.locator("#protected-target")).to_have_count(0)

    protected_branch_create(catalog=catalog, pattern="main", required_approvals=1, created_by=user)
    page.goto("/catalogs/lake/diff?from=feature&to=main")
    summary = page.locator("#summary-title + p")
    expect(summary).to_contain_text("No conflicts: main is protected, so merge through a merge request.")
    expect(summary).not_to_contain_text("Mergeable.")
    expect(page.get_by_role("button", name="Merge feature into main")).to_have_count(0)
    expect(page.get_by_role("button", name="Dry run")).to_be_enabled()  # a dry run writes nothing: still offered
    note = page.locator("#protected-target")
    expect(note).to_contain_text("main is protected (main): merge through a merge request, approved by 1 other user.")
    screenshot(page, "diff-protected-target")
    note.get_by_role("link", name="Open one for feature into main").click()
    expect(page.get_by_label("Source branch (merges from)")).to_have_value("feature")
    expect(page.get_by_label("Target branch (merges into)")).to_have_value("main")


def test_a_merge_request_offers_only_what_can_succeed_and_says_why_not(page, browser, live_server, user):
    catalog = catalog_with_a_feature(user)
    protected_branch_create(catalog=catalog, pattern="main", required_approvals=1, created_by=user)
    request = merge_request_open(catalog=catalog, source="feature", target="main", title="Order 3", author=user)
    sign_in(page, "alice", "alice-password")

    # The author, before any approval: neither "Merge when ready" (the queue would refuse it) nor a review of
    # their own request; the page says what the queue waits for.
    page.goto(f"/catalogs/lake/merge-requests/{request.number}")
    expect(page.get_by_role("button", name="Merge when ready")).to_have_count(0)
    waits = page.locator("#queue-waits")
    expect(waits).to_contain_text("is offered once the queue can take the request")
    expect(waits).to_contain_text("The target 'main' needs 1 approval(s); the request has 0.")
    expect(waits.get_by_role("link", name="merge queue of main")).to_have_attribute("href", "/catalogs/lake/queue/main")
    expect(page.get_by_role("button", name="Request changes")).to_have_count(0)
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    expect(page.locator("#author-note")).to_contain_text("another user must approve it (or request changes)")
    screenshot(page, "merge-request-unapproved")

    # Another user, an approver, is offered both reviews.
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    bob = context.new_page()
    bob_console = Console(bob)
    sign_in(bob, "bob", "bob-password")
    bob.goto(f"/catalogs/lake/merge-requests/{request.number}")
    expect(bob.get_by_role("button", name="Approve")).to_be_visible()
    expect(bob.get_by_role("button", name="Request changes")).to_be_visible()
    context.close()
    assert bob_console.errors == []

    # Approved, "Merge when ready" is offered, and it succeeds.
    merge_request_review(merge_request=request, reviewer=get_user_model().objects.get(username="bob"),
                         decision="approve")  # fmt: skip
    page.reload()
    expect(page.locator("#queue-waits")).to_have_count(0)
    page.get_by_role("button", name="Merge when ready").click()
    expect(page.get_by_text("!1 will merge into main when ready.")).to_be_visible()


def test_the_merge_queue_is_linked_from_the_catalog_page_and_its_branch(page, user):
    catalog = catalog_with_a_feature(user)
    sign_in(page, "alice", "alice-password")
    page.goto("/catalogs/lake")
    expect(page.locator("#merge-queues")).to_have_count(0)  # no branch has a queue yet
    expect(page.locator("a.queue-link")).to_have_count(0)

    protected_branch_create(catalog=catalog, pattern="main", require_queue=True, created_by=user)
    page.goto("/catalogs/lake")
    expect(page.locator("#merge-queues")).to_have_text("Merge queues: main (0 waiting).")
    main_row = page.locator("table.grid tr", has=page.get_by_role("cell", name="main default"))
    feature_row = page.locator("table.grid tr", has=page.get_by_role("cell", name="feature", exact=True))
    expect(feature_row.locator("a.queue-link")).to_have_count(0)  # no queue rule: no queue link
    main_row.get_by_role("link", name="merge queue (0)").click()
    expect(page.get_by_role("heading", name="Merge queue of main")).to_be_visible()
    page.goto("/catalogs/lake")
    page.locator("#merge-queues").get_by_role("link", name="main").click()
    expect(page.get_by_role("heading", name="Merge queue of main")).to_be_visible()


def test_the_demo_tour_upserts_by_key_and_its_pages_agree_on_the_counts(page):
    """README's tour on the demo catalog: a branch from main, the upsert by key through the table page's form, then
    the job, the diff and the merge request all count one row updated and one inserted, and the diff shows the
    updated cell as `10 → 15`."""
    call_command("lakeui_demo")
    sign_in(page, "admin", "lakeui-admin")
    page.goto("/catalogs/demo")
    expect(page.get_by_role("heading", name="New branch")).to_be_visible()  # the form below the branches
    page.locator("#branch-name").fill("fix-amounts")
    page.get_by_role("button", name="Create branch").click()
    expect(page.get_by_text("Branch fix-amounts created")).to_be_visible()

    # As the README says it: Objects, the branch typed in the Ref box, Show, then the table.
    page.get_by_role("link", name="Objects", exact=True).click()
    page.get_by_label("Ref", exact=True).fill("fix-amounts")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("heading", name="Objects at fix-amounts")).to_be_visible()
    page.get_by_role("link", name="sales.orders").click()
    page.get_by_label("Strategy").select_option("upsert")
    page.locator("#load-key_columns").fill("id")
    page.get_by_label("Rows as JSON").fill('[{"id": 1, "amount": 15, "region": "eu"}, {"id": 100, "amount": 40, '
                                           '"region": "us"}]')  # fmt: skip
    page.get_by_role("button", name="Submit load job").click()
    finished_job(page)
    result = page.locator("pre.json")
    expect(result).to_contain_text('"rows_updated": 1')
    expect(result).to_contain_text('"rows_inserted": 1')
    expect(result).to_contain_text('"rows_deleted": 0')

    page.goto("/catalogs/demo/diff?from=fix-amounts&to=main")
    orders = page.locator("section.card", has=page.get_by_role("heading", name="Table sales.orders"))
    source = orders.locator("details.changed-rows", has_text="Source fix-amounts vs base")
    expect(source.locator(".row-diff-summary")).to_contain_text("1 added, 0 deleted, 1 changed", timeout=JOB_TIMEOUT)
    expect(source.locator(".row-diff-summary")).to_contain_text("by key id")
    expect(source.locator("td.cell-changed")).to_have_text("10 → 15")
    expect(page.locator("#protected-target")).to_be_visible()  # the demo's main is protected
    page.locator("#protected-target").get_by_role("link", name="Open one for fix-amounts into main").click()
    page.get_by_label("Title").fill("Fix amounts")
    page.get_by_role("button", name="Open merge request").click()
    expect(page.locator(".timeline")).to_contain_text("merge plan updated", timeout=JOB_TIMEOUT)
    expected = page.locator(".expected-rows tr", has_text="sales.orders").locator("td")
    expect(expected).to_have_text(["sales.orders", "1", "1", "0"])  # inserted, updated, deleted
    screenshot(page, "demo-tour-merge-request")
