"""lakeui/events.py: an event a listener cannot record is logged and leaves the change that emitted it alone."""

import pytest
from django.db import transaction

from catalog_app.models import Branch
from catalog_app.services.refs import branch_create
from hooks_app.models import Delivery
from hooks_app.services import webhook_create
from lakeui.events import BRANCH_CREATED, event_emit
from tests.support.catalogs import make_catalog

pytestmark = pytest.mark.django_db


def test_a_listener_that_fails_does_not_fail_the_change(user, caplog):
    lake = make_catalog()
    webhook_create(catalog=lake, url="http://127.0.0.1:9/hook", events=["*"])
    with transaction.atomic():
        event_emit(catalog=lake, kind=BRANCH_CREATED, payload={"not json": object()})  # the listener's insert fails
        branch_create(catalog=lake, name="dev", source="main")  # the transaction is still usable
    assert Branch.objects.filter(catalog=lake, name="dev").exists()
    assert list(Delivery.objects.values_list("payload__data__branch", flat=True)) == ["dev"]
    assert "Event listener" in caplog.text and "branch.created" in caplog.text


def test_an_unknown_event_kind_is_a_programming_error(user):
    with pytest.raises(ValueError, match=r"branch\.renamed"):
        event_emit(catalog=make_catalog(), kind="branch.renamed", payload={})
