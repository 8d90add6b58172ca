"""User predicates and SET expressions: parsed by our own parser, checked, and evaluated by real Spark."""

import datetime as dt
from decimal import Decimal

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from catalog_app.engine.predicate_columns import to_column
from catalog_app.engine.predicate_parser import (
    MAX_DEPTH,
    MAX_IN_ITEMS,
    MAX_TEXT_LENGTH,
    MAX_TREE_DEPTH,
    parse_assignments,
    parse_expression,
    parse_predicate,
)
from catalog_app.engine.session import SparkConfig, get_or_create
from tests.catalog_app.engine.test_predicate_parser import COLUMNS

SCHEMA = (
    "id int, amount int, price double, cost decimal(10,2), region string, note string, flag boolean, day date, "
    "ts timestamp, blob binary, `big total` long"
)
D = dt.date
T = dt.datetime
ROWS = [
    (1, 5, 1.5, Decimal("10.25"), "eu", "hello", True, D(2024, 1, 31), T(2024, 1, 31, 10), b"\x01", 500),
    (2, 15, 2.25, Decimal("3.50"), "us", None, False, D(2024, 2, 29), T(2024, 2, 29, 23, 59, 59), b"", 1500),
    (3, 25, None, Decimal("0.00"), "apac", "it's", None, D(2023, 12, 25), T(2023, 12, 25), None, 2500),
    (4, None, 4.0, None, "EU", "  padded  ", True, None, None, b"ab", None),
    (5, -7, 0.5, Decimal("-1.00"), None, "hello world", False, D(2024, 3, 1), T(2024, 3, 1, 12, 30), b"x", -700),
]


@pytest.fixture(scope="module")
def spark_session(tmp_path_factory) -> SparkSession:
    # Not stopped afterwards: other tests in this process reuse the one session.
    return get_or_create(SparkConfig(warehouse=str(tmp_path_factory.mktemp("wh"))))


@pytest.fixture(scope="module")
def df(spark_session: SparkSession) -> DataFrame:
    return spark_session.createDataFrame(ROWS, SCHEMA).cache()


def ids_of(df: DataFrame) -> list[int]:
    return sorted(row.id for row in df.collect())


def assert_selects(df: DataFrame, where: str, ids: list[int]) -> None:
    """Filtering `df` by `where` keeps exactly the rows of ROWS with `ids`, all values intact."""
    filtered = df.filter(to_column(parse_predicate(where, COLUMNS))).orderBy("id").collect()
    assert [tuple(row) for row in filtered] == [row for row in ROWS if row[0] in ids]


# Each case: (where, the ids of the rows it keeps). Where Spark SQL reads the same text, it must agree (below).
FILTER_CASES = [
    # precedence
    ("id = 1 OR id = 2 AND amount > 100", [1]),
    ("(id = 1 OR id = 2) AND amount > 100", []),
    ("NOT id = 1 AND id < 3", [2]),
    ("NOT (id = 1 AND id < 3)", [2, 3, 4, 5]),
    ("amount + 2 * 3 = 11", [1]),
    ("(amount + 2) * 3 = 21", [1]),
    ("amount - 10 - 5 = 0", [2]),
    ("amount / 5 * 3 = 3", [1]),
    ("-amount * 2 = 14", [5]),
    ("- -amount = 5", [1]),
    ("amount * -1 = 7", [5]),
    # comparisons
    ("amount = 5", [1]),
    ("amount == 5", [1]),
    ("amount != 5", [2, 3, 5]),
    ("amount <> 5", [2, 3, 5]),
    ("amount < 15", [1, 5]),
    ("amount <= 15", [1, 2, 5]),
    ("amount > 15", [3]),
    ("amount >= 15", [2, 3]),
    ("price > 1.5", [2, 4]),
    ("price = 2.25", [2]),
    ("cost = 10.25", [1]),
    ("cost < 0", [5]),
    ("1e3 > amount", [1, 2, 3, 5]),
    ("amount > 1.5e1", [3]),
    ("region = 'eu'", [1]),
    ("region > 'f'", [2]),
    ("note = 'it''s'", [3]),
    ("flag", [1, 4]),
    ("NOT flag", [2, 5]),
    ("flag = TRUE", [1, 4]),
    ("flag = false or flag is null", [2, 3, 5]),
    ("TRUE", [1, 2, 3, 4, 5]),
    ("FALSE", []),
    ("day = DATE '2024-02-29'", [2]),
    ("day < DATE '2024-01-01'", [3]),
    ("ts >= TIMESTAMP '2024-02-29 23:59:59'", [2, 5]),
    ("ts = TIMESTAMP '2024-01-31T10:00:00'", [1]),
    ("ts = TIMESTAMP '2024-01-31 11:00:00+01:00'", [1]),
    ("day = ts", [3]),
    ("blob = blob", [1, 2, 4, 5]),
    ("`big total` > 1000", [2, 3]),
    ("`id` = 2", [2]),
    # arithmetic
    ("amount % 10 = 5", [1, 2, 3]),
    ("amount / 2 = 2.5", [1]),
    ("amount * 2 + 1 = 11", [1]),
    ("price * 2 = 3", [1]),
    ("cost + 1 > 11", [1]),
    ("amount + price > 17", [2]),
    # NULL semantics
    ("note IS NULL", [2]),
    ("note is not null", [1, 3, 4, 5]),
    ("note = NULL", []),
    ("note != NULL", []),
    ("NOT (note = NULL)", []),
    ("NULL IS NULL", [1, 2, 3, 4, 5]),
    ("amount + NULL IS NULL", [1, 2, 3, 4, 5]),
    ("flag OR NULL", [1, 4]),
    ("amount IN (5, NULL)", [1]),
    ("amount NOT IN (5, NULL)", []),
    # IN, BETWEEN, LIKE
    ("region IN ('eu', 'us')", [1, 2]),
    ("region NOT IN ('eu', 'us')", [3, 4]),
    ("amount IN (id * 5, 25)", [1, 3]),
    ("amount BETWEEN 5 AND 15", [1, 2]),
    ("amount NOT BETWEEN 5 AND 15", [3, 5]),
    ("amount BETWEEN id AND 10 AND flag", [1]),
    ("day BETWEEN DATE '2024-01-01' AND DATE '2024-02-29'", [1, 2]),
    ("region LIKE 'e%'", [1]),
    ("region NOT LIKE 'e%'", [2, 3, 4]),
    ("note LIKE '%''%'", [3]),
    ("note LIKE 'hell_'", [1]),
    ("region like 'E_'", [4]),
    # functions
    ("lower(region) = 'eu'", [1, 4]),
    ("UPPER(region) = 'EU'", [1, 4]),
    ("trim(note) = 'padded'", [4]),
    ("length(note) = 5", [1]),
    ("length(blob) = 2", [4]),
    ("abs(amount) = 7", [5]),
    ("round(price) = 2", [1, 2]),
    ("round(price, 1) = 2.3", [2]),
    ("round(amount, -1) = 20", [2]),
    ("coalesce(note, 'none') = 'none'", [2]),
    ("coalesce(amount, price, 0) = 4", [4]),
    ("concat(region, '-', note) = 'eu-hello'", [1]),
    ("substring(note, 1, 4) = 'hell'", [1, 5]),
    ("year(day) = 2024", [1, 2, 5]),
    ("month(ts) = 2", [2]),
    ("day(day) = 25", [3]),
    ("Year(ts) = 2023", [3]),
    ("to_date(ts) = DATE '2024-02-29'", [2]),
    ("to_date('2024-01-31') = day", [1]),
    ("lower(trim(concat(note, ' '))) = 'padded'", [4]),
]


@pytest.mark.parametrize(("where", "ids"), FILTER_CASES)
def test_predicate_filters_real_rows(df, where, ids):
    assert_selects(df, where, ids)
    # The oracle: Spark SQL reads the same (trusted, test-only) text the same way. It reads '' as two adjacent
    # strings, so the SQL spells a quote as a backslash and a quote.
    assert ids_of(df.filter(F.expr(where.replace("''", "\\'")))) == ids


def test_keywords_are_case_insensitive(df):
    assert_selects(df, "amount between 1 And 10 oR note Is NoT nUlL aNd NoT flag", [1, 5])


def test_long_or_chains_stay_shallow_for_spark(df):
    where = " OR ".join(f"amount = {n}" for n in range(500)) + " OR id = 5"
    assert len(where) < MAX_TEXT_LENGTH
    assert_selects(df, where, [1, 2, 3, 5])


def test_nesting_up_to_the_limit_is_accepted(df):
    assert_selects(df, "(" * MAX_DEPTH + "flag" + ")" * MAX_DEPTH, [1, 4])
    assert_selects(df, "NOT " * MAX_DEPTH + "flag", [1, 4])
    assert_selects(df, "- " * (MAX_DEPTH - 1) + "(amount) = -5", [1])


def test_the_deepest_accepted_expression_trees_run_in_spark(df):
    chain = "amount" + " + 1" * (MAX_TREE_DEPTH - 2)
    assert_selects(df, f"{chain} = {5 + MAX_TREE_DEPTH - 2}", [1])
    nested = "flag OR flag AND flag = (" * (MAX_DEPTH - 1) + "flag" + ")" * (MAX_DEPTH - 1)
    assert parse_predicate(nested, COLUMNS).depth <= MAX_TREE_DEPTH
    assert_selects(df, nested, [1, 4])


def test_in_list_up_to_the_limit_is_accepted(df):
    assert_selects(df, "amount IN (" + ", ".join(["5"] * MAX_IN_ITEMS) + ")", [1])


def test_column_mapping_reads_other_physical_columns(spark_session):
    physical = spark_session.createDataFrame([(1, 5), (2, 50)], "c1 int, c2 int")
    names = {"id": "c1", "amount": "c2"}
    predicate = to_column(
        parse_predicate("amount > 10", {"id": "int", "amount": "int"}), lambda name: F.col(names[name])
    )
    assert [row.c1 for row in physical.filter(predicate).collect()] == [2]


def test_naive_timestamps_are_in_the_session_time_zone(spark_session, df):
    """As in Spark SQL, whatever the session's time zone; F.lit alone would use the Python process's."""
    previous = spark_session.conf.get("spark.sql.session.timeZone")
    try:
        spark_session.conf.set("spark.sql.session.timeZone", "America/New_York")
        literal = to_column(parse_expression("TIMESTAMP '2024-01-31 10:00:00'", COLUMNS))
        row = df.limit(1).select(literal.alias("ours"), F.expr("TIMESTAMP '2024-01-31 10:00:00'").alias("sql")).first()
        assert row.ours == row.sql
    finally:
        spark_session.conf.set("spark.sql.session.timeZone", previous)


def test_set_expressions_with_column(df):
    assignments = parse_assignments(
        {
            "amount": "amount * 2 + 1",
            "region": "'eu'",
            "note": "concat(coalesce(note, ''), '!')",
            "price": "round(price * 2, 1)",
            "day": "DATE '2025-01-01'",
            "flag": "amount > 10",
            "cost": "NULL",
        },
        COLUMNS,
    )
    updated = df.withColumns({name: to_column(expr) for name, expr in assignments.items()})
    rows = [tuple(row) for row in updated.select("id", *assignments).orderBy("id").collect()]
    new_day = D(2025, 1, 1)
    assert rows == [
        (1, 11, "eu", "hello!", 3.0, new_day, False, None),
        (2, 31, "eu", "!", 4.5, new_day, True, None),
        (3, 51, "eu", "it's!", None, new_day, True, None),
        (4, None, "eu", "  padded  !", 8.0, new_day, None, None),
        (5, -13, "eu", "hello world!", 1.0, new_day, False, None),
    ]


def test_set_expression_reads_the_old_values(df):
    assignments = parse_assignments({"amount": "id", "id": "amount"}, COLUMNS)
    updated = df.withColumns({name: to_column(expr) for name, expr in assignments.items()})
    assert [(row.id, row.amount) for row in updated.orderBy("amount").collect()] == [
        (5, 1),
        (15, 2),
        (25, 3),
        (None, 4),
        (-7, 5),
    ]
