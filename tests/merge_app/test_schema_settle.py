"""Schema and data conflicts settled in one resolution (docs/merge-semantics.md#schema-conflicts-in-a-resolution), on
real Spark data: a column type both sides changed (A6.1) becomes a type every value of both sides fits, a NOT NULL
column one side added without a default (A6.2) is filled for the rows the other side wrote; together with column
rules, an expression and a cell pick on a primary-key table. Bad settlements are refused and nothing merges."""

import decimal

import pytest
from django.conf import settings

from catalog_app.engine.reads import read_rows_arrow
from catalog_app.engine.warehouse import Warehouse
from catalog_app.selectors.table_files import table_columns, table_scan_plan
from catalog_app.services.refs import branch_create
from catalog_app.services.tables import column_add, column_drop, column_update
from lakeui.errors import ApplicationError, ConflictError
from merge_app.models import Merge
from tests.support.catalogs import head, make_catalog, make_table, on
from tests.support.data import files_at, read, table_version
from tests.support.merges import change, insert, merge, table_at

pytestmark = pytest.mark.django_db(transaction=True)

TABLE = "sales.orders"


def both_changed_the_schema(**table):
    """An empty table on main and dev. main: amount int -> decimal(10,0), a NOT NULL column `code` added (no
    default), rows 1 and 2 with codes. dev: amount int -> long, rows 2 and 3 (no code)."""
    catalog = make_catalog()
    make_table(catalog, **table)
    branch_create(catalog=catalog, name="dev", source="main")
    column_update(target=on(catalog), database="sales", table="orders", column="amount",
                  changes={"type": "decimal(10,0)"})  # fmt: skip
    column_add(target=on(catalog), database="sales", table="orders",
               spec={"name": "code", "type": "string", "nullable": False})  # fmt: skip
    insert(catalog, [{"id": 1, "amount": 10, "region": "eu", "code": "m1"},
                     {"id": 2, "amount": 20, "region": "eu", "code": "m2"}])  # fmt: skip
    column_update(target=on(catalog, "dev"), database="sales", table="orders", column="amount",
                  changes={"type": "long"})  # fmt: skip
    insert(catalog, [{"id": 2, "amount": 2**40, "region": "us"}, {"id": 3, "amount": 30, "region": "us"}],
           branch="dev")  # fmt: skip
    return catalog


def reasons_of(error: ConflictError) -> str:
    return " ".join(c["reason"] for obj in error.details["conflicts"] for c in obj["conflicts"])


def settled(**schema):
    return {"tables": {TABLE: {"schema": schema}}}


def test_a_type_and_a_fill_settle_the_schema_conflicts_of_a_table_without_a_key(spark):
    catalog = both_changed_the_schema()
    before = head(catalog)
    with pytest.raises(ConflictError) as refused:
        merge(catalog)
    assert "6.1" in reasons_of(refused.value)
    with pytest.raises(ConflictError) as refused:  # the type alone: the rows dev wrote have no code
        merge(catalog, resolution=settled(amount={"type": "decimal(20,0)"}))
    assert "A6.2: the target added NOT NULL column 'code'" in reasons_of(refused.value)
    bad = {
        "schema_type_lossy": settled(amount={"type": "int"}),  # dev's 2**40 is no int
        "invalid_fill": settled(amount={"type": "decimal(20,0)"}, code={"fill": None}),
        "unknown_column": settled(nope={"fill": 1}),
        "unknown_type": settled(amount={"type": "money"}),
        "invalid_resolution": settled(amount={"type": "long", "fill": 1}),
    }
    for code, resolution in bad.items():
        with pytest.raises(ApplicationError) as error:
            merge(catalog, resolution=resolution)
        assert error.value.code == code, (code, error.value.message)
        assert head(catalog) == before

    done = merge(catalog, resolution=settled(amount={"type": "decimal(20,0)"}, code={"fill": "legacy"}))
    columns = {c["name"]: c for c in table_at(catalog).state["columns"]}
    assert (columns["amount"]["type"], columns["code"]["default"]) == ("decimal(20,0)", "legacy")
    rows = sorted(tuple(r) for r in read(spark, catalog).collect())
    assert rows == [
        (1, decimal.Decimal(10), "eu", "m1"), (2, decimal.Decimal(20), "eu", "m2"),
        (2, decimal.Decimal(2**40), "us", "legacy"), (3, decimal.Decimal(30), "us", "legacy"),
    ]  # fmt: skip
    logged = {e["column"]: e["choice"] for e in done.log["resolutions"] if e["scope"] == "schema"}
    assert logged == {"amount": {"type": "decimal(20,0)"}, "code": {"fill": "legacy"}}


@pytest.mark.parametrize(("fill", "dev_code"), [("legacy", "legacy"), ({"expression": "region"}, "us")])
def test_schema_and_cells_settled_together_on_a_primary_key_table(spark, fill, dev_code):
    """Both sides inserted key 2 with different rows, in their own schemas: its cells are compared in the merged one
    (amount as decimal(20,0), dev's missing code filled by a value or an expression), then settled by a column rule,
    an expression and a pick."""
    catalog = both_changed_the_schema(primary_key=["id"])
    schema = {"amount": {"type": "decimal(20,0)"}, "code": {"fill": fill}}
    rules = {"amount": "greatest", "region": {"expression": "concat(target.region, '+', source.region)"}}
    resolution = {"tables": {TABLE: {"schema": schema, "columns": rules}}}
    with pytest.raises(ConflictError):  # key 2's code: no rule settles it
        merge(catalog, resolution=resolution)
    dry = merge(catalog, resolution={**resolution, "default": "target_wins"}, dry_run=True)
    [obj] = [o for o in dry.report["objects"] if o["name"] == TABLE]
    [conflict] = obj["keys"]["listed"]
    assert (conflict["key_id"], sorted(conflict["cells"])) == ("[2]", ["amount", "code", "region"])
    inputs = {side: None if conflict[side] is None else conflict[side]["code"] for side in ("base", "source", "target")}
    assert inputs == {"base": None, "source": dev_code, "target": "m2"}  # dev's row has the fill
    pick = {"pick": "target", "inputs": inputs}
    before = head(catalog)
    stale = {**resolution, "cells": {TABLE: {"[2]": {"code": {**pick, "inputs": {**inputs, "target": "m9"}}}}}}
    with pytest.raises(ConflictError):  # a pick made on other values settles nothing
        merge(catalog, resolution=stale)
    nothing = {**resolution, "cells": {TABLE: {"[2]": {"code": {"pick": "base", "inputs": inputs}}}}}
    with pytest.raises(ApplicationError) as refused:  # both inserted the key: no base, and code is NOT NULL
        merge(catalog, resolution=nothing)
    assert refused.value.code == "invalid_cell_pick" and "NOT NULL" in refused.value.message
    assert head(catalog) == before

    done = merge(catalog, resolution={**resolution, "cells": {TABLE: {"[2]": {"code": pick}}}})
    [choice] = [c for c in done.report["objects"][0]["keys"]["choices"] if c["key_id"] == "[2]"]
    shown = {column: (cell["rule"] if isinstance(cell["rule"], str) else "expression", cell["result"])
             for column, cell in choice["cells"].items()}  # fmt: skip
    assert shown == {"amount": ("greatest", str(2**40)), "region": ("expression", "eu+us"), "code": ("pick", "m2")}
    rows = sorted(tuple(r) for r in read(spark, catalog).collect())
    assert rows == [
        (1, decimal.Decimal(10), "eu", "m1"), (2, decimal.Decimal(2**40), "eu+us", "m2"),
        (3, decimal.Decimal(30), "us", dev_code),
    ]  # fmt: skip
    logged = {(e["scope"], e.get("column")) for e in done.log["resolutions"]}
    assert {("schema", "amount"), ("schema", "code"), ("column", "amount"), ("column", "region"),
            ("cell", "code")} <= logged  # fmt: skip


def cast_on_both_sides(**table):
    """main: amount int -> decimal(10,0), rows 1 (amount 9) and 5 (amount 10) in one segment. dev: amount int ->
    long, rows 2 (2**40) and 3 (30). late, branched before either: row 4 (amount 7), amount still an int."""
    catalog = make_catalog()
    make_table(catalog, **table)
    branch_create(catalog=catalog, name="dev", source="main")
    branch_create(catalog=catalog, name="late", source="main")
    column_update(target=on(catalog), database="sales", table="orders", column="amount",
                  changes={"type": "decimal(10,0)"})  # fmt: skip
    insert(catalog, [{"id": 1, "amount": 9, "region": "eu"}, {"id": 5, "amount": 10, "region": "eu"}])
    column_update(target=on(catalog, "dev"), database="sales", table="orders", column="amount",
                  changes={"type": "long"})  # fmt: skip
    insert(catalog, [{"id": 2, "amount": 2**40, "region": "us"}, {"id": 3, "amount": 30, "region": "us"}],
           branch="dev")  # fmt: skip
    insert(catalog, [{"id": 4, "amount": 7, "region": "uk"}], branch="late")
    return catalog


def arrow_rows(catalog, ref="main"):
    version = table_at(catalog, ref)
    rows = read_rows_arrow(Warehouse(settings.LAKEUI_WAREHOUSE), table_columns(version), files_at(catalog, ref).reads())
    return sorted(tuple(row.values()) for row in rows.to_pylist())


def test_a_type_no_side_widens_to_is_checked_against_every_value_and_read_cast(spark):
    """A6.1 settled by a type that is not a widening of a side's (decimal(10,0) to long, long to string): each side's
    values are checked to fit it on Spark, cast and back, and the merge is refused naming the first that does not;
    the segments keep the type they were written in and are read cast (Spark and Arrow alike), and their statistics
    of the old type prune nothing. A branch that kept the old type takes the merged one with its values checked."""
    catalog = cast_on_both_sides()
    before = head(catalog)
    with pytest.raises(ApplicationError) as refused:  # dev's 2**40 is no int
        merge(catalog, resolution=settled(amount={"type": "int"}))
    assert refused.value.code == "schema_type_lossy"
    assert refused.value.details["value"] == 2**40 and refused.value.details["side"] == "source"
    with pytest.raises(ApplicationError) as refused:  # both sides hold region as text: no A6.1 to settle
        merge(catalog, resolution=settled(amount={"type": "string"}, region={"type": "date"}))
    assert refused.value.code == "schema_type_lossy" and "do not type it apart" in refused.value.message
    assert head(catalog) == before

    done = merge(catalog, resolution=settled(amount={"type": "string"}))
    assert {c["name"]: c["type"] for c in table_at(catalog).state["columns"]}["amount"] == "string"
    expected = [(1, "9", "eu"), (2, str(2**40), "us"), (3, "30", "us"), (5, "10", "eu")]
    assert sorted(tuple(r) for r in read(spark, catalog).collect()) == expected
    assert arrow_rows(catalog) == expected
    logged = {e["column"]: e["choice"] for e in done.log["resolutions"] if e["scope"] == "schema"}
    assert logged == {"amount": {"type": "string"}}
    merge(catalog, source="main", target="late")  # late's int 7 is checked to fit the text: "7"
    assert arrow_rows(catalog, "late") == sorted([(4, "7", "uk"), *expected])
    assert sorted(tuple(r) for r in read(spark, catalog, "late").collect()) == arrow_rows(catalog, "late")
    # main's segment of rows 1 and 5 has decimal statistics 9 to 10: as text "10" < "9", which prune no row
    change(catalog, "table_delete", {"where": "amount = '10'"})
    assert arrow_rows(catalog) == [row for row in expected if row[0] != 5]


def test_a_cast_that_one_value_does_not_survive_is_refused_with_that_value(spark):
    """decimal(10,0) and long to double: 2**53 + 1 is no double (it comes back 2**53)."""
    catalog = cast_on_both_sides()
    insert(catalog, [{"id": 6, "amount": 2**53 + 1, "region": "us"}], branch="dev")
    before = head(catalog)
    with pytest.raises(ApplicationError) as refused:
        merge(catalog, resolution=settled(amount={"type": "double"}))
    assert (refused.value.code, refused.value.details["value"]) == ("schema_type_lossy", 2**53 + 1)
    assert str(2**53 + 1) in refused.value.message
    assert head(catalog) == before


def test_a_key_column_only_widens(spark):
    catalog = cast_on_both_sides(primary_key=["id"])
    before = head(catalog)
    with pytest.raises(ApplicationError) as refused:  # the keys would order as text ("10" before "9")
        merge(catalog, resolution=settled(amount={"type": "long"}, id={"type": "string"}))
    assert refused.value.code == "schema_type_lossy" and "key or partition column" in refused.value.message
    assert head(catalog) == before
    merge(catalog, resolution=settled(amount={"type": "long"}))  # decimal(10,0)'s 9 and 10 fit a long
    expected = [(1, 9, "eu"), (2, 2**40, "us"), (3, 30, "us"), (5, 10, "eu")]
    assert arrow_rows(catalog) == expected
    assert sorted(tuple(r) for r in read(spark, catalog).collect()) == expected


def a_column_one_side_added():
    """main adds `qty` (long, NOT NULL, no default) to the empty table, then writes row 1 with it; dev writes rows 2
    and 3 without it; late, branched before either, writes row 4. empty is branched before the table was made."""
    catalog = make_catalog()
    branch_create(catalog=catalog, name="empty", source="main")
    make_table(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    branch_create(catalog=catalog, name="late", source="main")
    column_add(target=on(catalog), database="sales", table="orders",
               spec={"name": "qty", "type": "long", "nullable": False})  # fmt: skip
    insert(catalog, [{"id": 1, "amount": 10, "region": "eu", "qty": 5}])
    insert(catalog, [{"id": 2, "amount": 20, "region": "us"}, {"id": 3, "amount": 30, "region": "us"}], branch="dev")
    insert(catalog, [{"id": 4, "amount": 7, "region": "uk"}], branch="late")
    return catalog


def filled(expression):
    return settled(qty={"fill": {"expression": expression}})


def test_a_fill_by_an_expression_computes_each_row_from_its_other_columns(spark, user_client):
    """A6.2 settled by an expression: each row written without the column reads it computed from its own columns,
    in Spark and in Arrow alike; the merge checks every such row first (a NULL, a value the type does not hold);
    a branch that never had the column takes it with its rows checked and filled the same way."""
    catalog = a_column_one_side_added()
    before = head(catalog)
    refused = {
        "(SELECT 1)": "subqueries",
        "nope + 1": "unknown column",
        "region": "gives a string value",
        "amount / 0": "needs Spark",  # no division in a fill (so no division by zero)
        "1" * 100_001: "longer than",
        "length(region)": "needs Spark",  # a function: the preview computes fills in Arrow, which has none
        "NULL": "reads no column",  # a value is {"fill": value}
    }
    for expression, problem in refused.items():
        with pytest.raises(ApplicationError) as error:
            merge(catalog, resolution=filled(expression))
        assert error.value.code in ("invalid_fill", "invalid_resolution"), (expression, error.value.message)
        assert problem.lower() in error.value.message.lower(), (expression, error.value.message)
    assert head(catalog) == before

    done = merge(catalog, resolution=filled("id * 10 + amount"))
    qty = {c["name"]: c for c in table_at(catalog).state["columns"]}["qty"]
    assert (qty["fill"]["expression"], qty["default"]) == ("id * 10 + amount", None)
    assert [(c["id"], c["name"]) for c in qty["fill"]["columns"]] == [(1, "id"), (2, "amount")]  # what it reads
    shown = user_client.get(f"/api/v1/catalogs/{catalog.name}/refs/main/databases/sales/tables/orders").json()
    assert {c["name"]: c.get("fill", {}).get("expression") for c in shown["columns"]} == {
        "id": None, "amount": None, "region": None, "qty": "id * 10 + amount"
    }  # fmt: skip
    expected = [(1, 10, "eu", 5), (2, 20, "us", 40), (3, 30, "us", 60)]
    assert arrow_rows(catalog) == expected
    assert sorted(tuple(r) for r in read(spark, catalog).collect()) == expected
    logged = {e["column"]: e["choice"] for e in done.log["resolutions"] if e["scope"] == "schema"}
    assert logged == {"qty": {"fill": {"expression": "id * 10 + amount"}}}
    chain, version = table_version(catalog)
    with pytest.raises(ApplicationError) as error:  # a reader outside the server would read NULLs
        table_scan_plan(chain, commit_id=head(catalog), table=version, warehouse=Warehouse(settings.LAKEUI_WAREHOUSE))
    assert error.value.code == "scan_not_representable"

    branch_create(catalog=catalog, name="gaps", source="late")
    insert(catalog, [{"id": 9, "amount": None, "region": "us"}], branch="gaps")
    gaps = head(catalog, "gaps")
    with pytest.raises(ApplicationError) as error:  # row 9 has no amount: its qty would be NULL
        merge(catalog, source="main", target="gaps")
    assert error.value.code == "invalid_fill" and "NULL for the row {'id': 9" in error.value.message
    assert head(catalog, "gaps") == gaps
    merge(catalog, source="main", target="late")  # late never had qty: its row 4 is filled too
    assert arrow_rows(catalog, "late") == sorted([*expected, (4, 7, "uk", 47)])
    assert sorted(tuple(r) for r in read(spark, catalog, "late").collect()) == arrow_rows(catalog, "late")

    merge(catalog, source="main", target="empty")  # the table is new there: nothing of empty's to fill
    assert arrow_rows(catalog, "empty") == arrow_rows(catalog)

    # an update rewrites row 2 with the value its fill gave it; the others still compute theirs
    change(catalog, "table_update", {"set": {"amount": "amount + 1"}, "where": "id = 2"})
    expected = [(1, 10, "eu", 5), (2, 21, "us", 40), (3, 30, "us", 60)]
    assert arrow_rows(catalog) == expected
    assert sorted(tuple(r) for r in read(spark, catalog).collect()) == expected

    # the fill reads the segment's own values by column id: a rename, or a drop, of a column it reads changes nothing
    column_update(target=on(catalog), database="sales", table="orders", column="amount", changes={"name": "amt"})
    assert arrow_rows(catalog) == expected
    assert sorted(tuple(r) for r in read(spark, catalog).collect()) == expected
    column_drop(target=on(catalog), database="sales", table="orders", column="amt")
    expected = [(1, "eu", 5), (2, "us", 40), (3, "us", 60)]
    assert arrow_rows(catalog) == expected
    assert sorted(tuple(r) for r in read(spark, catalog).collect()) == expected


def test_hostile_fills_are_refused_through_the_api_before_anything_runs(spark, user_client):
    catalog = a_column_one_side_added()
    before = head(catalog)
    url = f"/api/v1/catalogs/{catalog.name}/merges"
    hostile = {
        "(SELECT qty FROM sales.orders)": "subqueries",
        "read_file('/etc/passwd')": "unknown function",
        "id + " * 20_000 + "id": "longer than",
        "region || '/etc/passwd'": "",
    }
    for text, named in hostile.items():
        response = user_client.post(url, {"source": "dev", "target": "main", "resolution": filled(text)}, format="json")
        body = response.json()
        assert (response.status_code, body["code"]) == (400, "invalid_fill"), (text[:40], body)
        assert named in body["message"] and (body["details"]["table"], body["details"]["column"]) == (TABLE, "qty")
    assert head(catalog) == before and not Merge.objects.filter(catalog=catalog).exists()
