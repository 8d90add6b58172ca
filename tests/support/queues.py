"""Protected branches whose merges go through the queue, and the requests that wait in it (docs/merge-queue.md): the
helpers of the queue's tests."""

from catalog_app.services.access import catalog_role_grant, protected_branch_create
from catalog_app.services.refs import branch_create
from merge_app.models import QueueEntry
from tests.support.catalogs import make_catalog, make_table
from tests.support.merges import insert


def lake(user, tables=("orders",)):
    catalog = make_catalog()
    for name in tables:
        make_table(catalog, table=name)
        insert(catalog, [{"id": 1, "amount": 10, "region": "eu"}, {"id": 2, "amount": 20, "region": "us"}],
               table=name)  # fmt: skip
    for name, role in (("bob", "editor"), ("carol", "approver"), ("dave", "editor")):
        catalog_role_grant(catalog=catalog, username=name, role=role, granted_by=user)
    return catalog


def protect(catalog, user, **rule):
    protected_branch_create(catalog=catalog, pattern="main", require_queue=True, created_by=user,
                            **{"required_approvals": 1, **rule})  # fmt: skip


def branch_with_rows(catalog, name, table, *ids, amount=5):
    branch_create(catalog=catalog, name=name, source="main")
    insert(catalog, [{"id": i, "amount": amount, "region": "eu"} for i in ids], branch=name, table=table)


def opened(clients, catalog, source, approve=True) -> int:
    base = f"/api/v1/catalogs/{catalog.name}/merge-requests"
    answer = clients["bob"].post(base, {"source": source, "target": "main", "title": source}, format="json")
    assert answer.status_code == 201, answer.json()
    number = answer.json()["number"]
    if approve:
        review = clients["carol"].post(f"{base}/{number}/reviews", {"decision": "approve"}, format="json")
        assert review.status_code == 201, review.json()
    return number


def entry(number) -> QueueEntry:
    return QueueEntry.objects.filter(merge_request__number=number).order_by("-id").first()
