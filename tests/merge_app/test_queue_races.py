"""The merge queue's runner against a request taken out of the line while it works on it: each interleaving made
deterministic, with no worker in the way. The runner's steps are called here, on the entry row as the runner read
it before, and the request is taken out through the API at the point under test (during the preparation, or between
preparing and publishing). The race the end-to-end queue tests met by chance: the runner wrote back the row it had
read, which put a request taken out back in line; queueing it again then failed with a 500."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from lakeui.jobs.models import Job
from merge_app.models import Merge, MergeQueueRunner, MergeRequest, QueueEntry
from merge_app.services import queue
from merge_app.services.merges import merge_result_checked
from tests.support.catalogs import head
from tests.support.merges import insert
from tests.support.queues import branch_with_rows, entry, lake, opened, protect

pytestmark = pytest.mark.django_db(transaction=True)


def taken_out(clients, catalog, number) -> None:
    answer = clients["bob"].delete(f"/api/v1/catalogs/{catalog.name}/merge-requests/{number}/queue")
    assert answer.status_code == 200, answer.json()


def in_line(clients, user):
    """A catalog whose protected main takes merges through its queue, and an approved request in line, recorded as
    `queue_enqueue` records it but without its kick: the suite's workers would run the queue job a kick starts, and
    here the test is the runner."""
    catalog = lake(user)
    protect(catalog, user)
    branch_with_rows(catalog, "dev", "orders", 3)
    number = opened(clients, catalog, "dev")
    worked_by_the_test(catalog)
    queued_now(catalog, number)
    return catalog, number


def worked_by_the_test(catalog) -> Job:
    """The line's runner is the test: a running queue job whose heartbeat no recovery finds stale. The workers'
    upkeep, which kicks a line with an entry waiting (`queues_follow_heads`), then asks that job for another pass
    and starts none of its own that would prepare or publish the entries under test (CI met it: a worker published
    the entry a test was about to prepare again)."""
    job = Job.objects.create(kind=queue.QUEUE_JOB, status=Job.Status.RUNNING, worker="the test",
                             heartbeat_at=timezone.now() + timedelta(days=1))  # fmt: skip
    MergeQueueRunner.objects.update_or_create(catalog=catalog, target="main", defaults={"job": job})
    return job


def queued_now(catalog, number) -> QueueEntry:
    """A new entry in line for the request (the one-active-entry constraint refuses it while another is in line)."""
    request = MergeRequest.objects.get(catalog=catalog, number=number)
    return QueueEntry.objects.create(catalog=catalog, target="main", merge_request=request,
                                     enqueued_by=request.author)  # fmt: skip


def counts() -> dict[str, int]:
    return {"merged": 0, "removed": 0, "prepared": 0, "rebuilt": 0}


def test_a_request_taken_out_while_the_runner_prepares_it_stays_out(clients, user, monkeypatch):
    catalog, number = in_line(clients, user)
    stale = entry(number)  # the row as the runner read it, before preparing for seconds

    def taken_out_meanwhile(**kwargs):
        planned = merge_result_checked(**kwargs)
        taken_out(clients, catalog, number)
        return planned

    monkeypatch.setattr(queue, "merge_result_checked", taken_out_meanwhile)
    done = counts()
    assert not queue._prepare(stale, head(catalog), [], None, done)
    left = entry(number)
    assert (left.state, left.reason, done["prepared"]) == (QueueEntry.State.REMOVED, "dequeued", 0)
    assert queued_now(catalog, number).id != left.id  # in line again (was a 500: the old entry was back in line)


def test_a_request_taken_out_after_it_was_prepared_is_not_published(clients, user):
    catalog, number = in_line(clients, user)
    main = head(catalog)
    assert queue._prepare(entry(number), main, [], None, counts())
    stale = entry(number)  # prepared: the runner publishes this row next
    assert stale.state == QueueEntry.State.PREPARED
    taken_out(clients, catalog, number)
    done = counts()
    queue._publish(stale, None, done)
    assert head(catalog) == main and done["merged"] == 0  # main did not move to the prepared result
    left = entry(number)
    assert (left.state, left.reason, left.merge_id) == (QueueEntry.State.REMOVED, "dequeued", None)
    request = clients["bob"].get(f"/api/v1/catalogs/{catalog.name}/merge-requests/{number}").json()
    assert request["state"] == "open"


@pytest.mark.parametrize("approvals", [1, 0])
def test_a_push_to_the_source_after_its_result_was_checked_publishes_nothing_older(clients, user, approvals):
    """The entry's result was checked on the source head it was prepared with; a push to the source before the runner
    publishes it makes that result older than the request: nothing is published (both heads are compared under the
    commit lock, as a merge's are). The next step takes the entry out (its approvals were for the older head) or,
    where none is required, prepares it again on the new source head."""
    catalog = lake(user)
    protect(catalog, user, required_approvals=approvals)
    branch_with_rows(catalog, "dev", "orders", 3)
    number = opened(clients, catalog, "dev", approve=bool(approvals))
    worked_by_the_test(catalog)
    queued_now(catalog, number)
    main = head(catalog)
    assert queue._prepare(entry(number), main, [], None, counts())
    prepared = entry(number)
    insert(catalog, [{"id": 4, "amount": 5, "region": "eu"}], branch="dev")
    pushed = head(catalog, "dev")
    done = counts()
    queue._publish(prepared, None, done)
    assert head(catalog) == main and done["merged"] == 0  # main did not move to the older result
    assert entry(number).state == QueueEntry.State.PREPARED and entry(number).merge_id is None
    assert queue._prepared([entry(number)], main, None, done) is not bool(approvals)
    after = entry(number)
    if approvals:
        assert (after.state, after.reason) == (QueueEntry.State.REMOVED, "approvals_missing")
    else:
        assert (after.state, after.source_head, after.rebuilds) == (QueueEntry.State.PREPARED, pushed, 1)
        queue._publish(after, None, done)
        assert head(catalog) == after.result_id and done["merged"] == 1
        assert Merge.objects.get(id=entry(number).merge_id).source_head == pushed


def test_a_read_of_the_queue_starts_no_job_and_the_upkeep_wakes_it(clients, user, monkeypatch):
    """An entry waits to be prepared (its kick left out, as if a head moved since): reading the queue, through the
    API or the page, asks for no pass over it (every kick goes through `queue.queue_kick`, watched here: the suite's
    workers run the same upkeep on their own round); the upkeep finds it and starts the queue's job, once."""
    catalog, number = in_line(clients, user)
    kicks = []
    monkeypatch.setattr(queue, "queue_kick", lambda **line: kicks.append(line))
    base = f"/api/v1/catalogs/{catalog.name}"
    for path in (f"{base}/branches/main/queue", f"{base}/merge-requests/{number}/queue"):
        assert clients["bob"].get(path).status_code == 200, path
    browser = Client()
    browser.force_login(User.objects.get(username="bob"))
    assert browser.get(f"/catalogs/{catalog.name}/queue/main").status_code == 200
    assert kicks == []
    queue.queues_follow_heads()
    assert kicks == [{"catalog_id": catalog.id, "target": "main"}]
    monkeypatch.undo()
    held = MergeQueueRunner.objects.get(catalog=catalog).job
    Job.objects.filter(id=held.id).update(status=Job.Status.SUCCEEDED, finished_at=timezone.now())
    queue.queues_follow_heads()
    queue.queues_follow_heads()  # a job at work on the line is asked for another pass, not started twice
    (job,) = Job.objects.filter(kind=queue.QUEUE_JOB).exclude(id=held.id)  # ours, or a worker's upkeep's
    assert job.params["target"] == "main" and MergeQueueRunner.objects.get(catalog=catalog).job_id == job.id
