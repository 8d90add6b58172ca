"""The delete and update jobs' Spark work (catalog_app/engine/dml.py): the rows a predicate matches, as one type
whichever shape it holds them in, and the delta files written from it."""

import uuid

import pytest

from catalog_app.engine import dml
from catalog_app.engine.predicate_parser import parse_predicate
from catalog_app.engine.reads import read_segments
from catalog_app.engine.segment_writes import write_segments
from catalog_app.engine.segments import Column, SegmentRead
from catalog_app.engine.table_data import TableData
from catalog_app.engine.warehouse import Warehouse

COLUMNS = (Column(1, "id", "long"), Column(2, "region", "string"))


@pytest.mark.parametrize("few", [True, False], ids=["arrow-positions", "cached-frame"])
def test_matched_counts_and_deletes_the_same_rows_whichever_shape(spark, tmp_path, few):
    """Two segments, the predicate matching 4 rows of the first and none of the second: the counts by segment,
    and the live rows once the delta files `write_deletes` wrote are read with them, are the same whether the
    positions were collected as Arrow (few candidate rows) or kept as a cached frame."""
    table = TableData(Warehouse(str(tmp_path)), "cat/tbl", COLUMNS)
    ids, reads = [str(uuid.uuid4()), str(uuid.uuid4())], []
    for n, region in enumerate(["eu", "us"]):
        rows = spark.createDataFrame(
            [(n * 10 + i, region if i % 3 else "xx") for i in range(10)], "id long, region string"
        )
        [segment] = write_segments(table.warehouse, table.base, rows.coalesce(1), COLUMNS, tag=f"seed{n}")
        reads.append(SegmentRead(ids[n], segment.path, COLUMNS, order=n))
    where = parse_predicate("region = 'xx' AND id < 10", {c.name: c.type for c in COLUMNS})

    matched = dml.rows_matching(spark, table, reads, where, few=few)
    deltas = matched.write_deletes(table, tag="d")

    assert isinstance(matched.positions, dict) is few
    assert matched.counts() == {ids[0]: 4}
    assert [(d.segment_id, d.row_count) for d in deltas] == [(ids[0], 4)]
    with_deltas = [SegmentRead(ids[0], reads[0].path, COLUMNS, (deltas[0].path,)), reads[1]]
    live = read_segments(spark, table.warehouse, table.base, list(COLUMNS), with_deltas).select("id").collect()
    assert sorted(r["id"] for r in live) == [1, 2, 4, 5, 7, 8, *range(10, 20)]
