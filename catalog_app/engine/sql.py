"""SELECT over a ref's tables, safely. The statement is parsed by Spark's own parser (nothing runs), checked
against an allow-list of query plan nodes and a deny-list of functions, and every table it names (`db.table`,
optionally `FOR TIMESTAMP AS OF '...'` or `FOR VERSION AS OF '<commit>'`) is replaced, by its exact span in the
text, with a temporary view of that table's rows. The rewritten statement is parsed and checked again before
it runs, so only those views can be read."""

import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from catalog_app.engine.types import json_value

QUERY_NODES = {
    "Project", "Filter", "Aggregate", "Join", "SubqueryAlias", "UnresolvedRelation", "RelationTimeTravel", "Sort",
    "GlobalLimit", "LocalLimit", "Offset", "Distinct", "Union", "Intersect", "Except", "UnresolvedWith", "Window",
    "WithWindowDefinition", "OneRowRelation", "UnresolvedSubqueryColumnAliases", "UnresolvedInlineTable",
    "Generate", "Pivot", "Deduplicate", "Tail", "Sample", "LateralJoin", "UnresolvedHaving", "LocalRelation",
    "CTERelationRef", "Expand",
}  # fmt: skip
# Functions that reach outside the query (the JVM, files) or leak the server's OS user (Spark's user functions).
DENIED_FUNCTIONS = {
    "reflect", "java_method", "try_reflect", "read_files", "input_file_name", "current_user", "user", "session_user",
}  # fmt: skip
# Expressions the parser builds directly (CURRENT_USER, SESSION_USER written without parentheses).
DENIED_EXPRESSIONS = {"CurrentUser"}
VIEW_PREFIX = "__lakeui_"
# A statement's size budget: checking (and analysing) a plan costs per expression, so a SELECT of 20,000 columns
# would hold a worker for minutes before it runs. Larger statements are refused before that.
MAX_EXPRESSIONS = 5_000
MESSAGE_TOO_LARGE = f"The statement is too large: it has more than {MAX_EXPRESSIONS} expressions."
POSITION = re.compile(r"line (\d+), pos (\d+)")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
MAX_SELECT_ROWS = 10_000  # rows a SELECT shows at most, whatever limit it asks


def error_message(exc: Exception) -> str:
    """A Spark error's first line for the user, without the Java exception class or stack trace."""
    java = getattr(exc, "java_exception", None)
    text = (java.getMessage() if java is not None else None) or str(exc) or type(exc).__name__
    lines = [line.strip() for line in text.split("\n") if line.strip() and not line.strip().startswith("at ")]
    first = lines[0] if lines else "the query failed"
    return re.sub(r"\b(?:java|scala|org\.apache)\.[\w.$]+(?:Exception|Error)\b:?\s*", "", first)[:300]


class SqlError(ValueError):
    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.message, self.position = message, position


@dataclass(frozen=True)
class TableReference:
    database: str
    table: str
    timestamp: str | None
    version: str | None
    start: int  # the span of the table name in the statement
    stop: int
    travel: tuple[int, int] | None  # the span of its FOR ... AS OF clause


def _seq(scala_seq) -> list:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _name(node) -> str:
    return node.getClass().getSimpleName().rstrip("$")


def _parse(spark: SparkSession, statement: str):
    if ";" in statement.strip().rstrip(";"):
        raise SqlError("Only one statement may be run at a time.", statement.index(";"))
    try:
        return spark._jsparkSession.sessionState().sqlParser().parsePlan(statement.strip().rstrip(";"))
    except Exception as exc:
        java = getattr(exc, "java_exception", None)
        if java is not None and _name(java) == "StackOverflowError":
            raise SqlError("The statement is nested too deeply.") from None
        text = (java.getMessage() if java is not None else None) or str(exc)
        found = POSITION.search(text)
        position = None
        if found:
            lines = statement.split("\n")
            position = sum(len(line) + 1 for line in lines[: int(found[1]) - 1]) + int(found[2])
        first = next((line.strip() for line in text.split("\n") if line.strip()), "syntax error")
        raise SqlError(f"The statement does not parse: {first[:300]}", position) from None


def _plans(plan) -> Iterator:
    """The plan, its children and the plans of its subqueries, depth first."""
    yield plan
    children = _seq(plan.children())
    if _name(plan) == "RelationTimeTravel":
        children.append(plan.relation())
    if _name(plan) == "UnresolvedWith":
        children += [pair._2() for pair in _seq(plan.cteRelations())]
    for child in [*children, *_seq(plan.subqueries())]:
        yield from _plans(child)


def _expressions(expression) -> Iterator:
    yield expression
    for child in _seq(expression.children()):
        yield from _expressions(child)


def _span(node) -> tuple[int, int]:
    origin = node.origin()
    return origin.startIndex().get(), origin.stopIndex().get()


def _check(plan) -> tuple[list, set[str]]:
    """The relations of an allowed query, and its CTE names; raises SqlError for anything else."""
    relations, ctes, seen = [], set(), 0
    for node in _plans(plan):
        kind, seen = _name(node), seen + 1
        if kind not in QUERY_NODES:
            raise SqlError(f"Only SELECT queries can run here ({kind} is not allowed).")
        if kind == "UnresolvedWith":
            ctes |= {pair._1().lower() for pair in _seq(node.cteRelations())}
        expressions = node.expressions()
        if seen + expressions.size() > MAX_EXPRESSIONS:  # before walking them: each costs calls into the JVM
            raise SqlError(MESSAGE_TOO_LARGE)
        for expression in _seq(expressions):
            for part in _expressions(expression):
                seen += 1
                if seen > MAX_EXPRESSIONS:
                    raise SqlError(MESSAGE_TOO_LARGE)
                if _name(part) == "UnresolvedFunction":
                    function = _seq(part.nameParts())[-1].lower()
                    if function in DENIED_FUNCTIONS or len(_seq(part.nameParts())) > 1:
                        raise SqlError(f"Function {function!r} is not allowed.", _span(part)[0])
                elif _name(part) in DENIED_EXPRESSIONS:
                    raise SqlError("The current user is not available in SQL.")
                elif _name(part) == "UnresolvedTableValuedFunction":
                    raise SqlError("Table-valued functions are not allowed.")
        if kind in ("UnresolvedRelation", "RelationTimeTravel"):
            relations.append(node)
    return relations, ctes


def table_references(spark: SparkSession, statement: str) -> list[TableReference]:
    plan = _parse(spark, statement)
    relations, ctes = _check(plan)
    travels = {_span(node.relation()): node for node in relations if _name(node) == "RelationTimeTravel"}
    references = []
    for node in relations:
        if _name(node) == "RelationTimeTravel":
            continue
        parts = [str(part) for part in _seq(node.multipartIdentifier())]
        start, stop = _span(node)
        if len(parts) == 1 and parts[0].lower() in ctes:
            continue
        if len(parts) != 2 or not all(IDENTIFIER.fullmatch(part) for part in parts):
            raise SqlError(f"Name tables as database.table, not {'.'.join(parts)!r}.", start)
        travel = travels.get((start, stop))
        timestamp = version = None
        if travel is not None:
            if travel.timestamp().isDefined():
                literal = travel.timestamp().get()
                if _name(literal) != "Literal":
                    raise SqlError("FOR TIMESTAMP AS OF takes a timestamp literal.", _span(travel)[0])
                timestamp = str(literal.value())
            if travel.version().isDefined():
                version = str(travel.version().get())
        references.append(
            TableReference(parts[0], parts[1], timestamp, version, start, stop, _span(travel) if travel else None)
        )
    return references


def run_select(
    spark: SparkSession,
    statement: str,
    references: Sequence[TableReference],
    frame_of: Callable[[TableReference], DataFrame],
    *,
    limit: int | None = None,
) -> DataFrame:
    """The statement's result, with each reference read through `frame_of` (a temporary view each)."""
    tag = uuid.uuid4().hex[:8]
    edits = []
    views = []
    for index, reference in enumerate(references):
        view = f"{VIEW_PREFIX}{tag}_{index}"
        frame_of(reference).createOrReplaceTempView(view)
        views.append(view)
        edits.append((reference.start, reference.stop, view))
        if reference.travel is not None:
            edits.append((reference.travel[0], reference.travel[1], ""))
    rewritten = statement.strip().rstrip(";")
    for start, stop, text in sorted(edits, reverse=True):
        rewritten = rewritten[:start] + text + rewritten[stop + 1 :]
    relations, ctes = _check(_parse(spark, rewritten))
    for node in relations:
        parts = [str(part) for part in _seq(node.multipartIdentifier())] if _name(node) != "RelationTimeTravel" else []
        if _name(node) == "RelationTimeTravel" or not (
            parts == [parts[0]] and (parts[0] in views or parts[0].lower() in ctes)
        ):
            raise SqlError("The statement reads something other than the catalog's tables.")
    try:
        result = spark.sql(rewritten)
    except PySparkException as exc:
        raise SqlError(f"The query cannot run: {error_message(exc)}") from None
    _check_analyzed(result._jdf.queryExecution().analyzed())
    return result.limit(limit) if limit is not None else result


def _check_analyzed(plan) -> None:
    """Refuses what only analysis reveals: CURRENT_USER or SESSION_USER written without parentheses parse as a
    column name and resolve to the server's OS user when no column has that name."""
    for node in _plans(plan):
        for expression in _seq(node.expressions()):
            for part in _expressions(expression):
                if _name(part) in DENIED_EXPRESSIONS:
                    raise SqlError("The current user is not available in SQL.")


class QueryFailed(Exception):
    """The user's query threw while it ran (a bad cast, a function's error): `message` is Spark's first line; the
    Spark error is the cause."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def selected_rows(frame: DataFrame, limit: int) -> dict[str, Any]:
    """Up to `limit` rows of a SELECT's result (`frame`, limited to `limit + 1` rows: one more tells whether there
    are more) as JSON values, with its columns' names and types."""
    try:
        rows = frame.collect()
    except (PySparkException, Py4JJavaError) as exc:
        raise QueryFailed(error_message(exc)) from exc
    return {
        "columns": [{"name": f.name, "type": f.dataType.simpleString()} for f in frame.schema.fields],
        "rows": [[json_value(value) for value in row] for row in rows[:limit]],
        "truncated": len(rows) > limit,
    }
