"""Merge requests through the API with the real worker: plans, reviews, approvals, resolutions, protection.

Scenarios are metadata-only (table properties, new databases) except the happy path, which loads rows on the
source so the plan's expected row counts are checked against a real insert."""

import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from catalog_app.models import Commit
from catalog_app.services.access import catalog_role_grant, protected_branch_create
from catalog_app.services.databases import database_create
from catalog_app.services.refs import branch_create
from catalog_app.services.tables import table_drop, table_update
from lakeui.errors import ApplicationError
from lakeui.jobs.models import Job
from merge_app.models import Merge, MergeRequest, MergeRequestReview
from merge_app.services.merge_requests import merge_requests_follow_heads
from tests.conftest import wait_for_job
from tests.support.catalogs import head, make_catalog, make_table, on
from tests.support.merges import insert, table_at

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


@pytest.fixture
def team(user):
    """alice admin (she creates the catalogs), bob editor, carol and dave approvers; a client for each."""
    people = {"alice": user}
    for name in ("bob", "carol", "dave"):
        people[name] = get_user_model().objects.create_user(name)
    clients = {}
    for name, person in people.items():
        clients[name] = APIClient()
        clients[name].force_authenticate(person)
    return people, clients


def lake(people, *, protect="main", approvals=1):
    catalog = make_catalog()
    make_table(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    table_update(target=on(catalog, "dev"), database="sales", name="orders", set_properties={"owner": "bob"})
    for name, role in (("bob", "editor"), ("carol", "approver"), ("dave", "approver")):
        catalog_role_grant(catalog=catalog, username=name, role=role, granted_by=people["alice"])
    if protect:
        protected_branch_create(
            catalog=catalog, pattern=protect, required_approvals=approvals, created_by=people["alice"]
        )
    return catalog


def url(catalog, number=None, tail=""):
    base = f"/api/v1/catalogs/{catalog.name}/merge-requests"
    return base if number is None else f"{base}/{number}{tail}"


def open_request(client, catalog, **extra):
    response = client.post(
        url(catalog), {"source": "dev", "target": "main", "title": "Owner property", **extra}, format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()


def planned(client, catalog, number, timeout=120):
    """GET the request until its plan is up to date with both heads; before each read, what the workers' upkeep does
    every round (a read plans nothing itself), so that no test waits for the upkeep's timer."""
    deadline = time.monotonic() + timeout
    while True:
        merge_requests_follow_heads()
        body = client.get(url(catalog, number)).json()
        if body["plan"] is not None and not body["status"]["stale"] and not body["status"]["planning"]:
            return body
        assert time.monotonic() < deadline, body["status"]
        time.sleep(0.05)


def review(client, catalog, number, decision="approve", comment=""):
    return client.post(url(catalog, number, "/reviews"), {"decision": decision, "comment": comment}, format="json")


def refused(response, status, code):
    assert (response.status_code, response.json()["code"]) == (status, code), response.json()


def test_happy_path_open_plan_approve_merge(spark, team):
    people, clients = team
    catalog = lake(people)
    insert(catalog, [{"id": i, "amount": i, "region": "eu"} for i in (1, 2, 3)], branch="dev")
    before = head(catalog)

    opened = open_request(clients["bob"], catalog, description="Adds an owner")
    assert (opened["number"], opened["state"], opened["author"]) == (1, "open", "bob")
    assert opened["plan_job"]["id"]
    body = planned(clients["bob"], catalog, 1)
    [orders] = [obj for obj in body["plan"]["objects"] if obj["name"] == "sales.orders"]
    assert [op["op"] for op in orders["source_operations"]] == ["alter_properties", "insert"]
    assert body["plan"]["rows"]["sales.orders"] == {"inserted": 3, "updated": 0, "deleted": 0}
    assert (body["plan"]["mergeable"], body["plan"]["conflicts"]) == (True, [])
    assert body["plan_heads"] == {"source": head(catalog, "dev"), "target": before}
    status = body["status"]
    assert (status["protected"], status["required_approvals"], status["approved_by"]) == (True, 1, [])
    assert [b["code"] for b in status["blockers"]] == ["approvals_missing"]

    assert review(clients["carol"], catalog, 1, comment="LGTM").status_code == 201
    merged = clients["bob"].post(url(catalog, 1, "/merge"))
    assert merged.status_code == 202, merged.json()
    job = wait_for_job(merged.json()["id"])
    assert job.status == "succeeded", (job.error_code, job.error_message)

    body = clients["dave"].get(url(catalog, 1)).json()
    assert (body["state"], body["merged_by"]) == ("merged", "bob")
    assert body["merge_commit"] == head(catalog) != before
    assert body["merge_url"] == f"/api/v1/catalogs/{catalog.name}/merges/{body['merge']}"
    audit = clients["dave"].get(body["merge_url"]).json()
    assert (audit["status"], audit["commit"]) == ("merged", head(catalog))
    assert audit["log"]["merge_request"]["approved_by"] == ["carol"]
    assert (audit["log"]["resolutions"], audit["log"]["resolution_choices"]) == ([], [])
    assert Commit.objects.get(id=head(catalog)).merge_parent_id == head(catalog, "dev")
    kinds = [event["kind"] for event in body["events"]]
    assert kinds == ["opened", "plan_updated", "reviewed", "merge_started", "merged"]
    again = clients["bob"].post(url(catalog, 1, "/merge"))
    refused(again, 409, "merge_request_not_open")


def test_an_author_cannot_approve_their_own_request(team):
    people, clients = team
    catalog = lake(people)
    catalog_role_grant(catalog=catalog, username="bob", role="approver", granted_by=people["alice"])
    open_request(clients["bob"], catalog)
    refused(review(clients["bob"], catalog, 1), 403, "self_approval")
    assert not MergeRequestReview.objects.exists()
    assert review(clients["bob"], catalog, 1, "request_changes", "note to self").status_code == 201


def test_editors_cannot_review(team):
    people, clients = team
    catalog = lake(people)
    open_request(clients["carol"], catalog)
    refused(review(clients["bob"], catalog, 1), 403, "role_required")
    assert not MergeRequestReview.objects.exists()


def test_a_new_source_commit_dismisses_approvals_and_replans(team):
    people, clients = team
    catalog = lake(people)
    open_request(clients["bob"], catalog)
    planned(clients["bob"], catalog, 1)
    assert review(clients["carol"], catalog, 1).status_code == 201

    table_update(target=on(catalog, "dev"), database="sales", name="orders", set_properties={"tier": "gold"})
    body = clients["bob"].get(url(catalog, 1)).json()
    assert body["status"]["approved_by"] == []  # an approval counts only on its source head, dismissed yet or not
    assert body["status"]["stale"] is True
    merge_requests_follow_heads()  # a round of the workers' upkeep (a read writes nothing)
    body = clients["bob"].get(url(catalog, 1)).json()
    [approval] = body["reviews"]
    assert approval["dismissed_reason"] == "source_moved"
    dismissed = [e for e in body["events"] if e["kind"] == "approvals_dismissed"]
    assert dismissed[0]["details"]["reviewers"] == ["carol"]
    assert {"plan_pending", "plan_stale"} & {b["code"] for b in body["status"]["blockers"]}
    main = head(catalog)
    response = clients["bob"].post(url(catalog, 1, "/merge"))
    # Refused whether the worker has replanned by now or not (then the dismissed approval is what is missing).
    assert response.status_code in (403, 409)
    assert response.json()["code"] in ("plan_pending", "plan_stale", "approvals_missing")

    body = planned(clients["bob"], catalog, 1)
    assert body["plan_heads"]["source"] == head(catalog, "dev")
    refused(clients["bob"].post(url(catalog, 1, "/merge")), 403, "approvals_missing")
    assert head(catalog) == main
    assert not Job.objects.filter(kind="branch_merge").exists()


def writes(captured: CaptureQueriesContext) -> list[str]:
    """The statements among `captured` that write or lock rows."""
    return [
        query["sql"] for query in captured.captured_queries
        if query["sql"].lstrip().split()[0].upper() in ("INSERT", "UPDATE", "DELETE", "COPY")
        or "FOR UPDATE" in query["sql"].upper()
    ]  # fmt: skip


def test_reads_after_the_source_moved_start_nothing_and_show_the_plan_stale_until_the_upkeep_plans(team):
    """Issue 53: a GET of a request, of its checks and of its page, after its source moved, writes no row and
    starts no job; each shows the plan as made on older heads, being planned again (the checks are those of the
    current heads). A round of the workers' upkeep (`merge_requests_follow_heads`, called here as a worker calls
    it) asks for the plan of the new heads and dismisses the approval of the older source head."""
    people, clients = team
    catalog = lake(people)
    open_request(clients["bob"], catalog)
    before = planned(clients["bob"], catalog, 1)
    assert review(clients["carol"], catalog, 1).status_code == 201
    posted = clients["carol"].post(url(catalog, 1, "/checks"), {"name": "ci/build", "state": "success",
                                   "head": before["plan_heads"]["source"]}, format="json")  # fmt: skip
    assert posted.status_code == 201, posted.json()
    assert [c["name"] for c in clients["bob"].get(url(catalog, 1, "/checks")).json()] == ["ci/build"]
    browser = Client()
    browser.force_login(people["bob"])
    page_url = f"/catalogs/{catalog.name}/merge-requests/1"

    # One transaction, so that the session's workers, whose upkeep plans moved requests every round, see nothing
    # of it until the reads are checked: what is measured is what the reads themselves do.
    with transaction.atomic():
        table_update(target=on(catalog, "dev"), database="sales", name="orders", set_properties={"tier": "gold"})
        moved_to = {"source": head(catalog, "dev"), "target": head(catalog)}
        jobs = Job.objects.count()
        with CaptureQueriesContext(connection) as reads:
            detail = clients["bob"].get(url(catalog, 1))
            checks = clients["bob"].get(url(catalog, 1, "/checks"))
            page = browser.get(page_url)
        assert (detail.status_code, checks.status_code, page.status_code) == (200, 200, 200)
        assert writes(reads) == []
        assert Job.objects.count() == jobs

        body = detail.json()
        assert (body["status"]["heads"], body["plan_heads"]) == (moved_to, before["plan_heads"])
        assert (body["status"]["stale"], body["status"]["moved"], body["status"]["planning"]) == (True, True, False)
        assert body["plan_job"]["id"] == before["plan_job"]["id"]
        [stale] = [b for b in body["status"]["blockers"] if b["code"] == "plan_stale"]
        assert stale["message"] == "The branches moved since the merge plan was computed; planning again."
        assert body["status"]["approved_by"] == [] and body["reviews"][0]["dismissed_at"] is None
        assert checks.json() == []  # the status was posted for the older source head
        html = page.content.decode()
        assert "the branches moved since the merge plan; planning again" in html
        assert 'id="plan-stale"' in html and "(plan_stale)" in html

        merge_requests_follow_heads()  # a round of the workers' upkeep
        upkept = MergeRequest.objects.get(catalog=catalog, number=1)
        assert upkept.plan_job_heads == moved_to and str(upkept.plan_job_id) != before["plan_job"]["id"]
        assert Job.objects.count() == jobs + 1
        assert MergeRequestReview.objects.get().dismissed_reason == "source_moved"
        merge_requests_follow_heads()  # the plan asked for already: nothing more
        assert Job.objects.count() == jobs + 1

    body = planned(clients["bob"], catalog, 1)  # the plan job was sent when the transaction committed
    assert (body["plan_heads"], body["plan_job"]["id"]) == (moved_to, str(upkept.plan_job_id))
    assert (body["status"]["stale"], body["status"]["moved"]) == (False, False)
    html = browser.get(page_url).content.decode()
    assert "planning again" not in html and 'id="plan-stale"' not in html


def test_a_request_for_changes_stands_until_that_reviewer_approves(team):
    people, clients = team
    catalog = lake(people)
    open_request(clients["bob"], catalog)
    planned(clients["bob"], catalog, 1)
    assert review(clients["carol"], catalog, 1, "request_changes", "rename it").status_code == 201
    assert review(clients["dave"], catalog, 1).status_code == 201
    response = clients["bob"].post(url(catalog, 1, "/merge"))
    refused(response, 409, "changes_requested")
    assert [b["code"] for b in response.json()["details"]["blockers"]] == ["changes_requested"]
    assert review(clients["carol"], catalog, 1).status_code == 201
    body = clients["bob"].get(url(catalog, 1)).json()
    assert (body["status"]["approved_by"], body["status"]["mergeable"]) == (["carol", "dave"], True)


def test_unresolved_conflicts_block_the_merge_and_resolutions_settle_them_in_the_audit_log(team):
    people, clients = team
    catalog = lake(people, protect=None)
    table_drop(target=on(catalog, "main"), database="sales", name="orders")  # vs the source's alter_properties
    protected_branch_create(catalog=catalog, pattern="main", created_by=people["alice"])
    open_request(clients["bob"], catalog)
    body = planned(clients["bob"], catalog, 1)
    assert [c["name"] for c in body["plan"]["conflicts"]] == ["sales.orders"]
    assert body["status"]["unresolved_conflicts"] == ["sales.orders"]
    assert review(clients["carol"], catalog, 1).status_code == 201
    refused(clients["bob"].post(url(catalog, 1, "/merge")), 409, "unresolved_conflicts")

    bad = clients["bob"].patch(url(catalog, 1), {"resolutions": {"tables": {"orders": "mine"}}}, format="json")
    refused(bad, 400, "invalid_resolution")
    chosen = clients["bob"].patch(
        url(catalog, 1), {"resolutions": {"tables": {"sales.orders": "source_wins"}}}, format="json"
    )
    assert chosen.status_code == 200, chosen.json()
    body = chosen.json()
    assert body["resolutions"]["tables"] == {"sales.orders": "source_wins"}
    [choice] = body["resolutions"]["chosen"]
    assert (choice["table"], choice["choice"], choice["by"]) == ("sales.orders", "source_wins", "bob")
    # The approval was given for the merge as it was to be resolved before: it is dismissed, and the plan is
    # made again with the resolution.
    assert body["status"]["approved_by"] == []
    assert body["reviews"][0]["dismissed_reason"] == "resolutions_changed"
    assert body["status"]["stale"] is True
    body = planned(clients["bob"], catalog, 1)
    [conflict] = body["plan"]["conflicts"]
    assert (conflict["name"], conflict["resolved"], conflict["resolution"]) == ("sales.orders", True, "source_wins")
    assert (body["status"]["unresolved_conflicts"], body["plan"]["mergeable"]) == ([], True)
    assert review(clients["carol"], catalog, 1).status_code == 201

    main = head(catalog)
    response = clients["dave"].post(url(catalog, 1, "/merge"))  # approvers may merge too (roles include editor)
    assert response.status_code == 202, response.json()
    job = wait_for_job(response.json()["id"])
    assert job.status == "succeeded", (job.error_code, job.error_message)
    merge = Merge.objects.get(job=job)
    [applied] = merge.log["resolutions"]
    assert (applied["object"], applied["choice"], applied["chosen_by"]) == ("sales.orders", "source_wins", "bob")
    assert applied["chosen_at"] == choice["at"]
    assert merge.log["merge_request"]["approved_by"] == ["carol"]
    assert merge.log["resolution_choices"] == [choice]
    assert head(catalog) != main and MergeRequest.objects.get().state == "merged"
    assert table_at(catalog, "main").state["properties"]["owner"] == "bob"  # the source's table won


def test_direct_writes_to_a_protected_branch_are_refused(team):
    people, clients = team
    catalog = lake(people, protect="release/*")
    protected_branch_create(catalog=catalog, pattern="main", created_by=people["alice"])
    branch_create(catalog=catalog, name="release/1", source="main")
    bob, base = clients["bob"], f"/api/v1/catalogs/{catalog.name}"
    heads, jobs, commits = (head(catalog), head(catalog, "release/1")), Job.objects.count(), Commit.objects.count()
    table = f"{base}/refs/main/databases/sales/tables/orders"

    refused(bob.post(f"{base}/refs/main/databases", {"name": "blocked"}, format="json"), 403, "branch_protected")
    refused(bob.patch(table, {"set_properties": {"a": "b"}}, format="json"), 403, "branch_protected")
    refused(bob.post(f"{table}/load", {"strategy": "append_only", "rows": [{"id": 1}]}, format="json"), 403,
            "branch_protected")  # fmt: skip
    refused(bob.post(f"{table}/delete", {"where": "id = 1"}, format="json"), 403, "branch_protected")
    refused(bob.post(f"{base}/refs/release/1/databases", {"name": "blocked"}, format="json"), 403, "branch_protected")
    refused(bob.post(f"{base}/merges", {"source": "dev", "target": "main"}, format="json"), 403, "branch_protected")
    refused(bob.post(f"{base}/sql", {"statement": "MERGE BRANCH dev TO main"}, format="json"), 403, "branch_protected")
    refused(clients["alice"].delete(f"{base}/branches/release/1"), 403, "branch_protected")
    restore = {"branch": "main", "commit": heads[0]}
    refused(bob.post(f"{base}/restores", restore, format="json"), 403, "branch_protected")
    with pytest.raises(ApplicationError) as service:
        database_create(target=on(catalog, "main"), name="blocked")  # the service path, under the API
    assert (service.value.code, service.value.status) == ("branch_protected", 403)
    assert (head(catalog), head(catalog, "release/1")) == heads
    assert (Job.objects.count(), Commit.objects.count()) == (jobs, commits)

    dry = bob.post(f"{base}/merges", {"source": "dev", "target": "main", "dry_run": True}, format="json")
    assert dry.status_code == 202  # a dry run writes nothing
    assert bob.post(f"{base}/refs/dev/databases", {"name": "fine"}, format="json").status_code == 201


def test_close_reopen_edit_and_one_open_request_per_pair(team):
    people, clients = team
    catalog = lake(people)
    open_request(clients["bob"], catalog)
    refused(clients["bob"].post(url(catalog), {"source": "dev", "target": "main", "title": "again"}, format="json"),
            409, "merge_request_exists")  # fmt: skip
    refused(clients["bob"].post(url(catalog), {"source": "ghost", "target": "main", "title": "x"}, format="json"),
            404, "branch_not_found")  # fmt: skip
    closed = clients["bob"].patch(url(catalog, 1), {"state": "closed", "title": "Renamed"}, format="json")
    assert (closed.json()["state"], closed.json()["title"]) == ("closed", "Renamed")
    refused(clients["bob"].post(url(catalog, 1, "/merge")), 409, "merge_request_not_open")
    refused(review(clients["carol"], catalog, 1), 409, "merge_request_not_open")
    assert clients["bob"].get(url(catalog), {"state": "closed"}).json()["count"] == 1
    reopened = clients["bob"].patch(url(catalog, 1), {"state": "open"}, format="json")
    assert reopened.json()["state"] == "open"
    kinds = [event["kind"] for event in reopened.json()["events"] if event["kind"] != "plan_updated"]  # any time
    assert kinds == ["opened", "edited", "closed", "reopened"]
    refused(clients["carol"].get(url(catalog, 99)), 404, "merge_request_not_found")


def test_a_failed_plan_is_asked_for_again_by_the_upkeep_never_by_a_read(team):
    people, clients = team
    catalog = lake(people)
    open_request(clients["bob"], catalog)
    first = planned(clients["bob"], catalog, 1)["plan_job"]["id"]
    # As if the plan job had failed before storing its plan (a worker crash, say).
    MergeRequest.objects.update(plan=None, plan_heads=None, plan_merge=None)
    Job.objects.filter(id=first).update(status=Job.Status.FAILED, error_message="worker lost")
    failed = clients["bob"].get(url(catalog, 1)).json()
    assert (failed["plan_job"]["id"], failed["status"]["blockers"][0]["code"]) == (first, "plan_failed")
    merge_requests_follow_heads()  # failed just now: not asked for again yet
    assert str(MergeRequest.objects.get().plan_job_id) == first
    Job.objects.filter(id=first).update(finished_at=timezone.now() - timedelta(minutes=2))
    with CaptureQueriesContext(connection) as reads:
        assert clients["bob"].get(url(catalog, 1)).status_code == 200
    assert writes(reads) == []  # a read asks for nothing, however long ago the plan failed
    body = planned(clients["bob"], catalog, 1)  # the upkeep asks for it again
    assert body["plan_job"]["id"] != first
    assert body["plan_heads"] == {"source": head(catalog, "dev"), "target": head(catalog)}
    # A plan that keeps failing is asked for after as long as the heads had stood when it was asked for.
    second = body["plan_job"]["id"]
    MergeRequest.objects.update(plan=None, plan_heads=None, plan_merge=None)
    asked = timezone.now() - timedelta(minutes=5)
    Job.objects.filter(id=second).update(status=Job.Status.FAILED, created_at=asked,
                                         finished_at=timezone.now() - timedelta(minutes=4))  # fmt: skip
    Commit.objects.filter(id__in=[head(catalog), head(catalog, "dev")]).update(created_at=asked - timedelta(minutes=30))
    merge_requests_follow_heads()  # the heads had stood 30 minutes: not before 30 minutes
    assert str(MergeRequest.objects.get().plan_job_id) == second
    Job.objects.filter(id=second).update(finished_at=timezone.now() - timedelta(minutes=31))
    merge_requests_follow_heads()
    assert str(MergeRequest.objects.get().plan_job_id) != second


def test_a_plan_asked_for_earlier_never_replaces_one_asked_for_later(team):
    """Two choices saved in a row ask for two plans, which the workers run side by side: the first may finish last.
    Its plan (of the resolutions before the second choice) must not replace the second's, or the request shows a plan
    of old resolutions with no job left to plan the new ones (it waited for a plan that never came)."""
    from merge_app.job_specs import MergeRequestPlanSpec
    from merge_app.services.merge_requests import merge_request_plan_store
    from merge_app.services.merges import branch_merge

    people, clients = team
    catalog = lake(people, protect=None)
    open_request(clients["bob"], catalog)
    planned(clients["bob"], catalog, 1)
    request = MergeRequest.objects.get()
    choices = [{}, {"tables": {"sales.orders": "source_wins"}}]
    earlier, later = (
        Job.objects.create(kind=MergeRequestPlanSpec.KIND, params=MergeRequestPlanSpec(
            catalog_id=str(catalog.id), merge_request_id=request.id, resolution=choice).to_params())
        for choice in choices
    )  # fmt: skip
    made = {}
    for job, choice in ((later, choices[1]), (earlier, choices[0])):  # the later job finishes first
        made[job.id] = branch_merge(catalog=catalog, source="dev", target="main", dry_run=True, job=job,
                                    resolution=choice)  # fmt: skip
        merge_request_plan_store(merge_request_id=request.id, merge=made[job.id], resolution=choice)
    stored = MergeRequest.objects.get()
    assert (stored.plan_merge_id, stored.plan["resolution"]) == (made[later.id].id, choices[1])


def test_a_moved_branch_is_planned_again_without_a_read_and_its_key_comparison_is_stored(spark, team):
    """Issue 40: the key comparison of a request's heads is made when a head moves (the workers' upkeep plans the
    request again), not when a page first asks: after a commit on the source, nobody reads the request, and the
    plan of the new heads and its key comparison are there."""
    from merge_app.models import KeyComparison
    from tests.support.merges import change

    people, clients = team
    catalog = make_catalog()
    table = make_table(catalog, primary_key=["id"])
    rows = [{"id": i, "amount": i, "region": "eu"} for i in (1, 2, 3)]
    change(catalog, "table_load", {"strategy": "append_only", "rows": rows})
    branch_create(catalog=catalog, name="dev", source="main")
    catalog_role_grant(catalog=catalog, username="bob", role="editor", granted_by=people["alice"])
    change(catalog, "table_load", {"strategy": "upsert", "key_columns": ["id"], "rows": [{"id": 1, "amount": 10, "region": "eu"}]},
           branch="dev")  # fmt: skip
    change(
        catalog,
        "table_load",
        {"strategy": "upsert", "key_columns": ["id"], "rows": [{"id": 2, "amount": 20, "region": "eu"}]},
    )
    open_request(clients["bob"], catalog)
    planned(clients["bob"], catalog, 1)

    change(catalog, "table_load", {"strategy": "upsert", "key_columns": ["id"], "rows": [{"id": 3, "amount": 30, "region": "eu"}]},
           branch="dev")  # fmt: skip
    heads = {"source": head(catalog, "dev"), "target": head(catalog)}
    deadline = time.monotonic() + 120
    while MergeRequest.objects.get(catalog=catalog, number=1).plan_heads != heads:  # read from the table, not the API
        assert time.monotonic() < deadline, "the request was not planned again without a read"
        time.sleep(0.2)
    stored = KeyComparison.objects.filter(table_id=table.object_id, source_head=heads["source"],
                                          target_head=heads["target"])  # fmt: skip
    assert stored.exists()
    assert not stored.get().conflict_rows.exists()  # dev and main changed different keys
