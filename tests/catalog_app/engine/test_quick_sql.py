"""SELECTs answered without Spark (catalog_app/engine/quick_sql.py): whatever it answers is Spark's answer (the same
columns, names, types, rows and NULLs), on random tables and random statements of its subset and around it; what
it cannot answer exactly it refuses (None), and Spark answers.

Each run tries EXAMPLES random tables and statements (a new draw each run; each one quick_sql answers costs a Spark
query in this process); LAKEUI_LONG_TESTS=1 tries LONG_EXAMPLES."""

import datetime
import decimal
import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog_app.engine import quick_sql, sql
from catalog_app.engine.frames import struct_type
from catalog_app.engine.segments import Column
from catalog_app.engine.types import arrow_type

COLUMNS = (
    Column(1, "id", "long"),
    Column(2, "Amount", "int"),
    Column(3, "big", "long"),
    Column(4, "region", "string"),
    Column(5, "day", "date"),
    Column(6, "price", "decimal(10,2)"),
    Column(7, "flag", "boolean"),
    Column(8, "ratio", "double"),
    Column(9, "at", "timestamp"),
)
VALUES = {
    "id": st.integers(-5, 5),
    "Amount": st.integers(-(2**31), 2**31 - 1) | st.integers(-3, 3),
    "big": st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3),
    "region": st.sampled_from(["eu", "us", "EU", "", "é", "z"]),
    "day": st.dates(datetime.date(1900, 1, 1), datetime.date(2100, 1, 1)),
    "price": st.decimals(-99_999_999, 99_999_999, places=2, allow_nan=False, allow_infinity=False),
    "flag": st.booleans(),
    "ratio": st.sampled_from([0.0, -0.0, 1.5, float("nan"), float("inf"), -2.25]),
    "at": st.datetimes(datetime.datetime(1970, 1, 1), datetime.datetime(2100, 1, 1)).map(
        lambda v: v.replace(tzinfo=datetime.UTC)
    ),
}
LITERALS = {"integer": st.integers(-(2**63) + 1, 2**63 - 1) | st.integers(-3, 3), "string": VALUES["region"]}
FAMILY = {"id": "integer", "Amount": "integer", "big": "integer", "region": "string"}
TABLE = "shop.orders"
EXAMPLES, LONG_EXAMPLES = 15, 300


@st.composite
def tables(draw) -> pa.Table:
    size = draw(st.integers(0, 12))
    arrays = {}
    for column in COLUMNS:
        values = [draw(st.none() | VALUES[column.name]) for _ in range(size)]
        arrays[column.name] = pa.array(values, arrow_type(column.type))
    return pa.table(arrays)


def spelled(draw, name: str) -> str:
    """A column name as a user may write it: in any case, maybe backquoted."""
    cased = draw(st.sampled_from([name, name.lower(), name.upper()]))
    return f"`{cased}`" if draw(st.booleans()) else cased


def literal(draw, family: str) -> str:
    value = draw(LITERALS[family])
    return str(value) if family == "integer" else f"'{value}'"


@st.composite
def conditions(draw, depth: int = 0) -> str:
    kind = draw(st.sampled_from(["cmp", "cmp", "null", "and", "or", "not"] if depth < 2 else ["cmp", "null"]))
    if kind in ("and", "or"):
        return f"({draw(conditions(depth + 1))} {kind.upper()} {draw(conditions(depth + 1))})"
    if kind == "not":
        return f"NOT {draw(conditions(depth + 1))}"
    name = draw(st.sampled_from([c.name for c in COLUMNS]))
    if kind == "null":
        return f"{spelled(draw, name)} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    op = draw(st.sampled_from(["=", "==", "<>", "!=", "<", "<=", ">", ">="]))
    family = FAMILY.get(name, "string")  # a date or a decimal against a string: refused, Spark answers
    other = draw(st.sampled_from([c for c in FAMILY if FAMILY[c] == family] + ["literal"]))
    right = literal(draw, family) if other == "literal" else spelled(draw, other)
    left = spelled(draw, name)
    return f"{left} {op} {right}" if draw(st.booleans()) else f"{right} {op} {left}"


@st.composite
def statements(draw) -> tuple[str, list[str], bool]:
    """A statement, the output names its ORDER BY names (in order) and whether it has a LIMIT."""
    names = [c.name for c in COLUMNS]
    if draw(st.booleans()):  # aggregates, grouped or not
        groups = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
        items = [spelled(draw, g) for g in groups]
        for _ in range(draw(st.integers(1 if not groups else 0, 3))):
            function = draw(st.sampled_from(["count", "sum", "avg", "min", "max", "COUNT", "Sum"]))
            argument = "*" if function.lower() == "count" and draw(st.booleans()) else spelled(draw, draw(
                st.sampled_from(names)))  # fmt: skip
            items.append(f"{function}({argument})")
        if draw(st.integers(0, 9)) == 0:
            items.append(spelled(draw, draw(st.sampled_from(names))))  # maybe not grouped: Spark's error
        group_by = f" GROUP BY {', '.join(spelled(draw, g) for g in groups)}" if groups else ""
    else:
        items = ["*"] if draw(st.booleans()) else [
            spelled(draw, n) for n in draw(st.lists(st.sampled_from(names), min_size=1, max_size=4))]  # fmt: skip
        group_by = ""
    aliased = []
    for item in items:
        if item != "*" and draw(st.integers(0, 3)) == 0:
            alias = draw(st.sampled_from(["a", "total", "`Total`"]))
            aliased.append(f"{item} {draw(st.sampled_from(['AS ', '']))}{alias}")
        else:
            aliased.append(item)
    distinct = "DISTINCT " if draw(st.integers(0, 4)) == 0 else ""
    where = f" WHERE {draw(conditions())}" if draw(st.booleans()) else ""
    statement = f"SELECT {distinct}{', '.join(aliased)} FROM {TABLE}{where}{group_by}"
    order: list[str] = []
    limit = False
    if draw(st.booleans()):
        outputs = _outputs(aliased)
        if outputs:
            order = draw(st.lists(st.sampled_from(outputs), min_size=1, max_size=2, unique=True))
            clauses = [f"`{name}`{draw(st.sampled_from(['', ' ASC', ' DESC']))}"
                       f"{draw(st.sampled_from(['', ' NULLS FIRST', ' NULLS LAST']))}" for name in order]  # fmt: skip
            statement += f" ORDER BY {', '.join(clauses)}"
            if draw(st.booleans()):
                statement += f" LIMIT {draw(st.integers(0, 5))}"
                limit = True
    return statement + draw(st.sampled_from(["", ";", " ; "])), order, limit


def _outputs(items: list[str]) -> list[str]:
    """The output names of plain columns and aliases (what ORDER BY may name here)."""
    names = []
    for item in items:
        if item == "*":
            names += [c.name for c in COLUMNS]
        elif " " in item:
            names.append(item.rsplit(" ", 1)[1].strip("`"))
        elif "(" not in item:
            names.append(item.strip("`"))
    return names


def spark_answer(spark, statement: str, rows: pa.Table) -> dict | None:
    frame = spark.createDataFrame(rows, schema=struct_type(COLUMNS))
    try:
        references = sql.table_references(spark, statement)
        result = sql.run_select(spark, statement, references, lambda reference: frame)
        return sql.selected_rows(result, 10_000)
    except (sql.SqlError, sql.QueryFailed):
        return None


def _key(row: list) -> str:
    return repr(row)


@settings(
    max_examples=LONG_EXAMPLES if os.environ.get("LAKEUI_LONG_TESTS") == "1" else EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(rows=tables(), query=statements())
def test_quick_answers_are_sparks(spark, rows, query):
    statement, order, limited = query
    parsed = quick_sql.parse(statement)
    quick = parsed and quick_sql.answer(parsed, COLUMNS, rows)
    if quick is None:
        return  # Spark answers it (tested by the SQL console's own tests)
    expected = spark_answer(spark, statement, rows)
    assert expected is not None, f"quick_sql answered what Spark refuses: {statement}"
    assert quick.columns == expected["columns"], statement
    if order:  # the ORDER BY keys come in the same order; ties (and a LIMIT among them) may pick other rows
        positions = [[c["name"].lower() for c in quick.columns].index(name.lower()) for name in order]
        keys = [[row[p] for p in positions] for row in quick.rows]
        assert keys == [[row[p] for p in positions] for row in expected["rows"]], statement
    if not limited:
        assert sorted(quick.rows, key=_key) == sorted(expected["rows"], key=_key), statement
    else:
        assert len(quick.rows) == len(expected["rows"]), statement


SAMPLE = pa.table(
    {
        "id": pa.array([1, 2, 3, None], pa.int64()),
        "Amount": pa.array([5, None, 7, 7], pa.int32()),
        "big": pa.array([2**62, 2**62, -1, None], pa.int64()),
        "region": ["eu", None, "us", "eu"],
        "day": pa.array([datetime.date(2024, 1, 1), None, datetime.date(2024, 2, 1), None]),
        "price": pa.array([decimal.Decimal("1.50"), None, decimal.Decimal("2.00"), None], pa.decimal128(10, 2)),
        "flag": [True, None, False, True],
        "ratio": [1.5, float("nan"), None, -0.0],
        "at": pa.array([datetime.datetime(2024, 1, 1, 5), None, None, None], pa.timestamp("us", tz="UTC")),
    }
)


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT * FROM shop.orders",
        "select region, count(*), sum(amount) AS total, avg(Amount), min(day), max(price) from shop.orders "
        "where id >= 2 or region = 'eu' group by region order by region desc nulls first limit 2",
        "SELECT DISTINCT region FROM shop.orders WHERE NOT (Amount IS NULL) ORDER BY region",
        "SELECT id FROM shop.orders WHERE amount > 2147483648 OR amount = -3",
        "SELECT count(*) FROM shop.orders WHERE day IS NULL;",
    ],
)
def test_the_subset_is_answered_as_spark_answers(spark, statement):
    quick = quick_sql.answer(quick_sql.parse(statement), COLUMNS, SAMPLE)
    assert quick is not None
    expected = spark_answer(spark, statement, SAMPLE)
    assert quick.columns == expected["columns"]
    assert sorted(quick.rows, key=_key) == sorted(expected["rows"], key=_key)


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT sum(big) FROM shop.orders",  # a partial sum may overflow: Spark fails in ANSI mode
        "SELECT sum(ratio) FROM shop.orders",  # a sum of doubles depends on the order
        "SELECT region FROM shop.orders WHERE ratio > 0",  # NaN and -0.0
        "SELECT id FROM shop.orders WHERE day > '2024-01-15'",  # Spark's cast of a string to a date
        "SELECT region, count(*) FROM shop.orders",  # not grouped: Spark's error
        "SELECT nothing FROM shop.orders",  # Spark's error
        "SELECT id FROM shop.orders WHERE region = 'it''s'",  # adjacent literals concatenate in Spark
        'SELECT id FROM shop.orders WHERE region = "eu"',
        "SELECT id FROM shop.orders -- comment",
        "SELECT id FROM shop.orders FOR VERSION AS OF 'abc'",
        "SELECT o.id FROM shop.orders o JOIN shop.orders p ON o.id = p.id",
        "SELECT id + 1 FROM shop.orders",
        "SELECT id FROM shop.orders WHERE id = 1.5",
        "SELECT id FROM shop.orders WHERE id = 9223372036854775808",
        "SELECT id FROM shop.orders LIMIT -1",
    ],
)
def test_what_could_differ_is_left_to_spark(statement):
    parsed = quick_sql.parse(statement)
    assert parsed is None or quick_sql.answer(parsed, COLUMNS, SAMPLE) is None
