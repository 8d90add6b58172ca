"""The merge plan's fourth stage (docs/architecture.md#the-path-of-a-merge): the merged state of each object, by
three-way merges of object states: what the target looks like once the source's changes are replayed on it, with
the checks of the result (two columns of one name, a NOT NULL column rows lack a value for).

Plain data in and out. Wherever the source changed a value since the ancestor, its value wins (it is the change
being replayed); elsewhere the target's stays. Columns are matched by id, so renames on either side never clash
with other changes; the rule tables have already refused the combinations that cannot merge (A6, S*, P*, U*).
"""

from collections.abc import Callable, Mapping
from typing import Any

import merge_app.plan.semantics as semantics
from catalog_app.engine.type_names import is_castable, is_widening, parse_type
from lakeui.errors import ApplicationError
from merge_app.plan.objects import DATABASE, MERGED_KINDS, WRITES_DATA, ObjectDiff
from merge_app.plan.rules import CONFLICT, PENDING, Op, Verdict

MISSING = object()
TABLE_FIELDS = ("partition_by", "primary_key", "comment")
COLUMN_FIELDS = ("name", "type", "nullable", "default")


def _pick(base: Any, src: Any, dest: Any) -> Any:
    return src if src != base else dest


def properties_merge(base: dict, src: dict, dest: dict) -> dict:
    merged = {}
    for key in [*dest, *(k for k in src if k not in dest)]:
        value = _pick(base.get(key, MISSING), src.get(key, MISSING), dest.get(key, MISSING))
        if value is not MISSING:
            merged[key] = value
    return merged


def name_merge(base: str, src: str, dest: str) -> str:
    return _pick(base, src, dest)


def database_state_merge(base: dict, src: dict, dest: dict) -> dict:
    return {
        **dest,
        "properties": properties_merge(base["properties"], src["properties"], dest["properties"]),
        "comment": _pick(base.get("comment"), src.get("comment"), dest.get("comment")),
    }


def columns_merge(base: list[dict], src: list[dict], dest: list[dict]) -> list[dict]:
    """Dest's columns in dest's order with src's changes by id, then the columns src added. A column either side
    dropped stays dropped."""
    base_by_id, src_by_id = {c["id"]: c for c in base}, {c["id"]: c for c in src}
    merged = []
    for column in dest:
        if column["id"] in base_by_id and column["id"] not in src_by_id:
            continue  # dropped by src
        if column["id"] in base_by_id:
            old, new = base_by_id[column["id"]], src_by_id[column["id"]]
            column = {**column, **{f: _pick(old[f], new[f], column[f]) for f in COLUMN_FIELDS}}
        merged.append(column)
    dest_ids = {c["id"] for c in dest}
    return merged + [c for c in src if c["id"] not in base_by_id and c["id"] not in dest_ids]


def table_state_merge(base: dict, src: dict, dest: dict) -> dict:
    if src == base and dest == base:  # neither side changed the definition (most tables of a data merge): as below
        return {**dest, "columns": [dict(c) for c in dest["columns"]], "properties": dict(dest["properties"]),
                **{key: dest.get(key) for key in TABLE_FIELDS}}  # fmt: skip
    state = {
        **dest,
        "columns": columns_merge(base["columns"], src["columns"], dest["columns"]),
        "properties": properties_merge(base["properties"], src["properties"], dest["properties"]),
        "last_column_id": max(src["last_column_id"], dest["last_column_id"]),
    }
    for key in TABLE_FIELDS:
        state[key] = _pick(base.get(key), src.get(key), dest.get(key))
    return state


def duplicate_column_names(columns: list[dict]) -> list[str]:
    seen, duplicates = set(), []
    for column in columns:
        if column["name"].lower() in seen:
            duplicates.append(column["name"])
        seen.add(column["name"].lower())
    return duplicates


def made_not_null(base: dict, sides: list[dict]) -> bool:
    """Whether a side's table state made a column NOT NULL that the base's allowed NULL in: the one case where
    `table_problems` needs the statistics of the rows written meanwhile (a three-way merge of the columns makes no
    column NOT NULL that neither side made so)."""
    columns = [side.get("columns", []) for side in sides]
    changed = [c for c in columns if c != base["columns"]]  # lists of dicts compared in C: cheap
    nullable = {c["id"] for c in base["columns"] if c["nullable"]} if changed else set()
    return any(not c["nullable"] and c["id"] in nullable for columns in changed for c in columns)


def table_problems(
    base: dict, src: dict, dest: dict, merged: dict, *, wrote: dict[str, bool], nulls: Callable[[str], set[int]]
) -> list[tuple[str, dict | None]]:
    """Why the merged table would break its own rules (docs/merge-semantics.md#three-way-merge, A6.2), for a table both
    sides changed: each reason, with the column a fill in the resolution's `schema` would settle it for (or None).
    `wrote[side]`: whether that side wrote rows since the ancestor; `nulls(side)`: the ids of the columns that the
    segments it wrote may hold NULLs in (read from their statistics, only when needed)."""
    problems = []
    names = {column["id"]: column["name"] for column in merged["columns"]}
    for field, what in (("partition_by", "partitioned"), ("primary_key", "keyed")):
        missing = [column_id for column_id in merged.get(field) or [] if column_id not in names]
        if missing:
            problems.append((
                f"The merged table would be {what} by a column one side dropped (column id {missing[0]}): drop the "
                f"{field.replace('_', ' ')} first or keep the column.", None,
            ))  # fmt: skip
    base_ids = {column["id"]: column for column in base["columns"]}
    side_ids = {"source": {c["id"] for c in src["columns"]}, "target": {c["id"] for c in dest["columns"]}}
    for column in merged["columns"]:
        if column["nullable"]:
            continue
        old = base_ids.get(column["id"])
        for side, other in (("source", "target"), ("target", "source")):
            added = old is None and column["id"] in side_ids[side] - side_ids[other]
            if added and column.get("default") is None and not column.get("fill") and wrote[other]:
                problems.append((
                    f"A6.2: the {side} added NOT NULL column {column['name']!r} without a default, and the {other} "
                    "wrote rows that have no value for it.", column,
                ))  # fmt: skip
        if old is not None and old["nullable"]:  # made NOT NULL since the ancestor: rows written meanwhile
            for side in ("source", "target"):
                if wrote[side] and column["id"] in nulls(side):
                    problems.append((
                        f"Column {column['name']!r} became NOT NULL while the {side} wrote rows that may hold NULL "
                        "in it.", None,
                    ))  # fmt: skip
                    break
    return problems


def merged_states(objects: list[ObjectDiff], stats: Mapping[str, dict]) -> None:
    """The merged state (`ObjectDiff.merged_state`) of each object the merge writes: a new one's is the source's;
    one either side changed is merged three-way (`state_merge`), unless a side dropped it or its conflicts stand
    (its pairs', `pairs.pairs_decide`, and its names', `conflicts.object_conflicts`). The pairs of a table merged by
    key do not hold its state back: its key comparison settles cells in the merged columns
    (`resolutions.keys_settle`). A table's choice `source_wins` merges it later (`resolutions`). `stats`: the column
    statistics of the segments either side wrote."""
    for obj in objects:
        if obj.kind not in MERGED_KINDS or obj.change == "added_in_target":
            continue
        if obj.change == "added_in_source":
            obj.merged_state = obj.source.state
            continue
        standing = [issue for issue in obj.issues if issue.verdict != PENDING] if obj.key_mode else obj.conflicts
        if not obj.source.dropped and not standing and not (obj.target is not None and obj.target.dropped):
            state_merge(obj, stats)


def state_merge(obj: ObjectDiff, stats: Mapping[str, dict]) -> None:
    """The merged state of an object both sides hold (`obj.merged_state`), with its schema settlements applied
    (`_schema_applied`); the conflicts of the result are its issues (A6: two columns of one name; 4.0: the table's
    problems, `table_problems`)."""
    base, src, dest = obj.base.state, obj.source.state, obj.target.state
    if obj.kind == DATABASE:
        obj.merged_state = database_state_merge(base, src, dest)
        return
    merged = table_state_merge(base, src, dest)
    if src == base and dest == base:  # the definition as it was: nothing of it for the checks below to find
        obj.merged_state = merged
        return
    if obj.schema:
        merged = _schema_applied(obj, merged)
    obj.casts = value_casts(obj, merged)
    duplicates = duplicate_column_names(merged["columns"])
    if duplicates:
        obj.issues.append(
            Verdict(CONFLICT, "A6", f"After the merge two columns would be named {duplicates[0]!r}; rename one.")
        )
    if obj.change == "changed_in_both":
        written = {side: segments_written(ops) for side, ops in (("source", obj.source_operations),
                                                                  ("target", obj.target_operations))}  # fmt: skip

        def nulls(side: str) -> set[int]:
            written_stats = [stats.get(segment) for segment in written[side]]
            return {c["id"] for c in merged["columns"] for s in written_stats if _may_be_null(s, c["id"])}

        wrote = {side: bool(ids) for side, ids in written.items()}
        for problem, column in table_problems(base, src, dest, merged, wrote=wrote, nulls=nulls):
            settles = column and (column["name"], "fill", column["type"])
            obj.issues.append(Verdict(CONFLICT, "4.0", problem, settles=settles))
    obj.merged_state = merged


def _schema_applied(obj: ObjectDiff, merged: dict) -> dict:
    """The merged table with its schema settlements: a column's type set to one both sides' values fit (400
    `schema_type_lossy` for a key or partition column that would not widen, or one the sides do not type apart;
    which casts keep the values, and the values themselves, are `value_casts`'s), a column's default to the fill
    (400 `invalid_fill` for a value that does not fit the column)."""
    types = {side: {c["id"]: c["type"] for c in getattr(obj, side).state["columns"]} for side in ("source", "target")}
    located = {*(merged.get("primary_key") or []), *(merged.get("partition_by") or [])}
    columns = []
    for column in merged["columns"]:
        settlement = obj.schema.get(column["id"])
        if settlement is not None and "type" in settlement:
            wanted = settlement["type"]
            for side, held in types.items():
                old = held.get(column["id"])
                if old is None or old == wanted or is_widening(parse_type(old), parse_type(wanted)):
                    continue
                agreed = len({t[column["id"]] for t in types.values() if column["id"] in t}) == 1  # no A6.1
                if agreed or column["id"] in located:  # which casts keep the values: `value_casts`
                    how = (
                        "a key or partition column only widens"
                        if column["id"] in located
                        else ("the sides do not type it apart, and a merge casts only a column they do")
                    )
                    raise ApplicationError(
                        "schema_type_lossy",
                        f"Column {column['name']!r} of {obj.name!r} cannot become {wanted}: the {side}'s {old} "
                        f"values cannot be cast to it ({how}).",
                        details={"table": obj.name, "column": column["name"], "side": side, "type": old,
                                 "wanted": wanted},
                    )  # fmt: skip
            column = {**column, "type": wanted}
        if settlement is not None and "fill" in settlement and not isinstance(settlement["fill"], dict):
            try:
                fill = semantics.cell_pick_value(settlement["fill"], column["type"], not_null=True)
            except ValueError as wrong:
                raise ApplicationError("invalid_fill", f"The fill of column {column['name']!r} of {obj.name!r} "
                                       f"does not fit it: {wrong}.", details={"table": obj.name,
                                       "column": column["name"], "type": column["type"]}) from None  # fmt: skip
            column = {**column, "default": fill}
        columns.append(column)
    return {**merged, "columns": [_filled(obj, column, columns) for column in columns]}


def _filled(obj: ObjectDiff, column: dict, columns: list[dict]) -> dict:
    """`column` with its fill by an expression, if the resolution gives one: the text, and the columns it reads as
    the merged table has them (`segments.Fill`)."""
    fill = obj.schema.get(column["id"], {}).get("fill")
    if not isinstance(fill, dict):
        return column
    others = [c for c in columns if c["id"] != column["id"]]
    types = {c["name"]: c["type"] for c in others}
    expr = semantics.fill_expression(fill[semantics.EXPRESSION], table=obj.name, column=column["name"],
                                     type_name=column["type"], types=types)  # fmt: skip
    reads = [{key: value for key, value in c.items() if key != "fill"} for c in others if c["name"] in expr.columns()]
    return {**column, "fill": {"expression": fill[semantics.EXPRESSION], "columns": reads}}


def value_casts(obj: ObjectDiff, merged: dict) -> list[dict]:
    """The columns of the merged table whose type is not a widening of a side's type for them (a type settled by
    the resolution, or one an earlier merge settled, merged into a side that kept the old one): each side's values
    must fit it, cast and back, which the worker checks on Spark before the merge writes (400 `schema_type_lossy`
    naming the first that does not). Segments keep the type they were written with and are cast when read."""
    casts = []
    for side in ("source", "target"):
        held = {c["id"]: c["type"] for c in getattr(obj, side).state["columns"]}
        for column in merged["columns"]:
            old = held.get(column["id"])
            if old is None or old == column["type"] or is_widening(parse_type(old), parse_type(column["type"])):
                continue
            if not is_castable(parse_type(old), parse_type(column["type"])):
                raise ApplicationError(
                    "schema_type_lossy", f"Column {column['name']!r} of {obj.name!r} cannot become {column['type']}: "
                    f"the {side}'s {old} values cannot be cast to it (no cast keeps them; a number or a string "
                    f"becomes another number type, a number, a boolean or a date becomes a string, a string any of "
                    f"them, when every value fits).",
                    details={"table": obj.name, "column": column["name"], "side": side, "type": old,
                             "wanted": column["type"]},
                )  # fmt: skip
            casts.append({"side": side, "column_id": column["id"], "column": column["name"], "type": old,
                          "to": column["type"]})  # fmt: skip
    return casts


def _may_be_null(stats: dict | None, column_id: int) -> bool:
    return bool((stats or {}).get(str(column_id), {}).get("nulls", 1))


def segments_written(operations: list[Op]) -> list[str]:
    """The segments these operations (a side's) wrote of rows (an insert's, an update's, an overwrite's)."""
    return [segment for op in operations if op.op in WRITES_DATA for segment in op.details.get("segments_added", [])]
