"""A page of table rows read in the web process from the files (pyarrow) is the page a worker's Spark reads:
same rows, same order, same values, across segments, deletes and every column type."""

import pytest

from catalog_app.engine import reads
from catalog_app.selectors.table_rows import rows_page
from catalog_app.services.tables import column_add
from tests.support.catalogs import make_catalog, make_table, on
from tests.support.data import run_in_process, table_version

pytestmark = pytest.mark.django_db

COLUMNS = [
    {"name": "id", "type": "long", "nullable": False}, {"name": "n", "type": "int"}, {"name": "s", "type": "string"},
    {"name": "d", "type": "date"}, {"name": "t", "type": "timestamp"}, {"name": "x", "type": "decimal(20,4)"},
    {"name": "f", "type": "double"}, {"name": "b", "type": "boolean"}, {"name": "raw", "type": "binary"},
]  # fmt: skip


def row(i: int) -> dict:
    return {
        "id": i, "n": None if i % 7 == 0 else i * 3, "s": f"row {i} ✓", "d": f"20{i % 30:02d}-01-0{i % 9 + 1}",
        "t": "0001-01-01T00:00:00" if i == 1 else f"2026-11-23T10:{i % 60:02d}:00.123456", "x": f"{i}.0{i % 10}",
        "f": 1.5 * i, "b": i % 2 == 0, "raw": "bHVrZQ==",
    }  # fmt: skip


def pages(spark, catalog, sizes) -> list[tuple]:
    chain, table = table_version(catalog)
    answers = []
    for page, size in sizes:
        here = rows_page(chain, table, page=page, page_size=size)
        spark_page = rows_page(chain, table, page=page, page_size=size, spark=spark)
        answers.append((here, spark_page))
    return answers


@pytest.mark.parametrize("batch", [reads.PAGE_BATCH_ROWS, 3])  # 3: pages cross the batches a row group is read in
def test_a_page_read_from_the_files_is_the_page_spark_reads(spark, batch, monkeypatch):
    monkeypatch.setattr(reads, "PAGE_BATCH_ROWS", batch)
    catalog = make_catalog()
    make_table(catalog, columns=COLUMNS, properties={"write.mode": "merge-on-read"})
    for first in (1, 11, 21):
        run_in_process(spark, catalog, {"strategy": "append_only", "rows": [row(i) for i in range(first, first + 10)]})
    run_in_process(spark, catalog, {"where": "id % 4 = 0"}, kind="table_delete")  # deletes in every segment
    run_in_process(spark, catalog, {"where": "id BETWEEN 11 AND 20"}, kind="table_delete")  # a whole segment
    run_in_process(spark, catalog, {"set": {"n": "n + 1"}, "where": "id = 3"}, kind="table_update")
    answers = pages(spark, catalog, [(1, 50), (1, 5), (2, 5), (3, 4), (4, 3), (7, 3), (100, 10)])
    for here, spark_page in answers:
        assert here == spark_page
    everything = answers[0][0]
    assert everything["count"] == len(everything["rows"]) == 16
    assert [r[0] for r in everything["rows"]] == [1, 2, 5, 6, 7, 9, 10, 21, 22, 23, 25, 26, 27, 29, 30, 3]
    assert everything["rows"][0][4] == "0001-01-01T00:00:00" and everything["rows"][-1][1] == 10
    assert answers[-1][0]["rows"] == []


def test_segments_of_an_older_schema_are_projected_here_as_spark_projects_them(spark):
    """Renamed, widened, added with a default (of each kind), dropped: the page read here is Spark's page, and a
    SELECT answered here (quick_sql) is Spark's answer."""
    from django.conf import settings

    from catalog_app.engine.sql import selected_rows
    from catalog_app.engine.warehouse import Warehouse
    from catalog_app.selectors.table_rows import quick_select, select_frame
    from catalog_app.services.tables import column_drop, column_update

    catalog = make_catalog()
    make_table(catalog, columns=COLUMNS, properties={"write.mode": "merge-on-read"})
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": [row(i) for i in range(1, 11)]})
    run_in_process(spark, catalog, {"where": "id % 4 = 0"}, kind="table_delete")
    target = {"target": on(catalog), "database": "sales", "table": "orders"}
    column_update(**target, column="s", changes={"name": "label"})
    column_update(**target, column="n", changes={"type": "long"})
    column_update(**target, column="x", changes={"type": "decimal(24,4)"})
    column_drop(**target, column="raw")
    for spec in [{"name": "extra", "type": "int", "default": 7}, {"name": "day", "type": "date", "default": "2024-02-29"},
                 {"name": "at", "type": "timestamp", "default": "2024-01-02T03:04:05"},
                 {"name": "price", "type": "decimal(10,2)", "default": "1.5"},
                 {"name": "ratio", "type": "double", "default": 2}, {"name": "nothing", "type": "string"}]:  # fmt: skip
        column_add(**target, spec=spec)
    newer = {**row(11), "label": "new", "extra": 1, "price": "2.25"}
    del newer["s"], newer["raw"]
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": [newer]})
    answers = pages(spark, catalog, [(1, 50), (2, 3)])
    for here, spark_page in answers:
        assert here == spark_page
    first = answers[0][0]
    assert [c["name"] for c in first["columns"]][-6:] == ["extra", "day", "at", "price", "ratio", "nothing"]
    assert first["rows"][0][-6:] == [7, "2024-02-29", "2024-01-02T03:04:05", "1.50", 2.0, None]
    assert first["rows"][0][2] == "row 1 ✓" and first["rows"][-1][2] == "new"
    chain, _ = table_version(catalog)
    statement = "SELECT label, sum(n), max(x), min(day), count(extra) FROM sales.orders GROUP BY label ORDER BY label"
    here = quick_select(chain=chain, statement=statement)
    frame = select_frame(spark, catalog=catalog, chain=chain, statement=statement,
                         warehouse=Warehouse(settings.LAKEUI_WAREHOUSE))  # fmt: skip
    assert here is not None and {"columns": here.columns, "rows": here.rows, "truncated": False} == selected_rows(
        frame, 100
    )
