"""Table schemas as plain data: columns with stable ids, and the checked changes to them.

A column is `{"id", "name", "type", "nullable", "default"}`. Partition specs and primary keys refer to column
ids, so renames never break them. Each change returns the new column list and the `alter_column` details the
merge engine replays (column id, old and new values).
"""

from typing import Any

from catalog_app.engine.types import check_default, is_widening, parse_type
from catalog_app.names import check_identifier
from lakeui.errors import ApplicationError, NotFoundError

MESSAGE_NOT_NULL_NEEDS_DEFAULT = (
    "Column {column!r} cannot be NOT NULL without a default: the table already holds rows that have no value for it."
)


def column_spec(spec: dict[str, Any], *, column_id: int) -> dict[str, Any]:
    name = check_identifier(spec.get("name"), "Column")
    column_type = parse_type(spec.get("type"))
    nullable = spec.get("nullable", True)
    if not isinstance(nullable, bool):
        raise ApplicationError("invalid_input", f"Column {name!r}: nullable must be true or false.")
    default = check_default(spec.get("default"), column_type, name)
    return {"id": column_id, "name": name, "type": str(column_type), "nullable": nullable, "default": default}


def columns_create(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not specs:
        raise ApplicationError("invalid_input", "A table needs at least one column.")
    columns = [column_spec(spec, column_id=position) for position, spec in enumerate(specs, start=1)]
    _check_unique_names(columns)
    return columns


def _check_unique_names(columns: list[dict[str, Any]]) -> None:
    seen: set[str] = set()
    for column in columns:
        if column["name"].lower() in seen:
            raise ApplicationError("duplicate_column", f"There are two columns named {column['name']!r}.")
        seen.add(column["name"].lower())


def column_named(columns: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for column in columns:
        if column["name"] == name:
            return column
    raise NotFoundError("column_not_found", f"There is no column {name!r}.")


def column_ids(columns: list[dict[str, Any]], names: list[str], what: str) -> list[int]:
    try:
        return [column_named(columns, name)["id"] for name in names]
    except NotFoundError:
        raise ApplicationError("column_not_found", f"{what} names a column the table does not have.") from None


def column_names(columns: list[dict[str, Any]], ids: list[int]) -> list[str]:
    by_id = {column["id"]: column["name"] for column in columns}
    return [by_id[column_id] for column_id in ids]


def column_add(
    columns: list[dict[str, Any]], spec: dict[str, Any], *, column_id: int, table_has_rows: bool
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    column = column_spec(spec, column_id=column_id)
    if not column["nullable"] and column["default"] is None and table_has_rows:
        raise ApplicationError("not_null_without_default", MESSAGE_NOT_NULL_NEEDS_DEFAULT.format(column=column["name"]))
    new_columns = [*columns, column]
    _check_unique_names(new_columns)
    return new_columns, {"action": "add", "column_id": column_id, "column": column}


def column_drop(
    columns: list[dict[str, Any]], name: str, *, protected_ids: set[int]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    column = column_named(columns, name)
    if column["id"] in protected_ids:
        raise ApplicationError(
            "column_in_use", f"Column {name!r} is part of the partition spec or the primary key; change those first."
        )
    if len(columns) == 1:
        raise ApplicationError("invalid_input", "A table needs at least one column; this is its last.")
    return [c for c in columns if c["id"] != column["id"]], {
        "action": "drop",
        "column_id": column["id"],
        "column": column,
    }


def column_alter(
    columns: list[dict[str, Any]], name: str, changes: dict[str, Any], *, table_has_rows: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rename, widen, change nullability or default. `changes` holds only the keys to change."""
    old = column_named(columns, name)
    new = dict(old)
    details: list[dict[str, Any]] = []
    if "name" in changes and changes["name"] != old["name"]:
        new["name"] = check_identifier(changes["name"], "Column")
        details.append({"action": "rename", "column_id": old["id"], "old": old["name"], "new": new["name"]})
    if "type" in changes:
        old_type, new_type = parse_type(old["type"]), parse_type(changes["type"])
        if new_type != old_type:
            if not is_widening(old_type, new_type):
                raise ApplicationError(
                    "type_narrowing",
                    f"Column {name!r} cannot change from {old_type} to {new_type}: types may only widen "
                    "(int to long or double, float to double, int or long to a wide enough decimal, "
                    "decimal precision up).",
                )
            new["type"] = str(new_type)
            details.append({"action": "widen", "column_id": old["id"], "old": old["type"], "new": new["type"]})
    if "default" in changes and changes["default"] != old["default"]:
        new["default"] = check_default(changes["default"], parse_type(new["type"]), new["name"])
        details.append({"action": "default", "column_id": old["id"], "old": old["default"], "new": new["default"]})
    if "nullable" in changes and changes["nullable"] != old["nullable"]:
        if not isinstance(changes["nullable"], bool):
            raise ApplicationError("invalid_input", "nullable must be true or false.")
        if not changes["nullable"] and new["default"] is None and table_has_rows:
            raise ApplicationError("not_null_without_default", MESSAGE_NOT_NULL_NEEDS_DEFAULT.format(column=name))
        new["nullable"] = changes["nullable"]
        details.append(
            {"action": "nullability", "column_id": old["id"], "old": old["nullable"], "new": new["nullable"]}
        )
    new_columns = [new if c["id"] == old["id"] else c for c in columns]
    _check_unique_names(new_columns)
    return new_columns, details
