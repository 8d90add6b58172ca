"""The typed input of each data job kind: built from a request and checked once, when the job is submitted
(`from_request`), stored in the job's params (`to_params`) and read back by the worker (`from_params`).

A spec knows the shape of a job's input (which fields a load strategy takes, the one source of its rows);
whether the input fits the table (its columns, its partitioning) is checked by the submit service against the
table at the branch head, and again by the worker against the table it reads (services/load_changes.py). This module
is the one place that lists a load strategy's fields: the API's serializer and the UI's form are made from
`LOAD_FIELDS`.
"""

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from lakeui.errors import ApplicationError

LOAD_STRATEGIES = (
    "append_only", "full_refresh", "insert", "update", "upsert", "delete_insert", "incremental", "scd2", "snapshot",
)  # fmt: skip
KEY_STRATEGIES = ("insert", "update", "upsert", "delete_insert", "incremental", "scd2")
STAGING_ID = re.compile(r"[0-9a-f]{32}")
MESSAGE_STAGING_ID = "staged must be the id of a staging location (POST .../staging gives one)."
MESSAGE_ONE_SOURCE = "Give the incoming data as one of `rows`, an uploaded `file` or `query`."
MESSAGE_FILE_OR_STAGED = "Give either an uploaded file or `staged`, not both."
MESSAGE_PARTITIONS_FOR = "partitions are for full_refresh of a partitioned table."


# --- where a table data job writes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TableTarget:
    """The branch and table a data job writes: ids for the worker, names for its default commit message."""

    catalog_id: str
    branch: str
    table_id: str
    database: str
    table: str
    message: str = ""

    def to_params(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "TableTarget":
        return cls(**{f.name: params[f.name] for f in dataclasses.fields(cls) if f.name in params})


# --- the source of a load's rows -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Rows:
    """JSON rows sent with the request (at most LAKEUI_MAX_ROWS: services.data_submit.load_rows_check)."""

    rows: tuple[Any, ...]

    def to_params(self) -> dict[str, Any]:
        return {"rows": list(self.rows)}


@dataclass(frozen=True)
class Query:
    """A Spark SQL SELECT over tables of the same ref."""

    statement: str

    def to_params(self) -> dict[str, Any]:
        return {"query": self.statement}


@dataclass(frozen=True)
class StoredFiles:
    """Files in the warehouse (`path` relative to it) the load reads: an upload the web process saved, or a
    staging folder a client wrote; `staged`: the load's own, removed once the load has an outcome."""

    path: str
    format: str
    staged: bool = False

    def to_params(self) -> dict[str, Any]:
        upload: dict[str, Any] = {"path": self.path, "format": self.format}
        if self.staged:
            upload["staged"] = True
        return {"upload": upload}


@dataclass(frozen=True)
class FileUpload:
    """A file sent with the request, not stored yet: the submit service saves it (a StoredFiles)."""

    file: Any  # a Django UploadedFile
    format: str

    def to_params(self) -> dict[str, Any]:
        raise TypeError("An upload is stored (StoredFiles) before its job is created.")


@dataclass(frozen=True)
class Staging:
    """A staging location named by its id (POST .../staging): the submit service checks it holds files."""

    id: str

    def to_params(self) -> dict[str, Any]:
        raise TypeError("A staging location is resolved (StoredFiles) before its job is created.")


Source = Rows | Query | StoredFiles | FileUpload | Staging


def _load_source(data: Mapping[str, Any]) -> Source:
    """The one source of a load's rows, as a request gives it (`upload`: files already stored, as a StoredFiles
    or its params, for callers in this process such as benchmarks/crash_recovery.py)."""
    given = [name for name in ("rows", "query") if name in data]
    if any(name in data for name in ("file", "staged", "upload")):
        given.append("upload")
    if len(given) != 1:
        raise ApplicationError("invalid_input", MESSAGE_ONE_SOURCE)
    if "query" in data:
        if not isinstance(data["query"], str) or not data["query"].strip():
            raise ApplicationError("invalid_input", "query must be a SELECT statement over tables of the same ref.")
        return Query(data["query"])
    if "rows" in data:
        if not isinstance(data["rows"], list):  # how many: the one limit, LAKEUI_MAX_ROWS, in the submit service
            raise ApplicationError("invalid_rows", "rows must be a list of objects; upload a file for many.")
        return Rows(tuple(data["rows"]))
    if "file" in data:
        file = data["file"]
        return FileUpload(file, (data.get("format") or file.name.rsplit(".", 1)[-1]).lower())
    if "staged" in data:
        if not isinstance(data["staged"], str) or not STAGING_ID.fullmatch(data["staged"]):
            raise ApplicationError("invalid_staging", MESSAGE_STAGING_ID)
        return Staging(data["staged"])
    upload = data["upload"]
    return upload if isinstance(upload, StoredFiles) else StoredFiles(**upload)


def _source_from_params(params: Mapping[str, Any]) -> Source:
    if "query" in params:
        return Query(params["query"])
    if "rows" in params:
        return Rows(tuple(params["rows"]))
    return StoredFiles(**params["upload"])


# --- a load ---------------------------------------------------------------------------------------------------


def _strategy_field(strategies: tuple[str, ...], kind: str, label: str, help_text: str, missing: tuple = ()):
    """A field some strategies take. `kind`: `column` (a name), `columns` (a list of names) or `partitions`;
    `missing`: the code and the why of the 400 when a strategy that takes it is not given it."""
    metadata = {"strategies": strategies, "kind": kind, "label": label, "help": help_text, "missing": missing}
    return dataclasses.field(default=None, metadata=metadata)


@dataclass(frozen=True)
class LoadSpec:
    """A load (docs/api.md#write-strategies): the strategy, the fields it takes (None where it takes none) and the
    source of the rows. `partitions` (full_refresh) are in the form the catalog keeps them once the submit service
    has checked them against the table."""

    KIND: ClassVar[str] = "table_load"
    VERB: ClassVar[str] = "Load"  # the default commit message: "<VERB> <database>.<table>"

    strategy: str
    source: Source
    key_columns: tuple[str, ...] | None = _strategy_field(
        KEY_STRATEGIES, "columns", "Key columns", "Key strategies: the columns that identify a row",
        ("missing_key_columns", "the columns that identify a row"),
    )  # fmt: skip
    watermark: str | None = _strategy_field(
        ("incremental",), "column", "Watermark column", "incremental: the column that orders a key's rows",
        ("missing_watermark", "the column that orders a key's rows"),
    )  # fmt: skip
    valid_from_column: str | None = _strategy_field(
        ("scd2",), "column", "Valid-from column", "scd2: timestamp column opening a version",
        ("missing_validity_columns", "the name of a validity column"),
    )  # fmt: skip
    valid_to_column: str | None = _strategy_field(
        ("scd2",), "column", "Valid-to column", "scd2: timestamp column closing a version",
        ("missing_validity_columns", "the name of a validity column"),
    )  # fmt: skip
    partition_column: str | None = _strategy_field(
        ("snapshot",), "column", "Partition column", "snapshot: the partition column replaced",
        ("missing_partition_column", "the partition column to replace"),
    )  # fmt: skip
    partitions: tuple[dict[str, Any], ...] | None = _strategy_field(
        ("full_refresh",), "partitions", "Partitions",
        "full_refresh: the partitions replaced, each a value for every partition column (default: all)",
    )  # fmt: skip

    @classmethod
    def from_request(cls, data: Mapping[str, Any]) -> "LoadSpec":
        """The load a request asks for (the API's validated input, the UI's form, or a dict of the job's params
        from a caller in this process), its shape checked: a missing or malformed field is a 400, never a
        fallback to another strategy. Fields the strategy does not take are left out."""
        if "staged" in data and "file" in data:
            raise ApplicationError("invalid_input", MESSAGE_FILE_OR_STAGED)
        strategy = data.get("strategy")
        if strategy not in LOAD_STRATEGIES:
            raise ApplicationError("invalid_strategy", f"strategy must be one of {LOAD_STRATEGIES}.")
        values = {
            f.name: _strategy_value(f, strategy, data.get(f.name))
            for f in LOAD_FIELDS
            if strategy in f.metadata["strategies"] and f.metadata["kind"] != "partitions"
        }
        if strategy == "scd2":
            validity = {values["valid_from_column"], values["valid_to_column"]}
            if len(validity) == 1 or validity & {*values["key_columns"]}:
                raise ApplicationError("invalid_input", "The validity columns must be two columns apart from the keys.")
        source = _load_source(data)
        if "partitions" in data:
            partitions = data["partitions"]
            if strategy != "full_refresh":
                raise ApplicationError("invalid_input", MESSAGE_PARTITIONS_FOR)
            if not isinstance(partitions, list) or not partitions:
                message = "partitions must be a non-empty list; leave it out to replace all."
                raise ApplicationError("invalid_input", message)
            values["partitions"] = tuple(partitions)
        return cls(strategy=strategy, source=source, **values)

    def to_params(self) -> dict[str, Any]:
        params = {"strategy": self.strategy, **self.source.to_params()}
        for f in LOAD_FIELDS:
            value = getattr(self, f.name)
            if value is not None:
                params[f.name] = list(value) if isinstance(value, tuple) else value
        return params

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "LoadSpec":
        values = {
            f.name: tuple(params[f.name]) if f.metadata["kind"] != "column" else params[f.name]
            for f in LOAD_FIELDS
            if f.name in params
        }
        return cls(strategy=params["strategy"], source=_source_from_params(params), **values)

    @property
    def overwrites_partitions(self) -> bool:
        """Whether the load replaces partitions: `snapshot`, or `full_refresh` with `partitions`."""
        return self.strategy == "snapshot" or bool(self.partitions)


LOAD_FIELDS = tuple(f for f in dataclasses.fields(LoadSpec) if "strategies" in f.metadata)


def _strategy_value(field: dataclasses.Field, strategy: str, value: Any) -> Any:
    code, why = field.metadata["missing"]
    if field.metadata["kind"] == "columns":
        if not value:
            raise ApplicationError(code, f"Strategy {strategy!r} needs {field.name}: {why}.")
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or len(set(value)) != len(value):
            raise ApplicationError("invalid_input", f"{field.name} must be a list of distinct column names.")
        return tuple(value)
    if not value:
        raise ApplicationError(code, f"Strategy {strategy!r} needs {field.name}: {why}.")
    if not isinstance(value, str):
        raise ApplicationError("invalid_input", f"{field.name} must be a column name.")
    return value


# --- deletes, updates, compaction ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DeleteSpec:
    """Delete the rows matching `where` (a predicate over the table's columns, checked by the submit service)."""

    KIND: ClassVar[str] = "table_delete"
    VERB: ClassVar[str] = "Delete from"  # the default commit message: "<VERB> <database>.<table>"

    where: str

    @classmethod
    def from_request(cls, data: Mapping[str, Any]) -> "DeleteSpec":
        return cls(where=data.get("where") or "")

    def to_params(self) -> dict[str, Any]:
        return {"where": self.where}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "DeleteSpec":
        return cls(where=params["where"])


@dataclass(frozen=True)
class UpdateSpec:
    """Set columns to expressions (`assignments`: column, expression) in the rows matching `where`."""

    KIND: ClassVar[str] = "table_update"
    VERB: ClassVar[str] = "Update"  # the default commit message: "<VERB> <database>.<table>"

    assignments: tuple[tuple[str, str], ...]
    where: str = "TRUE"

    @classmethod
    def from_request(cls, data: Mapping[str, Any]) -> "UpdateSpec":
        assignments = data.get("set") or {}
        if not isinstance(assignments, Mapping):
            raise ApplicationError("invalid_input", "set must map column names to expressions.")
        return cls(assignments=tuple(assignments.items()), where=data.get("where") or "TRUE")

    def to_params(self) -> dict[str, Any]:
        return {"where": self.where, "set": dict(self.assignments)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "UpdateSpec":
        return cls(assignments=tuple(params["set"].items()), where=params["where"])


@dataclass(frozen=True)
class CompactSpec:
    """Rewrite the table's small, deleted-from and unsplit segments (no input)."""

    KIND: ClassVar[str] = "table_compact"
    VERB: ClassVar[str] = "Compact"  # the default commit message: "<VERB> <database>.<table>"

    @classmethod
    def from_request(cls, data: Mapping[str, Any]) -> "CompactSpec":
        return cls()

    def to_params(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "CompactSpec":
        return cls()


TableJobSpec = LoadSpec | DeleteSpec | UpdateSpec | CompactSpec
TABLE_JOB_SPECS: dict[str, type[TableJobSpec]] = {
    spec.KIND: spec for spec in (LoadSpec, DeleteSpec, UpdateSpec, CompactSpec)
}


# --- jobs that read, and garbage collection ------------------------------------------------------------------


@dataclass(frozen=True)
class RowsPageSpec:
    """A page of a table's rows at a commit, read by a worker."""

    KIND: ClassVar[str] = "table_rows"

    commit: str
    table_id: str
    page: int
    page_size: int

    def to_params(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "RowsPageSpec":
        return cls(**{f.name: params[f.name] for f in dataclasses.fields(cls)})


MAX_GRACE_HOURS = 100 * 366 * 24  # a century: longer keeps every file anyway
MESSAGE_GRACE_PERIOD = f"grace_hours must be more than 0 and at most {MAX_GRACE_HOURS} (100 years)."


@dataclass(frozen=True)
class CatalogGcSpec:
    """Remove the catalog's unreferenced files older than `grace_seconds`."""

    KIND: ClassVar[str] = "catalog_gc"

    catalog_id: str
    grace_seconds: int

    @classmethod
    def from_request(cls, *, catalog_id: str, grace_hours: float) -> "CatalogGcSpec":
        if not math.isfinite(grace_hours) or not 0 < grace_hours <= MAX_GRACE_HOURS:
            raise ApplicationError("invalid_grace_period", MESSAGE_GRACE_PERIOD)
        grace_seconds = round(grace_hours * 3600)
        if grace_seconds <= 0:
            raise ApplicationError("invalid_grace_period", MESSAGE_GRACE_PERIOD)
        return cls(catalog_id=catalog_id, grace_seconds=grace_seconds)

    def to_params(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "CatalogGcSpec":
        return cls(catalog_id=params["catalog_id"], grace_seconds=int(params["grace_seconds"]))
