"""The webhooks pages (frontend/views/webhooks.py) through Django's test client: admins add, edit and delete
webhooks and redeliver from the delivery log; the secret LakeUI makes is shown once; nobody else gets the pages;
every form needs its CSRF token. No worker: the deliveries here are recorded, never sent."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from catalog_app.services.access import catalog_role_grant
from catalog_app.services.refs import branch_create
from hooks_app.models import Delivery, Webhook
from tests.support.catalogs import make_catalog

pytestmark = pytest.mark.django_db

URL = "http://127.0.0.1:9/hook"
PAGES = "/catalogs/lake/webhooks"


@pytest.fixture
def client(user):
    make_catalog()
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def token(client, url) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', client.get(url).content.decode()).group(1)


def post(client, url, data, page=PAGES):
    return client.post(url, {**data, "csrfmiddlewaretoken": token(client, page)})


def test_an_admin_adds_a_webhook_and_sees_its_secret_once(client):
    page = client.get(PAGES).content.decode()
    assert "No webhooks yet." in page and 'value="merge_request.approved"' in page
    added = post(client, PAGES, {"url": URL, "events": ["branch.created", "merge.completed"], "active": "on"})
    webhook = Webhook.objects.get()
    assert (added.status_code, added["Location"]) == (302, f"{PAGES}/{webhook.id}")  # its page at its own URL
    assert webhook.events == ["branch.created", "merge.completed"] and webhook.active
    shown = client.get(added["Location"]).content.decode()
    assert f'<code id="new-secret">{webhook.secret}</code>' in shown
    again = client.get(f"{PAGES}/{webhook.id}").content.decode()
    assert webhook.secret not in again and "new-secret" not in again
    assert webhook.secret not in client.get(PAGES).content.decode()


def test_a_refused_target_is_a_message_and_adds_nothing(client):
    refused = post(client, PAGES, {"url": "http://169.254.169.254/latest/", "events": ["*"]})
    assert refused.status_code == 400
    assert "webhook_target_refused" in refused.content.decode()
    assert not Webhook.objects.exists()


def test_an_admin_edits_redelivers_and_deletes(client):
    post(client, PAGES, {"url": URL, "events": ["*"], "secret": "sixteen-chars-ok", "active": "on"})
    webhook = Webhook.objects.get()
    detail = f"{PAGES}/{webhook.id}"
    saved = post(client, detail, {"url": URL, "events": ["branch.created"]}, page=detail)  # "active" unticked
    assert saved.status_code == 302
    webhook.refresh_from_db()
    assert (webhook.events, webhook.active, webhook.secret) == (["branch.created"], False, "sixteen-chars-ok")
    post(client, detail, {"url": URL, "events": ["*"], "active": "on"}, page=detail)
    branch_create(catalog=webhook.catalog, name="dev", source="main")
    delivery = Delivery.objects.get()
    log = client.get(detail).content.decode()
    assert "branch.created" in log and str(delivery.id) in log and "Redeliver" in log
    redelivered = post(client, f"{detail}/deliveries/{delivery.id}/redeliver", {}, page=detail)
    assert redelivered.status_code == 302
    assert Delivery.objects.filter(redelivery_of=delivery).count() == 1
    post(client, detail, {"url": URL, "events": ["*"]}, page=detail)  # inactive
    refused = client.post(
        f"{detail}/deliveries/{delivery.id}/redeliver", {"csrfmiddlewaretoken": token(client, detail)}, follow=True
    )
    assert "webhook_inactive" in refused.content.decode()
    assert Delivery.objects.filter(redelivery_of=delivery).count() == 1
    assert post(client, f"{detail}/delete", {}, page=detail).status_code == 302
    assert not Webhook.objects.exists() and not Delivery.objects.exists()


def test_every_form_needs_its_csrf_token(client):
    assert client.post(PAGES, {"url": URL, "events": ["*"]}).status_code == 403
    assert not Webhook.objects.exists()


@pytest.mark.parametrize("role", ["viewer", "editor", "approver"])
def test_only_admins_get_the_pages(client, user, role):
    post(client, PAGES, {"url": URL, "events": ["*"], "secret": "sixteen-chars-ok", "active": "on"})
    webhook = Webhook.objects.get()
    person = get_user_model().objects.create_user("pat")
    catalog_role_grant(catalog=webhook.catalog, username="pat", role=role, granted_by=user)
    other = Client()
    other.force_login(person)
    assert "Webhooks</a>" not in other.get("/catalogs/lake").content.decode()
    assert "Webhooks</a>" in client.get("/catalogs/lake").content.decode()
    for url in (PAGES, f"{PAGES}/{webhook.id}"):
        assert other.get(url).status_code == 403
    assert other.post(f"{PAGES}/{webhook.id}/delete").status_code == 403
    assert other.post(PAGES, {"url": URL, "events": ["*"]}).status_code == 403
    assert Webhook.objects.count() == 1
