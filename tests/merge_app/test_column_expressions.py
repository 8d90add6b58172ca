"""Column expressions: the conflicting cells of a primary-key table settled by a SQL expression over the key's base,
source and target rows (docs/merge-semantics.md#column-expressions), on real Spark data: the merge writes exactly
the cells the dry run showed, the audit log names each expression; hostile or ill-typed expressions are refused
with a 400 naming the problem, and one that fails on a key refuses the merge naming the key; nothing is merged."""

import datetime
import decimal
import math

import pytest

from catalog_app.engine.predicate_parser import PredicateError, parse_expression, parse_row_expression
from catalog_app.engine.predicate_values import EvaluationError, evaluate
from catalog_app.services.refs import branch_create
from lakeui.errors import ApplicationError
from lakeui.jobs.services import job_execute
from merge_app.models import Merge, MergeRequest
from merge_app.plan import semantics
from merge_app.selectors.merge_requests import resolution_of
from merge_app.services.merge_requests import merge_request_open
from tests.conftest import wait_for_job
from tests.merge_app.test_column_rules import (
    NAMES,
    TABLE,
    TARGET,
    both_changed_catalog,
    previewed,
    row,
    rows_at,
    typed,
)
from tests.support.catalogs import head
from tests.support.merges import merge

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def both_changed(spark):
    """The conflicting orders of test_column_rules: keys 1-3 changed in every value column on both sides."""
    return both_changed_catalog(spark)


EXPRESSIONS = {
    "status": "concat(target.status, '/', source.status)",
    "amount": "CASE WHEN source.status = 'paid' THEN source.amount ELSE target.amount + source.amount - base.amount END",
    "price": "round((source.price + target.price) / 2, 2)",
    "hits": "coalesce(source.hits, 0) * 2 + target.hits % 5",
    "updated_at": "CASE WHEN source.updated_at > target.updated_at THEN source.updated_at ELSE target.updated_at END",
    "note": "coalesce(source.note, target.note, 'none')",
}


def _written(value):
    """A value Spark read back, as the report's JSON shows it."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value.isoformat() if hasattr(value, "isoformat") else value


def test_expressions_settle_the_conflicting_cells_as_the_dry_run_shows(spark, both_changed):
    catalog = both_changed
    branch_create(catalog=catalog, name="try", source="main")
    resolution = {"tables": {TABLE: {"choice": "target_wins", "columns": {
        column: {"expression": text} for column, text in EXPRESSIONS.items()}}}}  # fmt: skip
    before = head(catalog, "try")
    dry = merge(catalog, "dev", "try", resolution=resolution, dry_run=True)
    assert dry.status == Merge.Status.PLANNED and dry.commit_id is None
    assert head(catalog, "try") == before
    done = merge(catalog, "dev", "try", resolution=resolution)
    merged = rows_at(spark, catalog, "try")
    assert merged == {
        # status: target/source; amount: key 3's source is paid (its amount), the others target + source - base;
        # price: the mean rounded half up (11.875 -> 11.88); hits: source * 2 + target % 5; updated_at: the later;
        # note: the source's, else the target's (key 2's source is NULL). Region: each side's own change.
        1: typed(row(1, "cancelled/shipped", 112, "11.88", "03-01", "s1", 25, region="tx")),
        2: typed(row(2, "held/shipped", 212, "19.75", "01-15", "t2", 45, region="sx")),
        3: typed(row(3, "held/paid", 305, "30.00", "03-03", "s3", 65)),
        4: typed(TARGET[4]),  # deleted against updated: not a conflict of cells, the table's target_wins
    }
    # The dry run showed exactly the cells the merge wrote.
    shown = previewed(dry.report)
    assert shown == previewed(done.report)
    assert set(shown) == {1, 2, 3} and all(set(cells) == set(EXPRESSIONS) for cells in shown.values())
    for key, cells in shown.items():
        for column, value in cells.items():
            assert value == _written(merged[key][NAMES.index(column)]), (key, column)
    # The audit log names each cell's rule: the expression, with the cells it settled and their inputs.
    logged = {e["column"]: e for e in done.log["resolutions"] if "column" in e}
    assert set(logged) == set(EXPRESSIONS)
    for column, text in EXPRESSIONS.items():
        entry = logged[column]
        assert (entry["choice"], entry["scope"], entry["cells"]) == ({"expression": text}, "column", 3)
    assert {(s["key"]["id"], s["base"], s["source"], s["target"], s["result"]) for s in logged["amount"]["sample"]} == {
        (1, 100, 105, 107, 112), (2, 200, 205, 207, 212), (3, 300, 305, 293, 305)}  # fmt: skip


HOSTILE = {
    "a subquery": ("(SELECT max(amount) FROM sales.orders)", "invalid_column_expression", "subqueries"),
    "a function outside the allow-list": ("sleep(source.amount)", "invalid_column_expression", "unknown function"),
    "a file read": ("read_files('/etc/passwd')", "invalid_column_expression", "unknown function 'read_files'"),
    "a file path": ("/etc/passwd", "invalid_column_expression", "unexpected '/'"),
    "a path as a table": ("parquet.`/etc/passwd`", "invalid_column_expression", "'parquet' is not a row"),
    "a 100 KB string": ("'" + "x" * 100_000 + "'", "invalid_column_expression", "10000 characters"),
    "deep nesting": ("(" * 200 + "source.amount" + ")" * 200, "invalid_column_expression", "nests deeper"),
    "a divide by zero": ("source.amount / 0", "invalid_column_expression", "division by zero"),
    "a second statement": ("source.amount; DROP TABLE sales.orders", "invalid_column_expression", "';'"),
    "a column of no row": ("amount + 1", "invalid_column_expression", "source.amount"),
    "an unknown column": ("source.nope", "invalid_column_expression", "unknown column 'source.nope'"),
    "a string for a long": ("source.status", "column_rule_type", "string value"),
    "a condition for a long": ("source.amount > 1", "column_rule_type", "boolean value"),
}


def test_hostile_and_ill_typed_expressions_are_refused_through_the_api(spark, both_changed, user, user_client):
    catalog = both_changed
    before = head(catalog)
    url = f"/api/v1/catalogs/{catalog.name}/merges"
    for what, (text, code, named) in HOSTILE.items():
        resolution = {"tables": {TABLE: {"columns": {"amount": {"expression": text}}}}}
        response = user_client.post(url, {"source": "dev", "target": "main", "resolution": resolution}, format="json")
        body = response.json()
        assert (response.status_code, body["code"]) == (400, code), (what, body)
        assert named in body["message"] and "'amount'" in body["message"] and TABLE in body["message"], (what, body)
        assert (body["details"]["table"], body["details"]["column"]) == (TABLE, "amount"), what
    assert head(catalog) == before and not Merge.objects.filter(catalog=catalog).exists()

    # A merge request refuses them the same way, and keeps a good one with who chose it.
    opened = merge_request_open(catalog=catalog, source="dev", target="main", title="expr", author=user)
    url = f"/api/v1/catalogs/{catalog.name}/merge-requests/{opened.number}"
    bad = {"tables": {TABLE: {"columns": {"note": {"expression": "source.note || '/etc/passwd'"}}}}}
    response = user_client.patch(url, {"resolutions": bad}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_column_expression"), response.json()
    good = {"default": "source_wins", "tables": {TABLE: {"columns": {"amount": {"expression": EXPRESSIONS["amount"]}}}}}
    response = user_client.patch(url, {"resolutions": good}, format="json")
    assert response.status_code == 200, response.json()
    stored = MergeRequest.objects.get(id=opened.id)
    assert resolution_of(stored)["columns"] == {TABLE: {"amount": {"expression": EXPRESSIONS["amount"]}}}
    done = merge(catalog, resolution=resolution_of(stored), audit={"resolution_choices": stored.resolutions["chosen"]})
    [amount] = [e for e in done.log["resolutions"] if e.get("column") == "amount"]
    assert (amount["choice"], amount["cells"], amount["chosen_by"]) == (
        {"expression": EXPRESSIONS["amount"]},
        3,
        "alice",
    )
    assert {k: v[NAMES.index("amount")] for k, v in rows_at(spark, catalog, "main").items()} == {1: 112, 2: 212, 3: 305}


def test_an_expression_that_fails_on_a_key_refuses_the_merge_naming_it(spark, both_changed, user_client):
    catalog = both_changed
    before = head(catalog)
    url = f"/api/v1/catalogs/{catalog.name}/merges"
    # Parses and types, but divides by zero on key 3 (its target's price is 29.90).
    failing = {"tables": {TABLE: {"choice": "target_wins", "columns": {
        "price": {"expression": "source.price / (target.price - 29.90)"}}}}}  # fmt: skip
    for dry_run in (True, False):
        response = user_client.post(url, {"source": "dev", "target": "main", "resolution": failing,
                                          "dry_run": dry_run}, format="json")  # fmt: skip
        assert response.status_code == 202, response.json()
        job_execute(job_id=response.json()["id"], worker="test-process")  # the merge job, run here
        job = wait_for_job(response.json()["id"], timeout=240)
        assert (job.status, job.error_code, job.error_status) == ("failed", "column_expression_failed", 400)
        assert "division by zero" in job.error_message and "'price'" in job.error_message
        assert '{"id": 3}' in job.error_message, job.error_message
    assert head(catalog) == before
    # A value that does not fit the column: half of an odd amount into a long (key 3's), refused naming the key.
    half = "CASE WHEN source.status = 'paid' THEN target.amount / 2 ELSE target.amount END"
    halves = {"tables": {TABLE: {"choice": "target_wins", "columns": {"amount": {"expression": half}}}}}
    with pytest.raises(ApplicationError) as refused:
        merge(catalog, resolution=halves)
    assert refused.value.code == "column_expression_failed"
    assert refused.value.details["key"] == {"id": 3} and "not a whole number" in refused.value.message
    assert head(catalog) == before


def test_the_evaluator_follows_sql():
    columns = {"a": "long", "d": "decimal(10,2)", "f": "double", "s": "string", "t": "timestamp", "day": "date"}

    def value(text, **row):
        expr = parse_row_expression(text, semantics.ROWS, columns)
        return evaluate(expr, {f"source.{k}": v for k, v in row.items()} | row)

    assert value("source.a + 1", a=None) is None
    assert value("CASE WHEN source.a > 1 THEN 'big' WHEN source.a IS NULL THEN 'none' END", a=None) == "none"
    assert value("CASE WHEN source.a > 1 THEN 'big' END", a=0) is None
    assert value("source.a > 1 OR TRUE", a=None) is True and value("source.a > 1 AND TRUE", a=None) is None
    assert value("source.a % 3", a=-7) == -1 and value("source.a / 4", a=6) == decimal.Decimal("1.5")
    assert math.isnan(value("greatest(source.f, 1.0)", f=math.nan)) and value("greatest(source.f, 1.0)", f=0.5) == 1
    assert value("least(source.a, NULL, 3)", a=None) == 3
    assert value("round(source.d, 1)", d=decimal.Decimal("2.25")) == decimal.Decimal("2.3")
    assert value("substring(source.s, -3, 2)", s="Spark SQL") == "SQ"
    assert value("source.s LIKE 'a\\_%'", s="a_b") is True and value("source.s LIKE 'a\\_%'", s="ab") is False
    midnight = {"t": datetime.datetime(2024, 1, 2), "day": datetime.date(2024, 1, 2)}
    assert value("year(source.t) = 2024 AND source.day < source.t", **midnight) is False
    assert value("source.day = source.t", **midnight) is True
    with pytest.raises(EvaluationError, match="division by zero"):
        value("source.a % (source.a - source.a)", a=3)
    with pytest.raises(EvaluationError, match="overflow"):
        value("source.a * source.a", a=2**62)
    with pytest.raises(EvaluationError, match="to a date"):
        value("to_date(source.s)", s="not a date")
    # CASE and the qualified names are for row expressions: a table's UPDATE and DELETE do not take them.
    with pytest.raises(PredicateError, match="not supported"):
        parse_expression("CASE WHEN a > 1 THEN 1 END", columns)
    # A NULL result settles the cell as NULL; a timestamp column takes a date as its midnight.
    conflict = {"key": {"id": 1}, "key_id": "[1]", "cells": ["t"], "base": None,
                "source": {"t": "2024-01-02T05:00:00", "day": "2024-03-04"}, "target": {"t": None, "day": None}}  # fmt: skip
    cells = semantics.key_settle(conflict, rules={"t": {"expression": "coalesce(base.t, source.day)"}},
                                 types={"t": "timestamp", "day": "date"}, fallback="fail", fallback_scope="default")  # fmt: skip
    assert cells["t"]["result"] == "2024-03-04T00:00:00"


def test_the_cli_shorthand_takes_expressions():
    from lakeui_client.cli import _resolution

    built = _resolution(False, False, ("sales.orders.amount=expr:CASE WHEN source.status = 'paid' THEN 1 END",
                                       "note=concat:=", "hits=expr:greatest(source.hits, target.hits)"),
                        "sales.orders", None)  # fmt: skip
    assert built == {"resolution": {"tables": {"sales.orders": {"columns": {
        "amount": {"expression": "CASE WHEN source.status = 'paid' THEN 1 END"},
        "note": {"concat": {"separator": "="}}, "hits": {"expression": "greatest(source.hits, target.hits)"}}}}}}  # fmt: skip


def test_a_null_for_a_not_null_column_refuses_the_merge_naming_the_key():
    conflict = {"key": {"id": 7}, "key_id": "[7]", "cells": ["note"], "base": {"note": "b"},
                "source": {"note": "s"}, "target": {"note": "t"}}  # fmt: skip
    rules = {"note": {"expression": "CASE WHEN source.note = 'x' THEN 'y' END"}}
    settle = {"rules": rules, "types": {"note": "string"}, "fallback": "fail", "fallback_scope": "default"}
    assert semantics.key_settle(conflict, **settle)["note"]["result"] is None  # a nullable column takes the NULL
    # The key's columns are read too (the key comparison lists them apart from the rows).
    by_key = {**settle, "rules": {"note": {"expression": "CASE WHEN source.id = 7 THEN 'seven' END"}},
              "types": {"id": "long", "note": "string"}}  # fmt: skip
    assert semantics.key_settle(conflict, **by_key)["note"]["result"] == "seven"
    with pytest.raises(ApplicationError) as refused:
        semantics.key_settle(conflict, **settle, table="sales.orders", not_null=frozenset({"note"}))
    assert refused.value.code == "column_expression_failed" and refused.value.details["key"] == {"id": 7}
    assert "NOT NULL" in refused.value.message
