"""Every cell of the rule tables of docs/merge-semantics.md#databases and #tables-without-a-primary-key.

Each cell builds its two sides through the public services on real Spark data: a source branch doing the row's
operation and a target branch doing the column's, both from one base. Then it merges and checks the outcome, not
the table: a conflict leaves the target as it was; a merge leaves on the target what replaying the source's
operation after the target's gives, by a small model of each operation (rows, columns, properties, name).
"""

import copy
from dataclasses import dataclass, field

import pytest

from catalog_app.services.databases import database_create, database_drop, database_update
from catalog_app.services.refs import branch_create
from catalog_app.services.tables import column_add, table_drop, table_update
from lakeui.errors import ConflictError
from merge_app.models import Merge
from merge_app.plan.rules import RULE_TABLES
from tests.support.catalogs import head, make_catalog, make_table, on
from tests.support.data import read
from tests.support.merges import change, insert, merge, table_at

pytestmark = pytest.mark.django_db(transaction=True)

BASE_ROWS = {i: {"amount": i * 10, "region": "eu" if i <= 4 else "us"} for i in range(1, 9)}  # 2 segments: 1-4, 5-8
# What each side does: different rows, keys and names, so that replaying one after the other is observable.
SIDES = {
    "src": {"insert": [100, 101], "delete": 1, "update": 2, "overwrite": [300, 301]},
    "dest": {"insert": [200, 201], "delete": 6, "update": 7, "overwrite": [400, 401]},
}
UPDATED_AMOUNT = {"src": -1, "dest": -2}


@dataclass
class Table:
    """What a user sees of the table: the model both the sides and the expected merge are computed on."""

    exists: bool = True
    name: str = "orders"
    rows: dict = field(default_factory=lambda: copy.deepcopy(BASE_ROWS))
    columns: list = field(default_factory=lambda: ["id", "amount", "region"])
    properties: dict = field(default_factory=lambda: {"keep": "1"})
    partition_by: list = field(default_factory=list)


def new_rows(ids):
    return {i: {"amount": i, "region": "eu"} for i in ids}


def as_json(ids):
    return [{"id": i, **row} for i, row in new_rows(ids).items()]


def _do(op, catalog, branch, side, name):
    target, plan = on(catalog, branch), SIDES[side]
    if op == "drop":
        table_drop(target=target, database="sales", name=name)
    elif op == "alter_name":
        table_update(target=target, database="sales", name=name, new_name=f"orders_{side}")
    elif op == "alter_properties":
        table_update(target=target, database="sales", name=name, set_properties={f"{side}_key": side})
    elif op == "alter_column":
        column_add(target=target, database="sales", table=name, spec={"name": f"{side}_col", "type": "string"})
    elif op == "alter_partition":
        table_update(target=target, database="sales", name=name, partition_by=["region"])
    elif op == "insert":
        insert(catalog, as_json(plan["insert"]), branch=branch, table=name)
    elif op == "delete":
        change(catalog, "table_delete", {"where": f"id = {plan['delete']}"}, branch=branch, table=name)
    elif op == "update":
        params = {"set": {"amount": str(UPDATED_AMOUNT[side])}, "where": f"id = {plan['update']}"}
        change(catalog, "table_update", params, branch=branch, table=name)
    elif op == "overwrite":
        params = {"strategy": "full_refresh", "rows": as_json(plan["overwrite"])}
        change(catalog, "table_load", params, branch=branch, table=name)
    elif op == "compaction":
        change(catalog, "table_compact", {}, branch=branch, table=name)


def _model(op, table: Table, side: str) -> Table:
    """The table after `op` of `side`, as the user would expect it replayed on `table`."""
    table, plan = copy.deepcopy(table), SIDES[side]
    if op == "drop":
        table.exists = False
    elif op == "alter_name":
        table.name = f"orders_{side}"
    elif op == "alter_properties":
        table.properties[f"{side}_key"] = side
    elif op == "alter_column":
        table.columns.append(f"{side}_col")
    elif op == "alter_partition":
        table.partition_by = ["region"]
    elif op == "insert":
        table.rows |= new_rows(plan["insert"])
    elif op == "delete":
        table.rows.pop(plan["delete"], None)
    elif op == "update" and plan["update"] in table.rows:
        table.rows[plan["update"]]["amount"] = UPDATED_AMOUNT[side]
    elif op == "overwrite":
        table.rows = new_rows(plan["overwrite"])
    return table


def observed(spark, catalog, ref, name) -> Table:
    version = table_at(catalog, ref, table=name)
    if version is None:
        return Table(exists=False)
    columns = [c["name"] for c in version.state["columns"]]
    by_id = {c["id"]: c["name"] for c in version.state["columns"]}
    rows = {
        row["id"]: {k: v for k, v in row.asDict().items() if k != "id"}
        for row in read(spark, catalog, ref, table=name).collect()
    }
    return Table(
        name=name, rows=rows, columns=columns, properties=version.state["properties"],
        partition_by=[by_id[i] for i in version.state["partition_by"]],
    )  # fmt: skip


def expected_table(src_op, dest_op) -> Table:
    after = _model(src_op, _model(dest_op, Table(), "dest"), "src")
    if not after.exists:
        return Table(exists=False)
    for name in after.columns[3:]:  # columns added on either side read as null in every row that lacks them
        for row in after.rows.values():
            row.setdefault(name, None)
    return after


# The outcomes a user expects in this scenario (the source changes segment 1-4, the target segment 5-8; a
# compaction rewrites both segments): which pairs conflict, and where the source's change is discarded.
TABLE_CONFLICTS = {(row, "drop") for row in RULE_TABLES["table"].rows if row != "drop"} | {
    ("delete", "insert"), ("update", "insert"),  # the target added rows the source's predicate never saw
    ("delete", "compaction"), ("update", "compaction"),  # F*: the positions the source changed were rewritten
}  # fmt: skip
TABLE_DISCARDED = {
    ("delete", "overwrite"), ("update", "overwrite"),  # A5, A4: the rows they changed were replaced
    ("compaction", "delete"), ("compaction", "update"), ("compaction", "overwrite"), ("compaction", "compaction"),
}  # fmt: skip


def _cell_pair(report, name):
    [table] = [obj for obj in report["objects"] if obj["kind"] == "table"]
    return table["pairs"]


def _sides(catalog, base: str, index: int) -> tuple[str, str]:
    """The source and the target branch of one cell of a rule table, both at `base`."""
    source, target = f"src-{index}", f"dest-{index}"
    for name in (source, target):
        branch_create(catalog=catalog, name=name, source=base)
    return source, target


@pytest.mark.parametrize("src_op", RULE_TABLES["table"].rows)
def test_table_rule_row(spark, subtests, src_op):
    catalog = make_catalog()
    make_table(catalog, properties={"keep": "1"})
    insert(catalog, [{"id": i, **row} for i, row in BASE_ROWS.items() if i <= 4])
    insert(catalog, [{"id": i, **row} for i, row in BASE_ROWS.items() if i > 4])
    base = head(catalog)
    for index, dest_op in enumerate(RULE_TABLES["table"].columns):
        with subtests.test(src=src_op, dest=dest_op):
            source, target = _sides(catalog, base, index)
            _do(src_op, catalog, source, "src", "orders")
            _do(dest_op, catalog, target, "dest", "orders")
            target_head = head(catalog, target)
            if (src_op, dest_op) in TABLE_CONFLICTS:
                with pytest.raises(ConflictError) as refused:
                    merge(catalog, source, target)
                assert refused.value.code == "merge_conflict"
                assert head(catalog, target) == target_head
                pairs = refused.value.details["conflicts"][0]["conflicts"]
                assert {(p["row"], p["column"]) for p in pairs} == {(src_op, dest_op)}
                continue
            result = merge(catalog, source, target)
            assert result.status == Merge.Status.MERGED
            [pair] = _cell_pair(result.report, "orders")
            want = "discarded" if (src_op, dest_op) in TABLE_DISCARDED else "ok"
            assert (pair["row"], pair["column"], pair["verdict"]) == (src_op, dest_op, want), pair
            if want == "discarded":
                assert [d["op"] for d in result.log["discarded_operations"]] == [src_op]
            want_table = expected_table(src_op, dest_op)
            assert observed(spark, catalog, target, want_table.name) == want_table


# --- 4.2 databases ---------------------------------------------------------------------------------------


@dataclass
class Database:
    exists: bool = True
    name: str = "sales"
    properties: dict = field(default_factory=lambda: {"owner": "ops", "tier": "gold"})


DATABASE_SIDES = {"src": {"unset": "owner"}, "dest": {"unset": "tier"}}


def _do_database(op, catalog, branch, side):
    target = on(catalog, branch)
    if op == "drop":
        database_drop(target=target, name="sales")
    elif op == "modify_name":
        database_update(target=target, name="sales", new_name=f"sales_{side}")
    elif op == "set_properties":
        database_update(target=target, name="sales", set_properties={"owner": side, f"{side}_key": "1"})
    elif op == "unset_properties":
        database_update(target=target, name="sales", unset_properties=[DATABASE_SIDES[side]["unset"]])


def _database_model(op, db: Database, side: str) -> Database:
    db = copy.deepcopy(db)
    if op == "drop":
        db.exists = False
    elif op == "modify_name":
        db.name = f"sales_{side}"
    elif op == "set_properties":
        db.properties |= {"owner": side, f"{side}_key": "1"}
    elif op == "unset_properties":
        db.properties.pop(DATABASE_SIDES[side]["unset"], None)
    return db


def observed_database(catalog, ref, object_id) -> Database:
    from catalog_app.selectors.objects import object_by_id
    from catalog_app.selectors.refs import ref_resolve

    version = object_by_id(ref_resolve(catalog=catalog, ref=ref).chain, object_id=object_id)
    if version.dropped:
        return Database(exists=False)
    return Database(name=version.name, properties=version.state["properties"])


DATABASE_CONFLICTS = {(row, "drop") for row in RULE_TABLES["database"].rows if row != "drop"}


@pytest.mark.parametrize("src_op", RULE_TABLES["database"].rows)
def test_database_rule_row(subtests, src_op):
    catalog = make_catalog()
    db = database_create(target=on(catalog), name="sales", properties={"owner": "ops", "tier": "gold"})
    base = head(catalog)
    for index, dest_op in enumerate(RULE_TABLES["database"].columns):
        with subtests.test(src=src_op, dest=dest_op):
            source, target = _sides(catalog, base, index)
            _do_database(src_op, catalog, source, "src")
            _do_database(dest_op, catalog, target, "dest")
            target_head = head(catalog, target)
            if (src_op, dest_op) in DATABASE_CONFLICTS:
                with pytest.raises(ConflictError):
                    merge(catalog, source, target)
                assert head(catalog, target) == target_head
                continue
            merge(catalog, source, target)
            want = _database_model(src_op, _database_model(dest_op, Database(), "dest"), "src")
            if not want.exists:
                want = Database(exists=False)
            assert observed_database(catalog, target, db.object_id) == want


def test_both_unsetting_the_same_database_property_conflicts():
    catalog = make_catalog()
    database_create(target=on(catalog), name="sales", properties={"owner": "ops"})
    branch_create(catalog=catalog, name="dev", source="main")
    database_update(target=on(catalog, "dev"), name="sales", unset_properties=["owner"])
    database_update(target=on(catalog), name="sales", unset_properties=["owner"])
    with pytest.raises(ConflictError) as refused:
        merge(catalog)
    [pair] = refused.value.details["conflicts"][0]["conflicts"]
    assert (pair["cell"], pair["verdict"]) == ("U*", "conflict")
