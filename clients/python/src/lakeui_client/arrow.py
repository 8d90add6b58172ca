"""Read a table at any ref straight from the warehouse with pyarrow: no Spark, and no table data through LakeUI's
web server (it hands out the scan plan: the files, their deleted positions, the schema by column id).

    from lakeui_client import Client
    from lakeui_client.arrow import read_arrow, to_pandas

    lake = Client()
    orders = read_arrow(lake, "sales", "main", "shop.orders", columns=["id", "amount"],
                        filter=[("region", "=", "eu"), ("amount", ">", 100)])
    frame = to_pandas(lake, "sales", "v1.0", "shop.orders", at="2026-11-01T00:00:00Z")

    import duckdb                      # DuckDB reads the Arrow table in place (no copy)
    duckdb.sql("SELECT region, sum(amount) FROM orders GROUP BY region")

Columns are matched by their stable id (Parquet field ids), so a renamed column reads from its old files, a column
added since a file was written reads as its default, and a widened one is cast up, as LakeUI's own engine reads
them. `filter` is a list of `(column, op, value)` conditions, all of which must hold (op one of `=`, `==`, `!=`,
`<`, `<=`, `>`, `>=`, `in`, `not in`), or a `pyarrow.compute.Expression`: the conditions are sent to the scan plan
(`where`), which leaves out the files whose partition values and statistics rule them out; the rows of the rest are
filtered here. Only the columns asked for (and those the filter reads) are read from the files.

Your process must reach the warehouse: the same folder for a local warehouse, or the bucket with your own
credentials for `s3a://` (read as pyarrow's `s3://`).
"""

import base64
import datetime
import decimal
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lakeui_client.client import Client
from lakeui_client.errors import ApiError

TYPES = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),  # Spark's TIMESTAMP: an instant
}
DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
OPERATORS = {"=": "=", "==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "in": "IN",
             "not in": "NOT IN"}  # fmt: skip
Filter = Sequence[tuple[str, str, Any]] | pc.Expression | None


def arrow_type(type_name: str) -> pa.DataType:
    found = DECIMAL.fullmatch(type_name)
    if found:
        return pa.decimal128(int(found.group(1)), int(found.group(2)))
    return TYPES[type_name]


def read_arrow(
    client: Client,
    catalog: str,
    ref: str,
    table: str,
    at: str | None = None,
    columns: Sequence[str] | None = None,
    filter: Filter = None,
) -> pa.Table:
    """The rows of `table` ("db.table") at `ref` (a branch, tag or commit id; `at`: an ISO time for time travel) as
    an Arrow table in the table's current schema (or `columns` of it, in that order), deleted rows left out."""
    conditions = list(filter) if filter is not None and not isinstance(filter, pc.Expression) else []
    expression = filter if isinstance(filter, pc.Expression) else _expression(conditions)
    plan = _plan(client, catalog, ref, table, at, _where(conditions))
    current = {c["name"]: c for c in plan["columns"]}
    wanted = list(columns) if columns is not None else list(current)
    unknown = [name for name in [*wanted, *(c[0] for c in conditions)] if name not in current]
    if unknown:
        raise ValueError(f"table {table!r} has no column {unknown[0]!r} at {ref!r}; it has {list(current)}")
    read = wanted + [name for name in _referenced(conditions) if name not in wanted]
    if isinstance(filter, pc.Expression):
        read = list(current)  # which columns an expression reads is not known here: read them all
    schema = pa.schema([pa.field(name, arrow_type(current[name]["type"])) for name in read])
    parts = [_segment(plan, segment, [current[name] for name in read], schema) for segment in plan["segments"]]
    rows = pa.concat_tables(parts) if parts else schema.empty_table()
    if expression is not None:
        rows = rows.filter(expression)
    return rows.select(wanted)


def to_pandas(
    client: Client,
    catalog: str,
    ref: str,
    table: str,
    at: str | None = None,
    columns: Sequence[str] | None = None,
    filter: Filter = None,
):
    """`read_arrow` as a pandas DataFrame (pandas must be installed)."""
    return read_arrow(client, catalog, ref, table, at=at, columns=columns, filter=filter).to_pandas()


def _plan(client: Client, catalog: str, ref: str, table: str, at: str | None, where: str | None) -> dict:
    if where is not None:
        try:
            return client.table_scan(catalog, ref, table, at=at, where=where, time_zone="UTC")
        except ApiError as refused:
            if refused.status != 400 or refused.code != "invalid_predicate":
                raise  # a predicate the server cannot prune by: every file is read, the rows filtered here
    return client.table_scan(catalog, ref, table, at=at)


def _segment(plan: dict, segment: dict, columns: list[dict], schema: pa.Schema) -> pa.Table:
    """One segment's live rows in the current schema: its columns read by id, the rest as their defaults."""
    written = {c["id"]: c["name"] for c in segment["columns"]}
    filesystem, path = _filesystem(segment["uri"])
    source = pq.ParquetFile(path, filesystem=filesystem)
    present = [written[c["id"]] for c in columns if c["id"] in written]
    data = source.read(columns=present) if present else None
    count = source.metadata.num_rows
    keep = None
    if segment["deletes"]:
        keep = np.ones(count, dtype=bool)
        for delete in segment["deletes"]:
            delete_fs, delete_path = _filesystem(delete["uri"])
            positions = pq.read_table(delete_path, columns=["pos"], filesystem=delete_fs).column(0).to_numpy()
            keep[positions] = False
    arrays = []
    for column, field in zip(columns, schema, strict=True):
        if column["id"] in written:
            arrays.append(data.column(written[column["id"]]).cast(field.type))
        else:
            arrays.append(pa.array([_default(column)] * count, field.type))
    rows = pa.Table.from_arrays(arrays, schema=schema) if columns else pa.table({"_": pa.nulls(count)}).select([])
    return rows.filter(pa.array(keep)) if keep is not None else rows


def _default(column: dict) -> Any:
    value, type_name = column.get("default"), column["type"]
    if value is None:
        return None
    if type_name == "date":
        return datetime.date.fromisoformat(value)
    if type_name == "timestamp":
        moment = datetime.datetime.fromisoformat(value)
        return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)
    if type_name == "binary":
        return base64.b64decode(value)
    if DECIMAL.fullmatch(type_name):
        return decimal.Decimal(str(value))
    return value


def _filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    if uri.startswith("s3a://"):
        uri = "s3://" + uri[len("s3a://") :]
    elif "://" not in uri and not uri.startswith("file:"):
        uri = os.path.abspath(uri)
    return pafs.FileSystem.from_uri(uri)


def _referenced(conditions: Sequence[tuple[str, str, Any]]) -> list[str]:
    return list(dict.fromkeys(name for name, _, _ in conditions))


def _expression(conditions: Sequence[tuple[str, str, Any]]) -> pc.Expression | None:
    for condition in conditions:
        if len(condition) != 3 or condition[1] not in OPERATORS:
            raise ValueError(
                f"filter condition {condition!r}: expected (column, op, value) with op in {list(OPERATORS)}"
            )
    return pq.filters_to_expression([tuple(c) for c in conditions]) if conditions else None


def _where(conditions: Sequence[tuple[str, str, Any]]) -> str | None:
    """The conditions as a LakeUI predicate, for the scan plan to leave out files by (None: nothing to send)."""
    parts = []
    for name, op, value in conditions:
        if not NAME.fullmatch(name):
            return None
        if op in ("in", "not in"):
            literals = [_literal(v) for v in value]
            if not literals or None in literals:
                continue
            parts.append(f"{name} {OPERATORS[op]} ({', '.join(literals)})")
            continue
        literal = _literal(value)
        if literal is not None:
            parts.append(f"{name} {OPERATORS[op]} {literal}")
    return " AND ".join(parts) or None


def _literal(value: Any) -> str | None:
    """A value as a literal of the predicate language; None for one it has no exact literal for."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime.datetime):
        moment = value.astimezone(datetime.UTC) if value.tzinfo else value
        return f"TIMESTAMP '{moment.replace(tzinfo=None).isoformat(sep=' ')}'"
    if isinstance(value, datetime.date):
        return f"DATE '{value.isoformat()}'"
    return None  # floats (binary fractions), bytes, None: filtered here only
