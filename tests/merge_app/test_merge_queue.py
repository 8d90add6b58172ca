"""The merge queue on real Spark data with the real workers (docs/merge-queue.md): approved requests into a protected
`main` merge one after another, each checked on exactly the state it publishes; `main` only ever moves to a checked
result; an entry that conflicts, fails a check together with those ahead, or loses its approvals leaves the line
with its reason and nothing built on it is published; a moved source or a direct push makes results rebuild."""

import time

import pytest
from django.db import transaction

from catalog_app.models import Commit
from catalog_app.services.refs import branch_create
from checks_app.models import CheckRun
from merge_app.models import Merge, MergeRequest, MergeRequestEvent, QueueEntry
from tests.support.catalogs import head
from tests.support.merges import change, insert, merge
from tests.support.queues import branch_with_rows, entry, lake, opened, protect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

WAIT = 600  # the shared test machine is slow: a queue of three took 240 s under load


def add_check(client, catalog, **body):
    response = client.post(f"/api/v1/catalogs/{catalog.name}/checks", {"branches": "main", **body}, format="json")
    assert response.status_code == 201, response.json()


def queued(clients, catalog, number, who="bob", expect=201):
    answer = clients[who].post(f"/api/v1/catalogs/{catalog.name}/merge-requests/{number}/queue", format="json")
    assert answer.status_code == expect, answer.json()
    return answer.json()


def queue_until(client, catalog, done, timeout=WAIT):
    """Read main's queue until `done(queue)` (the workers' upkeep wakes it when a head moves)."""
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(f"/api/v1/catalogs/{catalog.name}/branches/main/queue").json()
        if done(body):
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.1)


def history(catalog, since) -> list[Commit]:
    """main's first-parent history after `since`, oldest first."""
    commits, current = [], Commit.objects.get(id=head(catalog))
    while current.id != since:
        commits.append(current)
        current = current.parent
    return commits[::-1]


def post_status(clients, catalog, number, state="success"):
    base = f"/api/v1/catalogs/{catalog.name}/merge-requests/{number}"
    source = clients["carol"].get(base).json()["source"]
    body = {"name": "ci/build", "state": state, "head": head(catalog, source)}
    assert clients["carol"].post(f"{base}/checks", body, format="json").status_code == 201


def test_three_approved_requests_merge_in_order_each_on_its_checked_result(clients, user):
    catalog = lake(user, tables=("a", "b", "c"))
    for name in ("a", "b", "c"):
        branch_with_rows(catalog, f"load-{name}", name, 3, 4)
    branch_create(catalog=catalog, name="idle", source="main")
    before = head(catalog)
    protect(catalog, user)
    add_check(clients["alice"], catalog, name="no negative amounts", sql="SELECT id FROM sales.a WHERE amount < 0")
    numbers = [opened(clients, catalog, f"load-{name}") for name in ("a", "b", "c")]

    # The queue is the only way in; an unapproved request cannot join it; only its author or an admin takes it out.
    merged = clients["bob"].post(f"/api/v1/catalogs/{catalog.name}/merge-requests/{numbers[0]}/merge", format="json")
    assert (merged.status_code, merged.json()["code"]) == (409, "queue_required")
    unapproved = opened(clients, catalog, "idle", approve=False)
    assert queued(clients, catalog, unapproved, expect=403)["code"] == "approvals_missing"
    url = f"/api/v1/catalogs/{catalog.name}/merge-requests/{numbers[0]}/queue"
    assert clients["bob"].get(url).json()["code"] == "not_queued"
    # In one transaction: the queue's job is sent when the enqueue commits, so the entry is still in line when it is
    # taken out (a worker with Spark warm merged it between the requests).
    with transaction.atomic():
        first = queued(clients, catalog, numbers[0])
        assert first["position"] == 1 and first["state"] == "queued"
        assert queued(clients, catalog, numbers[0], expect=409)["code"] == "already_queued"
        assert clients["dave"].delete(url).json()["code"] == "role_required"
        assert clients["alice"].delete(url).json()["reason"] == "dequeued"
    for number in numbers:
        queued(clients, catalog, number)
    body = queue_until(clients["bob"], catalog, lambda q: not q["entries"])
    assert [e["state"] for e in body["recent"][:3]] == ["merged"] * 3
    entries = [entry(number) for number in numbers]
    assert all(e.state == QueueEntry.State.MERGED for e in entries), [(e.reason, e.message) for e in entries]
    # main's history is exactly the three merge commits, in queue order, each the checked result it published.
    commits = history(catalog, before)
    assert [c.id for c in commits] == [e.result_id for e in entries]
    assert all(c.merge_parent_id is not None for c in commits)
    for number, e, commit in zip(numbers, entries, commits, strict=True):
        log = Merge.objects.get(commit=commit)
        assert log.status == Merge.Status.MERGED and log.target == "main" and log.source == e.merge_request.source
        assert log.log["merge_queue"]["published"] == commit.id == log.log["checked_result"]
        assert log.log["merge_queue"]["entry"] == e.id and log.log["merge_queue"]["checked_with"] == e.checked_with
        assert [run["commit"] for run in log.log["checks"]] == [commit.id]  # the check ran on what was published
        assert commit.message == f"Merge {e.merge_request.source} into main"
        request = MergeRequest.objects.get(catalog=catalog, number=number)
        assert request.state == MergeRequest.State.MERGED and request.merge_id == log.id
        kinds = list(MergeRequestEvent.objects.filter(merge_request=request).values_list("kind", flat=True))
        assert "queued" in kinds and "merged_by_queue" in kinds and kinds.index("queued") < kinds.index("merged")
    # Each entry's result holds those ahead of it: the second was checked on the first's result, and so on.
    assert [c.parent_id for c in commits] == [before, commits[0].id, commits[1].id]


def test_two_requests_passing_alone_but_not_together_the_second_leaves_with_checks_failed(clients, user):
    catalog = lake(user)
    branch_with_rows(catalog, "one", "orders", 3)
    branch_with_rows(catalog, "two", "orders", 4)
    before = head(catalog)
    protect(catalog, user, required_checks=["ci/build"])  # the first waits, prepared, until CI reports on it
    add_check(clients["alice"], catalog, name="at most 3 orders", sql="SELECT id FROM sales.orders", max_rows=3)
    first, second = opened(clients, catalog, "one"), opened(clients, catalog, "two")
    queued(clients, catalog, first)
    queue_until(clients["bob"], catalog, lambda q: q["entries"][0]["state"] == "prepared")
    queued(clients, catalog, second)

    queue_until(clients["bob"], catalog, lambda q: len(q["entries"]) == 1)
    assert entry(first).state == QueueEntry.State.PREPARED
    post_status(clients, catalog, first)
    queue_until(clients["bob"], catalog, lambda q: not q["entries"])
    assert entry(first).state == QueueEntry.State.MERGED
    out = entry(second)
    assert (out.state, out.reason) == (QueueEntry.State.REMOVED, "checks_failed")
    assert "at most 3 orders" in out.message and f"#{first}" in out.message  # judged with the first ahead of it
    assert out.details["checked_with"] == [first]
    # The combined state it was judged on: 4 rows, a result built on the first's checked result, never published.
    run = CheckRun.objects.get(commit=out.details["result"], name="at most 3 orders")
    assert (run.state, run.row_count) == ("failure", 4)
    assert Commit.objects.get(id=out.details["result"]).parent_id == entry(first).result_id
    assert [c.id for c in history(catalog, before)] == [entry(first).result_id]  # main never held both
    assert MergeRequest.objects.get(catalog=catalog, number=second).state == MergeRequest.State.OPEN
    kinds = list(MergeRequestEvent.objects.filter(merge_request__number=second).values_list("kind", flat=True))
    assert kinds[-1] == "dequeued"


def test_a_source_that_moves_loses_its_approvals_and_leaves_the_queue(clients, user):
    catalog = lake(user)
    branch_with_rows(catalog, "one", "orders", 3)
    protect(catalog, user, required_checks=["ci/build"])  # the entry waits for CI once prepared
    number = opened(clients, catalog, "one")
    queued(clients, catalog, number)
    queue_until(clients["bob"], catalog, lambda q: q["entries"][0]["state"] == "prepared")
    insert(catalog, [{"id": 9, "amount": 1, "region": "eu"}], branch="one")
    body = queue_until(clients["bob"], catalog, lambda q: not q["entries"])
    assert body["recent"][0]["reason"] == "approvals_missing"
    assert body["recent"][0]["details"]["source_head"] == head(catalog, "one")


def test_a_source_that_moves_is_prepared_again_when_no_approval_is_required(clients, user):
    catalog = lake(user)
    branch_with_rows(catalog, "one", "orders", 3)
    before = head(catalog)
    protect(catalog, user, required_checks=["ci/build"], required_approvals=0)
    number = opened(clients, catalog, "one", approve=False)
    queued(clients, catalog, number)
    queue_until(clients["bob"], catalog, lambda q: q["entries"][0]["state"] == "prepared")
    prepared = entry(number).result_id
    insert(catalog, [{"id": 9, "amount": 1, "region": "eu"}], branch="one")
    moved = head(catalog, "one")
    queue_until(clients["bob"], catalog, lambda q: q["entries"][0]["source_head"] == moved)
    post_status(clients, catalog, number)
    queue_until(clients["bob"], catalog, lambda q: not q["entries"])
    done = entry(number)
    assert done.state == QueueEntry.State.MERGED and done.rebuilds == 1 and done.result_id != prepared
    assert Merge.objects.get(id=done.merge_id).source_head == moved
    assert [c.id for c in history(catalog, before)] == [done.result_id]


def test_a_direct_push_makes_prepared_results_rebuild(clients, user):
    catalog = lake(user)
    branch_with_rows(catalog, "one", "orders", 3)
    branch_with_rows(catalog, "two", "orders", 4)
    branch_with_rows(catalog, "hotfix", "orders", 5)
    protect(catalog, user, required_checks=["ci/build"])
    add_check(clients["alice"], catalog, name="no negative amounts", sql="SELECT id FROM sales.orders WHERE amount < 0")
    first, second = opened(clients, catalog, "one"), opened(clients, catalog, "two")
    queued(clients, catalog, first)
    queued(clients, catalog, second)
    body = queue_until(clients["bob"], catalog, lambda q: [e["state"] for e in q["entries"]] == ["prepared"] * 2)
    stale = [e["result"] for e in body["entries"]]
    assert body["entries"][1]["onto"] == stale[0] and body["entries"][1]["checked_with"] == [first]

    # Something else moves main (a write that does not go through the queue).
    pushed = merge(catalog, source="hotfix", target="main", via_merge_request=0).commit_id
    for number in (first, second):
        post_status(clients, catalog, number)
    queue_until(clients["bob"], catalog, lambda q: not q["entries"])
    entries = [entry(first), entry(second)]
    assert [e.state for e in entries] == [QueueEntry.State.MERGED] * 2
    assert all(e.rebuilds >= 1 for e in entries)
    commits = history(catalog, pushed)
    assert [c.id for c in commits] == [e.result_id for e in entries]  # the rebuilt results, on the push
    assert not set(stale) & {c.id for c in commits}  # the results built before the push were never published
    assert Merge.objects.get(id=entries[0].merge_id).target_head == pushed


def test_a_conflict_between_two_queued_requests_takes_the_second_out(clients, user):
    catalog = lake(user)
    for name, row in (("one", 1), ("two", 2)):  # updates of one segment on both sides: a conflict (rule A3)
        branch_create(catalog=catalog, name=name, source="main")
        change(catalog, "table_update", {"set": {"amount": "7"}, "where": f"id = {row}"}, branch=name)
    before = head(catalog)
    protect(catalog, user)
    first, second = opened(clients, catalog, "one"), opened(clients, catalog, "two")
    queued(clients, catalog, first)
    queued(clients, catalog, second)
    body = queue_until(clients["bob"], catalog, lambda q: not q["entries"])
    out = next(e for e in body["recent"] if e["merge_request"]["number"] == second)
    assert (out["state"], out["reason"]) == ("removed", "merge_conflict")
    [conflict] = out["details"]["conflicts"]  # as a refused merge shows it: the table, its conflicting pairs
    assert (conflict["kind"], conflict["name"]) == ("table", "sales.orders") and conflict["conflicts"]
    assert entry(first).state == QueueEntry.State.MERGED
    assert [c.id for c in history(catalog, before)] == [entry(first).result_id]
