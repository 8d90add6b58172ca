"""What a merge decides beyond the rule tables, as pure functions of plain values (docs/merge-semantics.md#new-objects
and #primary-key-tables).

- Resolutions (4.4): which choice settles which conflict. A table's own choice settles any conflict of the table;
  the default only conflicts of data. A primary-key table's keys each take their own choice, else the table's,
  else the default; a key's own `fail` stands whatever the table or the default chose.
- Rows of primary-key tables (4.4): the three-way merge of one key changed on both sides, cell by cell (or row by
  row with `merge.granularity=row`).

The rule tables and the conditions of their notes are in rules.py, the three-way merge of object states in
states.py. The diff (selectors/diff.py) and the key comparison (services/keys.py) call these; tests/merge_app/
test_semantics.py runs them without a database.
"""

import base64
import datetime
import decimal
import json
import math
import re
import struct
from functools import lru_cache
from typing import Any

from catalog_app.engine import predicate_parser, predicate_values
from catalog_app.engine.type_names import json_value, parse_type, stat_value
from lakeui.errors import ApplicationError
from merge_app.plan.rules import DML, FAIL

INSERT, UPDATE, DELETE = "insert", "update", "delete"  # a key's change on one side (catalog_app.engine.keys)
SETTLING = frozenset({"source_wins", "target_wins"})  # the choices that settle a conflict (`fail` does not)
COLUMNS = "columns"  # a key settled cell by cell by its table's column rules (`key_settle`)

# --- resolutions (4.4) -----------------------------------------------------------------------------------


def choices_of(resolution: dict, table: str) -> dict[str, Any]:
    """The table's own choice (None if it has none) and the default, from a merge's `resolution`."""
    return {"table_choice": resolution.get("tables", {}).get(table), "default": resolution.get("default", FAIL)}


def pair_choice(src_op: str, dest_op: str, *, table_choice: str | None, default: str) -> str | None:
    """The choice that settles a conflicting pair of operations: the table's, else the default for a pair of data
    operations; None when nothing settles it."""
    data = src_op in DML and dest_op in DML
    choice = table_choice or (default if data else None)
    return choice if choice in SETTLING else None


def data_choice(*, table_choice: str | None, default: str) -> str | None:
    """The choice that settles a conflict of a table's data as a whole."""
    choice = table_choice or default
    return choice if choice in SETTLING else None


def table_resolution(settled: list[str | None], *, table_choice: str | None, default: str) -> str | None:
    """The table's resolution when its conflicts are all settled (`settled`: each one's choice, None if it is not);
    None when there are none or some stand."""
    return (table_choice or default) if settled and all(settled) else None


def key_choices(
    conflicts: list[dict],
    *,
    table: str,
    per_key: dict[str, str],
    table_choice: str | None,
    default: str,
    rules: dict[str, Any] | None = None,
    types: dict[str, str] | None = None,
    not_null: frozenset[str] = frozenset(),
    picks: dict[str, dict[str, dict]] | None = None,
) -> list[dict[str, Any]]:
    """The choice of each conflicting key listed (`key`, `key_id`) that settles it, with its scope. A key whose
    conflict is of cells is merged cell by cell (choice `columns`, with the `cells`, by `key_settle`) when a reviewer
    picked some of its cells (`picks`: key id -> column -> pick) or, without a choice of its own, when the table has
    column rules (`rules`, with the columns' `types`); else the key's own choice, else the table's, else the
    default. A key whose choice is `fail` is left out: it stands."""
    fallback, fallback_scope = (table_choice, "table") if table_choice else (default, "default")
    choices = []
    for conflict in conflicts:
        key_id, mine = conflict["key_id"], (picks or {}).get(conflict["key_id"], {})
        if (mine or (rules and key_id not in per_key)) and conflict["cells"] != ["*"]:
            own = (per_key[key_id], "key") if key_id in per_key else (fallback, fallback_scope)
            cells = key_settle(conflict, rules={} if key_id in per_key else rules or {}, types=types or {},
                               fallback=own[0], fallback_scope=own[1], table=table, not_null=not_null,
                               picks=mine)  # fmt: skip
            if cells is not None:
                choices.append(
                    {"object": table, "scope": "columns", "key": conflict["key"], "key_id": key_id,
                     "choice": COLUMNS, "cells": cells}
                )  # fmt: skip
            continue
        choice = per_key.get(key_id, fallback)
        if choice != FAIL:
            scope = "key" if key_id in per_key else fallback_scope
            choices.append(
                {"object": table, "scope": scope, "key": conflict["key"], "key_id": key_id, "choice": choice}
            )  # fmt: skip
    return choices


def keys_unresolved(
    *, listed: int, settled: int, total: int, table_choice: str | None, default: str, rules: bool = False
) -> int:
    """Conflicting keys that stand: the listed ones not settled, and those past the list (counted, not listed)
    unless the table's choice or the default settles them (not known for them with column rules: they stand; a
    worker's plan lists every key)."""
    fallback = table_choice or default
    return listed - settled + (total - listed if fallback == FAIL or rules else 0)


def settled_cells(choices: list[dict]) -> dict[str, dict[str, Any]]:
    """Per column, the cells column rules and picks settled (`key_choices`' `columns` choices): each rule with where
    it came from, the count and a sample of keys with base, source, target and result (SAMPLE_CELLS at most; a pick
    with who made it). The audit log lists every pick apart (`MergeDiff.resolution_log`)."""
    columns: dict[str, dict[str, Any]] = {}
    for choice in choices:
        for column, cell in choice.get("cells", {}).items():
            name = cell["rule"] if cell["rule"] in (SAME_CHANGE, PICK) else column_rule_parse(cell["rule"])[0]
            entry = columns.setdefault(column, {"rules": {}, "cells": 0, "sample": []})
            rule = entry["rules"].setdefault(name, {"rule": cell["rule"], "scope": cell["scope"], "cells": 0})
            rule["cells"] += 1
            entry["cells"] += 1
            if len(entry["sample"]) < SAMPLE_CELLS:
                entry["sample"].append({"key": choice["key"], "rule": name, **{k: cell[k] for k in
                                        ("base", "source", "target", "result", "by") if k in cell}})  # fmt: skip
    return columns


# --- rows of primary-key tables (4.4) --------------------------------------------------------------------


def changed_columns(base: dict | None, row: dict | None) -> set[str]:
    """The columns a side changed in a row since the ancestor (`*`: the row as a whole, inserted or deleted)."""
    if base is None or row is None:
        return {"*"}
    return {column for column in row if row[column] != base.get(column)}


def row_merge(
    src_change: str,
    dest_change: str,
    base: dict | None,
    mine: dict | None,
    theirs: dict | None,
    value_columns: list[str],
    *,
    row_granularity: bool = False,
) -> tuple[list[str], dict | None]:
    """The three-way merge of one key both sides changed: the conflicting cells, and the merged row (None: a
    conflict; {}: the key is deleted). Both deleted: deleted. One deleted what the other changed: a conflict. Both
    inserted: the same row merges, else the differing cells conflict. Both updated: each side's changed cells
    merge, a cell both set to different values conflicts. With row granularity, any two different changes of one
    row conflict, on the cells both changed."""
    cells, merged = _row_merge(src_change, dest_change, base, mine, theirs, value_columns)
    if merged is not None and row_granularity and mine != theirs:
        return sorted(changed_columns(base, mine) & changed_columns(base, theirs)) or ["*"], None
    return cells, merged


def _row_merge(src_change, dest_change, base, mine, theirs, columns) -> tuple[list[str], dict | None]:
    if src_change == dest_change == DELETE:
        return [], {}
    if DELETE in (src_change, dest_change):
        return ["*"], None
    if src_change == dest_change == INSERT:
        cells = [c for c in columns if mine[c] != theirs[c]]
        return (cells, None) if cells else ([], theirs)
    merged, cells = dict(theirs), []
    for column in columns:
        if mine[column] == base[column]:
            continue
        if theirs[column] != base[column] and theirs[column] != mine[column]:
            cells.append(column)
        merged[column] = mine[column]
    return (cells, None) if cells else ([], merged)


# --- column rules: conflicting cells of primary-key tables (4.4) -----------------------------------------

SOURCE, TARGET, BASE = "source_wins", "target_wins", "base"
GREATEST, LEAST, SUM_OF_CHANGES, CONCAT = "greatest", "least", "sum_of_changes", "concat"
EXPRESSION = "expression"  # {"expression": "CASE WHEN source.status = 'closed' THEN source.amount ELSE ... END"}
ROWS = ("base", "source", "target")  # a key's three rows: what an expression reads (base.amount, ...), a pick takes
COLUMN_CHOICES = (SOURCE, TARGET, BASE, GREATEST, LEAST, SUM_OF_CHANGES, CONCAT)
CONCAT_SEPARATOR = " | "  # `concat` without a separator of its own
MAX_SEPARATOR = 100
MAX_COLUMN_RULES = 1000
SAMPLE_CELLS = 20  # settled cells listed per column in the report and the audit log (all are counted)
COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_INTEGERS = {"int": (-(2**31), 2**31), "long": (-(2**63), 2**63)}
NUMBERS = ("int", "long", "float", "double")  # and decimals
ORDERED = (*NUMBERS, "string", "date", "timestamp")  # and decimals: the types `greatest` and `least` compare
# The types each rule takes (None: any type); decimals go with the numbers.
RULE_TYPES: dict[str, tuple[str, ...] | None] = {
    SOURCE: None, TARGET: None, BASE: None, GREATEST: ORDERED, LEAST: ORDERED, SUM_OF_CHANGES: NUMBERS,
    CONCAT: ("string",), EXPRESSION: None,
}  # fmt: skip


def column_rule_parse(rule: Any) -> tuple[str, str | None]:
    """A column's rule as a resolution gives it: a choice's name, `{"concat": {"separator": " | "}}` or
    `{"expression": "..."}`. Its name and its separator or expression's text (None for the others); ValueError with
    what is wrong. (An expression's text is parsed against the table's columns by `column_rules_check`.)"""
    if isinstance(rule, dict) and len(rule) == 1 and EXPRESSION in rule:
        text = rule[EXPRESSION]
        if not isinstance(text, str) or not text.strip() or len(text) > predicate_parser.MAX_TEXT_LENGTH:
            raise ValueError(f"an expression is a string of 1 to {predicate_parser.MAX_TEXT_LENGTH} characters.")
        return EXPRESSION, text
    if isinstance(rule, dict) and len(rule) == 1 and CONCAT in rule:
        options = rule[CONCAT]
        if not isinstance(options, dict) or set(options) - {"separator"}:
            raise ValueError('`concat` takes {"separator": "..."} only.')
        separator = options.get("separator", CONCAT_SEPARATOR)
        if not isinstance(separator, str) or len(separator) > MAX_SEPARATOR:
            raise ValueError(f"A `concat` separator is a string of at most {MAX_SEPARATOR} characters.")
        return CONCAT, separator
    if not isinstance(rule, str) or rule not in COLUMN_CHOICES:
        raise ValueError(
            f'A column\'s rule is one of {list(COLUMN_CHOICES)}, {{"concat": {{"separator": ...}}}} or '
            '{"expression": "..."}.'
        )
    return rule, (CONCAT_SEPARATOR if rule == CONCAT else None)


def column_rules_shape(rules: Any, *, table: str) -> dict[str, Any]:
    """A table's column rules checked for their shape (names and choices; the table's columns are checked where they
    are known, `column_rules_check`). Raises `invalid_resolution`."""
    if not isinstance(rules, dict) or len(rules) > MAX_COLUMN_RULES:
        raise ApplicationError("invalid_resolution", f"`columns` of {table!r} maps column names to rules "
                               f"(at most {MAX_COLUMN_RULES}).", details={"table": table})  # fmt: skip
    for column, rule in rules.items():
        if not isinstance(column, str) or not COLUMN_NAME.fullmatch(column):
            raise ApplicationError("invalid_resolution", f"{str(column)[:64]!r} is not a column name.",
                                   details={"table": table, "column": str(column)[:64]})  # fmt: skip
        try:
            column_rule_parse(rule)
        except ValueError as bad:
            expression = isinstance(rule, dict) and EXPRESSION in rule
            code = "invalid_column_expression" if expression else "invalid_column_rule"
            raise ApplicationError(code, f"Column {column!r} of {table!r}: {bad}",
                                   details={"table": table, "column": column, "choices": list(COLUMN_CHOICES)},
                                   ) from None  # fmt: skip
    return rules


def schema_settlements_shape(given: Any, *, table: str) -> dict[str, dict]:
    """A table's schema settlements checked for their shape: `{column: {"type": "decimal(20,0)"}}` (A6.1: a type
    both sides' values fit) or `{column: {"fill": value}}` (A6.2: the value of the rows written without the column;
    `{"fill": {"expression": "..."}}`, one computed from each such row). Raises `invalid_resolution`."""

    def bad(message: str, **details: Any) -> ApplicationError:
        return ApplicationError("invalid_resolution", message, details={"table": table, **details})

    if not isinstance(given, dict) or len(given) > MAX_COLUMN_RULES:
        raise bad(f'`schema` of {table!r} maps column names to {{"type": ...}} or {{"fill": ...}}.')
    for column, settlement in given.items():
        if not isinstance(column, str) or not COLUMN_NAME.fullmatch(column):
            raise bad(f"{str(column)[:64]!r} is not a column name.", column=str(column)[:64])
        if not isinstance(settlement, dict) or len(settlement) != 1 or not set(settlement) <= {"type", "fill"}:
            raise bad(f'Column {column!r} of {table!r} is settled by {{"type": ...}} or {{"fill": ...}}.',
                      column=column)  # fmt: skip
        fill = settlement.get("fill")
        if isinstance(fill, dict) and set(fill) != {EXPRESSION}:
            raise bad(f'The fill of column {column!r} of {table!r} is a value or {{"expression": "..."}}.',
                      column=column)  # fmt: skip
    # each type as the catalog spells it (`unknown_type` for one it does not know)
    return {column: {"type": str(parse_type(s["type"]))} if "type" in s else s for column, s in given.items()}


def _type_fits(name: str, type_name: str) -> bool:
    taken = RULE_TYPES[name]
    if taken is None:
        return True
    return type_name in taken or (type_name.startswith("decimal") and "double" in taken)


def column_rules_check(rules: dict[str, Any], *, table: str, columns: list[dict], keys: list[str]) -> None:
    """A table's column rules against its columns (each {name, type}): every column named exists, is not a key
    column (a key's cells never conflict) and has a type its rule takes. Raises a 400 naming the column."""
    types = {c["name"]: c["type"] for c in columns}
    for column, rule in rules.items():
        details = {"table": table, "column": column}
        if column not in types:
            raise ApplicationError("unknown_column", f"{table!r} has no column {column!r} for a column rule.",
                                   details={**details, "columns": sorted(types)})  # fmt: skip
        if column in keys:
            raise ApplicationError("invalid_column_rule", f"{column!r} is a key column of {table!r}: its cells never "
                                   "conflict, so it takes no column rule.", details=details)  # fmt: skip
        name, text = column_rule_parse(rule)
        if name == EXPRESSION:
            _expression_check(text, table=table, column=column, types=types)
            continue
        if not _type_fits(name, types[column]):
            taken = {CONCAT: "strings", SUM_OF_CHANGES: "numbers"}.get(name, "numbers, strings, dates and timestamps")
            raise ApplicationError(
                "column_rule_type",
                f"{name} cannot settle column {column!r} of {table!r}: it is of type {types[column]}, and {name} "
                f"takes {taken} only.",
                details={**details, "rule": name, "type": types[column]},
            )  # fmt: skip


# --- column expressions (docs/merge-semantics.md#column-expressions) --------------------------------------

# The type of the values each column type takes from an expression (predicate_parser's types; NULL fits any).
_EXPRESSION_FITS = {"boolean": {"boolean"}, "string": {"string"}, "binary": {"binary"}, "date": {"date"},
                    "timestamp": {"timestamp", "date"}}  # fmt: skip


@lru_cache(maxsize=256)
def _row_expression(text: str, types: tuple[tuple[str, str], ...]) -> predicate_parser.Expr:
    return predicate_parser.parse_row_expression(text, ROWS, dict(types))


def row_expression(text: str, types: dict[str, str]) -> predicate_parser.Expr:
    """A column expression parsed over the three rows of a key (`base.`, `source.`, `target.` and the table's
    columns, `types`: name -> type), once per text and table. Raises predicate_parser.PredicateError."""
    return _row_expression(text, tuple(types.items()))


def _fits_column(expression_type: str, type_name: str) -> bool:
    """Whether an expression's value type (predicate_parser's) is one a column of `type_name` takes."""
    fits = {predicate_parser.NUMERIC} if type_name in NUMBERS or type_name.startswith("decimal") else set()
    taken = fits or _EXPRESSION_FITS.get(type_name, set())
    return expression_type == predicate_parser.NULL or expression_type in taken


def fill_expression(
    text: Any, *, table: str, column: str, type_name: str, types: dict[str, str]
) -> predicate_parser.Expr:
    """A fill given by an expression (`{"fill": {"expression": "amount * 2"}}`): the value of each row written without
    the column, from that row's other columns (`types`: name -> type, the merged table's less the column), in the
    language of an UPDATE's SET (predicate_parser.parse_expression: allow-listed functions and operators, no
    subquery, no I/O), typed against the column, reading at least one column (a value is `{"fill": value}`). 400
    `invalid_fill` naming the problem."""
    details = {"table": table, "column": column, "type": type_name}
    try:
        if not isinstance(text, str):
            raise predicate_parser.PredicateError(predicate_parser.NOT_TEXT)
        expr = predicate_parser.parse_expression(text, types)
    except predicate_parser.PredicateError as bad:
        where = "" if bad.position is None else f" (at character {bad.position})"
        raise ApplicationError("invalid_fill", f"The fill of column {column!r} of {table!r} is refused: "
                               f"{bad.message}{where}.", details={**details, "problem": bad.message,
                               "position": bad.position}) from None  # fmt: skip
    if not _fits_column(expr.type, type_name):
        raise ApplicationError("invalid_fill", f"The fill of column {column!r} of {table!r} gives a {expr.type} "
                               f"value, and the column is of type {type_name}.",
                               details={**details, "expression_type": expr.type})  # fmt: skip
    if not expr.columns():
        raise ApplicationError("invalid_fill", f"The fill of column {column!r} of {table!r} reads no column: give "
                               'a value as {"fill": value}.', details=details)  # fmt: skip
    return expr


def _expression_check(text: str, *, table: str, column: str, types: dict[str, str]) -> None:
    """A column's expression parsed against the table's columns and typed against the column: 400
    `invalid_column_expression` (naming the problem and where it is in the text) or `column_rule_type`."""
    details = {"table": table, "column": column}
    try:
        expr = row_expression(text, types)
    except predicate_parser.PredicateError as bad:
        where = "" if bad.position is None else f" (at character {bad.position})"
        raise ApplicationError("invalid_column_expression", f"Column {column!r} of {table!r}: the expression is "
                               f"refused: {bad.message}{where}.", details={**details, "problem": bad.message,
                               "position": bad.position}) from None  # fmt: skip
    type_name = types[column]
    if not _fits_column(expr.type, type_name):
        raise ApplicationError(
            "column_rule_type",
            f"The expression cannot settle column {column!r} of {table!r}: it gives a {expr.type} value, and the "
            f"column is of type {type_name}.",
            details={**details, "rule": EXPRESSION, "type": type_name, "expression_type": expr.type},
        )


def _expression_result(value: Any, type_name: str) -> Any:
    """An expression's value as a cell of the column's type (JSON): a whole number for an integer column, within its
    range; a decimal rounded half up to the column's scale, within its precision; a float to 32 bits. Raises
    predicate_values.EvaluationError for a value that does not fit."""
    if value is None:
        return None
    if type_name in _INTEGERS:
        whole = value if type(value) is int else None
        if isinstance(value, decimal.Decimal | float) and math.isfinite(value) and value == int(value):
            whole = int(value)
        low, high = _INTEGERS[type_name]
        if whole is None or not low <= whole < high:
            raise predicate_values.EvaluationError(f"{value} is not a whole number within a {type_name}'s range")
        return whole
    if type_name.startswith("decimal"):
        precision, scale = (int(d.strip()) for d in type_name[len("decimal(") : -1].split(","))
        number = decimal.Decimal(repr(value) if isinstance(value, float) else value)
        if not number.is_finite():
            raise predicate_values.EvaluationError(f"{value} is not a number a {type_name} holds")
        with decimal.localcontext(prec=80):
            number = number.quantize(decimal.Decimal(1).scaleb(-scale), decimal.ROUND_HALF_UP)
        if abs(number) >= decimal.Decimal(10) ** (precision - scale):
            raise predicate_values.EvaluationError(f"{value} does not fit a {type_name}")
        return str(number)
    if type_name in ("float", "double"):
        number = float(value)
        if type_name == "float" and math.isfinite(number):
            if abs(number) >= 3.4e38:
                raise predicate_values.EvaluationError(f"{value} does not fit a float")
            number = struct.unpack("f", struct.pack("f", number))[0]
        return json_value(number)
    if type_name == "timestamp" and not isinstance(value, datetime.datetime):
        value = datetime.datetime.combine(value, datetime.time())
    return json_value(value)


def expression_settle(expr: predicate_parser.Expr, type_name: str, rows: dict[str, dict | None],
                      types: dict[str, str]) -> Any:  # fmt: skip
    """One conflicting cell settled by its column's expression (parsed by `row_expression`) on the key's three rows
    as JSON (`rows`: base, source, target; the base None when both inserted the key: its columns read NULL). The
    value as JSON; predicate_values.EvaluationError when the expression fails on them or its value does not fit."""
    values = {}
    for name in expr.columns():
        row, _, column = name.partition(".")
        given = rows[row]
        values[name] = None if given is None else cell_value(given[column], types[column])
    return _expression_result(predicate_values.evaluate(expr, values), type_name)


def cell_value(value: Any, type_name: str) -> Any:
    """A cell as the key comparison lists it (JSON, `engine.types.json_value`) as the Python value of its column's
    type (the inverse): a statistic's parsing (dates, timestamps naive in UTC, decimals), bytes, and the floats JSON
    names as strings (NaN, the infinities)."""
    if value is not None and type_name == "binary":
        return base64.b64decode(value)
    if type_name in ("float", "double") and isinstance(value, str):
        return float(value)
    return stat_value(value, type_name)


def _order(value: Any) -> tuple:
    return (isinstance(value, float) and math.isnan(value), value)  # NaN orders above every number, as in Spark


def cell_settle(rule: Any, type_name: str, base: Any, source: Any, target: Any, *, has_base: bool) -> tuple[bool, Any]:
    """One conflicting cell settled by its column's rule, on the three values as JSON (the base's None when the row
    has no base, `has_base` false: both inserted the key). Whether the rule settles it, and the value (JSON).

    `greatest`/`least` ignore NULL (as SQL's GREATEST); `sum_of_changes` is target + source - base, and settles no
    cell with a NULL among the three, no key without a base and no result outside the column's type; `concat` is the
    target's value, the separator and the source's (a NULL side is left out); `base` settles no key without a base.
    A cell a rule does not settle goes by the table's or the merge's choice, or stands."""
    name, separator = column_rule_parse(rule)
    if name == SOURCE:
        return True, source
    if name == TARGET:
        return True, target
    if name == BASE:
        return has_base, base
    values = [cell_value(v, type_name) for v in (base, source, target)]
    old, mine, theirs = values
    if name in (GREATEST, LEAST):
        present = [v for v in (mine, theirs) if v is not None]
        if not present:
            return True, None
        pick = max(present, key=_order) if name == GREATEST else min(present, key=_order)
        return True, json_value(pick)
    if name == CONCAT:
        present = [v for v in (theirs, mine) if v is not None]
        return True, (separator.join(present) if present else None)
    # sum_of_changes
    if not has_base or None in values:
        return False, None
    if type_name.startswith("decimal"):
        precision, scale = (int(d.strip()) for d in type_name[len("decimal(") : -1].split(","))
        with decimal.localcontext(prec=80):
            total = (theirs + mine - old).quantize(decimal.Decimal(1).scaleb(-scale))
        if abs(total) >= decimal.Decimal(10) ** (precision - scale):
            return False, None
        return True, str(total)
    total = theirs + mine - old
    if type_name in _INTEGERS:
        low, high = _INTEGERS[type_name]
        return (low <= total < high), (total if low <= total < high else None)
    if type_name == "float" and math.isfinite(total) and abs(total) < 3.4e38:  # 32 bits: the value written
        total = struct.unpack("f", struct.pack("f", total))[0]
    return True, json_value(float(total))


# --- cell picks: a reviewer's value for one conflicting cell (docs/merge-semantics.md#cell-picks) ---------------

PICK, SAME_CHANGE = "pick", "same_change"  # the rules of a picked cell and of one both sides set alike
MAX_PICKED_TEXT = 10_000  # characters of a typed string value
_PICKED_TYPES = (*NUMBERS, "string", "boolean", "date", "timestamp", "binary")  # and decimals: a typed value's


def cell_pick_parse(pick: Any) -> tuple[str, Any]:
    """A cell pick as a resolution gives it: `{"pick": "base" | "source" | "target"}` or `{"value": v}` (with the
    `inputs` it was made on, who made it and when, as the merge request records them). `("pick", side)` or
    `("value", v)`; ValueError with what is wrong."""
    if (
        not isinstance(pick, dict)
        or set(pick) - {"pick", "value", "inputs", "by", "at"}
        or (("pick" in pick) == ("value" in pick))
    ):
        raise ValueError('a cell takes {"pick": "base" | "source" | "target"} or {"value": ...}')
    if "pick" in pick and pick["pick"] not in ROWS:
        raise ValueError(f"a cell's pick is one of {list(ROWS)}")
    inputs = pick.get("inputs")
    if inputs is not None and (not isinstance(inputs, dict) or set(inputs) != set(ROWS)):
        raise ValueError(f"a pick's inputs are the cell's {list(ROWS)} values")
    return ("pick", pick["pick"]) if "pick" in pick else ("value", pick["value"])


def cell_pick_value(value: Any, type_name: str, *, not_null: bool) -> Any:
    """A typed value for a cell of a column of `type_name`, as the key comparison gives cells (JSON): a whole number
    within an integer's range, a number (or NaN, Infinity) for a float, a decimal within its precision (rounded half
    up to its scale), a string of at most MAX_PICKED_TEXT characters, true or false, an ISO date or timestamp,
    base64 bytes; NULL unless the column is NOT NULL. ValueError with what is wrong."""
    if value is None:
        if not_null:
            raise ValueError("the column is NOT NULL")
        return None
    if not (type_name in _PICKED_TYPES or type_name.startswith("decimal")):
        raise ValueError(f"a value cannot be typed for a column of type {type_name}: pick a side")
    try:
        if type_name in NUMBERS or type_name.startswith("decimal"):
            named = type_name in ("float", "double") and value in ("NaN", "Infinity", "-Infinity")
            text = type_name.startswith("decimal") and isinstance(value, str)  # a decimal's exact digits
            if isinstance(value, bool) or not (isinstance(value, int | float) or named or text):
                raise ValueError(f"{json.dumps(value)[:40]} is not a number")
            value = float(value) if named else decimal.Decimal(value) if text else value
            return _expression_result(value, type_name)
        expected = {"string": str, "boolean": bool, "date": str, "timestamp": str, "binary": str}[type_name]
        if not isinstance(value, expected):
            raise ValueError(f"{json.dumps(value)[:40]} is not a {type_name}")
        if type_name == "string" and len(value) > MAX_PICKED_TEXT:
            raise ValueError(f"the value is longer than {MAX_PICKED_TEXT} characters")
        if type_name in ("date", "timestamp", "binary"):
            return json_value(cell_value(value, type_name))
        return value
    except (predicate_values.EvaluationError, ArithmeticError, ValueError, TypeError) as bad:
        raise ValueError(str(bad) or f"{json.dumps(value)[:40]} is not a {type_name}") from None


def pick_settle(pick: dict, inputs: dict[str, Any]) -> tuple[bool, Any]:
    """One conflicting cell settled by a reviewer's pick, if the cell's three values (`inputs`) are still those the
    pick was made on; else the pick is stale: (False, None)."""
    if pick.get("inputs") != inputs:
        return False, None
    kind, given = cell_pick_parse(pick)
    return True, inputs[given] if kind == "pick" else given


def picks_stale(conflicts: list[dict], picks: dict[str, dict[str, dict]]) -> list[dict[str, Any]]:
    """The picks of a table that settle nothing now (`picks`: key id -> column -> pick), each with why: `changed`
    (the cell still conflicts, with other values: it stands until picked again) or `not_in_conflict` (the cell no
    longer conflicts; `key` None when the key is not among the conflicts listed)."""
    by_id = {conflict["key_id"]: conflict for conflict in conflicts}
    stale = []
    for key_id, columns in picks.items():
        conflict = by_id.get(key_id)
        for column, pick in columns.items():
            entry = {"key_id": key_id, "key": conflict and conflict["key"], "column": column,
                     "inputs": pick.get("inputs"), "by": pick.get("by")}  # fmt: skip
            if conflict is None or column not in conflict["cells"] or None in (conflict["source"], conflict["target"]):
                stale.append({**entry, "reason": "not_in_conflict", "now": None})
                continue
            now = {row: None if conflict[row] is None else conflict[row][column] for row in ROWS}
            if pick.get("inputs") != now:
                stale.append({**entry, "reason": "changed", "now": now})
    return stale


def row_settled(base: dict | None, mine: dict, theirs: dict, columns: list[str], settled: dict[str, Any]) -> dict:
    """The merged row of a conflicting key whose conflicting cells are all settled (`settled`: column -> value): the
    target's row with the source's changes of the other cells (the cell-by-cell merge) and the settled cells."""
    merged = dict(theirs)
    if base is not None:
        for column in columns:
            if mine[column] != base[column] and theirs[column] == base[column]:
                merged[column] = mine[column]
    merged.update(settled)
    return merged


def key_settle(
    conflict: dict,
    *,
    rules: dict[str, Any],
    types: dict[str, str],
    fallback: str,
    fallback_scope: str,
    table: str = "",
    not_null: frozenset[str] = frozenset(),
    picks: dict[str, dict] | None = None,
) -> dict[str, dict] | None:
    """The conflicting cells of one key settled by a reviewer's picks (`picks`: column -> pick, `pick_settle`) and
    column rules (`rules`: column -> rule): each cell by its pick, else its column's rule, else the fallback choice
    (the key's, the table's or the merge's) if it settles; None when some cell stands (a stale pick stands, whatever
    the fallback) or the conflict is not of cells (a delete against an update, or `merge.granularity=row` with no
    common cell). Each cell: the rule, where it came from (`cell`, `column`, `key`, `table` or `default`), base,
    source, target, result (and who picked it). An expression that fails on the key, or gives NULL for a column of
    `not_null`, refuses the merge: 400 `column_expression_failed` naming the key and column."""
    if conflict["cells"] == ["*"] or conflict["source"] is None or conflict["target"] is None:
        return None
    base, source, target = conflict["base"], conflict["source"], conflict["target"]
    cells = {}
    for column in conflict["cells"]:
        inputs = {"base": None if base is None else base[column], "source": source[column], "target": target[column]}
        settled, extra = False, {}
        if source[column] == target[column]:  # both made the same change (a row-granularity conflict)
            settled, value, rule, scope = True, source[column], SAME_CHANGE, "both_sides"
        elif column in (picks or {}):
            settled, value = pick_settle(picks[column], inputs)
            if not settled:
                return None
            value = _picked(picks[column], value, types[column], column in not_null, table=table, key=conflict["key"],
                            column=column)  # fmt: skip
            rule, scope, extra = PICK, "cell", {"by": picks[column].get("by")}
        elif column in rules:
            rule, scope = rules[column], "column"
            name, text = column_rule_parse(rule)
            if name == EXPRESSION:
                settled, value = True, _key_expression(text, column, types, conflict, table, column in not_null)
            else:
                settled, value = cell_settle(rule, types[column], inputs["base"], inputs["source"], inputs["target"],
                                             has_base=base is not None)  # fmt: skip
        if not settled:
            if fallback not in SETTLING:
                return None
            rule, scope, value = fallback, fallback_scope, source[column] if fallback == SOURCE else target[column]
        cells[column] = {"rule": rule, "scope": scope, **inputs, "result": value, **extra}
    return cells


def _picked(pick: dict, value: Any, type_name: str, not_null: bool, *, table: str, key: dict, column: str) -> Any:
    """A picked cell's value as the column holds it: a typed one by `cell_pick_value` (`12.0` of an int column is
    `12`, a date of a timestamp column its midnight), a side's as it is. 400 `invalid_cell_pick` for a typed value
    that does not fit, or a NULL (the base of a key both sides inserted) in a NOT NULL column."""
    try:
        if "value" in pick:
            return cell_pick_value(value, type_name, not_null=not_null)
        if value is None and not_null:
            raise ValueError(f"the {pick['pick']} has no value for it, and the column is NOT NULL")
        return value
    except ValueError as wrong:
        raise ApplicationError(
            "invalid_cell_pick", f"The pick of cell {column!r} of key {json.dumps(key)} of {table!r} does not fit "
            f"the column: {wrong}.", details={"table": table, "key": key, "column": column},
        ) from None  # fmt: skip


def _key_expression(text: str, column: str, types: dict[str, str], conflict: dict, table: str, not_null: bool) -> Any:
    """A key's cell settled by its column's expression (`expression_settle`), or 400 `column_expression_failed`. The
    rows as the key comparison lists them hold the value columns: the key's columns are added (NULL for no base)."""
    rows = {row: None if conflict[row] is None else {**conflict["key"], **conflict[row]} for row in ROWS}
    try:
        value = expression_settle(row_expression(text, types), types[column], rows, types)
        if value is None and not_null:
            raise predicate_values.EvaluationError("it gives NULL, and the column is NOT NULL")
        return value
    except predicate_values.EvaluationError as failed:
        raise ApplicationError(
            "column_expression_failed",
            f"The expression of column {column!r} of {table!r} failed on key {json.dumps(conflict['key'])}: "
            f"{failed}. Nothing was merged.",
            details={"table": table, "column": column, "key": conflict["key"], "expression": text,
                     "problem": str(failed)},
        ) from None  # fmt: skip
