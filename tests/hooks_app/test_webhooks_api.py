"""The webhook API: admins add, read, change and delete a catalog's webhooks and read their deliveries; nobody else
may, reads included; the secret is write-only; a target on a refused address is refused when it is saved."""

import uuid

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from catalog_app.services.access import catalog_role_grant
from catalog_app.services.refs import branch_create
from hooks_app.models import Delivery, Webhook
from tests.support.catalogs import make_catalog

pytestmark = pytest.mark.django_db

URL = "http://127.0.0.1:9/hook"  # loopback is listed for the tests (lakeui/settings/test.py); nothing listens there
SECRET = "s3cret-s3cret-s3cret"


def hooks(catalog: str = "lake") -> str:
    return f"/api/v1/catalogs/{catalog}/webhooks"


@pytest.fixture
def lake(user):
    return make_catalog()  # alice's: she is its admin


@pytest.fixture
def hook(lake, user_client):
    answer = user_client.post(hooks(), {"url": URL, "events": ["*"], "secret": SECRET}, format="json")
    assert answer.status_code == 201, answer.content
    return answer.json()


def _no_secret(value) -> None:
    assert SECRET not in str(value) and "secret" not in str(value)


def test_an_admin_adds_a_webhook_whose_secret_is_never_shown(lake, user_client):
    answer = user_client.post(
        hooks(), {"url": URL, "events": ["merge.completed", "branch.created"], "secret": SECRET}, format="json"
    )
    assert answer.status_code == 201, answer.content
    created = answer.json()
    assert created["url"] == URL and created["active"] is True and created["created_by"] == "alice"
    assert created["events"] == ["branch.created", "merge.completed"]  # in the canonical order
    _no_secret(created)
    _no_secret(user_client.get(hooks()).json())
    _no_secret(user_client.get(f"{hooks()}/{created['id']}").json())
    assert Webhook.objects.get(id=created["id"]).secret == SECRET  # kept, to sign


def test_without_a_secret_one_is_made_and_shown_once(lake, user_client):
    created = user_client.post(hooks(), {"url": URL, "events": ["*"]}, format="json").json()
    assert len(created["secret"]) >= 32
    assert Webhook.objects.get(id=created["id"]).secret == created["secret"]
    assert "secret" not in user_client.get(f"{hooks()}/{created['id']}").json()


@pytest.mark.parametrize(
    "url",
    ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/hook", "http://[::1]:8000/hook", "http://0.0.0.0/"],
)
def test_a_target_on_a_refused_address_is_rejected_at_creation(lake, user_client, url):
    answer = user_client.post(hooks(), {"url": url, "events": ["*"], "secret": SECRET}, format="json")
    assert answer.status_code == 400
    assert answer.json()["code"] == "webhook_target_refused"
    assert not Webhook.objects.exists()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"url": "ftp://127.0.0.1/x", "events": ["*"]}, "webhook_url_invalid"),
        ({"url": URL, "events": []}, "invalid_input"),
        ({"url": URL, "events": ["branch.renamed"]}, "invalid_input"),
        ({"url": URL, "events": "merge.completed"}, "invalid_input"),
        ({"url": URL, "events": ["*"], "secret": "short"}, "invalid_input"),
        ({"events": ["*"]}, "invalid_input"),
    ],
)
def test_bad_input_is_a_400_that_adds_nothing(lake, user_client, body, code):
    answer = user_client.post(hooks(), body, format="json")
    assert answer.status_code == 400, answer.content
    assert answer.json()["code"] == code
    assert not Webhook.objects.exists()


def test_an_admin_changes_and_deletes_a_webhook(lake, user_client, hook):
    detail = f"{hooks()}/{hook['id']}"
    changed = user_client.patch(detail, {"events": ["restore.completed"], "active": False}, format="json")
    assert changed.status_code == 200
    assert (changed.json()["events"], changed.json()["active"]) == (["restore.completed"], False)
    assert user_client.patch(detail, {"secret": "another-secret-of-20"}, format="json").status_code == 200
    assert Webhook.objects.get(id=hook["id"]).secret == "another-secret-of-20"
    refused = user_client.patch(detail, {"url": "http://169.254.169.254/"}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (400, "webhook_target_refused")
    assert Webhook.objects.get(id=hook["id"]).url == URL
    assert user_client.delete(detail).status_code == 204
    gone = user_client.get(detail)
    assert (gone.status_code, gone.json()["code"]) == (404, "webhook_not_found")


def test_a_webhook_is_found_only_in_its_own_catalog(lake, user_client, hook):
    make_catalog("other")
    answer = user_client.get(f"{hooks('other')}/{hook['id']}")
    assert (answer.status_code, answer.json()["code"]) == (404, "webhook_not_found")


def test_deliveries_are_listed_read_and_redelivered(lake, user_client, hook):
    branch_create(catalog=lake, name="dev", source="main")  # recorded here; this test's transaction never commits
    listed = user_client.get(f"{hooks()}/{hook['id']}/deliveries").json()["results"]
    assert [(d["event"], d["status"], d["attempts"]) for d in listed] == [("branch.created", "pending", 0)]
    first = listed[0]
    detail = user_client.get(f"{hooks()}/{hook['id']}/deliveries/{first['id']}").json()
    payload = detail["payload"]
    assert (payload["event"], payload["catalog"], payload["id"]) == ("branch.created", "lake", first["event_id"])
    assert payload["data"]["branch"] == "dev"
    again = user_client.post(f"{hooks()}/{hook['id']}/deliveries/{first['id']}/redeliver")
    assert again.status_code == 202
    assert (again.json()["event_id"], again.json()["redelivery_of"]) == (first["event_id"], first["id"])
    assert Delivery.objects.count() == 2
    missing = user_client.post(f"{hooks()}/{hook['id']}/deliveries/{uuid.uuid4()}/redeliver")
    assert (missing.status_code, missing.json()["code"]) == (404, "delivery_not_found")


def test_inactive_webhooks_and_other_events_get_no_delivery(lake, user_client, hook):
    user_client.patch(f"{hooks()}/{hook['id']}", {"events": ["merge.completed"]}, format="json")
    branch_create(catalog=lake, name="dev", source="main")
    user_client.patch(f"{hooks()}/{hook['id']}", {"events": ["*"], "active": False}, format="json")
    branch_create(catalog=lake, name="dev2", source="main")
    assert not Delivery.objects.exists()


@pytest.mark.parametrize("role", ["viewer", "editor", "approver", None])
def test_only_admins_may_manage_or_read_webhooks(lake, user, hook, role):
    person = get_user_model().objects.create_user("pat")
    if role is not None:
        catalog_role_grant(catalog=lake, username="pat", role=role, granted_by=user)
    branch_create(catalog=lake, name="dev", source="main")
    delivery = Delivery.objects.get()
    client = APIClient()
    client.force_authenticate(person)
    base = f"{hooks()}/{hook['id']}"
    calls = [
        ("get", hooks(), None),
        ("post", hooks(), {"url": URL, "events": ["*"], "secret": SECRET}),
        ("get", base, None),
        ("patch", base, {"active": False}),
        ("delete", base, None),
        ("get", f"{base}/deliveries", None),
        ("get", f"{base}/deliveries/{delivery.id}", None),
        ("post", f"{base}/deliveries/{delivery.id}/redeliver", None),
    ]
    for method, path, body in calls:
        answer = getattr(client, method)(path, body, format="json")
        expected = (403, "role_required") if role else (404, "catalog_not_found")
        assert (answer.status_code, answer.json()["code"]) == expected, (method, path)
    assert list(Webhook.objects.values_list("id", "active")) == [(hook["id"], True)]
    assert Delivery.objects.count() == 1
