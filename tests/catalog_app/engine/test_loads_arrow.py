"""Small key loads with pyarrow and no Spark job (catalog_app/engine/loads_arrow.py, loads._key_change_arrow): on the
same table and incoming rows they write the rows the Spark path writes, in the files the driver path writes
(folders, groups, partitions, statistics, delta positions, copy-on-write copies); what Arrow cannot do exactly is
left to Spark, with the same result or the same refusal."""

import datetime
import decimal
import re
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.testing import assertDataFrameEqual

from catalog_app.engine import keymatch
from catalog_app.engine.incoming import IncomingError
from catalog_app.engine.loads import LiveSegment, LoadTable, load_write
from catalog_app.engine.reads import deleted_positions, read_segments
from catalog_app.engine.segment_writes import write_segments
from catalog_app.engine.segments import Column, SegmentRead
from catalog_app.engine.table_data import TableData
from catalog_app.engine.types import arrow_type, json_value
from catalog_app.engine.warehouse import Warehouse
from catalog_app.job_specs import LoadSpec

COLUMNS = (
    Column(1, "id", "long", nullable=False),
    Column(2, "n", "int"),
    Column(3, "price", "decimal(10,2)"),
    Column(4, "big", "decimal(30,5)"),
    Column(5, "name", "string"),
    Column(6, "day", "date"),
    Column(7, "at", "timestamp"),
    Column(8, "flag", "boolean"),
    Column(9, "ratio", "double"),
)
UTC = datetime.UTC
NAMES = ["alpha", "Beta", "", "ünï", None]
MODES = ("merge-on-read", "copy-on-write")
BIG = 10**9  # limits that never bind


def _row(i: int, *, version: int = 0) -> dict:
    return {
        "id": i,
        "n": None if (i + version) % 7 == 3 else i * 3 - 50 + version,
        "price": None if i % 11 == 5 else decimal.Decimal(i * 137 % 10000 - 3000 + version).scaleb(-2),
        "big": decimal.Decimal(f"{(i * 7919) % 10**9}123456789.{(i + version) % 100000:05d}"),
        "name": NAMES[(i + version) % len(NAMES)],
        "day": None if i % 13 == 1 else datetime.date(1969, 12, 25) + datetime.timedelta(days=i % 4 + version),
        "at": None if i % 8 == 2 else datetime.datetime(2024, 3, 1, tzinfo=UTC) + datetime.timedelta(seconds=i * 3601 + version),
        "flag": None if i % 6 == 4 else (i + version) % 2 == 0,
        "ratio": [0.5, -0.0, 0.0, None][(i + version) % 4],
    }  # fmt: skip


def _arrow(rows: list[dict]) -> pa.Table:
    return pa.table({c.name: pa.array([r[c.name] for r in rows], arrow_type(c.type)) for c in COLUMNS})


def _json(rows: list[dict]) -> list[dict]:
    return [{name: json_value(value) for name, value in row.items()} for row in rows]


def _table(spark, tmp_path, *, partition_by=(), copy_on_write=False) -> LoadTable:
    """Ids 0-39, 40-79 and 80-119 in three segments written by Spark, and ids 50 and 55 once more in a fourth
    (a key in two candidate segments); positions 0, 5 and 7 of the first are deleted by a delta file."""
    data = TableData(Warehouse(str(tmp_path)), "cat/tbl", COLUMNS, tuple(partition_by))
    reads, live = [], []
    batches = [list(range(0, 40)), list(range(40, 80)), list(range(80, 120)), [50, 55]]
    for n, ids in enumerate(batches):
        frame = spark.createDataFrame(_arrow([_row(i, version=n // 3) for i in ids])).coalesce(1)
        for w in write_segments(data.warehouse, data.base, frame, COLUMNS, partition_ids=partition_by, tag=f"s{n}",
                                few=True):  # fmt: skip
            segment = str(uuid.uuid4())
            reads.append(SegmentRead(segment, w.path, COLUMNS, order=len(reads)))
            live.append(LiveSegment(segment, w.row_count, w.size_bytes, w.stats, w.partition_values))
    first = reads[0]
    positions = pa.array([0, 5, 7], pa.int64())
    [delta] = keymatch.write_position_deltas(data.warehouse, data.base, {first.id: positions}, tag="d0")
    reads[0] = SegmentRead(first.id, first.path, COLUMNS, (delta.path,), order=0)
    by_id = {r.id: r for r in reads}
    return LoadTable(data, tuple(live), copy_on_write, lambda ids: [by_id[i] for i in ids])


def _jobs(spark, action):
    """`action`'s result (or the error it raised), and how many Spark jobs it ran."""
    group = f"probe-{uuid.uuid4().hex}"
    spark.sparkContext.setJobGroup(group, group)
    try:
        result = action()
    except Exception as refused:  # compared with the Spark path's
        result = refused
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return result, len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def _three_ways(spark, table: LoadTable, params: dict):
    """The load here (and its Spark jobs), on the driver path (Spark reads and writes, the driver matches) and all
    in Spark jobs."""
    spec = LoadSpec.from_params(params)

    def load(**limits):
        return lambda: load_write(spark, table, spec, uuid.uuid4().hex, **limits)

    here, jobs = _jobs(spark, load(driver_match_rows=BIG))
    driver, _ = _jobs(spark, load(driver_match_rows=BIG, here_rows=0))
    there, _ = _jobs(spark, load(driver_match_rows=0))
    return here, jobs, driver, there


def _after(spark, table: LoadTable, result):
    """The table's rows after the load's files."""
    reads = {r.id: r for r in table.reads([s.id for s in table.segments])}
    added = []
    for operation in result.operations:
        if table.copy_on_write:
            for segment in operation.touched:
                reads.pop(segment)
        for delta in operation.new_deltas:
            old = reads[delta.segment_id]
            reads[old.id] = SegmentRead(old.id, old.path, old.columns, (*old.deltas, delta.path), old.order)
        added += [SegmentRead(str(uuid.uuid4()), w.path, COLUMNS) for w in operation.new_segments]
    data = table.data
    return read_segments(spark, data.warehouse, data.base, list(COLUMNS), [*reads.values(), *added])


def _layout(table: LoadTable, result) -> list[tuple]:
    """What each operation wrote, without random names: its op, counts and touched segments; each file's folder
    (group, partition hash), rows, statistics and partition values; each delta file's positions."""
    layout = []
    for operation in result.operations:
        files = sorted(
            [(re.sub(r"/[^/]+\.parquet$", "", re.sub(r"^.*?/data/[0-9a-f]+", "", w.path)), w.row_count, w.stats,
              w.partition_values, w.group) for w in operation.new_segments],
            key=repr,
        )  # fmt: skip
        deltas = sorted(
            (d.segment_id, deleted_positions(table.data.warehouse, [d.path]).to_pylist()) for d in operation.new_deltas
        )
        layout.append((operation.op, operation.counts, sorted(operation.touched), files, deltas))
    return layout


def _same(spark, table, here, driver, there) -> None:
    assert _layout(table, here) == _layout(table, driver)
    assert [op.counts for op in here.operations] == [op.counts for op in there.operations]
    assert here.segments_read == driver.segments_read == there.segments_read
    assertDataFrameEqual(_after(spark, table, here), _after(spark, table, there))


INCOMING = [
    *[_row(i, version=5) for i in (3, 5, 8, 39, 50, 55, 90, 119)],  # 5: deleted already; 50, 55: in two segments
    *[_row(i, version=5) for i in (500, 501, 777)],  # new keys, above every segment
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("partition_by", [(), (6, 5), (9,)], ids=["unpartitioned", "day-name", "ratio"])
def test_an_upsert_here_writes_what_spark_writes(spark, tmp_path, mode, partition_by):
    table = _table(spark, tmp_path, partition_by=partition_by, copy_on_write=mode == "copy-on-write")
    params = {"strategy": "upsert", "key_columns": ["id"], "rows": _json(INCOMING)}
    here, jobs, driver, there = _three_ways(spark, table, params)
    assert jobs == 0  # read, matched and written here
    if not partition_by:  # partitioned, the delta file deletes other rows of the first partition's segment
        assert here.operations[0].counts == {"rows_updated": 9}  # 50 and 55 each update two rows
        assert here.operations[1].counts == {"rows_inserted": 4}
    _same(spark, table, here, driver, there)


@pytest.mark.parametrize(("strategy", "mode"), [("insert", MODES[0]), ("update", MODES[1]),
                                                ("delete_insert", MODES[0]), ("delete_insert", MODES[1])])  # fmt: skip
def test_insert_update_and_delete_insert_here_write_what_spark_writes(spark, tmp_path, strategy, mode):
    table = _table(spark, tmp_path, partition_by=(6,), copy_on_write=mode == "copy-on-write")
    params = {"strategy": strategy, "key_columns": ["id"], "rows": _json(INCOMING)}
    here, jobs, driver, there = _three_ways(spark, table, params)
    assert jobs == 0
    _same(spark, table, here, driver, there)


def test_a_composite_key_of_string_date_and_timestamp_columns(spark, tmp_path):
    table = _table(spark, tmp_path)
    rows = [{**_row(i, version=0), "n": 1000 + i} for i in (3, 9, 11, 12)] + [{**_row(9, version=0), "name": "new"}]
    params = {"strategy": "upsert", "key_columns": ["name", "day", "at"], "rows": _json(rows)}
    here, jobs, driver, there = _three_ways(spark, table, params)
    assert jobs == 0
    assert here.operations[0].counts == {"rows_updated": 3}  # 3, 11 and 12; 9 has a NULL in its key
    _same(spark, table, here, driver, there)


def _parquet(table: LoadTable, arrays: dict) -> dict:
    """An uploaded Parquet file of `arrays` (written by pyarrow, as a client would), as a load's `upload`."""
    path = f"{table.data.base}/uploads/{uuid.uuid4().hex}.parquet"
    Path(table.data.warehouse.uri(path)).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(arrays), table.data.warehouse.uri(path))
    return {"path": path, "format": "parquet"}


def _same_outcome(spark, table, here, there) -> None:
    if isinstance(there, Exception):
        assert (type(here), str(here)) == (type(there), str(there))
        if isinstance(there, IncomingError):
            assert (here.code, here.details) == (there.code, there.details)
    else:
        assertDataFrameEqual(_after(spark, table, here), _after(spark, table, there))


def test_a_parquet_upload_of_other_but_fitting_types_is_loaded_with_arrow(spark, tmp_path):
    """int32 into long, large strings, dictionary strings, milliseconds with another zone, int64 into a decimal,
    float32 into a double, a boolean column of NULLs, and a column left out (NULL): Arrow casts them as Spark does."""
    table = _table(spark, tmp_path)
    ids = [3, 50, 90, 600]
    upload = _parquet(table, {
        "id": pa.array(ids, pa.int32()),
        "n": pa.array([1, None, 3, 4], pa.int8()),
        "price": pa.array([12, None, -7, 0], pa.int64()),
        "name": pa.array(["x", None, "ünï", "x"], pa.large_string()).dictionary_encode(),
        "day": pa.array([datetime.date(2001, 2, 3), None, datetime.date(1, 1, 1), datetime.date(9999, 12, 31)]),
        "at": pa.array([datetime.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC), None, None, None],
                       pa.timestamp("ms", tz="Europe/Paris")),
        "flag": pa.nulls(4, pa.bool_()),
        "ratio": pa.array([0.25, None, -1.5, 3.0], pa.float32()),
    })  # fmt: skip
    here, jobs, driver, there = _three_ways(
        spark, table, {"strategy": "upsert", "key_columns": ["id"], "upload": upload}
    )
    assert jobs == 0
    _same(spark, table, here, driver, there)


@pytest.mark.parametrize(
    "column",
    [
        {"name": pa.array(["a", "b"], pa.binary())},  # binary into a string column: Spark refuses it
        {"n": pa.array(["1", "2"])},  # text into an int column: Spark parses it
        {"n": pa.array([1, 2**40])},  # a long that does not fit an int: Spark refuses it
        {"price": pa.array([decimal.Decimal("1.005"), None], pa.decimal128(10, 3))},  # Spark rounds it
        {"at": pa.array([datetime.datetime(2024, 1, 1), None])},  # a naive timestamp: Spark reads it in its zone
        {"name": pa.array(["nul\x00", "b"])},  # a NUL character: Spark refuses it with an example
        {"flag": pa.nulls(2)},  # Arrow's null type: Spark reads it as int, not boolean
        {"at": pa.array([datetime.datetime(2024, 1, 1, tzinfo=UTC), None], pa.timestamp("ns", tz="UTC"))},
    ],
    ids=["binary", "text", "overflow", "rounded", "naive", "nul", "null-type", "nanos"],
)
def test_what_arrow_cannot_read_exactly_is_left_to_spark_with_the_same_outcome(spark, tmp_path, column):
    table = _table(spark, tmp_path)
    upload = _parquet(table, {"id": pa.array([3, 700], pa.int64()), **column})
    spec = LoadSpec.from_params({"strategy": "upsert", "key_columns": ["id"], "upload": upload})
    here, jobs = _jobs(spark, lambda: load_write(spark, table, spec, uuid.uuid4().hex, driver_match_rows=BIG))
    there, _ = _jobs(spark, lambda: load_write(spark, table, spec, uuid.uuid4().hex, driver_match_rows=0))
    assert jobs > 0  # the load went to Spark
    _same_outcome(spark, table, here, there)


def test_a_null_in_a_not_null_column_is_refused_as_spark_refuses_it(spark, tmp_path):
    table = _table(spark, tmp_path)
    upload = _parquet(table, {"id": pa.array([3, None], pa.int64())})
    spec = LoadSpec.from_params({"strategy": "upsert", "key_columns": ["id"], "upload": upload})
    here, jobs = _jobs(spark, lambda: load_write(spark, table, spec, "a", driver_match_rows=BIG))
    there, _ = _jobs(spark, lambda: load_write(spark, table, spec, "b", driver_match_rows=0))
    assert jobs > 0 and isinstance(there, IncomingError) and there.code == "not_null_violation"
    _same_outcome(spark, table, here, there)


def test_repeated_incoming_keys_are_refused_as_spark_refuses_them(spark, tmp_path):
    table = _table(spark, tmp_path)
    rows = _json([_row(3), _row(3, version=1), _row(600)])
    spec = LoadSpec.from_params({"strategy": "upsert", "key_columns": ["id"], "rows": rows})
    here, jobs = _jobs(spark, lambda: load_write(spark, table, spec, "a", driver_match_rows=BIG))
    there, _ = _jobs(spark, lambda: load_write(spark, table, spec, "b", driver_match_rows=0))
    assert jobs > 0 and isinstance(there, IncomingError) and there.code == "duplicate_keys"
    _same_outcome(spark, table, here, there)


def test_json_rows_that_do_not_fit_are_refused_here_with_sparks_message(spark, tmp_path):
    table = _table(spark, tmp_path)
    spec = LoadSpec.from_params({"strategy": "upsert", "key_columns": ["id"], "rows": [{"id": 1, "n": "x"}]})
    here, jobs = _jobs(spark, lambda: load_write(spark, table, spec, "a", driver_match_rows=BIG))
    there, _ = _jobs(spark, lambda: load_write(spark, table, spec, "b", driver_match_rows=0))
    assert jobs == 0  # refused by the same conversion as Spark's, before any Spark job
    assert isinstance(there, IncomingError) and there.code == "type_mismatch"
    _same_outcome(spark, table, here, there)


@pytest.mark.parametrize("case", ["incremental", "double key", "too many rows", "copy-on-write of an older schema"])
def test_loads_arrow_does_not_do_go_to_spark(spark, tmp_path, case):
    table = _table(spark, tmp_path, copy_on_write=case == "copy-on-write of an older schema")
    params = {"strategy": "upsert", "key_columns": ["id"], "rows": _json(INCOMING)}
    limits = {"driver_match_rows": BIG}
    if case == "incremental":
        params |= {"strategy": "incremental", "watermark": "n"}
    elif case == "double key":
        params["key_columns"] = ["id", "ratio"]
    elif case == "too many rows":
        limits["here_rows"] = len(INCOMING) - 1
    else:
        older = COLUMNS[:-1]
        reads = table.reads
        table = LoadTable(table.data, table.segments, True,
                          lambda ids: [SegmentRead(r.id, r.path, older, r.deltas, r.order) for r in reads(ids)])  # fmt: skip
    spec = LoadSpec.from_params(params)
    here, jobs = _jobs(spark, lambda: load_write(spark, table, spec, uuid.uuid4().hex, **limits))
    there, _ = _jobs(spark, lambda: load_write(spark, table, spec, uuid.uuid4().hex, driver_match_rows=0))
    assert jobs > 0
    _same_outcome(spark, table, here, there)
