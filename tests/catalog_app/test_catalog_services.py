"""The catalog core through its services, on the real database."""

import time

import pytest
from django.utils import timezone

from catalog_app.models import Branch, Commit, ObjectVersion, Operation, SchemaVersion
from catalog_app.selectors.objects import object_get, object_history, objects_at, schema_history
from catalog_app.selectors.refs import chain_after, commit_chain, commit_log, ref_resolve
from catalog_app.services.databases import database_create, database_drop, database_update
from catalog_app.services.refs import branch_create, branch_delete, tag_create
from catalog_app.services.tables import column_add, column_drop, column_update, table_drop, table_update
from lakeui.errors import ApplicationError
from tests.support.catalogs import head, make_catalog, make_table, on

pytestmark = pytest.mark.django_db


def names_at(catalog, ref, kind="database", at=None, parent=None):
    chain = ref_resolve(catalog=catalog, ref=ref, at=at).chain
    return [version.name for version in objects_at(chain, kind=kind, parent_id=parent)]


def table_at(catalog, ref, database="sales", table="orders", at=None):
    chain = ref_resolve(catalog=catalog, ref=ref, at=at).chain
    db = object_get(chain, kind="database", name=database)
    return object_get(chain, kind="table", name=table, parent_id=db.object_id)


def test_catalog_starts_with_main_and_one_commit():
    catalog = make_catalog()
    assert list(Branch.objects.filter(catalog=catalog).values_list("name", flat=True)) == ["main"]
    assert Commit.objects.filter(catalog=catalog).count() == 1


def test_branch_sees_parent_as_of_fork_and_nothing_after():
    catalog = make_catalog()
    database_create(target=on(catalog), name="before")
    branch_create(catalog=catalog, name="dev", source="main")
    database_create(target=on(catalog), name="after_on_main")
    database_create(target=on(catalog, "dev"), name="only_on_dev")
    assert names_at(catalog, "main") == ["after_on_main", "before"]
    assert names_at(catalog, "dev") == ["before", "only_on_dev"]


def test_branch_creation_copies_no_rows():
    catalog = make_catalog()
    make_table(catalog)
    counts = [model.objects.count() for model in (Commit, ObjectVersion, Operation, SchemaVersion)]
    branch_create(catalog=catalog, name="feature/x", source="main")
    assert [model.objects.count() for model in (Commit, ObjectVersion, Operation, SchemaVersion)] == counts


def test_branch_from_commit_and_from_timestamp():
    catalog = make_catalog()
    database_create(target=on(catalog), name="one")
    first = head(catalog)
    time.sleep(0.02)
    moment = timezone.now()
    time.sleep(0.02)
    database_create(target=on(catalog), name="two")
    branch_create(catalog=catalog, name="from_commit", source=first)
    branch_create(catalog=catalog, name="from_time", source="main", at=moment)
    assert names_at(catalog, "from_commit") == ["one"]
    assert names_at(catalog, "from_time") == ["one"]
    assert names_at(catalog, "main") == ["one", "two"]


def test_nested_branches_keep_their_lines_apart():
    catalog = make_catalog()
    database_create(target=on(catalog), name="a")
    branch_create(catalog=catalog, name="dev", source="main")
    database_create(target=on(catalog, "dev"), name="b")
    branch_create(catalog=catalog, name="dev2", source="dev")
    database_create(target=on(catalog), name="c")
    database_create(target=on(catalog, "dev"), name="d")
    database_create(target=on(catalog, "dev2"), name="e")
    assert names_at(catalog, "main") == ["a", "c"]
    assert names_at(catalog, "dev") == ["a", "b", "d"]
    assert names_at(catalog, "dev2") == ["a", "b", "e"]
    assert [c.message for c in commit_log(ref_resolve(catalog=catalog, ref="dev2").chain)] == [
        "Create database e", "Create database b", "Create database a", "Create catalog",
    ]  # fmt: skip


def test_the_chain_after_a_commit_is_the_one_read_from_the_database_on_a_line_going_on_and_on_a_fork():
    catalog = make_catalog()
    database_create(target=on(catalog), name="a")
    branch_create(catalog=catalog, name="dev", source="main")
    branch_create(catalog=catalog, name="dev2", source="dev")
    for branch, name in (("main", "b"), ("main", "c"), ("dev", "d"), ("dev2", "e"), ("dev", "f"), ("dev2", "g")):
        before = ref_resolve(catalog=catalog, ref=branch).chain
        database_create(target=on(catalog, branch), name=name)
        after = Commit.objects.get(id=head(catalog, branch))
        assert chain_after(before, after) == commit_chain(after), (branch, name)


def test_time_travel_returns_each_earlier_state():
    catalog = make_catalog()
    make_table(catalog)
    changes = [("amount", {"name": "total"}), ("total", {"type": "long"}), ("total", {"nullable": False, "default": 0})]
    states = []
    for column, change in changes:
        states.append((head(catalog), timezone.now(), table_at(catalog, "main").state["columns"]))
        time.sleep(0.01)
        column_update(target=on(catalog), database="sales", table="orders", column=column, changes=change)
        time.sleep(0.01)
    assert len({str(columns) for _, _, columns in states}) == 3
    for commit_id, moment, columns in states:
        assert table_at(catalog, commit_id).state["columns"] == columns
        assert table_at(catalog, "main", at=moment).state["columns"] == columns
    final = {c["name"]: c for c in table_at(catalog, "main").state["columns"]}
    assert final["total"] == {"id": 2, "name": "total", "type": "long", "nullable": False, "default": 0}


def test_renames_keep_ids_and_history():
    catalog = make_catalog()
    table = make_table(catalog)
    database = ref_resolve(catalog=catalog, ref="main").chain
    db_id = object_get(database, kind="database", name="sales").object_id
    database_update(target=on(catalog), name="sales", new_name="revenue")
    table_update(target=on(catalog), database="revenue", name="orders", new_name="purchases")
    column_update(target=on(catalog), database="revenue", table="purchases", column="amount", changes={"name": "x"})
    renamed = table_at(catalog, "main", database="revenue", table="purchases")
    assert renamed.object_id == table.object_id
    assert renamed.parent_id == db_id
    assert [c["id"] for c in renamed.state["columns"]] == [1, 2, 3]
    history = object_history(ref_resolve(catalog=catalog, ref="main").chain, object_id=table.object_id)
    assert [[op.op for op in entry.operations] for entry in history] == [["alter_column"], ["alter_name"], ["create"]]
    assert history[0].operations[0].details == {"action": "rename", "column_id": 2, "old": "amount", "new": "x"}


def test_every_schema_change_adds_a_visible_schema_version():
    catalog = make_catalog()
    table = make_table(catalog)
    target = on(catalog)
    column_add(target=target, database="sales", table="orders", spec={"name": "note", "type": "string"})
    column_update(target=target, database="sales", table="orders", column="amount", changes={"type": "long"})
    column_drop(target=target, database="sales", table="orders", column="note")
    table_update(target=target, database="sales", name="orders", set_properties={"owner": "bi"})  # not a schema change
    versions = list(schema_history(ref_resolve(catalog=catalog, ref="main").chain, table_id=table.object_id))
    assert len(versions) == 4
    assert all(version.visible for version in versions)
    assert [len(version.columns) for version in versions] == [3, 4, 4, 3]
    assert table_at(catalog, "main").state["schema_version_id"] == versions[-1].id
    assert table_at(catalog, "main").state["last_column_id"] == 4  # a dropped column's id is never reused


def test_operations_record_what_the_merge_engine_needs():
    catalog = make_catalog()
    make_table(catalog, partition_by=["region"])
    target = on(catalog)
    table_update(target=target, database="sales", name="orders", set_properties={"a": "1", "b": "2"})
    table_update(target=target, database="sales", name="orders", set_properties={"a": "3"}, unset_properties=["b"])
    table_update(target=target, database="sales", name="orders", partition_by=[])
    column_update(target=target, database="sales", table="orders", column="amount", changes={"type": "long"})
    database_update(target=target, name="sales", set_properties={"k": "v"})
    database_update(target=target, name="sales", unset_properties=["k"])
    ops = [(op.op, op.details) for op in Operation.objects.order_by("commit__seq", "position")]
    assert ops[-6:] == [
        ("alter_properties", {"set": {"a": "1", "b": "2"}, "unset": [], "previous": {"a": None, "b": None}}),
        ("alter_properties", {"set": {"a": "3"}, "unset": ["b"], "previous": {"a": "1", "b": "2"}}),
        ("alter_partition", {"old": [3], "new": []}),
        ("alter_column", {"action": "widen", "column_id": 2, "old": "int", "new": "long"}),
        ("set_properties", {"set": {"k": "v"}, "previous": {"k": None}}),
        ("unset_properties", {"unset": ["k"], "previous": {"k": "v"}}),
    ]


def test_changes_on_a_branch_are_invisible_on_its_parent():
    catalog = make_catalog()
    make_table(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    column_update(target=on(catalog, "dev"), database="sales", table="orders", column="amount", changes={"name": "n"})
    table_drop(target=on(catalog, "dev"), database="sales", name="orders")
    assert names_at(catalog, "dev", kind="table", parent=table_at(catalog, "main").parent_id) == []
    assert [c["name"] for c in table_at(catalog, "main").state["columns"]] == ["id", "amount", "region"]


REJECTED = [
    ("type_narrowing", lambda c: column_update(
        target=on(c), database="sales", table="orders", column="id", changes={"type": "int"})),
    ("type_narrowing", lambda c: column_update(
        target=on(c), database="sales", table="orders", column="amount", changes={"type": "string"})),
    ("unknown_type", lambda c: column_add(
        target=on(c), database="sales", table="orders", spec={"name": "x", "type": "varchar2"})),
    ("name_exists", lambda c: database_create(target=on(c), name="sales")),
    ("name_exists", lambda c: make_table(c)),
    ("duplicate_column", lambda c: column_add(
        target=on(c), database="sales", table="orders", spec={"name": "amount", "type": "int"})),
    ("invalid_name", lambda c: database_create(target=on(c), name="bad-name; DROP")),
    ("invalid_name", lambda c: database_create(target=on(c), name="1abc")),
    ("read_only_ref", lambda c: database_create(target=on(c, "v1"), name="x")),
    ("branch_not_found", lambda c: database_create(target=on(c, "nope"), name="x")),
    ("column_in_use", lambda c: column_drop(target=on(c), database="sales", table="orders", column="id")),
    ("invalid_default", lambda c: column_add(
        target=on(c), database="sales", table="orders", spec={"name": "x", "type": "int", "default": "abc"})),
    ("property_not_set", lambda c: table_update(
        target=on(c), database="sales", name="orders", unset_properties=["missing"])),
    ("database_not_empty", lambda c: database_drop(target=on(c), name="sales")),
    ("default_branch", lambda c: branch_delete(catalog=c, name="main")),
    ("ref_exists", lambda c: branch_create(catalog=c, name="v1", source="main")),
    ("branch_moved", lambda c: database_create(target=on(c, expected_head="0" * 32), name="x")),
]  # fmt: skip


@pytest.mark.parametrize(("code", "change"), REJECTED, ids=[f"{i}-{code}" for i, (code, _) in enumerate(REJECTED)])
def test_rejected_change_changes_nothing(code, change):
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"])
    tag_create(catalog=catalog, name="v1", ref="main")
    before = (head(catalog), Commit.objects.count(), ObjectVersion.objects.count(), Operation.objects.count())
    with pytest.raises(ApplicationError) as refused:
        change(catalog)
    assert refused.value.code == code
    after = (head(catalog), Commit.objects.count(), ObjectVersion.objects.count(), Operation.objects.count())
    assert after == before


def test_not_null_column_without_default_is_accepted_on_an_empty_table():
    catalog = make_catalog()
    make_table(catalog)
    column_add(
        target=on(catalog), database="sales", table="orders", spec={"name": "x", "type": "int", "nullable": False}
    )
    assert table_at(catalog, "main").state["columns"][-1]["nullable"] is False


def test_dropped_table_stays_readable_at_earlier_commits():
    catalog = make_catalog()
    make_table(catalog)
    before = head(catalog)
    table_drop(target=on(catalog), database="sales", name="orders")
    with pytest.raises(ApplicationError) as missing:
        table_at(catalog, "main")
    assert missing.value.code == "table_not_found"
    assert table_at(catalog, before).name == "orders"
