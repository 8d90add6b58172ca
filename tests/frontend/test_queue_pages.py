"""The merge queue's pages (docs/merge-queue.md): "Merge when ready" on a request's page puts it in line with its
position shown there and on the branch's Queue page; a refusal is a message; its author takes it out. (The queue's
work on real data is tests/merge_app/test_merge_queue.py.)"""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from catalog_app.services.access import catalog_role_grant, protected_branch_create
from catalog_app.services.refs import branch_create
from merge_app.models import QueueEntry
from merge_app.services.merge_requests import merge_request_open, merge_request_review
from tests.frontend.test_views import csrf, text
from tests.support.catalogs import make_catalog

pytestmark = pytest.mark.django_db


def signed_in(person) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(person)
    return client


def test_merge_when_ready_shows_the_position_and_the_author_takes_it_out(user):
    catalog = make_catalog()
    branch_create(catalog=catalog, name="dev", source="main")
    bob, carol = (get_user_model().objects.create_user(name) for name in ("bob", "carol"))
    catalog_role_grant(catalog=catalog, username="bob", role="editor", granted_by=user)
    catalog_role_grant(catalog=catalog, username="carol", role="approver", granted_by=user)
    protected_branch_create(catalog=catalog, pattern="main", require_queue=True, created_by=user)
    request = merge_request_open(catalog=catalog, source="dev", target="main", title="load", author=bob)
    page = f"/catalogs/{catalog.name}/merge-requests/{request.number}"
    action = f"{page}/queue"
    browser = signed_in(bob)

    refused = browser.post(action, {"action": "enqueue", "csrfmiddlewaretoken": csrf(browser, page)}, follow=True)
    assert "(approvals_missing)" in text(refused) and not QueueEntry.objects.exists()

    merge_request_review(merge_request=request, reviewer=carol, decision="approve")
    queued = browser.post(action, {"action": "enqueue", "csrfmiddlewaretoken": csrf(browser, page)}, follow=True)
    shown = text(queued)
    assert "will merge into main when ready" in shown and "In the merge queue of main: position 1" in shown
    line = text(browser.get(f"/catalogs/{catalog.name}/queue/main"))
    assert "Merge queue of main" in line and "!1 load" in line and "queued" in line

    left = browser.post(action, {"action": "leave", "csrfmiddlewaretoken": csrf(browser, page)}, follow=True)
    assert "Taken out of the queue." in text(left) and "Merge when ready" in text(left)
    entry = QueueEntry.objects.get()
    assert (entry.state, entry.reason) == ("removed", "dequeued")
    assert "dequeued: Taken out of the queue by bob" in text(browser.get(f"/catalogs/{catalog.name}/queue/main"))
