"""The doubled-key guard of a key merge (catalog_app/engine/keys.py `key_merge_write`): a merge whose result would
hold a key twice fails before it writes a file; the segments it leaves alone are read only where their key bounds
may hold a merged key."""

import uuid

import pytest

from catalog_app.engine import keys
from catalog_app.engine.segment_writes import write_segments
from catalog_app.engine.segments import Column, SegmentRead
from catalog_app.engine.table_data import TableData
from catalog_app.engine.warehouse import Warehouse

COLUMNS = (Column(1, "id", "long", nullable=False), Column(2, "v", "string"))
ONLY = "id long, _after struct<id:long, v:string>"


def segment(spark, table: TableData, ids: list[int], tag: str) -> SegmentRead:
    rows = spark.createDataFrame([(i, f"old{i}") for i in ids], "id long, v string").coalesce(1)
    [written] = write_segments(table.warehouse, table.base, rows, list(COLUMNS), tag=tag)
    return SegmentRead(str(uuid.uuid4()), written.path, COLUMNS)


@pytest.fixture
def table(spark, tmp_path):
    data = TableData(Warehouse(str(tmp_path)), "cat/tbl", COLUMNS)
    return keys.KeyTable(data, keys=("id",))


def files(tmp_path) -> set[str]:
    return {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.parquet")}


def only(spark, ids: list[int]):
    return spark.createDataFrame([(i, (i, f"new{i}")) for i in ids], ONLY)


def test_a_key_live_in_a_segment_left_alone_fails_before_writing(spark, table, tmp_path):
    scanned = segment(spark, table.data, [10, 11], "scanned")
    shared = segment(spark, table.data, [1, 2, 3], "shared")
    before = files(tmp_path)

    with pytest.raises(keys.DoubledKeyError) as doubled:
        keys.key_merge_write(spark, table, only(spark, [3, 11]), [], [scanned], tag="m1",
                             others=[keys.KeyedSegment(shared, 1, 3)])  # fmt: skip

    assert doubled.value.keys == [{"id": 3}]
    assert files(tmp_path) == before  # no delete file, no segment


def test_a_key_written_twice_fails_before_writing(spark, table, tmp_path):
    scanned = segment(spark, table.data, [10, 11], "scanned")
    before = files(tmp_path)

    with pytest.raises(keys.DoubledKeyError) as doubled:
        keys.key_merge_write(spark, table, only(spark, [12]), [((12,), (12, "again"))], [scanned], tag="m2")

    assert doubled.value.keys == [{"id": 12}]
    assert files(tmp_path) == before


def test_segments_outside_the_merged_keys_bounds_are_not_read(spark, table, tmp_path):
    """A segment left alone whose bounds rule the merged keys out is never opened (its file does not even exist
    here); one with unknown bounds is read, and holds none of them: the merge writes."""
    scanned = segment(spark, table.data, [10, 11], "scanned")
    shared = segment(spark, table.data, [1, 2, 3], "shared")
    missing = SegmentRead(str(uuid.uuid4()), "cat/tbl/data/gone/part-0.parquet", COLUMNS)

    written, deltas = keys.key_merge_write(
        spark, table, only(spark, [11, 20]), [], [scanned], tag="m3",
        others=[keys.KeyedSegment(missing, 100, 200), keys.KeyedSegment(shared)],
    )  # fmt: skip

    assert [w.row_count for w in written] == [2]
    assert [(d.segment_id, d.row_count) for d in deltas] == [(scanned.id, 1)]
