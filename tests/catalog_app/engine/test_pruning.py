"""Segment pruning for DELETE and UPDATE predicates (catalog_app/engine/pruning.py).

A pruned segment must hold no row the predicate matches: checked against Spark's own evaluation over segments
written by Spark, for random predicates on every pruned type.
"""

import random
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from catalog_app.engine import pruning
from catalog_app.engine.predicate_columns import to_column
from catalog_app.engine.predicate_parser import parse_predicate
from catalog_app.engine.reads import read_segments
from catalog_app.engine.segment_writes import write_segments
from catalog_app.engine.segments import SEGMENT_ID, Column, SegmentRead
from catalog_app.engine.warehouse import Warehouse

TYPES = {"n": "long", "i": "int", "s": "string", "d": "date", "t": "timestamp", "m": "decimal(10,2)", "f": "double"}
COLUMNS = [Column(index, name, type_name) for index, (name, type_name) in enumerate(TYPES.items(), start=1)]


def known(**columns: tuple) -> dict[str, pruning.Bounds]:
    return {name: pruning.Bounds(*bounds) for name, bounds in columns.items()}


def may(text: str, columns: dict[str, pruning.Bounds], time_zone: str = "UTC") -> bool:
    return pruning.may_match(parse_predicate(text, TYPES), columns, time_zone=time_zone)


TEN_TO_TWENTY = known(n=(10, 20, 0))
CASES = [
    ("n = 15", True), ("n = 9", False), ("n = 21", False), ("n = 10", True), ("n = 20", True),
    ("n < 10", False), ("n <= 10", True), ("n > 20", False), ("n >= 20", True),
    ("9 = n", False), ("25 > n", True), ("5 > n", False), ("10 >= n", True),
    ("n != 15", True), ("n IN (1, 2, 30)", False), ("n IN (1, 12)", True), ("n NOT IN (1, 2)", True),
    ("n BETWEEN 21 AND 30", False), ("n BETWEEN 0 AND 10", True), ("n NOT BETWEEN 10 AND 20", True),
    ("n = 5 AND n = 15", False), ("n = 5 OR n = 15", True), ("n = 5 OR n = 25", False),
    ("NOT (n = 5)", True), ("n + 1 = 5", True), ("abs(n) = 5", True), ("n IS NULL", False),
    ("n IS NOT NULL", True), ("i = 5", True), ("n = 15.5", True), ("n = 1e3", True),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_a_comparison_outside_the_range_rules_a_segment_out(text, expected):
    assert may(text, TEN_TO_TWENTY) is expected


def test_nulls_equality_and_types():
    assert may("n != 7", known(n=(7, 7, 3))) is False  # every non-NULL value is 7; NULL != 7 is NULL
    assert may("n IS NULL", known(n=(7, 7, 3))) is True
    assert may("n = 7", known(n=(None, None, 5))) is False  # all NULL
    assert may("n IS NOT NULL", known(n=(None, None, 5))) is False
    assert may("n IS NULL", known(n=(1, 2, None))) is True  # NULL count unknown
    assert may("s = 'b'", known(s=("c", "d", 0))) is False
    assert may("s < 'c'", known(s=("c", "d", 0))) is False
    assert may("d = DATE '2024-03-01'", known(d=(date(2024, 3, 2), date(2024, 4, 1), 0))) is False
    assert may("d = TIMESTAMP '2024-03-01 00:00:00'", known(d=(date(2024, 3, 2), date(2024, 4, 1), 0))) is True
    assert may("m > 9.99", known(m=(Decimal("1.00"), Decimal("9.99"), 0))) is False
    assert may("m >= 9.99", known(m=(Decimal("1.00"), Decimal("9.99"), 0))) is True


def test_timestamp_literals_are_read_in_the_session_time_zone():
    noon = known(t=(datetime(2024, 3, 1, 12), datetime(2024, 3, 1, 12), 0))  # the catalog's naive UTC
    assert may("t = TIMESTAMP '2024-03-01 12:00:00'", noon) is True
    assert may("t = TIMESTAMP '2024-03-01 12:00:00'", noon, time_zone="Europe/Paris") is False
    assert may("t = TIMESTAMP '2024-03-01 13:00:00'", noon, time_zone="Europe/Paris") is True
    assert may("t = TIMESTAMP '2024-03-01T14:00:00+02:00'", noon) is True


def test_float_boolean_and_binary_columns_are_not_pruned_on():
    assert pruning.bounds({"min": 1.0, "max": 2.0, "nulls": 0}, "double") is None
    assert pruning.bounds({"min": False, "max": False, "nulls": 0}, "boolean") is None
    assert pruning.bounds({"min": "2024-01-01", "max": "2024-02-01", "nulls": 1}, "date") == pruning.Bounds(
        date(2024, 1, 1), date(2024, 2, 1), 1
    )


def _value(name: str, i: int):
    return {
        "n": i * 7 - 300, "i": i % 50, "s": f"k{i:04d}", "d": date(2024, 1, 1) + timedelta(days=i),
        "t": datetime(2024, 1, 1) + timedelta(hours=5 * i), "m": Decimal(i) / 4 - 20, "f": i / 3,
    }[name]  # fmt: skip


def _literal(name: str, i: int) -> str:
    value = _value(name, i)
    if name == "s":
        return f"'{value}'"
    if name == "d":
        return f"DATE '{value}'"
    if name == "t":
        return f"TIMESTAMP '{value}'"
    return str(value)


def _random_predicate(chance: random.Random, depth: int = 0) -> str:
    if depth < 2 and chance.random() < 0.3:
        join = chance.choice([" AND ", " OR "])
        return "(" + join.join(_random_predicate(chance, depth + 1) for _ in range(2)) + ")"
    name = chance.choice(list(TYPES))
    pick = lambda: _literal(name, chance.randrange(-20, 220))  # noqa: E731
    form = chance.randrange(5)
    if form == 0:
        return f"{name} {chance.choice(['=', '!=', '<', '<=', '>', '>='])} {pick()}"
    if form == 1:
        return f"{pick()} {chance.choice(['=', '<', '>='])} {name}"
    if form == 2:
        return f"{name} IN ({pick()}, {pick()}, {pick()})"
    if form == 3:
        low, high = sorted([chance.randrange(-20, 220) for _ in range(2)])
        return f"{name} BETWEEN {_literal(name, low)} AND {_literal(name, high)}"
    return f"{name} IS {chance.choice(['', 'NOT '])}NULL"


def test_a_pruned_segment_never_holds_a_matching_row(spark, tmp_path):
    """Ten segments of consecutive values (some NULL) written by Spark, their statistics from the footers, and 300
    random predicates: every segment in which Spark finds a matching row is kept, and some segments are pruned."""
    warehouse, base = Warehouse(str(tmp_path)), "cat/tbl"
    chance = random.Random(7)
    reads, stats = [], {}
    schema = ", ".join(f"{name} {type_name}" for name, type_name in TYPES.items())
    for segment in range(10):
        rows = [
            tuple(None if chance.random() < 0.05 else _value(name, i) for name in TYPES)
            for i in range(segment * 20, segment * 20 + 20)
        ]
        if segment == 9:  # a segment whose `s` is all NULL
            rows = [(*row[:2], None, *row[3:]) for row in rows]
        [written] = write_segments(
            warehouse, base, spark.createDataFrame(rows, schema).coalesce(1), COLUMNS, tag=f"s{segment}"
        )
        reads.append(SegmentRead(f"seg{segment}", written.path, tuple(COLUMNS), order=segment))
        stats[f"seg{segment}"] = pruning.segment_bounds(written.stats, COLUMNS, written=COLUMNS)
    table = read_segments(spark, warehouse, base, COLUMNS, reads, positions=True).cache()

    pruned = 0
    predicates = [_random_predicate(chance) for _ in range(300)]
    hits = table.select(
        SEGMENT_ID, *[F.coalesce(to_column(parse_predicate(text, TYPES)), F.lit(False)).alias(f"p{i}")
                      for i, text in enumerate(predicates)]
    ).groupBy(SEGMENT_ID).agg(*[F.max(f"p{i}").alias(f"p{i}") for i in range(len(predicates))]).collect()  # fmt: skip
    for i, text in enumerate(predicates):
        matching = {row[SEGMENT_ID] for row in hits if row[f"p{i}"]}
        kept = {segment for segment, columns in stats.items() if may(text, columns)}
        assert matching <= kept, (text, matching - kept)
        pruned += len(stats) - len(kept)
    table.unpersist()
    assert pruned > 300, pruned  # pruning does happen: on average more than one segment per predicate


def test_statistics_written_in_a_type_the_column_was_cast_from_prune_nothing():
    """A segment written when `s` was a decimal has its statistics as decimals ("9" to "10"); a merge made `s` text,
    where "10" sorts before "9": those bounds would rule out `s = '10'`, so they are unknown. A widening keeps them."""
    stats = {"1": {"min": "9", "max": "10", "nulls": 0}}
    text = [Column(1, "s", "string")]
    assert pruning.segment_bounds(stats, text, written=[Column(1, "s", "string")])["s"].low == "9"
    assert pruning.segment_bounds(stats, text, written=[Column(1, "s", "decimal(10,0)")]) == {}
    assert pruning.may_match(parse_predicate("s = '10'", {"s": "string"}), {})
    wide = [Column(1, "n", "long")]
    assert pruning.segment_bounds({"1": {"min": 1, "max": 5, "nulls": 0}}, wide, written=[Column(1, "n", "int")])
