"""Merge checks on real Spark data with the real workers (docs/merge-semantics.md#merge-checks): SQL checks judge the
merge's result before any branch points to it, block merge requests and direct merges, pass once the source is
fixed, skip a re-run whose tables did not change; external statuses gate a protected branch; an admin override is
logged with its reason."""

import time

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from rest_framework.test import APIClient

from catalog_app.models import Branch, Commit, Line
from catalog_app.selectors.refs import commit_chain, ref_resolve
from catalog_app.services.access import catalog_role_grant, protected_branch_create
from catalog_app.services.commits import commit_begin, commit_begin_detached, commit_publish
from catalog_app.services.databases import database_create
from catalog_app.services.refs import branch_create
from checks_app.models import CheckRun
from lakeui.jobs.models import Job
from merge_app.models import Merge
from tests.conftest import wait_for_job
from tests.support.catalogs import head, make_catalog, make_table, on
from tests.support.merges import change, insert
from tests.support.sql import sql_followed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

NEGATIVE = "SELECT id, amount FROM sales.orders WHERE amount < 0"


@pytest.fixture
def clients(user):
    """alice (admin: she creates the catalog), bob (editor), carol (approver)."""
    answer = {}
    for name in ("alice", "bob", "carol"):
        person = user if name == "alice" else get_user_model().objects.create_user(name)
        answer[name] = APIClient()
        answer[name].force_authenticate(person)
    return answer


def lake(user):
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, [{"id": 1, "amount": 10, "region": "eu"}, {"id": 2, "amount": 20, "region": "us"}])
    branch_create(catalog=catalog, name="dev", source="main")
    for name, role in (("bob", "editor"), ("carol", "approver")):
        catalog_role_grant(catalog=catalog, username=name, role=role, granted_by=user)
    return catalog


def add_check(client, catalog, expect=201, **body):
    """POST a check as a client sees it: a statement only Spark parses answers 202 with the job that saves it,
    followed here to the check (201) or to the job's refusal with its status."""
    body = {"name": "no negative amounts", "branches": "main", "sql": NEGATIVE, **body}
    response = client.post(f"/api/v1/catalogs/{catalog.name}/checks", body, format="json")
    status, answer = response.status_code, response.json()
    if status == 202:
        job = wait_for_job(answer["id"], timeout=240)
        if job.status == Job.Status.SUCCEEDED:
            status, answer = 201, client.get(f"/api/v1/catalogs/{catalog.name}/checks/{job.result['check']}").json()
        else:
            status, answer = job.error_status or 500, {"code": job.error_code, "message": job.error_message}
    assert status == expect, answer
    return answer


def merged_by_api(client, catalog, **body) -> Job:
    response = client.post(f"/api/v1/catalogs/{catalog.name}/merges", {"source": "dev", "target": "main", **body},
                           format="json")  # fmt: skip
    assert response.status_code == 202, response.json()
    return wait_for_job(response.json()["id"])


def test_check_statement_refused_at_creation(clients, user):
    catalog = lake(user)
    cases = [
        ("DELETE FROM sales.orders WHERE amount < 0", "invalid_query"),
        ("SELECT * FROM sales.missing", "table_not_found"),
        ("SELECT * FROM sales.orders FOR VERSION AS OF '0123456789abcdef'", "invalid_query"),
        ("SELECT reflect('java.lang.System', 'exit', 1)", "invalid_query"),
        ("SELECT * FROM orders", "invalid_query"),  # tables are named database.table
    ]
    for sql, code in cases:
        assert add_check(clients["alice"], catalog, expect=400, sql=sql)["code"] == code, sql
    # Only admins keep checks; everyone who sees the catalog reads them.
    assert add_check(clients["bob"], catalog, expect=403)["code"] == "role_required"
    created = add_check(clients["alice"], catalog)
    assert created["tables"] == ["sales.orders"] and created["version"] == 1
    assert add_check(clients["alice"], catalog, expect=409)["code"] == "check_exists"
    listed = clients["carol"].get(f"/api/v1/catalogs/{catalog.name}/checks").json()
    assert [c["name"] for c in listed["results"]] == ["no negative amounts"]
    url = f"/api/v1/catalogs/{catalog.name}/checks/{created['id']}"
    assert clients["alice"].patch(url, {"max_rows": 1}, format="json").json()["version"] == 2
    assert clients["alice"].patch(url, {"advisory": True}, format="json").json()["version"] == 2  # judges the same
    assert clients["bob"].delete(url).status_code == 403
    assert clients["alice"].delete(url).status_code == 204


def test_failing_check_refuses_a_direct_merge_until_the_source_is_fixed(clients, user):
    catalog = lake(user)
    add_check(clients["alice"], catalog)
    add_check(clients["alice"], catalog, name="few rows", sql="SELECT * FROM sales.orders", max_rows=2,
              advisory=True)  # fmt: skip
    insert(catalog, [{"id": 3, "amount": -5, "region": "eu"}], branch="dev")
    main_before = head(catalog)

    job = merged_by_api(clients["bob"], catalog)
    assert (job.status, job.error_code, job.error_status) == ("failed", "checks_failed", 409)
    assert "no negative amounts" in job.error_message and "few rows" not in job.error_message
    assert head(catalog) == main_before  # nothing published
    refused = Merge.objects.get(job=job)
    assert refused.status == Merge.Status.CHECKS_FAILED and refused.commit is None
    runs = {run["name"]: run for run in refused.log["checks"]}
    assert runs["no negative amounts"]["state"] == "failure" and runs["no negative amounts"]["row_count"] == 1
    assert runs["few rows"]["state"] == "failure" and runs["few rows"]["advisory"]  # reported, not blocking
    # The failing rows are kept with the run, read through the API.
    run_id = runs["no negative amounts"]["id"]
    detail = clients["carol"].get(f"/api/v1/catalogs/{catalog.name}/check-runs/{run_id}").json()
    assert detail["failing_rows"] == [[3, -5]] and [c["name"] for c in detail["columns"]] == ["id", "amount"]
    # The judged result is a commit no branch points to, holding the merged rows.
    result = Commit.objects.get(id=refused.log["checked_result"])
    assert not Branch.objects.filter(head=result).exists() and result.parent_id == main_before

    # SQL's MERGE BRANCH is refused the same way.
    status, answer = sql_followed(clients["bob"], catalog, "MERGE BRANCH dev TO main")
    assert (status, answer["code"]) == (409, "checks_failed"), answer
    assert head(catalog) == main_before

    change(catalog, "table_update", {"set": {"amount": "5"}, "where": "amount < 0"}, branch="dev")
    job = merged_by_api(clients["bob"], catalog)
    assert job.status == "succeeded", job.error_message
    merge = Merge.objects.get(job=job)
    assert merge.status == Merge.Status.MERGED
    # What was checked is what was published: main moved to the judged commit itself.
    assert merge.commit_id == merge.log["checked_result"] == head(catalog)
    assert merge.commit.job_id == job.id
    assert {run["name"]: run["state"] for run in merge.log["checks"]} == {
        "no negative amounts": "success", "few rows": "failure",
    }  # fmt: skip
    # The published result continues main's line, and the next commit on main extends it.
    assert Commit.objects.get(id=merge.commit_id).line_id == Commit.objects.get(id=main_before).line_id
    insert(catalog, [{"id": 9, "amount": 1, "region": "eu"}])
    after = Commit.objects.get(id=head(catalog))
    assert after.parent_id == merge.commit_id and after.line_id == Commit.objects.get(id=main_before).line_id


def test_a_rerun_skips_checks_whose_tables_did_not_change(clients, user):
    catalog = lake(user)
    add_check(clients["alice"], catalog)
    database_create(target=on(catalog, "dev"), name="other")
    make_table(catalog, branch="dev", database="other", table="notes")
    insert(catalog, [{"id": 3, "amount": 7, "region": "eu"}], branch="dev")
    dry = {"dry_run": True}
    first = Merge.objects.get(job=merged_by_api(clients["bob"], catalog, **dry))
    (run,) = first.log["checks"]
    assert run["state"] == "success" and run["reused_from"] is None
    # An unrelated head move: the target's other table changes, not the checked one.
    make_table(catalog, branch="main", database="sales", table="refunds")
    second = Merge.objects.get(job=merged_by_api(clients["bob"], catalog, **dry))
    assert second.target_head != first.target_head
    assert second.log["checks"][0]["reused_from"] == run["id"]
    # A move that changes the checked table runs it again.
    insert(catalog, [{"id": 4, "amount": 8, "region": "us"}])
    third = Merge.objects.get(job=merged_by_api(clients["bob"], catalog, **dry))
    assert third.log["checks"][0]["reused_from"] is None


def test_merge_request_shows_checks_and_waits_for_them(clients, user):
    catalog = lake(user)
    protected_branch_create(catalog=catalog, pattern="main", required_approvals=1, required_checks=["ci/build"],
                            created_by=user)  # fmt: skip
    add_check(clients["alice"], catalog)
    insert(catalog, [{"id": 3, "amount": -5, "region": "eu"}], branch="dev")
    base = f"/api/v1/catalogs/{catalog.name}/merge-requests"
    number = (
        clients["bob"].post(base, {"source": "dev", "target": "main", "title": "t"}, format="json").json()["number"]
    )
    body = _planned(clients["bob"], base, number)
    checks = {c["name"]: c for c in body["status"]["checks"]}
    assert checks["no negative amounts"]["state"] == "failure"
    codes = [b["code"] for b in body["status"]["blockers"]]
    assert "checks_failed" in codes and "checks_pending" in codes
    assert clients["carol"].post(f"{base}/{number}/reviews", {"decision": "approve"}, format="json").status_code == 201
    answer = clients["bob"].post(f"{base}/{number}/merge", format="json")
    assert (answer.status_code, answer.json()["code"]) == (409, "checks_failed")

    # The source is fixed: a head move re-runs the check on the new heads.
    change(catalog, "table_update", {"set": {"amount": "5"}, "where": "amount < 0"}, branch="dev")
    body = _planned(clients["bob"], base, number)
    assert {c["name"]: c["state"] for c in body["status"]["checks"]} == {"no negative amounts": "success"}
    assert clients["carol"].post(f"{base}/{number}/reviews", {"decision": "approve"}, format="json").status_code == 201
    answer = clients["bob"].post(f"{base}/{number}/merge", format="json")
    assert (answer.status_code, answer.json()["code"]) == (409, "checks_pending")

    # A CI system (carol's token: an approver) reports for the source head it tested: pending still blocks,
    # success lets it through. The request's author cannot post them; a status names its head.
    status_url = f"{base}/{number}/checks"
    dev = head(catalog, "dev")
    own = clients["bob"].post(status_url, {"name": "ci/build", "state": "success", "head": dev}, format="json")
    assert (own.status_code, own.json()["code"]) == (403, "role_required")  # an editor
    catalog_role_grant(catalog=catalog, username="bob", role="approver", granted_by=user)
    own = clients["bob"].post(status_url, {"name": "ci/build", "state": "success", "head": dev}, format="json")
    assert (own.status_code, own.json()["code"]) == (403, "self_status")  # the author, even as an approver
    headless = clients["carol"].post(status_url, {"name": "ci/build", "state": "success"}, format="json")
    assert (headless.status_code, headless.json()["code"]) == (400, "invalid_input")
    stale = clients["carol"].post(status_url, {"name": "ci/build", "state": "success", "head": "0" * 32},
                                  format="json")  # fmt: skip
    assert stale.json()["code"] == "branch_moved"
    posted = clients["carol"].post(status_url, {"name": "ci/build", "state": "pending", "url": "https://ci.example/1",
                                                "head": dev[:8]}, format="json")  # fmt: skip
    assert posted.status_code == 201 and posted.json()["commit"] == dev
    assert clients["bob"].post(f"{base}/{number}/merge", format="json").json()["code"] == "checks_pending"
    clients["carol"].post(status_url, {"name": "ci/build", "state": "success", "head": dev}, format="json")
    listed = {c["name"]: c["state"] for c in clients["carol"].get(status_url).json()}
    assert listed == {"no negative amounts": "success", "ci/build": "success"}
    answer = clients["bob"].post(f"{base}/{number}/merge", format="json")
    assert answer.status_code == 202, answer.json()
    job = wait_for_job(answer.json()["id"])
    assert job.status == "succeeded", job.error_message
    merged = clients["bob"].get(f"{base}/{number}").json()
    assert merged["state"] == "merged" and merged["merge_commit"] == head(catalog)


def test_admin_override_of_a_failed_check_is_logged_with_its_reason(clients, user):
    catalog = lake(user)
    add_check(clients["alice"], catalog)
    insert(catalog, [{"id": 3, "amount": -5, "region": "eu"}], branch="dev")
    body = {"override_checks": "refund rows are negative on purpose"}
    refused = clients["bob"].post(f"/api/v1/catalogs/{catalog.name}/merges",
                                  {"source": "dev", "target": "main", **body}, format="json")  # fmt: skip
    assert (refused.status_code, refused.json()["code"]) == (403, "role_required")
    job = merged_by_api(clients["alice"], catalog, **body)
    assert job.status == "succeeded", job.error_message
    merge = Merge.objects.get(job=job)
    assert merge.log["checks_overridden"] == {
        "reason": "refund rows are negative on purpose", "by": "alice", "checks": ["no negative amounts"],
    }  # fmt: skip
    assert merge.log["checks"][0]["state"] == "failure" and merge.commit_id == head(catalog)
    assert CheckRun.objects.filter(name="no negative amounts", state="failure").exists()


def test_a_judged_result_is_not_published_once_the_target_moved(clients, user):
    """The compare-and-swap that publishes a checked result: a target that moved after the checks ran keeps its
    head (the merge then plans and checks again); one that did not moves to the judged commit itself."""
    catalog = lake(user)
    insert(catalog, [{"id": 3, "amount": 7, "region": "eu"}], branch="dev")
    dev = ref_resolve(catalog=catalog, ref="dev").commit

    def judged():
        with transaction.atomic():
            draft = commit_begin_detached(catalog=catalog, parent=ref_resolve(catalog=catalog, ref="main").commit)
            return draft.commit(author=None, message="judged result", merge_parent=dev)

    stale = judged()
    insert(catalog, [{"id": 5, "amount": 1, "region": "eu"}])  # main moves after the checks ran
    moved = head(catalog)
    with transaction.atomic():
        assert commit_publish(catalog=catalog, branch="main", commit=stale) is False
    assert head(catalog) == moved
    fresh = judged()
    main_line = Commit.objects.get(id=moved).line_id
    assert fresh.line_id != main_line  # made where no branch points, on a line of its own
    with transaction.atomic():
        assert commit_publish(catalog=catalog, branch="main", commit=fresh) is True
    assert head(catalog) == fresh.id
    # Published, it continues main's line (one more line per checked merge would lengthen every read of main).
    published = Commit.objects.get(id=fresh.id)
    assert published.line_id == main_line and Line.objects.get(id=main_line).tip_seq == published.seq
    assert commit_chain(published).segments[1:] == commit_chain(Commit.objects.get(id=moved)).segments[1:]
    with transaction.atomic():
        assert commit_begin(catalog=catalog, branch="main").parent.id == fresh.id
    # A judged result something was committed on meanwhile (a branch made from it, then written) keeps its own
    # line when published; main's next commits extend that line.
    forked = judged()
    own_line = forked.line_id
    branch_create(catalog=catalog, name="from-judged", source=forked.id)
    insert(catalog, [{"id": 8, "amount": 1, "region": "eu"}], branch="from-judged")
    with transaction.atomic():
        assert commit_publish(catalog=catalog, branch="main", commit=forked) is True
    assert Commit.objects.get(id=forked.id).line_id == own_line != main_line
    assert Line.objects.get(id=own_line).branch.name == "main"
    with transaction.atomic():
        assert commit_begin(catalog=catalog, branch="main").parent.id == forked.id


def _planned(client, base, number, timeout=120):
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(f"{base}/{number}").json()
        if body["plan"] is not None and not body["status"]["stale"] and not body["status"]["planning"]:
            return body
        assert time.monotonic() < deadline, body["status"]
        time.sleep(0.2)


def test_a_run_on_a_small_table_is_judged_in_the_request_as_spark_judges_it(clients, user, settings):
    """An on-demand run that needs no Spark (a small table, a statement quick_sql answers exactly; or an earlier
    run of the same version on the same files) is judged in the request: its job is finished when the POST
    answers. One Spark must judge goes to a worker, and both judge alike."""
    catalog = lake(user)
    insert(catalog, [{"id": 3, "amount": -5, "region": "eu"}, {"id": 4, "amount": -6, "region": "us"}], branch="dev")
    here = add_check(clients["alice"], catalog, max_rows=1)
    spark = add_check(clients["alice"], catalog, name="by spark", max_rows=1,
                      sql="SELECT id, amount FROM sales.orders WHERE amount + 0 < 0")  # fmt: skip

    def run(check) -> tuple[dict, CheckRun]:
        url = f"/api/v1/catalogs/{catalog.name}/checks/{check['id']}/runs"
        response = clients["alice"].post(url, {"ref": "dev"}, format="json")
        assert response.status_code == 202, response.json()
        job = wait_for_job(response.json()["id"])
        assert job.status == "succeeded", job.error_message
        return response.json(), CheckRun.objects.get(job=job)

    answered, judged = run(here)
    assert (answered["status"], answered["progress"]) == ("succeeded", 100)  # no worker, no wait
    assert Job.objects.get(id=answered["id"]).worker == "here"
    assert answered["result"]["id"] == str(judged.id) and judged.reused_from is None
    queued, by_spark = run(spark)
    assert queued["status"] == "queued" and Job.objects.get(id=queued["id"]).worker != "here"
    assert (judged.state, judged.row_count, judged.columns, judged.failing_rows, judged.commit) == (
        by_spark.state, by_spark.row_count, by_spark.columns, by_spark.failing_rows, by_spark.commit,
    ) == ("failure", 2, [{"name": "id", "type": "bigint"}, {"name": "amount", "type": "int"}], [[3, -5], [4, -6]],
          head(catalog, "dev"))  # fmt: skip
    # The same version on the same files: the earlier run again, in the request too.
    again, reused = run(here)
    assert again["status"] == "succeeded" and reused.reused_from_id == judged.id
    # Quick SQL off (LAKEUI_QUICK_SQL_ROWS=0 in this process): a new version goes to a worker.
    settings.LAKEUI_QUICK_SQL_ROWS = 0
    clients["alice"].patch(f"/api/v1/catalogs/{catalog.name}/checks/{here['id']}", {"max_rows": 2}, format="json")
    queued, passed = run(here)
    assert queued["status"] == "queued" and (passed.state, passed.row_count) == ("success", 2)
