"""A commit's rows as they are stored, whether they went in with INSERT or, many at once, with COPY."""

import uuid

import pytest
from django.db import transaction

from catalog_app.models import ObjectKind, ObjectVersion, Operation
from catalog_app.selectors.objects import objects_at
from catalog_app.selectors.refs import ref_resolve
from catalog_app.services import commits
from catalog_app.services.commits import commit_begin
from tests.support.catalogs import make_catalog

pytestmark = pytest.mark.django_db(transaction=True)


def commit_databases(catalog, count: int):
    with transaction.atomic():
        draft = commit_begin(catalog=catalog, branch="main")
        staged = []
        for n in range(count):
            object_id = uuid.uuid4()
            state = {"properties": {"n": str(n), "quote": 'it\'s "x"\t\\'}, "comment": None}
            staged.append(draft.put(kind=ObjectKind.DATABASE, object_id=object_id, name=f"db{n}", state=state))
            draft.operation(object_id=object_id, kind=ObjectKind.DATABASE, op=Operation.Op.CREATE,
                            details={"name": f"db{n}"})  # fmt: skip
        return draft.commit(author=None, message=f"{count} databases"), staged


@pytest.mark.parametrize("count", [3, commits.COPY_ROWS + 10])
def test_a_commit_stores_its_rows_with_their_ids_however_many(count):
    catalog = make_catalog()
    commit, staged = commit_databases(catalog, count)

    stored = {v.id: v for v in ObjectVersion.objects.filter(commit=commit)}
    assert sorted(stored) == sorted(v.id for v in staged)  # the staged versions got the ids they were stored with
    for version in staged:
        row = stored[version.id]
        assert (row.object_id, row.name, row.kind, row.state, row.seq, row.line_id, row.dropped) == (
            version.object_id, version.name, "database", version.state, commit.seq, commit.line_id, False
        )  # fmt: skip
    operations = Operation.objects.filter(commit=commit).order_by("position")
    assert [(o.position, o.op, o.details["name"]) for o in operations] == [
        (n, "create", f"db{n}") for n in range(count)
    ]
    live = objects_at(ref_resolve(catalog=catalog, ref="main").chain, kind=ObjectKind.DATABASE)
    assert {d.name for d in live} == {f"db{n}" for n in range(count)}
    later, _ = commit_databases(catalog, 2)  # the sequence went on past the ids COPY drew
    assert min(ObjectVersion.objects.filter(commit=later).values_list("id", flat=True)) > max(stored)
