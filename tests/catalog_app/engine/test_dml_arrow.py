"""Small updates and deletes with pyarrow (catalog_app/engine/dml_arrow.py, predicate_arrow.py, spark_hash.py,
writes.write_segments_arrow): they match the rows Spark matches and write the files Spark writes, with no Spark job;
what they cannot do exactly is done by Spark, with the same result."""

import datetime
import decimal
import os
import re
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from catalog_app.engine import dml, dml_arrow, predicate_arrow
from catalog_app.engine.dml import matches
from catalog_app.engine.predicate_columns import to_column
from catalog_app.engine.predicate_parser import parse_assignments, parse_predicate
from catalog_app.engine.reads import read_segments
from catalog_app.engine.segment_writes import write_segments
from catalog_app.engine.segments import Column, SegmentRead
from catalog_app.engine.spark_hash import xxhash64
from catalog_app.engine.table_data import TableData
from catalog_app.engine.types import arrow_type
from catalog_app.engine.warehouse import Warehouse

COLUMNS = (
    Column(1, "id", "long", nullable=False),
    Column(2, "n", "int"),
    Column(3, "price", "decimal(10,2)"),
    Column(4, "big", "decimal(30,5)"),
    Column(5, "ratio", "double"),
    Column(6, "name", "string"),
    Column(7, "blob", "binary"),
    Column(8, "day", "date"),
    Column(9, "at", "timestamp"),
    Column(10, "flag", "boolean"),
    Column(11, "small", "float"),
)
TYPES = {c.name: c.type for c in COLUMNS}
UTC = datetime.UTC
NAMES = ["alpha", "beta", "Beta", "a%b", "a_b", "line\nbreak", "", "ünï", "emoji 🙂", None]


def _row(i: int) -> dict:
    return {
        "id": i,
        "n": None if i % 7 == 3 else (i * 37) % 50 - 20,
        "price": None if i % 11 == 5 else decimal.Decimal(i * 137 % 10000 - 3000).scaleb(-2),
        "big": decimal.Decimal(f"{(i * 7919) % 10**9}123456789.{i % 100000:05d}") * (-1 if i % 4 == 0 else 1),
        "ratio": None if i % 9 == 0 else [0.5, -0.0, 0.0, 1e300, -2.25, 3.0][i % 6],
        "name": NAMES[i % len(NAMES)],
        "blob": None if i % 5 == 0 else bytes([i % 256, (i * 3) % 256]),
        "day": None if i % 13 == 1 else datetime.date(1969, 12, 25) + datetime.timedelta(days=i * 3),
        "at": None if i % 8 == 2 else datetime.datetime(2024, 3, 1, tzinfo=UTC) + datetime.timedelta(seconds=i * 3601, microseconds=i),
        "flag": None if i % 6 == 4 else i % 2 == 0,
        "small": [0.25, -1.5, None, 2.0][i % 4],
    }  # fmt: skip


def _arrow(rows: list[dict]) -> pa.Table:
    return pa.table({c.name: pa.array([r[c.name] for r in rows], arrow_type(c.type)) for c in COLUMNS})


def _table(spark, tmp_path, *, partition_by=(), segments=3, rows_each=40, deleted=()) -> tuple[TableData, list]:
    """A table of `segments` segments written by Spark (as loads write them), `deleted` positions of the first one
    deleted by a delta file written as a delete writes it."""
    table = TableData(Warehouse(str(tmp_path)), "cat/tbl", COLUMNS, tuple(partition_by))
    reads = []
    for n in range(segments):
        frame = spark.createDataFrame(_arrow([_row(n * rows_each + i) for i in range(rows_each)]))
        written = write_segments(table.warehouse, table.base, frame.coalesce(1), COLUMNS, tag=f"seed{n}", few=True)
        reads += [SegmentRead(str(uuid.uuid4()), w.path, COLUMNS, order=len(reads)) for w in written]
    if deleted:
        first = reads[0]
        [delta] = dml.keymatch.write_position_deltas(
            table.warehouse, table.base, {first.id: pa.array(sorted(deleted), pa.int64())}, tag="del0"
        )
        reads[0] = SegmentRead(first.id, first.path, COLUMNS, (delta.path,), order=0)
    return table, reads


def _jobs(spark, action):
    """`action`'s result, and how many Spark jobs it ran."""
    group = f"probe-{uuid.uuid4().hex}"
    spark.sparkContext.setJobGroup(group, group)
    try:
        result = action()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return result, len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def _layout(written) -> list[tuple]:
    """The written files without their random names: folder (group, partition hash), rows, stats, partition."""
    return sorted(
        (re.sub(r"/[^/]+\.parquet$", "", re.sub(r"^.*?/data/[^/]+", "", w.path)), w.row_count, w.stats,
         w.partition_values, w.group)
        for w in written
    )  # fmt: skip


def _new_rows(spark, table, written):
    reads = [SegmentRead(str(uuid.uuid4()), w.path, COLUMNS) for w in written]
    return read_segments(spark, table.warehouse, table.base, list(COLUMNS), reads)


def _update_both_ways(spark, table, reads, where_text, assignments_text):
    where = parse_predicate(where_text, TYPES)
    assignments = parse_assignments(assignments_text, TYPES)
    here, jobs = _jobs(spark, lambda: _update(spark, table, reads, where, assignments, few=True))
    there, _ = _jobs(spark, lambda: _update(spark, table, reads, where, assignments, few=False))
    return here, there, jobs


def _update(spark, table, reads, where, assignments, *, few):
    matched = dml.rows_matching(spark, table, reads, where, few=few)
    if not matched.counts():
        return matched, [], []
    tag = uuid.uuid4().hex
    deltas = matched.write_deletes(table, tag)
    written = dml.rows_updated_write(spark, table, matched, assignments, tag, touched=None, few=few)
    return matched, deltas, written


SUPPORTED = [
    ("id = 8", {"n": "n + 1"}),
    ("id IN (3, 17, 44, 81) AND name IS NOT NULL", {"price": "12.5", "name": "'x'"}),
    ("n BETWEEN -5 AND 5 OR flag", {"flag": "NOT flag", "n": "-n", "price": "n", "big": "id"}),
    ("name LIKE 'a%' OR name LIKE '_eta' OR name LIKE '%\n%'", {"day": "DATE '2001-02-03'"}),
    ("NOT (price > 10.5) AND day >= DATE '1970-01-01'", {"at": "TIMESTAMP '2020-05-06 07:08:09.123456'"}),
    ("at < TIMESTAMP '2024-03-02 12:00:00+02:00' AND big < 0", {"big": "big", "ratio": "0.25"}),
    ("ratio = 0 OR small = 2", {"small": "small", "blob": "blob", "n": "NULL"}),
    ("name NOT IN ('alpha', 'Beta') AND id < 30 AND blob IS NULL", {"id": "id * 1000 + n"}),
    ("price IS NULL OR day IS NULL", {"price": "price", "n": "n * 2 - 1"}),
    ("name = 'ünï' OR name = 'emoji 🙂' OR name = ''", {"name": "NULL", "at": "at"}),
]


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    """One table per partitioning, built once for the module: the updates below write new files only."""
    built = {}

    def table(partition_by):
        if partition_by not in built:
            folder = tmp_path_factory.mktemp("dml-here")
            built[partition_by] = _table(spark, folder, partition_by=partition_by, deleted=(0, 5, 7, 9, 20))
        return built[partition_by]

    return table


PARTITIONINGS = {"plain": (), "by-name": (6,), "by-price-day": (3, 8), "by-at-flag": (9, 10)}
# Each update on two of the four partitionings, in turn: every partitioning meets five updates, every update two
# partitionings (the whole cross product with LAKEUI_LONG_TESTS=1).
UPDATES = [
    pytest.param(PARTITIONINGS[name], where, assignments, id=f"{name}-{index}")
    for index, (where, assignments) in enumerate(SUPPORTED)
    for n, name in enumerate(PARTITIONINGS)
    if os.environ.get("LAKEUI_LONG_TESTS") or n in (index % 4, (index + 2) % 4)
]


@pytest.mark.parametrize(("partition_by", "where", "assignments"), UPDATES)
def test_a_small_update_here_writes_what_spark_writes(spark, tables, partition_by, where, assignments):
    """Across column types, partitionings, and a segment with a delta file: the pyarrow path runs no Spark job,
    matches the rows Spark's matches, and writes the same files (folders, row counts, statistics, partition values)
    holding the same rows as Spark's write of the same update."""
    table, reads = tables(partition_by)
    (here, here_deltas, here_written), (there, there_deltas, there_written), jobs = _update_both_ways(
        spark, table, reads, where, assignments
    )
    assert here.found_by_arrow and not there.found_by_arrow
    assert jobs == 0
    assert here.counts() == there.counts() and here.counts()
    assert [(d.segment_id, d.row_count) for d in here_deltas] == [(d.segment_id, d.row_count) for d in there_deltas]
    assert _layout(here_written) == _layout(there_written)
    assertDataFrameEqual(_new_rows(spark, table, here_written), _new_rows(spark, table, there_written))


FALLBACK = [
    ("lower(name) = 'beta'", {"n": "1"}),  # a function: Spark matches
    ("id = 4", {"ratio": "n / 2"}),  # division: Spark computes the new row
    ("id = 4", {"ratio": "n"}),  # an int into a double column: Spark's cast
    ("id = 4", {"price": "price * 2"}),  # decimal arithmetic
    ("n < 1.5", {"n": "0"}),  # a fraction compared with an int column
    ("at > DATE '2024-03-02'", {"n": "0"}),  # a timestamp compared with a date
    ("id = 4", {"at": "DATE '2024-01-01'"}),  # a date into a timestamp column
]


@pytest.mark.parametrize(("where", "assignments"), FALLBACK)
def test_what_arrow_cannot_do_exactly_is_done_by_spark_with_the_same_result(spark, tmp_path, where, assignments):
    table, reads = _table(spark, tmp_path, partition_by=(6,), segments=2, deleted=(1, 2))
    (here, _, here_written), (there, _, there_written), jobs = _update_both_ways(
        spark, table, reads, where, assignments
    )
    assert jobs > 0
    assert here.counts() == there.counts() and here.counts()
    assert _layout(here_written) == _layout(there_written)
    assertDataFrameEqual(_new_rows(spark, table, here_written), _new_rows(spark, table, there_written))


def test_an_overflow_or_a_null_into_not_null_is_left_to_spark(spark, tmp_path):
    """Spark's ANSI arithmetic fails on an overflow, and its update refuses NULL in a NOT NULL column: the pyarrow
    path gives these to Spark instead of writing a value Spark would not."""
    rows = pa.table({"n": pa.array([2**31 - 1, 5], pa.int32()), "id": pa.array([1, 2], pa.int64())})
    types = {"n": "int", "id": "long"}
    with pytest.raises(predicate_arrow.Unsupported):
        predicate_arrow.assigned(parse_assignments({"n": "n + 1"}, types)["n"], rows, types, COLUMNS[1],
                                 time_zone="UTC")  # fmt: skip
    with pytest.raises(predicate_arrow.Unsupported):
        predicate_arrow.assigned(parse_assignments({"id": "NULL"}, types)["id"], rows, types, COLUMNS[0],
                                 time_zone="UTC")  # fmt: skip
    assert predicate_arrow.assigned(
        parse_assignments({"id": "n + 1"}, types)["id"], rows.slice(1), types, COLUMNS[0], time_zone="UTC"
    ).to_pylist() == [6]


def test_a_naive_timestamp_outside_utc_is_left_to_spark():
    rows = pa.table({"at": pa.array([None], pa.timestamp("us", tz="UTC"))})
    where = parse_predicate("at > TIMESTAMP '2024-01-01 00:00:00'", {"at": "timestamp"})
    with pytest.raises(predicate_arrow.Unsupported):
        predicate_arrow.matching(where, rows, {"at": "timestamp"}, time_zone="Europe/Paris")
    assert predicate_arrow.matching(where, rows, {"at": "timestamp"}, time_zone="UTC").tolist() == [False]


def test_a_delete_of_few_rows_runs_no_spark_job_and_deletes_what_spark_deletes(spark, tmp_path):
    table, reads = _table(spark, tmp_path, deleted=(3, 4))
    where = parse_predicate("name LIKE '%a%' AND n > 0", TYPES)
    here, jobs = _jobs(spark, lambda: dml.rows_matching(spark, table, reads, where, few=True))
    there = dml.rows_matching(spark, table, reads, where, few=False)
    assert jobs == 0 and here.found_by_arrow
    assert here.counts() == there.counts()
    spark_positions = dml.keymatch.positions_by_segment(there.positions.toArrow())
    assert {k: v.to_pylist() for k, v in here.positions.items()} == {
        k: v.to_pylist() for k, v in spark_positions.items()
    }


# --- Spark's xxhash64, computed here ----------------------------------------------------------------------------

HASHED = {
    "int": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
    "string": st.text(max_size=80),
    "binary": st.binary(max_size=80),
    "boolean": st.booleans(),
    "date": st.dates(),
    "timestamp": st.datetimes(timezones=st.just(UTC)),
    "decimal(10,2)": st.decimals(min_value=-(10**8) + 1, max_value=10**8 - 1, places=2),
    "decimal(30,5)": st.decimals(min_value=-(10**25) + 1, max_value=10**25 - 1, places=5),
    "double": st.floats(allow_nan=True, allow_infinity=True),
    "float": st.floats(width=32, allow_nan=True, allow_infinity=True),
}


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.fixed_dictionaries({name: st.lists(st.none() | values, min_size=30, max_size=30)
                              for name, values in HASHED.items()}))  # fmt: skip
def test_the_partition_hash_computed_here_is_sparks(spark, values):
    """Random values of every type, NULLs among them: Spark's xxhash64 of each value alone, and of all of a row's
    values with their NULL flags (as `write_segments` names a partition's folder), equal the hash computed here."""
    frame = spark.createDataFrame(
        pa.table({name: pa.array(column, arrow_type(name)) for name, column in values.items()})
    )
    names = list(values)
    chained = F.xxhash64(*[F.col(f"`{n}`") for n in names], *[F.col(f"`{n}`").isNull() for n in names])
    got = frame.select(*[F.xxhash64(F.col(f"`{n}`")).alias(n) for n in names], chained.alias("_row")).collect()
    for index, row in enumerate(got):
        for name in names:
            assert row[name] == xxhash64([(values[name][index], name)]), (name, values[name][index])
        pairs = [(values[name][index], name) for name in names]
        assert row["_row"] == xxhash64([*pairs, *[(value is None, "boolean") for value, _ in pairs]])


# --- predicates: Arrow against Spark, at random -----------------------------------------------------------------

LITERALS = {
    "id": st.integers(-5, 130).map(str),
    "n": st.integers(-25, 35).map(str) | st.sampled_from(["2.0", "-3", "7.00"]),
    "price": st.decimals(min_value=-40, max_value=70, places=2).map(str) | st.integers(-40, 70).map(str),
    "big": st.sampled_from(["0", "-1", "123456789.5", "500000000123456789.00000"]),
    "ratio": st.sampled_from(["0", "0.5", "-2.25", "3", "1e300", "-0.0"]),
    "small": st.sampled_from(["0.25", "-1.5", "2", "2.0"]),
    "name": st.sampled_from([n for n in NAMES if n is not None] + ["gamma", "ALPHA"]).map(lambda s: "'" + s.replace("'", "''") + "'"),
    "day": st.dates(datetime.date(1969, 12, 1), datetime.date(1971, 6, 1)).map(lambda d: f"DATE '{d}'"),
    "at": st.datetimes(datetime.datetime(2024, 2, 28), datetime.datetime(2024, 3, 8)).map(lambda d: f"TIMESTAMP '{d}'"),
    "flag": st.sampled_from(["TRUE", "FALSE"]),
}  # fmt: skip
ORDERED = ["id", "n", "price", "big", "ratio", "small", "name", "day", "at", "flag"]
LIKE_PATTERNS = ["'a%'", "'%a%'", "'_eta'", "'%\n%'", "'%🙂'", "''", "'%'", "'a_b'", "'ü%'"]


@st.composite
def _atoms(draw) -> str:
    column = draw(st.sampled_from(ORDERED))
    literal = LITERALS[column]
    kind = draw(st.sampled_from(["compare", "in", "between", "null", "like", "arith"]))
    if kind == "null" or (kind == "like" and column != "name"):
        return f"{column} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if kind == "like":
        return f"name {draw(st.sampled_from(['', 'NOT ']))}LIKE {draw(st.sampled_from(LIKE_PATTERNS))}"
    if kind == "in":
        items = draw(st.lists(literal | st.just("NULL"), min_size=1, max_size=4))
        return f"{column} {draw(st.sampled_from(['', 'NOT ']))}IN ({', '.join(items)})"
    if kind == "between":
        return f"{column} {draw(st.sampled_from(['', 'NOT ']))}BETWEEN {draw(literal)} AND {draw(literal)}"
    if kind == "arith" and column in ("id", "n"):
        return f"{column} {draw(st.sampled_from(['+', '-', '*']))} {draw(st.integers(-3, 3))} > {draw(literal)}"
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
    return f"{column} {op} {draw(literal)}" if draw(st.booleans()) else f"{draw(literal)} {op} {column}"


_PREDICATES = st.recursive(
    _atoms(),
    lambda inner: (
        st.tuples(inner, st.sampled_from([" AND ", " OR "]), inner).map(lambda t: f"({t[0]}{t[1]}{t[2]})")
        | inner.map(lambda p: f"NOT ({p})")
    ),
    max_leaves=5,
)


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_PREDICATES, min_size=60, max_size=60))
def test_random_predicates_match_here_the_rows_spark_matches(spark, predicates):
    """Random predicates over every column type, NULLs and edge values in the data: each one Arrow evaluates
    matches exactly the rows Spark's filter matches; most are evaluated here."""
    rows = _arrow([_row(i) for i in range(120)])
    frame = spark.createDataFrame(rows)
    parsed = [parse_predicate(text, TYPES) for text in predicates]
    spark_masks = frame.select(*[matches(to_column(p)).alias(f"p{i}") for i, p in enumerate(parsed)]).toArrow()
    evaluated = 0
    for i, (text, predicate) in enumerate(zip(predicates, parsed, strict=True)):
        try:
            here = predicate_arrow.matching(predicate, rows, TYPES, time_zone="UTC")
        except dml_arrow.Unsupported:
            continue
        evaluated += 1
        assert here.tolist() == spark_masks.column(f"p{i}").to_pylist(), text
    assert evaluated >= len(predicates) // 2


@pytest.mark.parametrize("default", [None, "x"], ids=["added-column", "added-column-with-default"])
def test_a_segment_of_an_older_schema_is_read_here_as_spark_reads_it(spark, tmp_path, default):
    """A segment written before a column was renamed and widened (int `n` to long `count`) and another added: the
    update matches and rewrites its rows as Spark does; a column added with a default is left to Spark."""
    old = (Column(1, "id", "long", nullable=False), Column(2, "n", "int"))
    current = (Column(1, "id", "long", nullable=False), Column(2, "count", "long"), Column(12, "extra", "string",
               default=default))  # fmt: skip
    table = TableData(Warehouse(str(tmp_path)), "cat/tbl", current, (2,))
    frame = spark.createDataFrame([(i, None if i == 3 else i * 2**20) for i in range(10)], "id long, n int")
    [written] = write_segments(table.warehouse, table.base, frame.coalesce(1), old, tag="seed")
    reads = [SegmentRead(str(uuid.uuid4()), written.path, old)]
    where = parse_predicate("count >= 4194304 OR count IS NULL", {c.name: c.type for c in current})
    assignments = parse_assignments({"count": "count * 4096 + id"}, {c.name: c.type for c in current})
    here, jobs = _jobs(spark, lambda: _update(spark, table, reads, where, assignments, few=True))
    there = _update(spark, table, reads, where, assignments, few=False)
    assert (jobs == 0) is (default is None)
    assert here[0].counts() == there[0].counts() == {reads[0].id: 7}
    assert _layout(here[2]) == _layout(there[2])

    def rows(files):
        new = [SegmentRead(str(uuid.uuid4()), w.path, current) for w in files]
        return read_segments(spark, table.warehouse, table.base, list(current), new)

    assertDataFrameEqual(rows(here[2]), rows(there[2]))
