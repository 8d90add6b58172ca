"""Subscriptions to a branch's change feed (docs/changes.md#subscriptions), through the API, on real data: a
consumer reads the batch since its cursor and acknowledges it; a consumer that crashes before acknowledging reads
the same batch again; a second acknowledgement of one batch is a 409; retention keeps what a cursor holds, and a
cursor a forced expiry removed answers 410 with where to resume."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from catalog_app.models import ExpiredCommit
from catalog_app.services.access import catalog_role_grant
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.merges import change, insert

pytestmark = pytest.mark.django_db(transaction=True)


def rows(*ids):
    return [{"id": i, "amount": i * 10, "region": "eu"} for i in ids]


def changed(answer) -> list[tuple]:
    return sorted((r["key"]["id"], r["change"]) for r in answer["results"])


def test_a_consumer_reads_acknowledges_and_reads_each_change_once(user, user_client, monkeypatch):
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"])
    insert(catalog, rows(1, 2))
    start = head(catalog)
    base = f"/api/v1/catalogs/{catalog.name}/subscriptions"
    made = user_client.post(base, {"name": "search", "branch": "main", "tables": ["sales.orders"]}, format="json")
    assert made.status_code == 201, made.json()
    assert (made.json()["cursor"], made.json()["lag_commits"], made.json()["pending_batch"]) == (start, 0, False)
    assert user_client.post(base, {"name": "slow", "branch": "main"}, format="json").status_code == 201
    for body, code in (({"name": "search", "branch": "main"}, "subscription_exists"),
                       ({"name": "../x", "branch": "main"}, "invalid_name"),
                       ({"name": "t", "branch": "main", "tables": ["orders"]}, "invalid_tables"),
                       ({"name": "t", "branch": "nope"}, "ref_not_found")):  # fmt: skip
        refused = user_client.post(base, body, format="json")
        assert refused.status_code in (400, 404, 409) and refused.json()["code"] == code, refused.json()

    # A viewer consumes (reads and acknowledges) but creates nothing.
    viewer = get_user_model().objects.create_user("vic")
    catalog_role_grant(catalog=catalog, username="vic", role="viewer", granted_by=user)
    consumer = APIClient()
    consumer.force_authenticate(viewer)
    assert consumer.post(base, {"name": "mine", "branch": "main"}, format="json").status_code == 403

    change(catalog, "table_load", {"strategy": "upsert", "key_columns": ["id"],
                                   "rows": [{"id": 1, "amount": 11, "region": "eu"}, *rows(3)]})  # fmt: skip
    upserted = head(catalog)
    first = consumer.get(f"{base}/search/changes").json()
    assert (first["source"], first["target"]) == (start, upserted)
    assert changed(first) == [(1, "update"), (3, "insert")]
    change(catalog, "table_delete", {"where": "id = 2"})
    deleted = head(catalog)
    # The consumer crashed before acknowledging: it reads the same batch, not what the branch did since.
    again = consumer.get(f"{base}/search/changes").json()
    assert (again["ack"], again["target"], changed(again)) == (first["ack"], upserted, changed(first))
    assert consumer.get(f"{base}/search").json()["pending_batch"] is True

    acked = consumer.post(f"{base}/search/changes", {"ack": first["ack"]}, format="json")
    assert acked.status_code == 200 and acked.json()["cursor"] == upserted and acked.json()["lag_commits"] == 1
    twice = consumer.post(f"{base}/search/changes", {"ack": first["ack"]}, format="json")  # a second consumer
    assert (twice.status_code, twice.json()["code"]) == (409, "stale_ack")
    assert consumer.post(f"{base}/search/changes", {"ack": "x"}, format="json").status_code == 400

    second = consumer.get(f"{base}/search/changes").json()
    assert (second["source"], second["target"], changed(second)) == (upserted, deleted, [(2, "delete")])
    assert consumer.post(f"{base}/search/changes", {"ack": second["ack"]}, format="json").status_code == 200
    empty = consumer.get(f"{base}/search/changes").json()
    assert (empty["source"], empty["target"], empty["count"]) == (deleted, deleted, 0)

    # Retention keeps the commit a slow consumer's cursor holds, and says why.
    listed = {s["name"]: s for s in user_client.get(base).json()["results"]}
    assert (listed["slow"]["cursor"], listed["slow"]["lag_commits"]) == (start, 2)
    browser = Client()
    browser.force_login(user)
    page = browser.get(f"/catalogs/{catalog.name}").content.decode()
    assert "slow" in page and "2 commits</a>, 3 rows" in page and f"?from={start}&amp;to=main" in page  # its lag
    monkeypatch.setattr("frontend.views.catalogs.TOUCHED_COMMITS", 1)  # as if it were thousands of commits behind
    far = browser.get(f"/catalogs/{catalog.name}").content.decode()
    assert "2 commits</a>, rows counted on" in far and "3 rows" not in far  # the catalog page does not read them
    own = browser.get(f"/catalogs/{catalog.name}/subscriptions/slow").content.decode()
    records = ("<td>update (amount)</td>", "<td>delete</td>", "<td>insert</td>", "<strong>amount=11</strong>")
    assert "2 commits, 3 changed rows" in own and all(r in own for r in records), own
    assert f"/commits/{upserted}" in own and f"/commits/{deleted}" in own  # each change names its commit
    viewing = Client()
    viewing.force_login(viewer)
    assert viewing.get(f"/catalogs/{catalog.name}/subscriptions/slow").status_code == 200
    assert viewing.get(f"/catalogs/{catalog.name}/subscriptions/nope").status_code == 404
    table_page = browser.get(f"/catalogs/{catalog.name}/browse/sales/orders?ref=main").content.decode()
    assert f"?from={start}&amp;to=main" in table_page and "changes since" in table_page
    commit_page = browser.get(f"/catalogs/{catalog.name}/commits/{start}").content.decode()
    assert f"?from={start}&amp;to=main" in commit_page and "changes since this commit" in commit_page
    preview = user_client.post(f"/api/v1/catalogs/{catalog.name}/retention/preview",
                               {"rules": [{"pattern": "main", "keep_commits": 1}]}, format="json")  # fmt: skip
    assert preview.status_code == 200, preview.json()
    (main,) = [r for r in preview.json()["refs"] if r["ref"] == "main"]
    assert start not in main["expiring"]
    assert any(k["commit"] == start and "held by subscription slow" in k["reasons"] for k in main["must_keep"])

    # A cursor a forced expiry removed (only one could): 410, with where to resume.
    ExpiredCommit.objects.create(commit_id=start, catalog=catalog)
    gone = consumer.get(f"{base}/slow/changes")
    assert (gone.status_code, gone.json()["code"]) == (410, "cursor_expired")
    assert "resume_from" in gone.json()["details"]
    expired = browser.get(f"/catalogs/{catalog.name}/subscriptions/slow").content.decode()
    assert "cannot be read here" in expired and "removed from time travel" in expired, expired
    assert user_client.delete(f"{base}/slow").status_code == 204
    assert user_client.get(f"{base}/slow").status_code == 404
    assert consumer.get(f"{base}/slow/changes").status_code == 404
