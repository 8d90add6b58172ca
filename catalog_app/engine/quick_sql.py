"""SELECTs over one small table answered in this process, with Spark's answer: DuckDB over the table's rows in
Arrow, for the statements whose meaning in Spark SQL this module knows exactly, and only those.

`parse` accepts a strict subset of Spark's SELECT and gives None for anything else (so Spark runs it, and gives
its own errors); `answer` types the statement against the table's columns, refuses (None) what it cannot run
exactly, and runs what it can. The subset:

    SELECT [DISTINCT] item, ... FROM db.table [WHERE condition] [GROUP BY column, ...]
        [ORDER BY name [ASC|DESC] [NULLS FIRST|LAST], ...] [LIMIT n]

- an item is `*`, a column, COUNT(*), COUNT(column), SUM, AVG, MIN or MAX of a column, each with an optional
  `[AS] alias`; names are plain identifiers or `backquoted` ones (matched to the columns case-insensitively);
- a condition is comparisons (= == <> != < <= > >=) of columns and literals (integers, 'strings' without
  backslashes or quotes), IS [NOT] NULL, AND, OR, NOT and parentheses;
- ORDER BY names the SELECT's output columns.

Typed exactly as Spark types them (Spark 4, ANSI mode): integers compare as integers, strings as strings (both
UTF-8 binary, as DuckDB's default collation), COUNT is bigint, SUM of int or long is bigint, AVG only of int (a
sum of doubles that stays exact below 2^53: `MAX_ROWS_FOR_AVG` rows), MIN and MAX keep their type. What could
differ is left to Spark: floating point comparisons, grouping and ordering (NaN, -0.0), sums of decimals and of
doubles, comparisons of dates with strings (Spark's casts), a SUM of longs whose partial sums could overflow
(Spark fails; the sum of the absolute values bounds every partial sum in any order). Output names are Spark's:
the alias, else the name as written (`Amount` for a column `amount`), `count(1)`, `sum(Amount)`, ...
"""

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from catalog_app.engine.segments import Column
from catalog_app.engine.types import arrow_type, is_decimal, json_value

TOKEN = re.compile(
    r"\s*(?:(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<quoted>`[A-Za-z_][A-Za-z0-9_]*`)"
    r"|(?P<number>[0-9]+)(?![A-Za-z0-9_.])|(?P<string>'[^'\\]*')|(?P<op><=|>=|<>|!=|==|[=<>(),.*;-]))"
)
# Words that may not name a column, alias or table unquoted: Spark's keywords this subset or its neighbours use.
KEYWORDS = {
    "select", "from", "where", "group", "by", "order", "limit", "as", "and", "or", "not", "is", "null", "asc",
    "desc", "nulls", "first", "last", "distinct", "all", "having", "union", "join", "on", "inner", "left", "right",
    "full", "outer", "cross", "window", "over", "in", "like", "ilike", "rlike", "regexp", "between", "case", "when",
    "then", "else", "end", "true", "false", "except", "intersect", "minus", "offset", "with", "lateral", "natural",
    "anti", "semi", "using", "sort", "cluster", "distribute", "qualify", "pivot", "unpivot", "tablesample", "for",
    "version", "timestamp", "interval", "exists", "any", "some", "div", "values", "table", "grouping", "rollup",
    "cube", "sets", "filter", "escape", "unknown", "date", "collate", "current_date", "current_timestamp",
    "current_user", "user", "session_user", "current_time", "current_catalog", "current_database", "current_schema",
}  # fmt: skip
AGGREGATES = {"count", "sum", "avg", "min", "max"}
COMPARISONS = {"=": "=", "==": "=", "<>": "<>", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
INTEGRAL = {"int", "long"}
ORDERED = {"int", "long", "string", "date", "boolean"}  # exact comparison, grouping and ordering; decimals too
MAX_LONG = 2**63 - 1
MAX_ROWS_FOR_AVG = 2**21  # int values (< 2^31) summed as doubles stay exact below 2^52 in any order
SPARK_NAMES = {"long": "bigint"}


class Unsupported(Exception):
    """Outside the subset: Spark answers."""


@dataclass(frozen=True)
class Name:
    text: str  # as written, without backquotes


@dataclass(frozen=True)
class Item:
    function: str | None  # None: a column; else an aggregate
    argument: Name | None  # None: `*` (SELECT * or COUNT(*))
    alias: str | None


@dataclass(frozen=True)
class Query:
    distinct: bool
    items: tuple[Item, ...]
    database: str
    table: str
    where: tuple | None  # ("and"|"or", a, b) | ("not", a) | ("cmp", op, left, right) | ("null", name, negated)
    group_by: tuple[Name, ...]
    order_by: tuple[tuple[str, bool, bool | None], ...]  # (name, descending, nulls first)
    limit: int | None


def _tokens(statement: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    text = statement.rstrip().removesuffix(";")
    while position < len(text):
        match = TOKEN.match(text, position)
        if match is None:
            if text[position:].strip():
                raise Unsupported
            break
        tokens.append((match.lastgroup, match.group(match.lastgroup)))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, statement: str) -> None:
        self.tokens, self.index = _tokens(statement), 0

    def peek(self, ahead: int = 0) -> tuple[str, str]:
        at = self.index + ahead
        return self.tokens[at] if at < len(self.tokens) else ("end", "")

    def word(self, *words: str) -> bool:
        kind, text = self.peek()
        if kind == "word" and text.lower() in words:
            self.index += 1
            return True
        return False

    def op(self, *ops: str) -> str | None:
        kind, text = self.peek()
        if kind == "op" and text in ops:
            self.index += 1
            return text
        return None

    def expect_word(self, word: str) -> None:
        if not self.word(word):
            raise Unsupported

    def expect_op(self, op: str) -> None:
        if not self.op(op):
            raise Unsupported

    def name(self) -> Name:
        kind, text = self.peek()
        if kind == "quoted":
            self.index += 1
            return Name(text[1:-1])
        if kind == "word" and text.lower() not in KEYWORDS and text.lower() not in AGGREGATES:
            self.index += 1
            return Name(text)
        raise Unsupported

    def integer(self) -> int:
        negative = bool(self.op("-"))
        kind, text = self.peek()
        if kind != "number" or int(text) > MAX_LONG:
            raise Unsupported
        self.index += 1
        return -int(text) if negative else int(text)

    def query(self) -> Query:
        self.expect_word("select")
        distinct = self.word("distinct")
        items = [self.item()]
        while self.op(","):
            items.append(self.item())
        self.expect_word("from")
        database = self.name().text
        self.expect_op(".")
        table = self.name().text
        where = self.condition() if self.word("where") else None
        group_by: list[Name] = []
        if self.word("group"):
            self.expect_word("by")
            group_by.append(self.name())
            while self.op(","):
                group_by.append(self.name())
        order_by = []
        if self.word("order"):
            self.expect_word("by")
            order_by.append(self.order_item())
            while self.op(","):
                order_by.append(self.order_item())
        limit = None
        if self.word("limit"):
            limit = self.integer()
            if limit < 0:
                raise Unsupported
        if self.peek()[0] != "end":
            raise Unsupported
        return Query(distinct, tuple(items), database, table, where, tuple(group_by), tuple(order_by), limit)

    def item(self) -> Item:
        if self.op("*"):
            return Item(None, None, None)
        kind, text = self.peek()
        if kind == "word" and text.lower() in AGGREGATES and self.peek(1) == ("op", "("):
            self.index += 2
            function = text.lower()
            argument = None if function == "count" and self.op("*") else self.name()
            self.expect_op(")")
        else:
            function, argument = None, self.name()
        kind, text = self.peek()
        named = self.word("as") or kind == "quoted" or (kind == "word" and text.lower() not in KEYWORDS)
        return Item(function, argument, self.name().text if named else None)

    def order_item(self) -> tuple[str, bool, bool | None]:
        name = self.name().text
        descending = self.word("desc") or (self.word("asc") and False)
        nulls_first = None
        if self.word("nulls"):
            nulls_first = self.word("first") or (not self.word("last") and _raise())
        return name, descending, nulls_first

    def condition(self) -> tuple:
        left = self.conjunction()
        while self.word("or"):
            left = ("or", left, self.conjunction())
        return left

    def conjunction(self) -> tuple:
        left = self.negation()
        while self.word("and"):
            left = ("and", left, self.negation())
        return left

    def negation(self) -> tuple:
        if self.word("not"):
            return ("not", self.negation())
        if self.op("("):
            inner = self.condition()
            self.expect_op(")")
            return inner
        left = self.operand()
        if isinstance(left, Name) and self.word("is"):
            negated = self.word("not")
            self.expect_word("null")
            return ("null", left, negated)
        op = self.op(*COMPARISONS)
        if op is None:
            raise Unsupported
        return ("cmp", COMPARISONS[op], left, self.operand())

    def operand(self) -> Name | int | str:
        kind, text = self.peek()
        if kind == "string":
            self.index += 1
            return text[1:-1]
        if kind == "number" or (kind, text) == ("op", "-"):
            return self.integer()
        return self.name()


def _raise():
    raise Unsupported


def parse(statement: str) -> Query | None:
    """The statement as a Query if it is in the subset, else None."""
    try:
        return _Parser(statement).query()
    except Unsupported:
        return None


# --- typing and running ---------------------------------------------------------------------------------------


def _ordered(type_name: str) -> bool:
    return type_name in ORDERED or is_decimal(type_name)


def spark_type_name(type_name: str) -> str:
    """The type as Spark's `simpleString` names it (what the SQL console shows)."""
    return SPARK_NAMES.get(type_name, type_name)


@dataclass(frozen=True)
class Output:
    sql: str  # DuckDB's expression
    name: str  # Spark's output name
    type: str  # the column type name of the value


class _Typer:
    def __init__(self, columns: Sequence[Column], rows: int) -> None:
        self.columns, self.rows, self.params = columns, rows, []
        self.longs_summed: list[str] = []

    def column(self, name: Name) -> Column:
        found = [c for c in self.columns if c.name.lower() == name.text.lower()]
        if len(found) != 1:
            raise Unsupported  # unknown or ambiguous: Spark says which
        return found[0]

    def output(self, item: Item) -> list[Output]:
        if item.function is None and item.argument is None:
            return [Output(_quote(c.name), c.name, c.type) for c in self.columns]
        if item.function is None:
            column = self.column(item.argument)
            return [Output(_quote(column.name), item.alias or item.argument.text, column.type)]
        if item.argument is None:
            return [Output("count(*)", item.alias or "count(1)", "long")]
        column = self.column(item.argument)
        name = item.alias or f"{item.function}({item.argument.text})"
        quoted = _quote(column.name)
        if item.function == "count":
            return [Output(f"count({quoted})", name, "long")]
        if item.function == "sum" and column.type in INTEGRAL:
            if column.type == "long":
                self.longs_summed.append(quoted)
            return [Output(f"CAST(sum({quoted}) AS BIGINT)", name, "long")]
        if item.function == "avg" and column.type == "int" and self.rows <= MAX_ROWS_FOR_AVG:
            return [Output(f"avg({quoted})", name, "double")]
        if item.function in ("min", "max") and _ordered(column.type):
            return [Output(f"{item.function}({quoted})", name, column.type)]
        raise Unsupported

    def condition(self, node: tuple) -> str:
        kind = node[0]
        if kind in ("and", "or"):
            return f"({self.condition(node[1])} {kind.upper()} {self.condition(node[2])})"
        if kind == "not":
            return f"(NOT {self.condition(node[1])})"
        if kind == "null":
            return f"({_quote(self.column(node[1]).name)} IS {'NOT ' if node[2] else ''}NULL)"
        _, op, left, right = node
        if not isinstance(left, Name) and not isinstance(right, Name):
            raise Unsupported  # literals alone: Spark's constant folding and literal types
        family = {self.operand_family(left), self.operand_family(right)}
        if len(family) != 1 or family == {None}:
            raise Unsupported
        return f"({self.operand(left)} {op} {self.operand(right)})"

    def operand_family(self, operand) -> str | None:
        """Integers compare with integers, strings with strings; other types only with their own type."""
        if isinstance(operand, Name):
            type_name = self.column(operand).type
            if type_name in INTEGRAL:
                return "integer"
            return type_name if _ordered(type_name) else None
        return "integer" if isinstance(operand, int) else "string"

    def operand(self, operand) -> str:
        if isinstance(operand, Name):
            column = self.column(operand)
            return f"CAST({_quote(column.name)} AS BIGINT)" if column.type in INTEGRAL else _quote(column.name)
        self.params.append(operand)
        return "CAST(? AS BIGINT)" if isinstance(operand, int) else "CAST(? AS VARCHAR)"


_DATABASE: list[duckdb.DuckDBPyConnection] = []
_DATABASE_LOCK = threading.Lock()


def _database() -> duckdb.DuckDBPyConnection:
    """The process's in-memory DuckDB (opening one costs 30-80 ms; a cursor of it 2 ms)."""
    with _DATABASE_LOCK:
        if not _DATABASE:
            _DATABASE.append(duckdb.connect(config={"threads": 1}))
        return _DATABASE[0]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Answer:
    columns: list[dict[str, str]]  # name and Spark's type name, as `sql.selected_rows` gives them
    rows: list[list[Any]]  # every row, as JSON values


def answer(query: Query, columns: Sequence[Column], rows: pa.Table) -> Answer | None:
    """The query's result over `rows` (the table's live rows in the `columns` schema) if this module can give
    Spark's exactly, else None."""
    try:
        return _answer(query, columns, rows)
    except Unsupported:
        return None


def _answer(query: Query, columns: Sequence[Column], rows: pa.Table) -> Answer | None:
    typer = _Typer(columns, rows.num_rows)
    outputs = [output for item in query.items for output in typer.output(item)]
    aggregated = bool(query.group_by) or any(item.function for item in query.items)
    groups = [typer.column(name) for name in query.group_by]
    if any(not _ordered(column.type) for column in groups):
        raise Unsupported
    if aggregated:
        grouped = {column.name for column in groups}
        for item in query.items:  # a column outside GROUP BY: Spark's error
            if item.function is None and (item.argument is None or typer.column(item.argument).name not in grouped):
                raise Unsupported
    if query.distinct and not all(_ordered(output.type) for output in outputs):
        raise Unsupported
    where = typer.condition(query.where) if query.where is not None else None
    order = []
    for name, descending, nulls_first in query.order_by:
        found = [index for index, output in enumerate(outputs) if output.name.lower() == name.lower()]
        if len(found) != 1 or not _ordered(outputs[found[0]].type):
            raise Unsupported
        first = (not descending) if nulls_first is None else nulls_first  # Spark: NULLs are the smallest
        order.append(f"o{found[0]} {'DESC' if descending else 'ASC'} NULLS {'FIRST' if first else 'LAST'}")
    sql = (
        f"SELECT {'DISTINCT ' if query.distinct else ''}"
        + ", ".join(f"{output.sql} AS o{index}" for index, output in enumerate(outputs))
        + " FROM lakeui_rows"
        + (f" WHERE {where}" if where else "")
        + (f" GROUP BY {', '.join(_quote(column.name) for column in groups)}" if groups else "")
        + (f" ORDER BY {', '.join(order)}" if order else "")
        + (f" LIMIT {query.limit}" if query.limit is not None else "")
    )
    connection = _database().cursor()  # a connection of its own (its registered view is its own)
    try:
        connection.register("lakeui_rows", rows)
        for quoted in typer.longs_summed:  # a partial sum that could overflow: Spark fails, DuckDB would not
            ((bound,),) = connection.sql(f"SELECT sum(abs(CAST({quoted} AS HUGEINT))) FROM lakeui_rows").fetchall()
            if bound is not None and bound > MAX_LONG:
                raise Unsupported
        result = connection.sql(sql, params=typer.params).to_arrow_table()
    except duckdb.Error:
        raise Unsupported from None  # whatever DuckDB cannot do, Spark does (or gives its error)
    finally:
        connection.close()
    schema = pa.schema([(f"o{index}", arrow_type(output.type)) for index, output in enumerate(outputs)])
    result = result.cast(schema)
    return Answer(
        columns=[{"name": output.name, "type": spark_type_name(output.type)} for output in outputs],
        rows=[[json_value(value) for value in row.values()] for row in result.to_pylist()],
    )
