"""Column rules: the conflicting cells of a primary-key table settled per column (docs/merge-semantics.md#column-rules),
on real Spark data: each built-in rule, the table's or the default choice for the rest, the dry run showing what the
merge writes, the audit log naming each rule, and bad rules refused with nothing merged."""

import datetime
import decimal

import pytest

from catalog_app.services.refs import branch_create
from lakeui.errors import ApplicationError, ConflictError
from merge_app.models import Merge, MergeRequest
from merge_app.plan import semantics
from merge_app.selectors.merge_requests import resolution_of
from merge_app.services.merge_requests import merge_request_open
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import read, run_in_process
from tests.support.merges import merge

pytestmark = pytest.mark.django_db(transaction=True)

COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "status", "type": "string"},
    {"name": "amount", "type": "long"},
    {"name": "price", "type": "decimal(10,2)"},
    {"name": "updated_at", "type": "timestamp"},
    {"name": "note", "type": "string"},
    {"name": "hits", "type": "int"},
    {"name": "region", "type": "string"},
]
NAMES = [c["name"] for c in COLUMNS]
TABLE = "sales.orders"


def row(i, status, amount, price, day, note, hits, region="eu"):
    return {"id": i, "status": status, "amount": amount, "price": price, "updated_at": f"2024-{day} 00:00:00",
            "note": note, "hits": hits, "region": region}  # fmt: skip


BASE = {i: row(i, "new", 100 * i, f"{10 * i}.00", f"01-0{i}", f"n{i}", 10 * i) for i in (1, 2, 3, 4)}
# Both sides change every value column of keys 1-3, each differently; the source also changes region of key 2 (a
# cell only it changed: merged as it is), the target region of key 1. Key 4: the source deletes it, the target
# updates it (not a conflict of cells: the table's or the default choice settles it).
SOURCE = {
    1: row(1, "shipped", 105, "12.50", "02-01", "s1", 11),
    2: row(2, "shipped", 205, "19.00", "01-15", None, 21, region="sx"),
    3: row(3, "paid", 305, "30.10", "03-03", "s3", 31),
}
TARGET = {
    1: row(1, "cancelled", 107, "11.25", "03-01", "t1", 8, region="tx"),
    2: row(2, "held", 207, "20.50", "01-10", "t2", 18),
    3: row(3, "held", 293, "29.90", "02-03", "t3", 28),
    4: row(4, "held", 499, "40.00", "01-04", "t4", 40),
}


def typed(values: dict) -> tuple:
    """A JSON row as Spark reads it back."""
    return (
        values["id"], values["status"], values["amount"], decimal.Decimal(values["price"]),
        datetime.datetime.fromisoformat(values["updated_at"]), values["note"], values["hits"], values["region"],
    )  # fmt: skip


def rows_at(spark, catalog, ref):
    return {r["id"]: tuple(r) for r in read(spark, catalog, ref).collect()}


@pytest.fixture
def both_changed(spark):
    return both_changed_catalog(spark)


def both_changed_catalog(spark):
    """main: the table with BASE; dev branched from it; then each side's changes (SOURCE on dev, TARGET on main)."""
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"], columns=COLUMNS)
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": list(BASE.values())})
    branch_create(catalog=catalog, name="dev", source="main")
    run_in_process(spark, catalog, {"strategy": "upsert", "key_columns": ["id"], "rows": list(SOURCE.values())},
             branch="dev")  # fmt: skip
    run_in_process(spark, catalog, {"where": "id = 4"}, kind="table_delete", branch="dev")
    run_in_process(spark, catalog, {"strategy": "upsert", "key_columns": ["id"], "rows": list(TARGET.values())})
    return catalog


def previewed(report: dict) -> dict[int, dict[str, object]]:
    """The settled cells a merge's report shows, per key: column -> result (JSON)."""
    [obj] = [o for o in report["objects"] if o["name"] == TABLE]
    return {
        c["key"]["id"]: {column: cell["result"] for column, cell in c["cells"].items()}
        for c in obj["keys"]["choices"] if c["choice"] == "columns"
    }  # fmt: skip


def test_column_rules_settle_the_conflicting_cells_as_the_dry_run_shows(spark, both_changed):
    catalog = both_changed
    # Merge 1, into a copy of main: greatest, least, sum_of_changes, concat (with its separator) and source_wins;
    # updated_at has no rule: the table's target_wins settles it, and key 4 (a delete against an update).
    branch_create(catalog=catalog, name="try", source="main")
    first = {"tables": {TABLE: {"choice": "target_wins", "columns": {
        "status": "source_wins", "amount": "sum_of_changes", "price": "greatest", "hits": "least",
        "note": {"concat": {"separator": " / "}},
    }}}}  # fmt: skip
    before = head(catalog, "try")
    dry = merge(catalog, "dev", "try", resolution=first, dry_run=True)
    assert dry.status == Merge.Status.PLANNED and dry.commit_id is None
    assert head(catalog, "try") == before
    done = merge(catalog, "dev", "try", resolution=first)
    merged = rows_at(spark, catalog, "try")
    expected = {
        # status from the source; amount target + source - base; price the greater; updated_at has no rule: the
        # table's target_wins; note target / source (a NULL side left out); hits the lesser; region: each side's
        # own change merges (key 1's target, key 2's source).
        1: typed(row(1, "shipped", 112, "12.50", "03-01", "t1 / s1", 8, region="tx")),
        2: typed(row(2, "shipped", 212, "20.50", "01-10", "t2", 18, region="sx")),
        3: typed(row(3, "paid", 298, "30.10", "02-03", "t3 / s3", 28)),
        4: typed(TARGET[4]),  # deleted against updated: the table's target_wins keeps the target's row
    }
    assert merged == expected
    # The dry run showed exactly these cells, and the merge planned the same.
    shown = previewed(dry.report)
    assert shown == previewed(done.report)
    for key, cells in shown.items():
        for column, value in cells.items():
            written = merged[key][NAMES.index(column)]
            assert value == (str(written) if isinstance(written, decimal.Decimal) else
                             written.isoformat() if isinstance(written, datetime.datetime) else written)  # fmt: skip
    assert set(shown[1]) == {"status", "amount", "price", "updated_at", "note", "hits"}
    # The audit log: each rule, who chose it, the cells it settled and a sample of them.
    logged = {(e["column"], e["choice"] if isinstance(e["choice"], str) else "concat"): e
              for e in done.log["resolutions"] if "column" in e}  # fmt: skip
    assert set(logged) == {("status", "source_wins"), ("amount", "sum_of_changes"), ("price", "greatest"),
                           ("hits", "least"), ("note", "concat"), ("updated_at", "target_wins")}  # fmt: skip
    assert logged[("updated_at", "target_wins")]["scope"] == "table"
    amount = logged[("amount", "sum_of_changes")]
    assert (amount["scope"], amount["cells"], amount["chosen_by"]) == ("column", 3, None)
    assert {(s["key"]["id"], s["base"], s["source"], s["target"], s["result"]) for s in amount["sample"]} == {
        (1, 100, 105, 107, 112), (2, 200, 205, 207, 212), (3, 300, 305, 293, 298)}  # fmt: skip
    assert logged[("note", "concat")]["choice"] == {"concat": {"separator": " / "}}

    # Merge 2, into main: base, least, target_wins, concat with its default separator, greatest on a timestamp;
    # the rest (status has no rule) and key 4 by the default source_wins: key 4 is deleted.
    second = {"default": "source_wins", "tables": {TABLE: {"columns": {
        "amount": "base", "price": "least", "hits": "target_wins", "note": "concat", "updated_at": "greatest",
    }}}}  # fmt: skip
    done = merge(catalog, resolution=second)
    assert rows_at(spark, catalog, "main") == {
        1: typed(row(1, "shipped", 100, "11.25", "03-01", "t1 | s1", 8, region="tx")),
        2: typed(row(2, "shipped", 200, "19.00", "01-15", "t2", 18, region="sx")),
        3: typed(row(3, "paid", 300, "29.90", "03-03", "t3 | s3", 28)),
    }
    scopes = {(e["column"], e["scope"]) for e in done.log["resolutions"] if "column" in e}
    assert ("status", "default") in scopes and ("amount", "column") in scopes
    assert {"scope": "default", "choice": "source_wins"}.items() <= next(
        e for e in done.log["resolutions"] if "column" not in e and e.get("scope") == "default"
    ).items()


def test_rules_that_cannot_apply_are_refused_and_nothing_merges(spark, both_changed, user, user_client):
    catalog = both_changed
    before = head(catalog)
    url = f"/api/v1/catalogs/{catalog.name}/merges"
    bad = {
        "unknown_column": {"tables": {TABLE: {"columns": {"nope": "greatest"}}}},
        "invalid_column_rule": {"tables": {TABLE: {"columns": {"amount": "max"}}}},
        "column_rule_type": {"tables": {TABLE: {"columns": {"status": "sum_of_changes"}}}},
        "unknown_table": {"tables": {"sales.nope": {"columns": {"amount": "greatest"}}}},
    }
    for code, resolution in bad.items():
        response = user_client.post(url, {"source": "dev", "target": "main", "resolution": resolution}, format="json")
        assert (response.status_code, response.json()["code"]) == (400, code), response.json()
        assert response.json()["message"]
    hostile = {"tables": {TABLE: {"columns": {"note": {"concat": {"separator": "x" * 100_000}}}}}}
    response = user_client.post(url, {"source": "dev", "target": "main", "resolution": hostile}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_column_rule")
    column_name = {"tables": {TABLE: {"columns": {"amount; DROP TABLE x": "greatest"}}}}
    response = user_client.post(url, {"source": "dev", "target": "main", "resolution": column_name}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_resolution")
    # The plan checks them too (a merge asked for past the API): refused before anything is written.
    with pytest.raises(ApplicationError) as refused:
        merge(catalog, resolution={"tables": {TABLE: {"columns": {"note": "greatest", "hits": "concat"}}}})
    assert refused.value.code == "column_rule_type" and refused.value.details["column"] == "hits"
    assert head(catalog) == before
    # A cell no rule settles and no choice settles stands: the merge is refused with the key unresolved.
    with pytest.raises(ConflictError):
        merge(catalog, resolution={"tables": {TABLE: {"columns": {"amount": "greatest"}}}})
    assert head(catalog) == before

    # A merge request keeps column rules with who chose them (the API's PATCH), refuses bad ones the same way, and
    # its merge's audit log names the chooser of each rule.
    opened = merge_request_open(catalog=catalog, source="dev", target="main", title="rules", author=user)
    url = f"/api/v1/catalogs/{catalog.name}/merge-requests/{opened.number}"
    response = user_client.patch(url, {"resolutions": {"tables": {TABLE: {"columns": {"status": "least"}}}}},
                                 format="json")  # fmt: skip
    assert response.status_code == 200, response.json()
    response = user_client.patch(url, {"resolutions": {"tables": {TABLE: {"columns": {"hits": "concat"}}}}},
                                 format="json")  # fmt: skip
    assert (response.status_code, response.json()["code"]) == (400, "column_rule_type")
    given = {"default": "source_wins", "tables": {TABLE: {"columns": {"amount": "sum_of_changes", "status": None}}}}
    response = user_client.patch(url, {"resolutions": given}, format="json")
    assert response.status_code == 200, response.json()
    stored = MergeRequest.objects.get(id=opened.id)
    assert resolution_of(stored)["columns"] == {TABLE: {"amount": "sum_of_changes"}}
    assert [(c["scope"], c.get("column"), c["choice"], c["by"]) for c in stored.resolutions["chosen"]] == [
        ("column", "status", "least", "alice"), ("default", None, "source_wins", "alice"),
        ("column", "amount", "sum_of_changes", "alice"), ("column", "status", None, "alice"),
    ]  # fmt: skip
    done = merge(catalog, resolution=resolution_of(stored), audit={"resolution_choices": stored.resolutions["chosen"]})
    [amount] = [e for e in done.log["resolutions"] if e.get("column") == "amount"]
    assert (amount["choice"], amount["cells"], amount["chosen_by"]) == ("sum_of_changes", 3, "alice")
    assert rows_at(spark, catalog, "main")[3][NAMES.index("amount")] == 298


def test_the_cli_shorthand_builds_the_resolution():
    from lakeui_client.cli import _resolution

    built = _resolution(False, True, ("sales.orders.amount=greatest", "note=concat: / "), "sales.orders", None)
    assert built == {"resolution": {"default": "target_wins", "tables": {"sales.orders": {"columns": {
        "amount": "greatest", "note": {"concat": {"separator": " / "}}}}}}}  # fmt: skip
    given = '{"tables": {"sales.orders": "source_wins"}}'
    assert _resolution(False, False, ("sales.orders.hits=least",), None, given)["resolution"]["tables"] == {
        "sales.orders": {"choice": "source_wins", "columns": {"hits": "least"}}}  # fmt: skip


def test_what_each_rule_settles_and_what_it_leaves_to_the_choice():
    settle = semantics.cell_settle
    assert settle("greatest", "long", 1, None, 5, has_base=True) == (True, 5)  # NULL ignored
    assert settle("least", "double", 1.0, "NaN", 3.0, has_base=True) == (True, 3.0)  # NaN the greatest
    assert settle("greatest", "date", None, "2024-01-02", "2023-12-31", has_base=False) == (True, "2024-01-02")
    assert settle("sum_of_changes", "int", 10, None, 12, has_base=True) == (False, None)  # a NULL: not settled
    assert settle("sum_of_changes", "int", None, 3, 4, has_base=False) == (False, None)  # no base
    assert settle("sum_of_changes", "int", -(2**31), 2**31 - 1, 2**31 - 1, has_base=True)[0] is False  # overflow
    assert settle("sum_of_changes", "decimal(4,2)", "1.00", "60.00", "50.00", has_base=True) == (False, None)
    assert settle("sum_of_changes", "decimal(10,2)", "1.10", "2.25", "3.00", has_base=True) == (True, "4.15")
    assert settle("base", "string", None, "a", "b", has_base=False) == (False, None)
    assert settle("concat", "string", "x", None, "t", has_base=True) == (True, "t")
    # A key whose cell no rule settles goes by the choice, or stands.
    conflict = {"key": {"id": 9}, "key_id": "[9]", "cells": ["amount", "note"], "base": {"amount": 1, "note": "b"},
                "source": {"amount": 2, "note": "s"}, "target": {"amount": 3, "note": "t"}}  # fmt: skip
    types = {"amount": "long", "note": "string"}
    rules = {"amount": "greatest"}
    assert semantics.key_settle(conflict, rules=rules, types=types, fallback="fail", fallback_scope="default") is None
    cells = semantics.key_settle(conflict, rules=rules, types=types, fallback="source_wins", fallback_scope="table")
    assert {c: (cell["rule"], cell["scope"], cell["result"]) for c, cell in cells.items()} == {
        "amount": ("greatest", "column", 3), "note": ("source_wins", "table", "s")}  # fmt: skip
    deleted = {**conflict, "cells": ["*"], "source": None}
    assert semantics.key_settle(deleted, rules=rules, types=types, fallback="target_wins", fallback_scope="x") is None
