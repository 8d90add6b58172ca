"""`lakeui_client.arrow`: read_arrow and to_pandas straight from the warehouse with pyarrow, from the scan plan,
against a live server with the real worker: columns and a filter pushed down, files ruled out by the plan, DuckDB
over the Arrow table. (The same reads over every kind of change are compared with the rows API in
tests/catalog_app/test_iceberg_rest.py.)"""

import pyarrow.compute as pc
import pytest
from lakeui_client.arrow import _where, read_arrow, to_pandas

COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "amount", "type": "int"},
    {"name": "region", "type": "string"},
]


def test_read_arrow_pushes_columns_and_filter_down(client, celery_worker, monkeypatch):
    client.catalog_create("lake")
    client.database_create("lake", "main", "shop")
    client.table_create("lake", "main", "shop.orders", COLUMNS, partition_by=["region"])
    rows = [{"id": i, "amount": i % 50, "region": ["eu", "us", "apac"][i % 3]} for i in range(300)]
    client.load("lake", "main", "shop.orders", strategy="append_only", rows=rows)
    client.delete_rows("lake", "main", "shop.orders", where="id % 10 = 0")
    live = [r for r in rows if r["id"] % 10]

    everything = read_arrow(client, "lake", "main", "shop.orders")
    assert everything.column_names == ["id", "amount", "region"]
    assert sorted(everything.column("id").to_pylist()) == [r["id"] for r in live]

    # the plan the filter asks for leaves out the other partitions' files: only the eu file is opened
    opened = []
    real_plan = client.table_scan

    def plan(*args, **kwargs):
        answer = real_plan(*args, **kwargs)
        opened.extend(s["partition_values"] for s in answer["segments"])
        return answer

    monkeypatch.setattr(client, "table_scan", plan)
    eu = read_arrow(client, "lake", "main", "shop.orders", columns=["amount", "id"],
                    filter=[("region", "=", "eu"), ("amount", ">=", 20)])  # fmt: skip
    assert eu.column_names == ["amount", "id"]
    assert sorted(eu.column("id").to_pylist()) == [r["id"] for r in live if r["region"] == "eu" and r["amount"] >= 20]
    assert [list(values.values()) for values in opened] == [["eu"]]

    ins = read_arrow(client, "lake", "main", "shop.orders", columns=["id"], filter=[("id", "in", [1, 2, 10, 299])])
    assert sorted(ins.column("id").to_pylist()) == [1, 2, 299]  # 10 was deleted
    expression = read_arrow(client, "lake", "main", "shop.orders", filter=pc.field("amount") == 7)
    assert sorted(expression.column("id").to_pylist()) == [r["id"] for r in live if r["amount"] == 7]

    frame = to_pandas(client, "lake", "main", "shop.orders", columns=["region", "amount"])
    assert frame.groupby("region")["amount"].sum().to_dict() == {
        region: sum(r["amount"] for r in live if r["region"] == region) for region in ("apac", "eu", "us")
    }
    assert client.to_pandas("lake", "main", "shop.orders").shape == (len(live), 3)

    duckdb = pytest.importorskip("duckdb")
    connection = duckdb.connect()
    connection.register("orders", everything)
    assert connection.execute("SELECT count(*) FROM orders WHERE region = 'us'").fetchone() == (
        sum(1 for r in live if r["region"] == "us"),
    )
    with pytest.raises(ValueError, match="no column 'nope'"):
        read_arrow(client, "lake", "main", "shop.orders", columns=["nope"])


def test_filter_conditions_become_a_plan_predicate_only_where_exact():
    assert _where([("region", "=", "e'u"), ("amount", ">", 3)]) == "region = 'e''u' AND amount > 3"
    assert _where([("id", "in", [1, 2])]) == "id IN (1, 2)"
    assert _where([("ratio", "<", 0.1)]) is None  # a float literal is filtered here only
    assert _where([("bad name", "=", 1)]) is None
