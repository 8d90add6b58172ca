"""Metadata reads answered cold (nothing kept by the process: the read caches emptied before each) cost a fixed
number of queries, whatever the number of tables, versions or commits they list: a table, its history, a table
list and a commit log page. A regression to a query per item fails here. And the serializers that write these
answers directly write what their fields would."""

import pytest
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from catalog_app.apis.common import CommitOutputSerializer
from catalog_app.apis.objects import (
    DatabaseOutputSerializer,
    HistoryEntryOutputSerializer,
    SchemaVersionOutputSerializer,
    TableOutputSerializer,
)
from catalog_app.models import Catalog, Commit, ObjectKind, ObjectVersion, Operation
from catalog_app.selectors.objects import (
    ObjectsAt,
    object_find,
    object_history,
    objects_at,
    schema_history,
    schema_history_read,
)
from catalog_app.selectors.refs import Author, CommitLog, LogCommit, commit_log, ref_resolve

pytestmark = pytest.mark.django_db

API = "/api/v1/catalogs"
COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "amount", "type": "int"},
    {"name": "day", "type": "date"},
]


@pytest.fixture
def reader(user):
    """A client with an API token, as engines and scripts read (the token's query counted too)."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def made(response, code=201):
    assert response.status_code == code, response.content
    return response.json()


def lake(client, tables: int, updates: int, name: str = "lake") -> None:
    """Catalog `name` with database sales of `tables` tables, t0 changed `updates` times, branch dev and tag v1."""
    made(client.post(API, {"name": name}, format="json"))
    made(client.post(f"{API}/{name}/refs/main/databases", {"name": "sales"}, format="json"))
    for index in range(tables):
        body = {"name": f"t{index}", "columns": COLUMNS, "primary_key": ["id"], "comment": "c"}
        made(client.post(f"{API}/{name}/refs/main/databases/sales/tables", body, format="json"))
    for index in range(updates):
        body = {"set_properties": {"n": str(index)}}
        made(client.patch(f"{API}/{name}/refs/main/databases/sales/tables/t0", body, format="json"), 200)
    made(client.post(f"{API}/{name}/branches", {"name": "dev", "source": "main"}, format="json"))
    made(client.post(f"{API}/{name}/tags", {"name": "v1", "ref": "main"}, format="json"))


def cold_queries(client, path: str) -> int:
    """The queries of one read of `path` with nothing kept from an earlier one."""
    caches["reads"].clear()
    caches["default"].clear()
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200, response.content
    return len(captured.captured_queries)


READS = {
    "table": "refs/{ref}/databases/sales/tables/t0",
    "history": "refs/{ref}/databases/sales/tables/t0/history",
    "tables": "refs/{ref}/databases/sales/tables",
    "commits": "refs/{ref}/commits",
}
# One query before the view for the token's user, the catalog with the user's role, the ref's commit and its chain
# (catalog_app/middleware.py: the permission check and read_ref take them); then the read's own: a table (with its
# database); a table and its versions with their operations, and its schema versions; the database and a page of
# its tables; a page of the log.
EXPECTED = {"table": 2, "history": 4, "tables": 3, "commits": 2}
# At a commit id prefix (which may name several commits) the ref is resolved the normal way: a branch, a tag and a
# commit looked for, whether retention expired it, and its chain.
PREFIX_MORE = 5


def commit_id(client, catalog: str, ref: str) -> str:
    return client.get(f"{API}/{catalog}/refs/{ref}/commits").json()["results"][1]["id"]


@pytest.mark.parametrize("ref", ["main", "dev", "v1", "commit", "prefix"])
def test_cold_reads_cost_a_fixed_number_of_queries(user_client, reader, ref):
    lake(user_client, tables=3, updates=2, name="small")
    lake(user_client, tables=40, updates=60, name="big")  # more tables, versions and commits than a page holds
    more = PREFIX_MORE if ref == "prefix" else 0

    def counts(catalog: str) -> dict[str, int]:
        named = {"commit": commit_id(reader, catalog, "main"), "prefix": commit_id(reader, catalog, "main")[:12]}
        at = named.get(ref, ref)
        return {kind: cold_queries(reader, f"{API}/{catalog}/{path.format(ref=at)}") for kind, path in READS.items()}

    assert counts("small") == {kind: count + more for kind, count in EXPECTED.items()}
    # the same queries, but a commit log longer than its page counts its commits
    assert counts("big") == {kind: count + more + (kind == "commits") for kind, count in EXPECTED.items()}


def test_a_table_list_longer_than_its_page_is_read_with_its_count_in_one_query(user_client, reader):
    lake(user_client, tables=4, updates=0)
    page = f"{API}/lake/refs/main/databases/sales/tables?page_size=3"
    assert cold_queries(reader, page) == EXPECTED["tables"]  # the page read with the count of the list
    body = reader.get(page).json()
    assert body["count"] == 4 and [t["name"] for t in body["results"]] == ["t0", "t1", "t2"]
    second = reader.get(page + "&page=2").json()
    assert [t["name"] for t in second["results"]] == ["t3"] and second["previous"] and second["count"] == 4


def test_answers_written_directly_are_what_the_fields_write(user_client):
    lake(user_client, tables=1, updates=1)
    body = {"name": "events", "columns": [*COLUMNS, {"name": "note", "type": "string", "default": "x"}],
            "partition_by": ["day"], "properties": {"a": "b"}}  # fmt: skip
    made(user_client.post(f"{API}/lake/refs/main/databases/sales/tables", body, format="json"))
    checked = 0
    for version in ObjectVersion.objects.filter(dropped=False).select_related("commit"):
        serializer = {"table": TableOutputSerializer, "database": DatabaseOutputSerializer}.get(version.kind)
        if serializer is not None:
            fields = serializers.Serializer.to_representation(serializer(), version)
            assert serializer().to_representation(version) == fields
            checked += 1
    for commit in Commit.objects.select_related("author"):
        fields = serializers.Serializer.to_representation(CommitOutputSerializer(), commit)
        assert CommitOutputSerializer().to_representation(commit) == fields
        checked += 1
    catalog = Catalog.objects.get(name="lake")
    chain = ref_resolve(catalog=catalog, ref="main").chain
    for listed in [*ObjectsAt(chain, kind=ObjectKind.DATABASE)[0:9], *ObjectsAt(chain, kind=ObjectKind.TABLE)[0:9]]:
        serializer = TableOutputSerializer if listed.parent_id else DatabaseOutputSerializer
        assert serializer().to_representation(listed) == serializers.Serializer.to_representation(serializer(), listed)
        checked += 1
    for commit in CommitLog(chain)[0:9]:
        fields = serializers.Serializer.to_representation(CommitOutputSerializer(), commit)
        assert CommitOutputSerializer().to_representation(commit) == fields
    for table in objects_at(chain, kind=ObjectKind.TABLE):
        schemas = schema_history_read(chain, table_id=table.object_id)
        for schema in schemas:
            fields = serializers.Serializer.to_representation(SchemaVersionOutputSerializer(), schema)
            assert SchemaVersionOutputSerializer().to_representation(schema) == fields
        for entry in object_history(chain, object_id=table.object_id, schemas=schemas):
            fields = serializers.Serializer.to_representation(HistoryEntryOutputSerializer(), entry)
            assert HistoryEntryOutputSerializer().to_representation(entry) == fields
            checked += 1
    assert checked > 12


def test_plain_sql_reads_find_what_the_orm_finds(user_client):
    """object_find, ObjectsAt, CommitLog, object_history and schema_history_read (plain SQL) against the ORM's
    queries they stand for, at refs whose chains hold renamed, dropped and re-created objects and a fork."""
    lake(user_client, tables=4, updates=3)
    tables = f"{API}/lake/refs/main/databases/sales/tables"
    made(user_client.patch(f"{tables}/t1", {"name": "t1b"}, format="json"), 200)
    made(user_client.delete(f"{tables}/t2"), 200)
    made(user_client.post(tables, {"name": "t2", "columns": COLUMNS}, format="json"))  # the name again
    made(user_client.post(f"{tables}/t0/columns", {"name": "note", "type": "string"}, format="json"))
    made(user_client.post(f"{API}/lake/refs/main/databases", {"name": "ops"}, format="json"))
    dev = f"{API}/lake/refs/dev/databases/sales/tables"
    made(user_client.post(dev, {"name": "only_dev", "columns": COLUMNS}, format="json"))
    made(user_client.delete(f"{dev}/t3"), 200)
    made(user_client.post(f"{API}/lake/branches", {"name": "deeper", "source": "dev"}, format="json"))
    made(user_client.patch(f"{API}/lake/refs/deeper/databases/sales/tables/t0", {"name": "t0d"}, format="json"), 200)
    catalog = Catalog.objects.get(name="lake")
    refs = ["main", "dev", "deeper", "v1", *Commit.objects.filter(catalog=catalog).values_list("id", flat=True)]
    names = set(ObjectVersion.objects.filter(catalog=catalog).values_list("name", flat=True)) | {"nothing"}
    compared = 0
    for ref in refs:
        chain = ref_resolve(catalog=catalog, ref=ref).chain
        databases = list(objects_at(chain, kind=ObjectKind.DATABASE))
        for kind, parent in [(ObjectKind.DATABASE, None), *((ObjectKind.TABLE, d) for d in databases)]:
            parent_id = parent.object_id if parent else None
            orm = list(objects_at(chain, kind=kind, parent_id=parent_id))
            listed = ObjectsAt(chain, kind=kind, parent_id=parent_id)
            assert [_listed(v) for v in listed[0:100]] == [_listed(v) for v in orm]
            assert [_listed(v) for v in listed[1:3]] == [_listed(v) for v in orm[1:3]]
            assert listed.count() == len(orm)  # as the page read it
            assert ObjectsAt(chain, kind=kind, parent_id=parent_id).count() == len(orm)  # and alone
            for name in names:
                wanted = objects_at(chain, kind=kind, parent_id=parent_id).filter(name=name).first()
                found = object_find(chain, kind=kind, name=name, parent_id=parent_id)
                assert (found and (found.pk, found.commit.pk, found.state)) == (wanted and (
                    wanted.pk, wanted.commit.pk, wanted.state))  # fmt: skip
                if parent is not None:
                    by_name = object_find(chain, kind=kind, name=name, parent_named=parent.name)
                    assert (by_name and by_name.pk) == (wanted and wanted.pk)
                compared += wanted is not None
            for version in orm:
                _history_as_orm_reads_it(chain, version.object_id)
        log = list(commit_log(chain))
        assert CommitLog(chain)[0:500] == [_logged(c) for c in log]
        assert [c.id for c in CommitLog(chain)[2:4]] == [c.id for c in log[2:4]]
        assert CommitLog(chain).count() == len(log)
    assert compared > 50


def _listed(version) -> tuple:
    return (version.object_id, version.name, version.commit_id, version.parent_id, version.state,
            version.commit.created_at)  # fmt: skip


def _logged(commit) -> LogCommit:
    author = commit.author and Author(commit.author.username)
    return LogCommit(commit.id, commit.seq, commit.parent_id, commit.merge_parent_id, commit.created_at,
                     commit.author_id, author, commit.message)  # fmt: skip


def _history_as_orm_reads_it(chain, object_id) -> None:
    versions = ObjectVersion.objects.filter(chain.q(), object_id=object_id).select_related("commit__author")
    schemas = list(schema_history(chain, table_id=object_id))
    read = schema_history_read(chain, table_id=object_id)
    assert [(s.pk, s.columns, s.visible, s.commit.created_at) for s in read] == [
        (s.pk, s.columns, s.visible, s.commit.created_at) for s in schemas
    ]
    history = object_history(chain, object_id=object_id, schemas=read)
    wanted = [
        (v.pk, v.commit.pk, v.commit.author.username, v.state.get("schema_version_id"),
         [(o.pk, o.op, o.details) for o in Operation.objects.filter(commit_id=v.commit_id, object_id=object_id)])
        for v in versions.order_by("-seq")
    ]  # fmt: skip
    assert [
        (e.version.pk, e.commit.pk, e.commit.author.username, e.schema_version and e.schema_version.pk,
         [(o.pk, o.op, o.details) for o in e.operations])
        for e in history
    ] == wanted  # fmt: skip
