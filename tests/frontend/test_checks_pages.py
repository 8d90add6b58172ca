"""The merge checks pages (frontend/views/checks.py) and the checks on a merge request's page, through Django's test
client with CSRF enforced, on the real database and the real workers (a check's statement is parsed by the
interactive worker, runs and merge plans by the jobs worker): admins add, edit, run and delete checks and a bad
statement is a message on the form; everyone else reads them; a merge request shows its failing check with the
failing rows and the blocker, and an admin merges through it with a reason the audit log keeps."""

import html
import re
import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from catalog_app.services.access import catalog_role_grant, protected_branch_create
from catalog_app.services.refs import branch_create
from checks_app.models import Check, CheckRun
from checks_app.services.checks import check_create
from lakeui.jobs.models import Job
from merge_app.models import Merge, MergeRequest
from merge_app.selectors.merge_requests import merge_request_get, merge_request_status
from merge_app.services.merge_requests import merge_request_open, merge_request_status_post
from tests.conftest import wait_for_job
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.merges import insert

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

PAGES = "/catalogs/lake/checks"
NEGATIVE = "SELECT id, amount FROM sales.orders WHERE amount < 0"
NAME = "no negative amounts"


def lake(user):
    """main holds two good rows; dev adds a negative amount; bob is an editor."""
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, [{"id": 1, "amount": 10, "region": "eu"}, {"id": 2, "amount": 20, "region": "us"}])
    branch_create(catalog=catalog, name="dev", source="main")
    insert(catalog, [{"id": 3, "amount": -5, "region": "eu"}], branch="dev")
    get_user_model().objects.create_user("bob")
    catalog_role_grant(catalog=catalog, username="bob", role="editor", granted_by=user)
    return catalog


def signed_in(username: str) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(get_user_model().objects.get(username=username))
    return client


def token(client, url) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', client.get(url).content.decode()).group(1)


def post(client, url, data, page=PAGES, **kwargs):
    return client.post(url, {**data, "csrfmiddlewaretoken": token(client, page)}, **kwargs)


def text(response) -> str:
    return html.unescape(response.content.decode())


def form(**fields) -> dict:
    return {"name": NAME, "branches": "main", "sql": NEGATIVE, "max_rows": "0", **fields}


def test_an_admin_adds_edits_runs_and_deletes_a_check(user):
    catalog = lake(user)
    alice = signed_in("alice")
    page = text(alice.get(PAGES))
    assert "No checks yet." in page and 'name="sql"' in page and 'href="/catalogs/lake/checks"' in page

    # Refusals of the service are messages on the form, which keeps what was typed; nothing is added.
    for sql, code in (
        ("SELECT * FROM sales.missing", "table_not_found"),
        ("DELETE FROM sales.orders", "invalid_query"),
    ):
        refused = post(alice, PAGES, form(sql=sql))
        assert refused.status_code == 400
        assert f"({code})" in text(refused) and sql in text(refused)
    assert post(alice, PAGES, form(max_rows="many")).status_code == 400
    assert not Check.objects.exists()

    added = post(alice, PAGES, form(sql=NEGATIVE.replace(" WHERE", "\r\nWHERE")))
    check = Check.objects.get()
    assert added.status_code == 302 and added["Location"] == f"{PAGES}/{check.id}"
    assert (check.name, check.branches, check.tables, check.max_rows, check.advisory, check.version) == (
        NAME, "main", ["sales.orders"], 0, False, 1,
    )  # fmt: skip
    assert check.sql == NEGATIVE.replace(" WHERE", "\nWHERE")  # the textarea's CRLF as one line break
    listed = text(alice.get(PAGES))
    assert f'<a href="{PAGES}/{check.id}">{NAME}</a>' in listed and "never run" in listed
    assert "sales.orders" in listed and "No checks yet." not in listed
    duplicate = post(alice, PAGES, form())
    assert duplicate.status_code == 400 and "(check_exists)" in text(duplicate)

    # Editing: the same statement re-sent with CRLF line breaks is no new version; a new bound is.
    detail = f"{PAGES}/{check.id}"
    saved = post(alice, detail, form(sql=check.sql.replace("\n", "\r\n"), advisory="on"), page=detail)
    check.refresh_from_db()
    assert saved.status_code == 302 and (check.advisory, check.version) == (True, 1)
    post(alice, detail, form(max_rows="1"), page=detail)
    check.refresh_from_db()
    assert (check.max_rows, check.advisory, check.version) == (1, False, 2)
    bad = post(alice, detail, form(sql="SELECT * FROM sales.missing", name="renamed"), page=detail)
    assert bad.status_code == 400 and "(table_not_found)" in text(bad)
    check.refresh_from_db()
    assert (check.name, check.version) == (NAME, 2)

    # Run now, on dev (one negative row, one allowed: success) and after the bound is 0 again (failure).
    ran = post(alice, f"{detail}/runs", {"ref": "dev"}, page=detail)
    job = Job.objects.get(kind="check_run")
    assert ran.status_code == 302 and ran["Location"] == f"/jobs/{job.id}"
    assert wait_for_job(job.id).status == "succeeded"
    assert CheckRun.objects.get(job=job).state == "success"
    post(alice, detail, form(), page=detail)
    ran = post(alice, f"{detail}/runs", {"ref": "dev"}, page=detail)
    job = Job.objects.get(id=ran["Location"].rsplit("/", 1)[1])
    assert wait_for_job(job.id).status == "succeeded"
    run = CheckRun.objects.get(job=job)
    assert (run.state, run.row_count, run.failing_rows, run.commit) == ("failure", 1, [[3, -5]], head(catalog, "dev"))
    runs = text(alice.get(detail))
    assert f'data-run="{run.id}" data-state="failure"' in runs and 'class="badge check-failure"' in runs
    assert "<details open><summary>Failing rows of this run</summary>" in runs  # the newest failure's, unfolded
    failing = runs[runs.index('class="grid data failing-rows"') :]
    assert re.search(r"<th scope=\"col\">id .*<th scope=\"col\">amount", failing)
    assert re.search(r"<tr><td>3</td><td>-5</td></tr>", failing)
    assert f"{NAME}: 1 row(s), at most 0 allowed." in runs
    assert "check-failure" in text(alice.get(PAGES))  # the list's last run
    unknown = post(alice, f"{detail}/runs", {"ref": "nope"}, page=detail)
    assert unknown.status_code == 400 and Job.objects.filter(kind="check_run").count() == 2

    deleted = post(alice, f"{detail}/delete", {}, page=detail)
    assert deleted.status_code == 302 and deleted["Location"] == PAGES
    assert not Check.objects.exists()
    assert CheckRun.objects.filter(id=run.id, check_rule=None).exists()  # runs outlive their check


def test_others_read_the_checks_and_cannot_change_them(user):
    catalog = lake(user)
    check = check_create(catalog=catalog, name=NAME, branches="main", sql=NEGATIVE, created_by=user)
    bob = signed_in("bob")
    detail = f"{PAGES}/{check.id}"
    nav = text(bob.get("/catalogs/lake"))
    assert re.search(r'<a href="/catalogs/lake/checks"[^>]*>Checks</a>', nav)
    listed = text(bob.get(PAGES))
    assert NAME in listed and NEGATIVE in listed and "your role is editor" in listed
    assert '<form method="post" action="/catalogs/lake/checks"' not in listed and 'name="sql"' not in listed
    page = text(bob.get(detail))
    assert NEGATIVE in page and "No runs yet" in page
    assert 'name="sql"' not in page and 'name="ref"' not in page and "/delete" not in page
    # Posts are refused for the role (with a valid CSRF token: the refusal is the role's).
    for url, data in ((PAGES, form(name="other")), (detail, form(max_rows="5")), (f"{detail}/delete", {}),
                      (f"{detail}/runs", {"ref": "main"})):  # fmt: skip
        assert post(bob, url, data).status_code == 403, url
    assert list(Check.objects.values_list("name", "max_rows")) == [(NAME, 0)]
    assert not Job.objects.filter(kind="check_run").exists()
    # Every form needs its CSRF token, an admin's too.
    assert signed_in("alice").post(PAGES, form(name="other")).status_code == 403
    assert Check.objects.count() == 1


def _planned(catalog, number: int, timeout: float = 180) -> None:
    """Wait until the request's plan (and with it its SQL checks' runs) is computed on its current heads."""
    deadline = time.monotonic() + timeout
    while True:
        status = merge_request_status(merge_request_get(catalog=catalog, number=number))
        if not status.stale and not status.planning:
            return
        assert time.monotonic() < deadline, status.blockers
        time.sleep(0.1)


def test_a_merge_request_shows_its_failing_check_and_an_admin_overrides_it(user):
    catalog = lake(user)
    check = check_create(catalog=catalog, name=NAME, branches="main", sql=NEGATIVE, created_by=user)
    bob_user = get_user_model().objects.get(username="bob")
    request = merge_request_open(catalog=catalog, source="dev", target="main", title="refunds", author=bob_user)
    # The CI system posts as a user other than the request's author (here alice's), for the head it tested.
    merge_request_status_post(merge_request=request, user=user, name="ci/build", state="pending",
                              url="https://ci.example/builds/7", description="building",
                              head=head(catalog, "dev"))  # fmt: skip
    # main needs ci/build (posted: pending) and ci/deploy (nothing posted yet); no approvals.
    protected_branch_create(catalog=catalog, pattern="main", required_approvals=0,
                            required_checks=["ci/build", "ci/deploy"], created_by=user)  # fmt: skip
    _planned(catalog, request.number)
    page_url = f"/catalogs/lake/merge-requests/{request.number}"
    alice, bob = signed_in("alice"), signed_in("bob")

    page = text(alice.get(page_url))
    checks = page[page.index('id="checks-title"') : page.index('id="plan-title"')]
    assert f'<a href="{PAGES}/{check.id}">{NAME}</a>' in checks
    assert f'data-check-name="{NAME}" data-state="failure"' in checks and 'class="badge check-failure"' in checks
    assert re.search(r"<tr><td>3</td><td>-5</td></tr>", checks)  # the failing rows, from the run
    assert "Failing rows of no negative amounts" in checks and f"{NAME}: 1 row(s), at most 0 allowed." in checks
    build = checks[checks.index('data-check-name="ci/build"') : checks.index('data-check-name="ci/deploy"')]
    assert 'data-state="pending"' in build and 'class="badge check-pending"' in build and "required" in build
    assert '<a href="https://ci.example/builds/7" rel="noopener noreferrer">details</a>' in build
    deploy = checks[checks.index('data-check-name="ci/deploy"') :]
    assert 'data-state="pending"' in deploy and "No status was posted for the source head yet." in deploy
    # The run judged the merge's result, a commit no branch points to, which its check's page links to.
    run = CheckRun.objects.get(check_rule=check, state="failure")
    assert run.commit not in (head(catalog), head(catalog, "dev"))
    assert f'href="/catalogs/lake/commits/{run.commit}"' in text(alice.get(f"{PAGES}/{check.id}"))
    assert alice.get(f"/catalogs/lake/commits/{run.commit}").status_code == 200
    blockers = page[page.index('id="merge-blockers"') :]
    assert '<li data-code="checks_failed">Check(s) failed on the current heads: no negative amounts.' in blockers
    pending = "Required check(s) have not succeeded on the source head yet: ci/build, ci/deploy."
    assert f'<li data-code="checks_pending">{pending}' in blockers
    # A pending required check cannot be overridden: the override's button waits for it.
    override = page[page.index('id="override-checks-form"') :]
    override = override[: override.index("</form>")]
    assert 'name="override_checks"' in override and re.search(r"<button type=\"submit\" disabled", override)
    waiting = post(alice, f"{page_url}/merge", {"override_checks": "not yet"}, page=page_url, follow=True)
    assert "(checks_pending)" in text(waiting) and not Job.objects.filter(kind="branch_merge").exists()
    for name in ("ci/build", "ci/deploy"):
        merge_request_status_post(merge_request=request, user=user, name=name, state="success",
                                  head=head(catalog, "dev"))  # fmt: skip
    page = text(alice.get(page_url))
    assert 'data-code="checks_pending"' not in page and 'data-code="checks_failed"' in page
    override = page[page.index('id="override-checks-form"') :]
    assert re.search(r"<button type=\"submit\" >Merge !1 through failed checks</button>", override)
    # An editor sees the blocker, not the override.
    editor_page = text(bob.get(page_url))
    assert 'data-code="checks_failed"' in editor_page and 'name="override_checks"' not in editor_page
    refused = post(bob, f"{page_url}/merge", {"override_checks": "mine"}, page=page_url, follow=True)
    assert "(role_required)" in text(refused)

    # No reason: a message, nothing queued.
    missing = post(alice, f"{page_url}/merge", {"override_checks": "  "}, page=page_url, follow=True)
    assert "An override of failed checks needs a reason" in text(missing) and "(invalid_input)" in text(missing)
    assert not Job.objects.filter(kind="branch_merge").exists()
    assert MergeRequest.objects.get(id=request.id).merge_job_id is None

    reason = "refund rows are negative on purpose"
    merged = post(alice, f"{page_url}/merge", {"override_checks": reason}, page=page_url)
    assert merged.status_code == 302 and merged["Location"].startswith("/jobs/")
    job = wait_for_job(merged["Location"].rsplit("/", 1)[1], timeout=240)
    assert job.status == "succeeded", job.error_message
    merge = Merge.objects.get(job=job)
    assert merge.log["checks_overridden"]["reason"] == reason
    assert merge.log["checks_overridden"]["by"] == "alice" and merge.log["checks_overridden"]["checks"] == [NAME]
    assert merge.commit_id == head(catalog) and MergeRequest.objects.get(id=request.id).state == "merged"


def test_a_merge_from_the_diff_page_into_a_guarded_branch_is_refused_by_its_check(user):
    """The browser's direct merge (the diff page's Merge button) runs the checks guarding the target like every
    other entry point: its job fails `checks_failed`, its page says why, and main does not move."""
    catalog = lake(user)
    check_create(catalog=catalog, name=NAME, branches="main", sql=NEGATIVE, created_by=user)
    main_before = head(catalog)
    bob = signed_in("bob")
    diff = "/catalogs/lake/diff?from=dev&to=main"
    answer = post(bob, "/catalogs/lake/merge", {"source": "dev", "target": "main"}, page=diff)
    assert answer.status_code == 302, text(answer)
    job = wait_for_job(answer.url.rsplit("/", 1)[-1])
    assert (job.status, job.error_code) == ("failed", "checks_failed"), job.error_message
    assert head(catalog) == main_before
    assert f"fails its check(s): {NAME}" in html.unescape(text(bob.get(answer.url)))
