"""The merge request page offers each schema conflict a resolution settles
(docs/merge-semantics.md#schema-conflicts-in-a-resolution): a column type both sides changed takes a type, a NOT NULL
column one side added takes a fill for the rows the other side wrote (a value, or an expression after "="); saved
from the form, the plan is mergeable."""

import re

import pytest
from django.test import Client

from merge_app.models import MergeRequest
from merge_app.services.merge_requests import merge_request_open
from tests.frontend.test_cell_picks_page import planned
from tests.merge_app.test_schema_settle import both_changed_the_schema

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def test_the_page_settles_a_type_and_a_fill(spark, user):
    browser = Client()
    browser.force_login(user)
    catalog = both_changed_the_schema()
    opened = planned(merge_request_open(catalog=catalog, source="dev", target="main", title="schema", author=user))
    url = f"/catalogs/{catalog.name}/merge-requests/{opened.number}"
    page = browser.get(url).content.decode()
    fields = re.findall(r'name="(schema:[^"]+)"', page)
    assert fields == ["schema:sales.orders:amount:type"]  # A6.2 shows once the type no longer conflicts

    def save(**fields) -> str:
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', browser.get(url).content.decode())[1]
        saved = browser.post(f"{url}/resolutions", {"csrfmiddlewaretoken": token, **fields}, follow=True)
        return saved.content.decode()

    assert "unknown_type" in save(**{"schema:sales.orders:amount:type": "money"})
    assert "Resolutions saved" in save(**{"schema:sales.orders:amount:type": "decimal(20,0)"})
    opened = planned(MergeRequest.objects.get(id=opened.id))
    page = browser.get(url).content.decode()
    assert sorted(re.findall(r'name="(schema:[^"]+)"', page)) == ["schema:sales.orders:amount:type",
                                                                  "schema:sales.orders:code:fill"]  # fmt: skip
    assert 'value="decimal(20,0)"' in page  # the type saved, shown to change
    assert "A6.2: the target added NOT NULL column &#x27;code&#x27;" in page
    assert 'name="schematext:sales.orders:code:fill"' in page  # a string column: its fill is text as typed

    assert "Resolutions saved" in save(**{"schema:sales.orders:code:fill": "007"})
    opened = planned(MergeRequest.objects.get(id=opened.id))
    assert opened.resolutions["schema"] == {"sales.orders": {"amount": {"type": "decimal(20,0)"},
                                                             "code": {"fill": "007"}}}  # fmt: skip
    assert opened.plan["mergeable"], opened.plan
    page = browser.get(url).content.decode()  # settled, the table conflicts no more: its settlements stay to change
    assert sorted(re.findall(r'name="(schema:[^"]+)"', page)) == ["schema:sales.orders:amount:type",
                                                                  "schema:sales.orders:code:fill"]  # fmt: skip
    assert 'value="decimal(20,0)"' in page and 'value="007"' in page

    # a fill by an expression, written after "=" as a spreadsheet's formula is
    refused = save(**{"schema:sales.orders:code:fill": "=nope"})  # checked against the tables when saved
    assert "invalid_fill" in refused and "unknown column &#x27;nope&#x27;" in refused
    assert "Resolutions saved" in save(**{"schema:sales.orders:code:fill": "=region"})
    opened = planned(MergeRequest.objects.get(id=opened.id))
    assert opened.resolutions["schema"]["sales.orders"]["code"] == {"fill": {"expression": "region"}}
    assert opened.plan["mergeable"], opened.plan
    assert 'value="=region"' in browser.get(url).content.decode()
