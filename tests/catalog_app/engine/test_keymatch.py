"""Key matching on the driver (catalog_app/engine/keymatch.py) against what Spark gives for the same keys.

The driver's survey must prune exactly as the Spark survey does, for every key type the catalog keeps min/max
of; matched positions must skip deleted rows and read keys written in an older, narrower type.
"""

import random
import uuid
from datetime import date, datetime, timedelta
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from catalog_app.engine import keymatch
from catalog_app.engine import reads as engine_reads
from catalog_app.engine.frames import struct_type
from catalog_app.engine.reads import read_segments
from catalog_app.engine.segment_writes import write_segments
from catalog_app.engine.segments import POSITION, SEGMENT_ID, Column, SegmentRead, in_schema
from catalog_app.engine.strategies import key_survey
from catalog_app.engine.types import stat_json
from catalog_app.engine.warehouse import Warehouse

START = datetime(2024, 2, 28, 23, 0, 0, 123456)
VALUES = {  # the i-th value of each type: increasing in i, as the ranges below need
    "int": lambda i: i - 50,
    "long": lambda i: i * 1_000_000_007,
    "string": lambda i: f"k{i:03d}",
    "date": lambda i: date(2024, 2, 20) + timedelta(days=i),
    "timestamp": lambda i: START + timedelta(minutes=7 * i),
    "decimal(10,2)": lambda i: Decimal(i) / 4,
    "boolean": lambda i: i >= 50,
}


def _keys_frame(spark, names_types: list[tuple[str, str]], rows: list[tuple]):
    schema = ", ".join(f"`{name}` {type_name}" for name, type_name in names_types)
    return spark.createDataFrame(rows, f"{schema}, flag int")


@pytest.mark.parametrize("type_name", list(VALUES))
def test_the_driver_survey_prunes_as_the_spark_survey_does(spark, type_name):
    """Random keys (some NULL, some repeated) against random segment ranges over the same values: the same
    segments hit, the same repeated keys and the same check sums from both surveys."""
    chance = random.Random(type_name)
    value = VALUES[type_name]
    size = 2 if type_name == "boolean" else 100
    pick = (
        (lambda: value(chance.choice([0, 99]))) if type_name == "boolean" else (lambda: value(chance.randrange(size)))
    )
    rows = [(pick() if chance.random() > 0.05 else None, chance.randint(0, 1)) for _ in range(60)]
    rows += [rows[3], rows[7]]  # at least two repeated keys
    ranges = []
    for segment in range(25):
        low = chance.randrange(100)
        high = min(99, low + chance.randrange(6))
        ranges.append((f"s{segment}", [stat_json(value(low)), stat_json(value(high))]))
    keys = [Column(1, "k", type_name)]
    frame = _keys_frame(spark, [("k", type_name)], rows)

    by_spark = key_survey(spark, frame, keys, ranges, summed=["flag"], limit=100)
    found = keymatch.collect_keys(frame, keys, ["flag"], limit=1000)

    by_driver = keymatch.survey(found, keys, ranges, ["flag"], limit=100)
    assert by_driver.segments == by_spark.segments
    assert type_name == "boolean" or 0 < len(by_spark.segments) < len(ranges)  # some pruned, some not
    assert sorted(map(str, by_driver.repeated)) == sorted(map(str, by_spark.repeated))
    assert by_driver.sums == by_spark.sums == {"flag": [flag for _, flag in rows].count(1)}


def test_the_driver_survey_checks_every_column_of_a_composite_key(spark):
    keys = [Column(1, "region", "string"), Column(2, "day", "date")]
    frame = _keys_frame(spark, [("region", "string"), ("day", "date")],
                        [("eu", date(2024, 1, 5), 0), ("us", date(2024, 3, 1), 0)])  # fmt: skip
    ranges = [
        ("a", ["eu", "eu", "2024-01-01", "2024-01-31"]),  # holds (eu, Jan 5)
        ("b", ["eu", "us", "2024-02-01", "2024-02-28"]),  # regions fit both keys, days fit neither
        ("c", ["us", "us", "2024-03-01", "2024-03-01"]),  # holds (us, Mar 1)
        ("d", ["ap", "ap", "2024-01-01", "2024-12-31"]),
    ]
    found = keymatch.collect_keys(frame, keys, [], limit=10)
    assert keymatch.segments_hit(found, keys, ranges) == {"a", "c"}
    assert key_survey(spark, frame, keys, ranges).segments == {"a", "c"}


def test_keys_are_not_collected_above_the_limit(spark):
    frame = spark.range(11).select(F.col("id").alias("k"))
    keys = [Column(1, "k", "long")]
    assert keymatch.collect_keys(frame, keys, [], limit=10) is None
    assert keymatch.collect_keys(frame, keys, [], limit=11).num_rows == 11


def test_float_keys_are_left_to_spark():
    assert not keymatch.matchable([Column(1, "id", "long"), Column(2, "x", "double")])
    assert keymatch.matchable([Column(1, "id", "long"), Column(2, "d", "decimal(38,10)")])


def test_matched_positions_skip_deleted_rows_and_read_narrower_keys(spark, tmp_path):
    """A segment written when the key was an int, read now that it is a long, with a delta file deleting two
    of its rows: the incoming keys match the live rows only, at their positions in the file."""
    warehouse, base = Warehouse(str(tmp_path)), "cat/tbl"
    written_as = [Column(1, "id", "int"), Column(2, "v", "string")]
    rows = spark.createDataFrame([(i, f"v{i}") for i in range(10)], "id int, v string").coalesce(1)
    [segment] = write_segments(warehouse, base, rows, written_as, tag="seed")
    segment_id = str(uuid.uuid4())
    [delta] = keymatch.write_position_deltas(warehouse, base, {segment_id: pa.array([2, 3], pa.int64())}, tag="d1")
    read = SegmentRead(segment_id, segment.path, tuple(written_as), (delta.path,))
    keys = [Column(1, "id", "long")]
    incoming = pa.table({"id": pa.array([1, 2, 7, 42, None], pa.int64())})

    matched = keymatch.matched_positions(warehouse, [read], keys, incoming)

    assert sorted(zip(matched["id"].to_pylist(), matched[POSITION].to_pylist(), strict=True)) == [(1, 1), (7, 7)]
    assert set(matched[SEGMENT_ID].to_pylist()) == {segment_id}
    assert (delta.segment_id, delta.row_count) == (segment_id, 2)
    current = [Column(1, "id", "long"), Column(2, "v", "string")]
    live = read_segments(spark, warehouse, base, current, [read]).select("id")
    assert sorted(r["id"] for r in live.collect()) == [0, 1, 4, 5, 6, 7, 8, 9]  # Spark reads the same delta file


@pytest.mark.parametrize("small_read", [engine_reads.SMALL_READ, 0])
def test_reads_leave_out_dropped_positions_one_scan_per_segment_or_not(spark, tmp_path, monkeypatch, small_read):
    """`dropped` positions are left out like deleted ones, whether the segments are read one scan each (a few)
    or one scan per schema (many)."""
    monkeypatch.setattr(engine_reads, "SMALL_READ", small_read)
    warehouse, base = Warehouse(str(tmp_path)), "cat/tbl"
    columns = [Column(1, "id", "long")]
    reads = []
    for n in range(3):
        rows = spark.range(n * 10, n * 10 + 10).coalesce(1)
        [segment] = write_segments(warehouse, base, rows, columns, tag=f"t{n}")
        reads.append(SegmentRead(f"s{n}", segment.path, tuple(columns), order=n))
    dropped = {"s0": pa.array([0, 9], pa.int64()), "s2": pa.array([5], pa.int64())}

    frame = read_segments(spark, warehouse, base, columns, reads, positions=True, dropped=dropped)

    expected = [(i, f"s{i // 10}", i % 10) for i in range(30) if i not in (0, 9, 25)]
    assertDataFrameEqual(
        frame.select("id", SEGMENT_ID, POSITION),
        spark.createDataFrame(expected, f"id long, {SEGMENT_ID} string, {POSITION} long"),
    )


ALL_TYPES = [
    Column(1, "id", "long"), Column(2, "i", "int"), Column(3, "f", "float"), Column(4, "d", "double"),
    Column(5, "s", "string"), Column(6, "b", "binary"), Column(7, "day", "date"), Column(8, "at", "timestamp"),
    Column(9, "small", "decimal(10,2)"), Column(10, "big", "decimal(38,10)"), Column(11, "ok", "boolean"),
    Column(12, "region", "string"),
]  # fmt: skip


def _all_types_row(i: int) -> tuple:
    if i % 4 == 3:  # every type NULL in some rows
        return (i, *[None] * 10, "eu")
    return (
        i, i - 5, i / 3, i * 1.5, f"s{i}", bytes([i, 255 - i]), date(2024, 1, 1) + timedelta(days=i),
        START + timedelta(hours=i, microseconds=i), Decimal(i) / 4, Decimal(i) / 7 if i else Decimal("-0.0000000001"),
        i % 2 == 0, "eu",
    )  # fmt: skip


@pytest.mark.parametrize("batch_rows", [keymatch.COPY_BATCH_ROWS, 5])
def test_a_segment_rewritten_on_the_driver_keeps_its_other_rows_as_spark_wrote_them(
    spark, tmp_path, monkeypatch, batch_rows
):
    """Copy-on-write on the driver: a segment of every column type (partitioned, so its path has partition
    folders) with a delta file deleting two rows and one more row dropped. The new segment holds exactly the
    other rows, in their order, read back by Spark by field id; its footer statistics are those of the same rows
    written by Spark. A segment with no row left gives no file. Copied in one batch, or in batches of 5 rows."""
    monkeypatch.setattr(keymatch, "COPY_BATCH_ROWS", batch_rows)
    warehouse, base = Warehouse(str(tmp_path)), "cat/tbl"
    schema = struct_type(ALL_TYPES)
    rows = spark.createDataFrame([_all_types_row(i) for i in range(12)], schema).coalesce(1)
    [segment] = write_segments(warehouse, base, rows, ALL_TYPES, partition_ids=[12], tag="seed")
    assert "/__p=" in segment.path
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    [delta] = keymatch.write_position_deltas(warehouse, base, {first: pa.array([2, 3], pa.int64())}, tag="d1")
    [emptied] = write_segments(warehouse, base, rows.limit(2), ALL_TYPES, tag="seed2")
    reads = [
        SegmentRead(first, segment.path, tuple(ALL_TYPES), (delta.path,)),
        SegmentRead(second, emptied.path, tuple(ALL_TYPES), order=1),
    ]
    dropped = {first: pa.array([5], pa.int64()), second: pa.array([0, 1], pa.int64())}

    [rewritten] = keymatch.rewrite_without(
        warehouse, base, reads, dropped, columns=ALL_TYPES, partition_ids=[12], tag="kept"
    )

    kept = [_all_types_row(i) for i in range(12) if i not in (2, 3, 5)]
    new = SegmentRead(str(uuid.uuid4()), rewritten.path, tuple(ALL_TYPES))
    back = read_segments(spark, warehouse, base, ALL_TYPES, [new], positions=True).orderBy(POSITION)
    assert [tuple(r)[:12] for r in back.collect()] == [tuple(r) for r in spark.createDataFrame(kept, schema).collect()]
    assert rewritten.row_count == len(kept)
    [by_spark] = write_segments(
        warehouse, base, spark.createDataFrame(kept, schema).coalesce(1), ALL_TYPES, partition_ids=[12], tag="check"
    )
    assert (rewritten.stats, rewritten.partition_values) == (by_spark.stats, by_spark.partition_values)
    assert in_schema(reads, ALL_TYPES)
    assert not in_schema(reads, [*ALL_TYPES[:-1], Column(12, "area", "string")])
