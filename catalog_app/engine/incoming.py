"""Incoming rows checked against a table's schema: unknown columns, wrong types and nulls in NOT NULL columns
are refused with a message that names the row and column. A missing column takes its default (or NULL)."""

import decimal
import re
from collections.abc import Callable, Collection, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from catalog_app.engine.frames import arrow_frame
from catalog_app.engine.segments import Column
from catalog_app.engine.types import arrow_type, json_value, python_value, spark_type, type_fits
from catalog_app.engine.warehouse import arrow_filesystem

FILE_FORMATS = ("parquet", "csv", "json")
NUL = "\x00"
# The years a date or timestamp (in UTC) may have: those of ISO 8601 and Python's datetime, in which the catalog keeps
# statistics and partition values.
MIN_YEAR, MAX_YEAR = 1, 9999
MESSAGE_NUL = "hold a NUL character (U+0000), which text values may not"
MESSAGE_RANGE = "are outside the years 1 to 9999 (in UTC) that a {type} may have"
MAX_ERRORS = 5
CHECK_PREFIX = "_check:"


class IncomingError(ValueError):
    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.details = code, message, details


def catalog_value(value: Any, column: Column) -> Any:
    """A JSON value given for `column`, checked as a row's value is, in the form the catalog keeps values
    (partition values, statistics): timestamps in UTC without an offset, decimals at the column's scale. Raises
    TypeError or ValueError if it is not a value of the column's type."""
    return None if value is None else json_value(python_value(value, column.type))


def rows_frame(spark: SparkSession, rows: Sequence[Any], columns: Sequence[Column]) -> DataFrame:
    """JSON rows (objects keyed by column name) as a DataFrame in the table's schema."""
    return arrow_frame(spark, rows_arrays(rows, columns))


def rows_arrays(rows: Sequence[Any], columns: Sequence[Column]) -> dict[str, pa.Array]:
    """JSON rows (objects keyed by column name) as Arrow arrays in the table's types, by column name: each value
    checked and converted with `python_value`, a missing one given its column's default."""
    by_name = {column.name: column for column in columns}
    values, errors = [], []
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise IncomingError("invalid_rows", f"Row {index} is not an object of column values.")
        unknown = sorted(set(row) - set(by_name))
        if unknown:
            raise IncomingError("unknown_column", f"Row {index} has columns the table does not have: {unknown}.")
        converted = []
        for column in columns:
            value = row.get(column.name, column.default) if column.name in row else column.default
            if value is None:
                if not column.nullable:
                    errors.append(f"row {index}: column {column.name!r} is NOT NULL and has no value")
                converted.append(None)
                continue
            try:
                converted.append(python_value(value, column.type))
            except (TypeError, ValueError, decimal.InvalidOperation):
                errors.append(f"row {index}: {value!r} is not a {column.type} for column {column.name!r}")
                converted.append(None)
        if len(errors) >= MAX_ERRORS:
            break
        values.append(tuple(converted))
    if errors:
        code = "type_mismatch" if any(" is not a " in error for error in errors) else "not_null_violation"
        raise IncomingError(code, "The rows do not fit the table's schema: " + "; ".join(errors) + ".", errors)
    return {c.name: pa.array([row[i] for row in values], arrow_type(c.type)) for i, c in enumerate(columns)}


PARQUET_MAGIC = b"PAR1"
MESSAGE_EMPTY_FILE = "The file is empty (0 bytes): there are no rows to load."


def _looks_like(head: bytes) -> str:
    """What the first bytes of a file look like, for a message: parquet, json, csv or empty. A NUL in text is
    not told apart here: it is a value the load refuses naming its column (engine.incoming's checks)."""
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        return "empty"
    return "json" if text.startswith(b"{") else "csv"


def upload_problem(*, size: int, head: bytes, tail: bytes, file_format: str) -> IncomingError | None:
    """What is wrong with an uploaded file, told from its size and its first and last bytes before any engine
    reads it, or None: an empty file, a file that is not the format it is sent as (a CSV sent as Parquet). A file
    that passes can still be unreadable further in; the engine's read says so then (`file_frame`)."""
    if size == 0:
        return IncomingError("empty_file", MESSAGE_EMPTY_FILE)
    looks = _looks_like(head)
    if file_format == "parquet":
        if head.startswith(PARQUET_MAGIC) and tail.endswith(PARQUET_MAGIC):
            return None
        why = "it is cut short (it does not end as a Parquet file does)" if looks == "parquet" else ""
        if looks in ("csv", "json"):
            why = f"it looks like {'JSON lines' if looks == 'json' else 'CSV'} text; send it with format {looks}"
        why = why or "a Parquet file begins and ends with the bytes PAR1"
        return IncomingError("unreadable_file", f"The file is not a Parquet file: {why}.")
    if looks == "parquet":
        message = f"The file is a Parquet file, not {file_format}: send it with format parquet."
        return IncomingError("unreadable_file", message)
    if looks == "empty":
        return IncomingError("empty_file", "The file holds only blank lines: there are no rows to load.")
    if file_format == "json" and looks != "json":
        message = "The file is not JSON lines (one JSON object per line): its first line is not an object."
        return IncomingError("unreadable_file", message)
    return None


def unreadable_reason(exc: BaseException, uri: str) -> str:
    """Why Spark could not read a file, for its sender: the first line of Spark's own message, without the Java
    class, the JVM's call names (`o3929.load`) or the file's place in the warehouse."""
    java = getattr(exc, "java_exception", None)
    text = (java.getMessage() if java is not None else None) or str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(("at ", "An error"))]
    first = lines[0] if lines else ""
    first = re.sub(r"\b(?:java|scala|org\.apache)\.[\w.$]+(?:Exception|Error)\b:?\s*", "", first)
    first = re.sub(r"\bo\d+\.\w+\b", "", first)
    for place in (uri, uri.removeprefix("file:"), "file:" + uri):
        first = first.replace(place, "the file")
    first = re.sub(r"(?:file:|s3a?://)\S+", "the file", first)
    return first[:300].strip(" .:") or "it is damaged or not in this format"


def file_frame(
    spark: SparkSession, uri: str, file_format: str, columns: Sequence[Column], *, deferred: bool = False
) -> DataFrame:
    """An uploaded Parquet, CSV (with a header) or JSON-lines file as a DataFrame in the table's schema."""
    if file_format not in FILE_FORMATS:
        raise IncomingError("unsupported_format", f"File format must be one of {FILE_FORMATS}.")
    reader = spark.read.option("header", "true") if file_format == "csv" else spark.read
    if file_format == "json":
        reader = reader.option("mode", "FAILFAST")
    try:
        frame = reader.format(file_format).load(uri)
        incoming = frame.columns
    except Exception as exc:  # a file Spark cannot read is the user's error, not ours
        message = f"The file cannot be read as {file_format}: {unreadable_reason(exc, uri)}."
        raise IncomingError("unreadable_file", message) from None
    return checked_frame(frame, incoming, columns, deferred=deferred)


def file_rows(uri: str, file_format: str) -> int | None:
    """How many rows an uploaded file holds, when its format says so without a pass (Parquet's footer)."""
    if file_format != "parquet":
        return None
    filesystem, path = arrow_filesystem(uri)
    try:
        with filesystem.open_input_file(path) as handle:
            return pq.ParquetFile(handle).metadata.num_rows
    except (OSError, pa.ArrowException):  # not one readable file: Spark's read says what is wrong
        return None


def checked_frame(
    frame: DataFrame,
    incoming: Sequence[str],
    columns: Sequence[Column],
    *,
    deferred: bool = False,
    keep: Sequence[str] = (),
    only: Collection[str] | None = None,
) -> DataFrame:
    """Cast `frame` to the table's schema by column name, refusing what does not fit (one Spark pass). Columns
    named in `keep` (not the table's: a writer's group, say) pass through as they are. With `only`, just those
    columns are checked (an update's assigned columns: the others hold the table's own values, checked when
    written); with no column to check there is no pass.

    With `deferred`, that pass is left to the caller's own first pass over the rows: the frame keeps one 0/1
    column per check (see `check_columns`) whose sums go to `check_counts`, which refuses what does not fit."""
    by_name = {column.name: column for column in columns}
    names = [name.lower() for name in incoming]  # Spark resolves names case-insensitively
    repeated = sorted({name for name in incoming if names.count(name.lower()) > 1})
    if repeated:
        raise IncomingError("duplicate_columns", f"The data has more than one column named {repeated}.")
    unknown = sorted(set(incoming) - set(by_name))
    if unknown:
        raise IncomingError("unknown_column", f"The data has columns the table does not have: {unknown}.")
    mismatched = [
        f"column {column.name!r} is {frame.schema[column.name].dataType.simpleString()}, not {column.type}"
        for column in columns
        if column.name in incoming and not type_fits(frame.schema[column.name].dataType, column.type)
    ]
    if mismatched:
        raise IncomingError("type_mismatch", "The data does not fit the table's schema: " + "; ".join(mismatched) + ".")
    projected, checks = [], []
    for column in columns:
        target = spark_type(column.type)
        checked = only is None or column.name in only
        if column.name in incoming:
            source = F.col(f"`{column.name}`")
            cast = source.try_cast(target)  # Spark 4 is ANSI: cast raises on bad input, try_cast gives NULL
            if checked and frame.schema[column.name].dataType != target:  # the same type cannot fail to cast
                checks.append(_flag(source.isNotNull() & cast.isNull(), f"bad:{column.name}"))
        else:
            cast = F.lit(column.default).cast(target)
        projected.append(cast.alias(column.name))
        if checked and not column.nullable:
            checks.append(_flag(cast.isNull(), f"null:{column.name}"))
        if checked and column.name in incoming:
            checks += _value_checks(cast, column)
    frame = frame.select(*projected, *[F.col(f"`{name}`") for name in keep], *checks)
    if deferred or not checks:
        return frame
    names = check_columns(frame)
    counts = frame.agg(*[F.sum(F.col(f"`{name}`")).alias(name) for name in names]).first().asDict()
    check_counts(counts, columns, examples=check_examples(frame))
    return frame.drop(*names)


def _value_checks(value, column: Column) -> list:
    """Checks of values Spark holds but the catalog cannot keep in its statistics and partition values: a NUL
    character in text (PostgreSQL refuses it), a date or timestamp outside the years 1 to 9999 in UTC (Python's
    datetime, and ISO 8601, end there)."""
    if column.type == "string":
        return [_flag(F.instr(value, NUL) > 0, f"nul:{column.name}")]
    if column.type in ("date", "timestamp"):
        year = F.year(value)  # of the instant in UTC: the session's time zone
        return [_flag((year < MIN_YEAR) | (year > MAX_YEAR), f"range:{column.name}")]
    return []


def _flag(condition, name: str):
    return F.when(condition, 1).otherwise(0).alias(CHECK_PREFIX + name)


def check_columns(frame: DataFrame) -> list[str]:
    """The check columns a deferred `checked_frame` left in `frame` (drop them before writing)."""
    return [name for name in frame.columns if name.startswith(CHECK_PREFIX)]


def check_examples(frame: DataFrame) -> Callable[[str], str | None]:
    """For a checked frame that still has its check columns: one value a check flagged, as text (another Spark
    pass, run only when the data is refused)."""

    def example(check: str) -> str | None:
        name = check.removeprefix(CHECK_PREFIX).split(":", 1)[1]
        flagged = frame.where(F.col(f"`{check}`") == 1).select(F.col(f"`{name}`").cast("string")).first()
        return None if flagged is None else flagged[0]

    return example


def check_counts(
    counts: dict[str, int | None],
    columns: Sequence[Column],
    *,
    examples: Callable[[str], str | None] | None = None,
) -> None:
    """Refuse the data if any check (summed per check column) counted a row; a value check's message quotes one
    of the values it flagged (from `examples`, see `check_examples`)."""
    by_name = {column.name: column for column in columns}
    problems = [(key, key.removeprefix(CHECK_PREFIX).split(":", 1), count) for key, count in counts.items() if count]
    if not problems:
        return
    messages = []
    for key, (kind, name), count in problems:
        if kind == "bad":
            messages.append(f"{count} values of column {name!r} are not of type {by_name[name].type}")
        elif kind == "null":
            messages.append(f"{count} rows have no value for NOT NULL column {name!r}")
        else:
            example = examples(key) if examples is not None else None
            quoted = f" (e.g. {_quoted(example)})" if example is not None else ""
            what = MESSAGE_NUL if kind == "nul" else MESSAGE_RANGE.format(type=by_name[name].type)
            messages.append(f"{count} values of column {name!r}{quoted} {what}")
    kinds = {kind for _, (kind, _), _ in problems}
    code = "type_mismatch" if "bad" in kinds else "invalid_value" if kinds & {"nul", "range"} else "not_null_violation"
    raise IncomingError(code, "The data does not fit the table's schema: " + "; ".join(messages) + ".")


def _quoted(value: str) -> str:
    """A value for a message: quoted, a NUL and other control characters escaped, at most 60 characters."""
    return repr(value if len(value) <= 60 else value[:57] + "...")
