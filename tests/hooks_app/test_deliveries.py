"""Deliveries for real: a worker POSTs each event to a local HTTP server that checks the signature; failures and
timeouts are retried with back-off (LAKEUI_WEBHOOK_RETRY_DELAYS is 0.2 s, 0.4 s in the tests, the timeout 2 s), every
attempt is logged, a delivery can be sent again, and each kind of event is delivered where it happens."""

import hashlib
import hmac
import json
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import override_settings
from rest_framework.test import APIClient

from catalog_app.services.access import catalog_role_grant
from catalog_app.services.refs import branch_create
from catalog_app.services.tables import table_update
from hooks_app.models import Delivery
from hooks_app.services import delivery_attempt, webhook_create
from tests.conftest import wait_for_job
from tests.support.catalogs import head, make_catalog, make_table, on
from tests.support.webhooks import Receiver

SECRET = "a-secret-for-the-tests"


def verified(received) -> dict:
    """The body of a request the receiver got, once its signature is checked as docs/api.md#webhooks tells receivers."""
    expected = "sha256=" + hmac.new(SECRET.encode(), received.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(received.headers["x-lakeui-signature"], expected)
    assert received.headers["content-type"] == "application/json"
    body = json.loads(received.body)
    assert received.headers["x-lakeui-event"] == body["event"]
    return body


def settled(delivery_id, timeout: float = 30) -> Delivery:
    deadline = time.monotonic() + timeout
    while True:
        delivery = Delivery.objects.get(id=delivery_id)
        if delivery.status != Delivery.Status.PENDING or time.monotonic() > deadline:
            return delivery
        time.sleep(0.05)


@pytest.fixture
def lake(user):
    return make_catalog()


def hook(catalog, receiver, events=("*",)):
    return webhook_create(catalog=catalog, url=receiver.url, events=list(events), secret=SECRET)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_a_signed_delivery_answered_500_is_retried_then_succeeds(lake, user_client):
    with Receiver(answers=[500]) as receiver:
        hook(lake, receiver)
        created = user_client.post("/api/v1/catalogs/lake/branches", {"name": "dev", "from": "main"}, format="json")
        assert created.status_code == 201
        first, second = receiver.wait_for(2)
        delivery = settled(Delivery.objects.get().id)
    bodies = [verified(first), verified(second)]
    assert bodies[0] == bodies[1]
    assert (bodies[0]["event"], bodies[0]["catalog"], bodies[0]["actor"]) == ("branch.created", "lake", "alice")
    assert bodies[0]["data"] == {"branch": "dev", "head": head(lake, "dev")}
    assert bodies[0]["id"] == str(delivery.event_id)
    assert first.headers["x-lakeui-delivery"] == second.headers["x-lakeui-delivery"] == str(delivery.id)
    assert first.path == "/hook"
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("succeeded", 2, 200)
    assert [attempt["status"] for attempt in delivery.attempts_log] == [500, 200]
    assert delivery.attempts_log[0]["error"] == "HTTP 500" and delivery.attempts_log[1]["response"] == "answer 2: 200"
    assert all(attempt["duration_ms"] is not None for attempt in delivery.attempts_log)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_a_timeout_is_retried(lake):
    with Receiver(delays=[3]) as receiver:  # longer than the tests' 2 s timeout
        hook(lake, receiver)
        branch_create(catalog=lake, name="dev", source="main")
        delivery = settled(Delivery.objects.get().id)
        assert len(receiver.wait_for(2)) == 2
    assert (delivery.status, delivery.attempts) == ("succeeded", 2)
    assert delivery.attempts_log[0]["status"] is None and "timed out" in delivery.attempts_log[0]["error"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_a_delivery_that_keeps_failing_stops_and_can_be_redelivered(lake, user_client):
    with Receiver(answers=[500, 503, 502]) as receiver:
        webhook = hook(lake, receiver, events=["branch.created"])
        started = time.monotonic()
        branch_create(catalog=lake, name="dev", source="main")
        failed = settled(Delivery.objects.get().id)
        assert (failed.status, failed.attempts, failed.response_status) == ("failed", 3, 502)  # 1 + 2 retries
        assert time.monotonic() - started >= 0.6  # the back-off: 0.2 s, then 0.4 s
        url = f"/api/v1/catalogs/lake/webhooks/{webhook.id}/deliveries"
        assert [d["status"] for d in user_client.get(url).json()["results"]] == ["failed"]
        again = user_client.post(f"{url}/{failed.id}/redeliver")
        assert again.status_code == 202
        redelivered = settled(again.json()["id"])
        received = receiver.wait_for(4)
    assert (redelivered.status, redelivered.attempts, redelivered.redelivery_of_id) == ("succeeded", 1, failed.id)
    assert len({verified(r)["id"] for r in received}) == 1  # the same event every time
    assert received[3].headers["x-lakeui-delivery"] == str(redelivered.id) != received[0].headers["x-lakeui-delivery"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_a_change_that_rolls_back_sends_nothing(lake):
    with Receiver() as receiver:
        hook(lake, receiver)
        with pytest.raises(RuntimeError):
            _create_then_fail(lake)
        branch_create(catalog=lake, name="other", source="main")  # a committed one, sent after the first would be
        [received] = receiver.wait_for(1)
        time.sleep(0.5)
    assert verified(received)["data"]["branch"] == "other"
    assert len(receiver.received) == 1
    assert list(Delivery.objects.values_list("payload__data__branch", flat=True)) == ["other"]


def _create_then_fail(catalog) -> None:
    with transaction.atomic():
        branch_create(catalog=catalog, name="dev", source="main")
        raise RuntimeError("the change fails after its event")


@pytest.mark.django_db
def test_the_target_is_checked_again_at_delivery_time(lake):
    """A target allowed when the webhook was saved and refused now (the allow-list changed, or its name resolves
    elsewhere) gets nothing: the delivery fails at once, with the reason logged."""
    with Receiver() as receiver:
        hook(lake, receiver)
        branch_create(catalog=lake, name="dev", source="main")  # recorded; this test's transaction never commits
        delivery = Delivery.objects.get()
        with override_settings(LAKEUI_WEBHOOK_ALLOWED_HOSTS=["*"]):
            assert delivery_attempt(delivery_id=str(delivery.id)).retry_in is None
        time.sleep(0.2)
        assert receiver.received == []
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("failed", 1, None)
    assert "(loopback address)" in delivery.error


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_each_kind_of_event_is_delivered_where_it_happens(lake, user, user_client):
    api = "/api/v1/catalogs/lake"
    carol = get_user_model().objects.create_user("carol")
    catalog_role_grant(catalog=lake, username="carol", role="approver", granted_by=user)
    reviewer = APIClient()
    reviewer.force_authenticate(carol)
    make_table(lake)
    with Receiver() as receiver:
        hook(lake, receiver)
        assert user_client.post(f"{api}/branches", {"name": "dev", "from": "main"}, format="json").status_code == 201
        table_update(target=on(lake, "dev"), database="sales", name="orders", set_properties={"owner": "bob"})
        opened = user_client.post(f"{api}/merge-requests", {"source": "dev", "target": "main", "title": "Owner"},
                                  format="json")  # fmt: skip
        assert opened.status_code == 201, opened.json()
        assert (
            reviewer.post(f"{api}/merge-requests/1/reviews", {"decision": "approve"}, format="json").status_code == 201
        )
        before = head(lake)
        merged = _planned_merge(user_client, f"{api}/merge-requests/1")
        assert wait_for_job(merged["id"]).status == "succeeded"
        restored = user_client.post(f"{api}/restores", {"branch": "main", "commit": before}, format="json")
        assert wait_for_job(restored.json()["id"]).status == "succeeded"
        assert user_client.post(f"{api}/branches", {"name": "fix", "from": "main"}, format="json").status_code == 201
        table_update(target=on(lake, "fix"), database="sales", name="orders", set_properties={"owner": "eve"})
        user_client.post(f"{api}/merge-requests", {"source": "fix", "target": "main", "title": "No"}, format="json")
        assert user_client.patch(f"{api}/merge-requests/2", {"state": "closed"}, format="json").status_code == 200
        assert user_client.delete(f"{api}/branches/fix").status_code == 204
        received = receiver.wait_for(11)
        time.sleep(0.3)
    bodies = {}
    for request in receiver.received:
        body = verified(request)
        bodies.setdefault(body["event"], []).append(body)
    assert sorted((kind, len(found)) for kind, found in bodies.items()) == [
        ("branch.created", 2), ("branch.deleted", 1), ("merge.completed", 1), ("merge_request.approved", 1),
        ("merge_request.closed", 1), ("merge_request.merged", 1), ("merge_request.opened", 2),
        ("restore.completed", 1),
    ], [b["event"] for b in map(verified, received)]  # fmt: skip
    [merge] = bodies["merge.completed"]
    assert (merge["data"]["source"], merge["data"]["target"], merge["actor"]) == ("dev", "main", "alice")
    assert bodies["merge_request.merged"][0]["data"]["commit"] == merge["data"]["commit"]
    approved = bodies["merge_request.approved"][0]
    assert (approved["actor"], approved["data"]["merge_request"]["number"]) == ("carol", 1)
    [restore] = bodies["restore.completed"]
    assert (restore["data"]["branch"], restore["data"]["point"], restore["data"]["commit"]) == (
        "main",
        before,
        head(lake),
    )
    assert bodies["merge_request.closed"][0]["data"]["merge_request"]["source"] == "fix"
    assert bodies["branch.deleted"][0]["data"]["branch"] == "fix"
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}


def _planned_merge(client, url: str, timeout: float = 120) -> dict:
    """POST the merge once the request's plan is up to date (it is planned by a job after opening)."""
    deadline = time.monotonic() + timeout
    while True:
        status = client.get(url).json()["status"]
        if not status["stale"] and not status["planning"]:
            answer = client.post(f"{url}/merge")
            assert answer.status_code == 202, answer.json()
            return answer.json()
        assert time.monotonic() < deadline, status
        time.sleep(0.2)


@pytest.mark.django_db
def test_an_inactive_webhook_sends_nothing(lake, user_client):
    """Its pending deliveries fail at their next attempt without sending, and it cannot be redelivered to."""
    with Receiver() as receiver:
        webhook = hook(lake, receiver)
        branch_create(catalog=lake, name="dev", source="main")  # recorded; this test's transaction never commits
        delivery = Delivery.objects.get()
        user_client.patch(f"/api/v1/catalogs/lake/webhooks/{webhook.id}", {"active": False}, format="json")
        assert delivery_attempt(delivery_id=str(delivery.id)).retry_in is None
        again = user_client.post(f"/api/v1/catalogs/lake/webhooks/{webhook.id}/deliveries/{delivery.id}/redeliver")
        time.sleep(0.2)
        assert receiver.received == []
    assert (again.status_code, again.json()["code"]) == (409, "webhook_inactive")
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("failed", 1, None)
    assert "inactive" in delivery.error and Delivery.objects.count() == 1
