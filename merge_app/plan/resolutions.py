"""The merge plan's last stage (docs/architecture.md#the-path-of-a-merge): what a merge's resolution settles
(docs/merge-semantics.md#resolutions). A table merged by key takes its key comparison, and its conflicting keys and
cells are settled by the resolution's choices, column rules and cell picks (`keys_settle`); every other conflict of
an object is settled by its table's choice or the default (`pairs_resolve`). Also the resolution's own shape, checked
where a merge is asked for (`resolution_check`). Plain values in and out.
"""

import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import merge_app.plan.semantics as semantics
import merge_app.plan.states as states
from lakeui.errors import ApplicationError
from merge_app.plan.objects import TABLE, ObjectDiff
from merge_app.plan.rules import CHOICES, CONFLICT, DML, KEYS_PENDING, OK, SOURCE_WINS, Op, SourceWins, Verdict

KEYS_IN_REPORT = 20  # conflicting keys listed per table in the report; the rest through the keys endpoint
MAX_CELL_PICKS = 10_000  # cells a resolution picks, in all
RESOLUTION_PARTS = frozenset({"default", "tables", "keys", "columns", "cells", "schema"})
MAX_KEY_ID = 1_000  # characters of a key id (the key's values as a JSON list)


def resolutions_settle(
    objects: list[ObjectDiff], resolution: dict[str, Any], compared: Mapping[uuid.UUID, dict], stats: Mapping[str, dict]
) -> None:
    """Settle what the resolution settles: each table merged by key with its key comparison from `compared` (table
    id -> counts and conflicts; without one it is pending), then every object's conflicting pairs and data.
    `stats`: the column statistics of the segments either side wrote (a table `source_wins` takes is merged
    anew)."""
    for obj in objects:
        if obj.key_mode:
            keys_settle(obj, compared.get(obj.object_id), resolution)
    for obj in objects:
        pairs_resolve(obj, resolution, stats)


def keys_settle(obj: ObjectDiff, result: dict | None, resolution: dict) -> None:
    """A table merged by key: its key comparison (`result`; None: not run yet) with its conflicting keys and cells
    settled as the resolution says (`obj.keys`), and the verdict of its data pairs, pending until then
    (`pairs.pairs_decide`), the comparison's (`key_verdict`)."""
    if result is not None:
        chosen = semantics.choices_of(resolution, obj.name)
        per_key = resolution.get("keys", {}).get(obj.name, {})
        column_rules = resolution.get("columns", {}).get(obj.name, {})
        picks = resolution.get("cells", {}).get(obj.name, {})
        state = obj.merged_state or (obj.target.state if obj.target else {})
        columns = state.get("columns", [])
        not_null = frozenset(c["name"] for c in columns if c.get("nullable") is False)
        if picks:
            cell_picks_check(picks, table=obj.name, columns=columns)
        if column_rules:  # checked where the merge was asked for too; here against the table the merge writes
            names = {c["id"]: c["name"] for c in columns}
            semantics.column_rules_check(column_rules, table=obj.name, columns=columns,
                                         keys=[names.get(i) for i in state.get("primary_key", [])])  # fmt: skip
        choices = semantics.key_choices(
            result["conflicts"], table=obj.name, per_key=per_key, rules=column_rules,
            types={c["name"]: c["type"] for c in columns}, not_null=not_null, picks=picks, **chosen,
        )  # fmt: skip
        unresolved = semantics.keys_unresolved(
            listed=len(result["conflicts"]), settled=len(choices), total=result["counts"]["conflicts"],
            rules=bool(column_rules), **chosen,
        )  # fmt: skip
        obj.keys = {
            **result["counts"], "unresolved": unresolved, "choices": choices,
            "listed": result["conflicts"][:KEYS_IN_REPORT],
        }  # fmt: skip
        # the columns the cells were settled in: a page of the preview is settled again with them
        obj.keys["types"], obj.keys["not_null"] = {c["name"]: c["type"] for c in columns}, sorted(not_null)
        if column_rules or picks:
            obj.keys["settled_cells"] = semantics.settled_cells(choices)
        if picks:
            obj.keys["stale_picks"] = semantics.picks_stale(result["conflicts"], picks)
    decided = key_verdict(obj.keys)
    if any(pair.cell == "4.4" for pair in obj.pairs):
        obj.pairs = [replace(pair, decided=decided) if pair.cell == "4.4" else pair for pair in obj.pairs]
    elif decided.verdict != OK:
        # No pair of data operations shows the comparison (one side's changes of the rows are all replays of the
        # other's, or picks of them): the table's own verdict is the comparison's.
        obj.issues.append(decided)


def cell_picks_check(picks: dict[str, dict[str, dict]], *, table: str, columns: list[dict]) -> None:
    """A table's cell picks against its columns (each {name, type, nullable}): each column exists, each typed value
    fits it (`semantics.cell_pick_value`), and a side picked has a value for a NOT NULL column (known once the pick
    was made on a cell: its `inputs`). Raises 400 `invalid_cell_pick` naming the cell."""
    types = {c["name"]: c["type"] for c in columns}
    not_null = {c["name"] for c in columns if c.get("nullable") is False}
    for key_id, cells in picks.items():
        for column, pick in cells.items():
            details = {"table": table, "key_id": key_id, "column": column}
            if column not in types:
                raise ApplicationError("invalid_cell_pick", f"{table!r} has no column {column!r} to pick a cell of.",
                                       details={**details, "columns": sorted(types)})  # fmt: skip
            kind, given = semantics.cell_pick_parse(pick)
            if kind == "pick" and pick.get("inputs") and pick["inputs"][given] is None and column in not_null:
                raise ApplicationError(
                    "invalid_cell_pick",
                    f"The {given} has no value for cell {column!r} of key "
                    f"{key_id} of {table!r}, and the column is NOT NULL.",
                    details=details,
                )
            if kind == "value":
                try:
                    semantics.cell_pick_value(given, types[column], not_null=column in not_null)
                except ValueError as wrong:
                    raise ApplicationError("invalid_cell_pick", f"The value picked for cell {column!r} of key "
                                           f"{key_id} of {table!r} does not fit the column: {wrong}.",
                                           details={**details, "type": types[column]}) from None  # fmt: skip


def pairs_resolve(obj: ObjectDiff, resolution: dict, stats: Mapping[str, dict]) -> None:
    """Settle the object's conflicting pairs with a whole-table resolution: the table's own choice settles any
    conflict, the default only conflicts of data (between two data operations, or of the table's data whole)."""
    chosen = semantics.choices_of(resolution, obj.name)
    settled = []
    for index, pair in enumerate(obj.pairs):
        if pair.decided.verdict != CONFLICT or pair.decided.note == "4.4":
            continue
        src_op, dest_op = obj.source_operations[pair.source].op, obj.target_operations[pair.target].op
        choice = semantics.pair_choice(src_op, dest_op, **chosen)
        if choice is not None:
            obj.pairs[index] = replace(pair, resolved=choice)  # Pair is frozen
        settled.append(choice)
    if obj.data_issues:  # conflicts of the table's data as a whole, which its choice or the default settles
        settled.append(semantics.data_choice(**chosen))
    obj.resolution = semantics.table_resolution(settled, **chosen)
    if obj.resolution == SOURCE_WINS and obj.kind == TABLE and not obj.key_mode:
        _source_wins(obj, stats)


def _source_wins(obj: ObjectDiff, stats: Mapping[str, dict]) -> None:
    """A table without a key settled `source_wins`: the target takes the source's version of the segments in
    conflict and keeps its other changes (`source_wins_scope`). A table the target dropped, or whose data the
    target lacks (R*), is taken from the source whole."""
    if obj.source_wins is not None or obj.target.dropped or obj.source.dropped or obj.data_issues:
        return
    conflicting = [(pair.source, pair.target) for pair in obj.pairs if pair.resolved == SOURCE_WINS]
    scope = source_wins_scope(obj.source_operations, obj.target_operations, conflicting)
    if scope.mixed:
        obj.issues.append(
            Verdict(
                CONFLICT, "source_wins",
                "source_wins cannot settle this table: the target rewrote rows it inserted itself together with "
                "the segments in conflict, so taking the source's version of those would drop them. Settle it "
                "with target_wins, or compact less on the target.",
            )
        )  # fmt: skip
        return
    obj.source_wins = scope
    if obj.merged_state is None:
        states.state_merge(obj, stats)


def resolution_check(resolution: dict | None, *, choices: tuple[str, ...] = CHOICES) -> dict[str, Any]:
    """`{"default": fail | source_wins | target_wins, "tables": {"db.t": choice | {"choice": choice, "columns":
    {column: rule}, "schema": {column: {"type": t} | {"fill": v}}}}, "keys": {"db.t": {key_id: choice}}, "cells":
    {"db.t": {key_id: {column: pick}}}}`; the default settles data conflicts only, a table's choice also its DDL
    conflicts; a table's column rules and cell picks settle the conflicting cells of its keys
    (`semantics.key_settle`), its schema settlements its A6 conflicts (`states.state_merge`). Given back with the column
    rules and the schema settlements apart (`"columns": {"db.t": {column: rule}}`, `"schema": {"db.t": ...}`, forms
    it also takes) and each table's choice a string. `choices`: the planner's own callers also pass LEAVE_OUT (a
    virtual base's)."""
    resolution = resolution or {}
    if not isinstance(resolution, dict) or set(resolution) - RESOLUTION_PARTS:
        raise ApplicationError("invalid_resolution", f"resolution takes {', '.join(sorted(RESOLUTION_PARTS))}.")
    tables, keys = resolution.get("tables", {}), resolution.get("keys", {})
    columns = resolution.get("columns", {})
    if (
        not isinstance(tables, dict)
        or not isinstance(keys, dict)
        or not isinstance(columns, dict)
        or not all(isinstance(k, dict) for k in keys.values())
    ):
        raise ApplicationError(
            "invalid_resolution", "`tables` maps a table to a choice; `keys` maps a table to {key id: choice}."
        )
    tables, columns, schema = dict(tables), dict(columns), dict(resolution.get("schema", {}))
    for table, given in list(tables.items()):
        if not isinstance(given, dict):
            continue
        if set(given) - {"choice", "columns", "schema"}:
            raise ApplicationError("invalid_resolution", f"A table's resolution ({table!r}) takes `choice`, "
                                   "`columns` and `schema`.", details={"table": table})  # fmt: skip
        if "columns" in given:
            columns[table] = {**columns.get(table, {}), **semantics.column_rules_shape(given["columns"], table=table)}
        if "schema" in given:
            schema[table] = semantics.schema_settlements_shape(given["schema"], table=table)
        if "choice" in given:
            tables[table] = given["choice"]
        else:
            del tables[table]
    for table, given in columns.items():
        semantics.column_rules_shape(given, table=table)
    chosen = [resolution.get("default", "fail"), *tables.values()]
    chosen += [choice for per_key in keys.values() for choice in per_key.values()]
    if any(not isinstance(choice, str) or choice not in choices for choice in chosen):
        raise ApplicationError("invalid_resolution", f"A resolution is one of {CHOICES}.")
    checked = {**resolution, "tables": tables} if "tables" in resolution else dict(resolution)
    if columns:
        checked["columns"] = {table: rules for table, rules in columns.items() if rules}
    if "cells" in resolution:
        checked["cells"] = cell_picks_shape(resolution["cells"])
    if schema:
        checked["schema"] = {table: settled for table, settled in schema.items() if settled}
    return checked


def cell_picks_shape(cells: Any) -> dict[str, dict[str, dict[str, dict]]]:
    """`{"db.t": {key id: {column: pick}}}` checked for its shape (`semantics.cell_pick_parse`; the values against
    the table's columns where it is merged, `keys_settle`). Raises `invalid_cell_pick`."""

    def bad(message: str, **details: Any) -> ApplicationError:
        return ApplicationError("invalid_cell_pick", message, details=details)

    if not isinstance(cells, dict) or not all(isinstance(keys, dict) for keys in cells.values()):
        raise bad("`cells` maps a table to {key id: {column: pick}}.")
    if sum(len(columns) for keys in cells.values() for columns in keys.values()) > MAX_CELL_PICKS:
        raise bad(f"A resolution picks at most {MAX_CELL_PICKS} cells.")
    for table, keys in cells.items():
        for key_id, columns in keys.items():
            if not isinstance(key_id, str) or len(key_id) > MAX_KEY_ID or not isinstance(columns, dict):
                raise bad(f"A key of {table!r} is its key id (the key's values as a JSON list) with its cells.",
                          table=table)  # fmt: skip
            for column, pick in columns.items():
                if not isinstance(column, str) or not semantics.COLUMN_NAME.fullmatch(column):
                    raise bad(f"{str(column)[:64]!r} is not a column name.", table=table, key_id=key_id)
                try:
                    semantics.cell_pick_parse(pick)
                except ValueError as wrong:
                    raise bad(f"Cell {column!r} of key {key_id} of {table!r}: {wrong}.", table=table, key_id=key_id,
                              column=column) from None  # fmt: skip
    return {table: keys for table, keys in cells.items() if keys}


def key_verdict(keys: dict | None) -> Verdict:
    """A primary-key table merged by key: its comparison's verdict (pending until it ran)."""
    if keys is None:
        return KEYS_PENDING
    counts, unresolved = keys, keys.get("unresolved", 0)
    summary = (
        f"{counts['both']} key(s) changed on both sides, {counts['merged_cell_by_cell']} merged cell by cell, "
        f"{counts['conflicts']} conflicting ({unresolved} unresolved)."
    )
    return Verdict(CONFLICT if unresolved else OK, "4.4", summary)


def source_wins_scope(src_ops: list[Op], dest_ops: list[Op], conflicting: list[tuple[int, int]]) -> SourceWins:
    """The segments the conflicting pairs changed (both operations' inputs), grown to a fixpoint by every operation
    of either side that read or wrote one of them (rewrites, compactions, delete files, an update's new rows): the
    target takes the source's version of all of those files and keeps every other change of its own. Positions are
    the only row identity of a table without a key, so a conflict is settled a segment at a time."""
    files: set[str] = set()
    for i, j in conflicting:
        files |= _inputs(src_ops[i]) | _inputs(dest_ops[j])
    sides = [(False, i, op) for i, op in enumerate(src_ops)] + [(True, j, op) for j, op in enumerate(dest_ops)]
    inside: set[tuple[bool, int]] = set()
    grown = True
    while grown:
        grown = False
        for side in sides:
            target, index, op = side
            if (target, index) in inside or op.op not in DML or not (_inputs(op) | op.added) & files:
                continue
            files |= _inputs(op) | op.added
            inside.add((target, index))
            grown = True
    superseded = tuple(sorted(index for target, index in inside if target))
    mixed = tuple(index for index in superseded if dest_ops[index].op == "insert")
    return SourceWins(frozenset(files), superseded, mixed)


def _inputs(op: Op) -> set[str]:
    return op.touched | op.taken_out
