"""A merge never leaves a table that breaks its own rules (docs/merge-semantics.md#three-way-merge): a replayed change that would is a
conflict naming why, and nothing changes. Each case was a silent success before."""

import pytest

from catalog_app.services.refs import branch_create
from catalog_app.services.tables import column_add, column_drop, column_update, table_update
from lakeui.errors import ConflictError
from merge_app.plan.states import table_problems
from tests.support.catalogs import head, make_catalog, make_table, on
from tests.support.data import read
from tests.support.merges import change, insert, merge

pytestmark = pytest.mark.django_db(transaction=True)


def rows(*ids, amount=1, region="eu"):
    return [{"id": i, "amount": amount, "region": region} for i in ids]


def refused(catalog, why: str, source="dev", target="main"):
    heads = head(catalog, "main"), head(catalog, "dev")
    with pytest.raises(ConflictError) as error:
        merge(catalog, source=source, target=target)
    assert error.value.code == "merge_conflict"
    [obj] = error.value.details["conflicts"]
    reasons = " ".join(conflict["reason"] for conflict in obj["conflicts"])
    assert why in reasons, reasons
    assert (head(catalog, "main"), head(catalog, "dev")) == heads


def empty_table_on_two_branches():
    catalog = make_catalog()
    make_table(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    return catalog


def not_null(name="code"):
    return {"name": name, "type": "string", "nullable": False}


def test_the_target_adds_a_not_null_column_while_the_source_loads_rows(spark):
    """The seed's A6.2 case, with no column change on the source at all."""
    catalog = empty_table_on_two_branches()
    column_add(target=on(catalog), database="sales", table="orders", spec=not_null())
    insert(catalog, rows(1, 2), branch="dev")
    refused(catalog, "the target added NOT NULL column 'code' without a default")


def test_the_source_adds_a_not_null_column_while_the_target_writes_rows(spark):
    catalog = empty_table_on_two_branches()
    column_add(target=on(catalog, "dev"), database="sales", table="orders", spec=not_null())
    insert(catalog, rows(1, 2), branch="main")
    refused(catalog, "the source added NOT NULL column 'code' without a default")


def test_a_column_made_not_null_while_the_other_side_wrote_nulls(spark):
    catalog = empty_table_on_two_branches()
    column_update(target=on(catalog, "dev"), database="sales", table="orders", column="amount",
                  changes={"nullable": False})  # fmt: skip
    insert(catalog, [{"id": 1, "amount": None, "region": "eu"}], branch="main")
    refused(catalog, "Column 'amount' became NOT NULL while the target wrote rows that may hold NULL")


def test_a_column_made_not_null_merges_when_the_other_side_wrote_no_null(spark):
    catalog = empty_table_on_two_branches()
    column_update(target=on(catalog, "dev"), database="sales", table="orders", column="amount",
                  changes={"nullable": False})  # fmt: skip
    insert(catalog, rows(1), branch="main")
    merge(catalog)
    assert [r["id"] for r in read(spark, catalog).collect()] == [1]


def test_the_source_partitions_by_a_column_the_target_drops(spark):
    catalog = empty_table_on_two_branches()
    insert(catalog, rows(1), branch="main")
    table_update(target=on(catalog, "dev"), database="sales", name="orders", partition_by=["region"])
    column_drop(target=on(catalog), database="sales", table="orders", column="region")
    refused(catalog, "partitioned by a column one side dropped")


def test_a_partition_overwrite_carried_by_a_merge_reads_its_column_in_its_own_schema(spark):
    """dev overwrites partition eu, then renames the partition column; the overwrite reaches `x` through a merge
    and `main` through `x`. It replaces eu only, on every branch, whatever the column is called by then."""
    catalog = make_catalog()
    make_table(catalog, partition_by=["region"])
    insert(catalog, rows(1, 2, region="eu") + rows(3, 4, region="us"))
    for name in ("dev", "x"):
        branch_create(catalog=catalog, name=name, source="main")
    change(catalog, "table_load", {"strategy": "snapshot", "partition_column": "region", "rows": rows(10)},
           branch="dev")  # fmt: skip
    column_update(target=on(catalog, "dev"), database="sales", table="orders", column="region",
                  changes={"name": "area"})  # fmt: skip
    merge(catalog, source="dev", target="x")
    insert(catalog, rows(5, region="us"), branch="main")
    merge(catalog, source="x", target="main")
    assert sorted((r["id"], r["area"]) for r in read(spark, catalog).collect()) == [
        (3, "us"), (4, "us"), (5, "us"), (10, "eu"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("merged", "wrote", "nulls", "expected", "filled"),
    [
        ({"partition_by": [9]}, {"source": False, "target": False}, set(), "partitioned by a column one side dropped",
         None),
        ({"primary_key": [9]}, {"source": False, "target": False}, set(), "keyed by a column one side dropped", None),
        ({"columns": [{"id": 1, "name": "a", "nullable": True}, {"id": 2, "name": "n", "nullable": False}]},
         {"source": True, "target": False}, set(), "the target added NOT NULL column 'n'", "n"),
        ({"columns": [{"id": 1, "name": "a", "nullable": False}]}, {"source": False, "target": True}, {1},
         "Column 'a' became NOT NULL while the target wrote", None),
    ],
)  # fmt: skip
def test_table_problems(merged, wrote, nulls, expected, filled):
    base = {"columns": [{"id": 1, "name": "a", "nullable": True}]}
    dest = {"columns": [*base["columns"], {"id": 2, "name": "n", "nullable": False}]}
    merged = {"columns": base["columns"], "partition_by": [], "primary_key": [], **merged}
    [(problem, column)] = table_problems(base, base, dest, merged, wrote=wrote, nulls=lambda side: nulls)
    assert expected in problem and (column and column["name"]) == filled  # the column a fill settles it for


def test_table_problems_none_for_a_valid_merge():
    base = {"columns": [{"id": 1, "name": "a", "nullable": True}]}
    merged = {"columns": base["columns"], "partition_by": [1], "primary_key": []}
    assert table_problems(base, base, base, merged, wrote={"source": True, "target": True}, nulls=lambda s: {1}) == []
