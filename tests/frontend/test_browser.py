"""The story of the browser UI in real Chromium against a live server and a real worker: sign in, create a
branch, load rows into a table on it through the form, read the diff with a red conflict cell and a green one,
merge a clean branch from the diff page, watch the job finish, and read the audit log."""

import pytest
from playwright.sync_api import expect

from catalog_app.services.refs import branch_create
from merge_app.models import Merge
from tests.frontend.conftest import screenshot
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import load, run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

JOB_TIMEOUT = 240_000  # ms: a data job on a worker whose Spark may still be starting


def rows(*ids):
    return [{"id": i, "amount": i * 10, "region": "eu"} for i in ids]


def catalog_with_a_fix_branch(user):
    """main holds ids 1 and 2; branch fix deleted id 1 and loaded id 5."""
    catalog = make_catalog(user=user)
    make_table(catalog)
    load(catalog, rows(1, 2))
    branch_create(catalog=catalog, name="fix", source="main")
    run(catalog, "table_delete", {"where": "id = 1"}, branch="fix")
    load(catalog, rows(5), branch="fix")
    return catalog


def finished_job(page) -> None:
    """On a job page: the bar polls the job every second and the page reloads itself once it is done."""
    expect(page.locator("#job-status")).to_have_text("succeeded", timeout=JOB_TIMEOUT)


def test_branch_load_diff_merge_and_audit_log_in_the_browser(page, user):
    catalog = catalog_with_a_fix_branch(user)

    # Sign in with the keyboard.
    page.goto("/catalogs/lake")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("User name").fill("alice")
    page.get_by_label("Password").fill("alice-password")
    page.get_by_label("Password").press("Enter")
    expect(page.get_by_role("heading", name="Catalog lake")).to_be_visible()

    # Create a branch from the catalog page.
    page.locator("#branch-name").fill("dev")
    page.get_by_role("button", name="Create branch").click()
    expect(page.get_by_text("Branch dev created")).to_be_visible()
    expect(page.locator("svg.branch-graph")).to_contain_text("[dev]")
    screenshot(page, "catalog-graph")

    # Load rows into the table on the branch through the form; the job page follows the job to its end.
    page.goto("/catalogs/lake/browse/sales/orders?ref=dev")
    expect(page.locator("#rows")).to_contain_text("2 rows", timeout=JOB_TIMEOUT)
    page.get_by_label("Strategy").select_option("append_only")
    page.get_by_label("Rows as JSON").fill('[{"id": 10, "amount": 100, "region": "us"}]')
    page.get_by_label("Commit message").fill("Load a US order")
    page.get_by_role("button", name="Submit load job").click()
    expect(page.get_by_role("heading", name="Job table_load")).to_be_visible()
    finished_job(page)
    expect(page.locator("pre.json")).to_contain_text("rows_inserted")
    load(catalog, rows(3))  # meanwhile, main moves on

    # The diff of the branch with a delete against main's insert: a red conflict cell and a green ok one.
    page.goto("/catalogs/lake/diff?from=fix&to=main")
    conflict = page.locator("table.rules td.applies.cell-conflict")
    ok = page.locator("table.rules td.applies.cell-ok")
    expect(conflict).to_have_count(1)
    expect(ok).to_have_count(1)
    expect(conflict).to_have_attribute(
        "title", "conflict (conflict): The source's delete cannot be replayed after the target's insert."
    )
    assert conflict.evaluate("cell => getComputedStyle(cell).backgroundColor") == "rgb(255, 216, 211)"
    assert ok.evaluate("cell => getComputedStyle(cell).backgroundColor") == "rgb(215, 245, 221)"
    expect(page.locator(".pairs")).to_contain_text("delete \N{MULTIPLICATION SIGN} insert: cell conflict, conflict")
    expect(page.get_by_role("button", name="Merge fix into main")).to_be_disabled()
    screenshot(page, "diff-conflict")
    page.get_by_label("Verdict").select_option("ok")
    page.get_by_role("button", name="Compare").click()
    expect(page.get_by_text("1 object hidden by the filters")).to_be_visible()

    # The clean branch: a dry run, then the merge, from the diff page.
    page.goto("/catalogs/lake/diff?from=dev&to=main")
    expect(page.locator("table.rules td.applies.cell-ok")).to_have_count(1)
    expect(page.locator("table.rules td.applies.cell-conflict")).to_have_count(0)
    screenshot(page, "diff-clean")
    page.get_by_role("button", name="Dry run").click()
    finished_job(page)
    expect(page.locator(".callout")).to_contain_text("Dry run dev → main: planned")
    before = head(catalog)
    page.goto("/catalogs/lake/diff?from=dev&to=main")
    page.get_by_role("button", name="Merge dev into main").click()
    finished_job(page)
    screenshot(page, "job")
    merge = Merge.objects.get(dry_run=False, status="merged")
    assert (merge.target_head, merge.commit_id) == (before, head(catalog))

    # The audit log of that merge.
    page.get_by_role("link", name="Read the audit log").click()
    expect(page.get_by_role("heading", name="Merge dev → main")).to_be_visible()
    expect(page.locator(".callout")).to_contain_text(f"Status merged: merge commit {merge.commit_id[:12]}")
    expect(page.locator("#objects-title + table")).to_contain_text("sales.orders")
    expect(page.locator("#files-title + p")).to_contain_text("1 file, 1 row")
    screenshot(page, "audit-log")

    # Main now holds the branch's row; the preview reads it on the worker.
    page.goto("/catalogs/lake/browse/sales/orders?ref=main")
    expect(page.locator("#rows")).to_contain_text("4 rows", timeout=JOB_TIMEOUT)
    expect(page.locator("#rows table")).to_contain_text("us")
    screenshot(page, "table")

    page.goto("/catalogs/lake/sql")
    page.get_by_label("Statement").fill("SELECT id, region FROM sales.orders WHERE amount > 20 ORDER BY id")
    page.get_by_role("button", name="Run").click()
    expect(page.locator("table.data tbody tr")).to_have_count(2, timeout=JOB_TIMEOUT)
    screenshot(page, "sql")

    page.goto("/catalogs/lake")
    expect(page.locator("svg.branch-graph .merge-edge")).to_have_count(1)
    screenshot(page, "catalog-graph-merged")
    for name, url in (("catalogs", "/"), ("jobs", "/jobs/"), ("merges", "/catalogs/lake/merges")):
        page.goto(url)
        screenshot(page, name)


def sign_in(page, username: str, password: str) -> None:
    page.goto("/login/")
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_label("Password").press("Enter")
    expect(page.get_by_role("heading", name="Catalogs")).to_be_visible()


def test_merge_request_story_in_the_browser(page, browser, live_server, user):
    """Open a merge request into a protected main, be refused a self-approval, approve as another user, merge."""
    from django.contrib.auth import get_user_model

    from catalog_app.services.access import catalog_role_grant, protected_branch_create
    from merge_app.models import MergeRequest
    from tests.frontend.conftest import Console

    catalog = catalog_with_a_fix_branch(user)
    get_user_model().objects.create_user("bob", password="bob-password")
    catalog_role_grant(catalog=catalog, username="bob", role="approver", granted_by=user)

    sign_in(page, "alice", "alice-password")
    page.goto("/catalogs/lake")
    page.locator("#branch-name").fill("feature")
    page.get_by_role("button", name="Create branch").click()
    expect(page.get_by_text("Branch feature created")).to_be_visible()

    page.goto("/catalogs/lake/browse/sales/orders?ref=feature")
    page.get_by_label("Strategy").select_option("append_only")
    page.get_by_label("Rows as JSON").fill('[{"id": 20, "amount": 200, "region": "us"}]')
    page.get_by_role("button", name="Submit load job").click()
    finished_job(page)
    load(catalog, rows(3))  # main moves on, then is protected: one approval needed
    protected_branch_create(catalog=catalog, pattern="main", required_approvals=1, created_by=user)

    # The diff: a red conflict cell (fix's delete against main's insert) and a green one.
    page.goto("/catalogs/lake/diff?from=fix&to=main")
    expect(page.locator("table.rules td.applies.cell-conflict")).to_have_count(1)
    expect(page.locator("table.rules td.applies.cell-ok")).to_have_count(1)

    # From the clean branch's diff to a merge request.
    page.goto("/catalogs/lake/diff?from=feature&to=main")
    expect(page.locator("table.rules td.applies.cell-ok")).to_have_count(1)
    page.get_by_role("link", name="Open a merge request").click()
    expect(page.get_by_label("Source branch (merges from)")).to_have_value("feature")
    page.get_by_label("Title").fill("US order")
    page.get_by_label("Description").fill("One order from the US.")
    page.get_by_role("button", name="Open merge request").click()
    expect(page.get_by_role("heading", name="!1 US order")).to_be_visible()
    # The page follows the plan job and reloads once it is done.
    expect(page.locator(".timeline")).to_contain_text("merge plan updated (no conflicts)", timeout=JOB_TIMEOUT)
    expect(page.locator(".expected-rows")).to_contain_text("sales.orders")
    expect(page.locator("table.rules td.applies.cell-ok")).to_have_count(1)
    merge_button = page.get_by_role("button", name="Merge !1 into main")
    expect(merge_button).to_be_disabled()
    expect(page.locator("#merge-blockers")).to_contain_text("needs 1 approval(s); the request has 0")

    # The author is not offered Approve.
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    expect(page.locator("#author-note")).to_contain_text("another user must approve it")
    expect(merge_button).to_be_disabled()
    screenshot(page, "merge-request-blocked")

    # Bob approves in his own browser session.
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    bob = context.new_page()
    bob_console = Console(bob)
    sign_in(bob, "bob", "bob-password")
    bob.goto("/catalogs/lake/merge-requests")
    bob.get_by_role("link", name="US order").click()
    bob.get_by_label("Comment").fill("Looks right")
    bob.get_by_role("button", name="Approve").click()
    expect(bob.locator(".msg-success")).to_contain_text("Approved.")
    expect(bob.locator("#merge-blockers")).to_contain_text("Ready to merge.")
    expect(bob.get_by_role("button", name="Merge !1 into main")).to_be_enabled()
    context.close()
    assert bob_console.errors == [], bob_console.errors

    # Alice merges; the job page follows the merge to its end; then the audit log.
    page.reload()
    expect(page.locator(".timeline")).to_contain_text("bob approved: “Looks right”")
    screenshot(page, "merge-request-approved")
    before = head(catalog)
    page.get_by_role("button", name="Merge !1 into main").click()
    expect(page.get_by_role("heading", name="Job branch_merge")).to_be_visible()
    finished_job(page)
    merge_request = MergeRequest.objects.get(catalog=catalog, number=1)
    assert merge_request.state == "merged" and merge_request.merge.target_head == before
    assert merge_request.merge.commit_id == head(catalog)
    page.get_by_role("link", name="Read the audit log").click()
    expect(page.get_by_role("heading", name="Merge feature → main")).to_be_visible()
    expect(page.locator(".callout")).to_contain_text("Status merged")
    page.goto("/catalogs/lake/merge-requests/1")
    expect(page.locator(".timeline")).to_contain_text("merged (merged")
    screenshot(page, "merge-request-merged")
    page.goto("/catalogs/lake/merge-requests?state=merged")
    expect(page.locator("table.grid")).to_contain_text("US order")
    screenshot(page, "merge-requests")
