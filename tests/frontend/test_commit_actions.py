"""Revert and cherry-pick from a commit page, and the merge request's verdict, as a new user meets them (issue 41):
the branch pickers list the branches each action can act on, the actions are two forms, a pick's job page is a
result page (the new commit, its branch's log, the audit log), reverts and picks are in the audit log list under
their own titles; a failing check makes the plan's verdict "not mergeable"; an approver who approved is not
offered Approve again."""

import re

import pytest

from catalog_app.services.refs import branch_create
from checks_app.services.checks import check_create
from merge_app.services.merge_requests import merge_request_open, merge_request_review
from tests.conftest import wait_for_job
from tests.frontend.test_checks_pages import NAME, NEGATIVE, _planned, lake, post, signed_in, text
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.merges import insert

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def _form(page: str, kind: str) -> str:
    """The commit page's form whose hidden `kind` is `kind`."""
    forms = re.findall(r"<form .*?</form>", page, re.S)
    (found,) = [f for f in forms if f'name="kind" value="{kind}"' in f]
    return found


def _options(form: str) -> list[str]:
    return re.findall(r'<option value="([^"]+)"', form)


def test_revert_and_cherry_pick_from_a_commit_page(user):
    """`aaa` (alphabetically first) and main lack the commit hotfix made: the revert's picker offers hotfix only,
    the pick's main first; each action is a form of its own; their job pages name the new commit and link to it,
    to the branch's log and to the audit log, which lists them titled as what they are."""
    catalog = make_catalog(user=user)
    make_table(catalog)
    insert(catalog, [{"id": 1, "amount": 10, "region": "eu"}])
    for name in ("aaa", "hotfix"):
        branch_create(catalog=catalog, name=name, source="main")
    insert(catalog, [{"id": 2, "amount": 20, "region": "us"}], branch="hotfix")
    commit = head(catalog, "hotfix")
    alice = signed_in("alice")
    page_url = f"/catalogs/lake/commits/{commit}"
    page = text(alice.get(page_url))
    revert, pick = _form(page, "revert"), _form(page, "cherry_pick")
    assert _options(revert) == ["hotfix"] and _options(pick) == ["main", "aaa"]
    assert "cherry_pick" not in revert and "revert" not in pick.replace("revert-title", "")

    reverted = post(alice, f"{page_url}/pick", {"kind": "revert", "branch": "hotfix"}, page=page_url)
    assert reverted.status_code == 302, text(reverted)
    job = wait_for_job(reverted["Location"].rstrip("/").split("/")[-1], timeout=240)
    assert job.status == "succeeded", job.error_message
    new = head(catalog, "hotfix")
    assert new != commit
    job_page = text(alice.get(reverted["Location"]))
    assert f"<h1>Revert of {commit[:12]} on hotfix</h1>" in job_page, job_page
    assert f'New commit <a href="/catalogs/lake/commits/{new}"><code>{new[:12]}</code></a>' in job_page
    assert 'href="/catalogs/lake/log?ref=hotfix"' in job_page and "Read its log</a>" in job_page
    assert '<pre class="json">' not in job_page and "Job commit_pick" not in job_page

    picked = post(alice, f"{page_url}/pick", {"kind": "cherry_pick", "branch": "main"}, page=page_url)
    job = wait_for_job(picked["Location"].rstrip("/").split("/")[-1], timeout=240)
    assert job.status == "succeeded", job.error_message
    assert f"<h1>Cherry-pick of {commit[:12]} onto main</h1>" in text(alice.get(picked["Location"]))

    audit = text(alice.get("/catalogs/lake/merges"))
    assert f"Revert of {commit[:12]} on hotfix" in audit and f"Cherry-pick of {commit[:12]} onto main" in audit
    (row,) = [r for r in re.findall(r"<tr>.*?</tr>", audit, re.S) if "Revert of" in r]
    (revert_log,) = re.findall(r'href="(/catalogs/lake/merges/[^"]+)"', row)
    log_page = text(alice.get(revert_log))
    assert f"<h1>Revert of {commit[:12]} on hotfix</h1>" in log_page and not re.search(r"Merge [0-9a-f]{32}", log_page)


def test_a_failing_check_is_in_the_plans_verdict_and_an_approver_approves_once(user):
    catalog = lake(user)
    check_create(catalog=catalog, name=NAME, branches="main", sql=NEGATIVE, created_by=user)
    from django.contrib.auth import get_user_model

    bob = get_user_model().objects.get(username="bob")
    request = merge_request_open(catalog=catalog, source="dev", target="main", title="refunds", author=bob)
    _planned(catalog, request.number)
    page_url = f"/catalogs/lake/merge-requests/{request.number}"
    alice = signed_in("alice")
    page = text(alice.get(page_url))
    plan = page[page.index('id="plan-title"') :]
    assert "Mergeable." not in plan
    assert "No conflicts, but not mergeable: Check(s) failed on the current heads: no negative amounts." in plan
    assert 'name="decision" value="approve"' in page

    merge_request_review(merge_request=request, reviewer=user, decision="approve")
    page = text(alice.get(page_url))
    assert 'name="decision" value="approve"' not in page and 'name="decision" value="request_changes"' in page
    assert "You approved this request" in page
