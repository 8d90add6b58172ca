"""What a merge decides beyond the rule tables, as pure functions of plain values (docs/merge-semantics.md#new-objects
and #primary-key-tables).

- Names (4.1): an object the source adds or renames must not take a name another object of its kind holds on the
  target, and a table the source adds needs its database on the target.
- Resolutions (4.4): which choice settles which conflict. A table's own choice settles any conflict of the table;
  the default only conflicts of data. A primary-key table's keys each take their own choice, else the table's,
  else the default; a key's own `fail` stands whatever the table or the default chose.
- Rows of primary-key tables (4.4): the three-way merge of one key changed on both sides, cell by cell (or row by
  row with `merge.granularity=row`).

The rule tables and the conditions of their notes are in rules.py, the three-way merge of object states in
states.py. The diff (selectors/diff.py) and the key comparison (services/keys.py) call these; tests/merge_app/
test_semantics.py runs them without a database.
"""

from collections.abc import Hashable
from typing import Any

from merge_app.plan.rules import CONFLICT, DML, FAIL, Verdict

INSERT, UPDATE, DELETE = "insert", "update", "delete"  # a key's change on one side (catalog_app.engine.keys)
SETTLING = frozenset({"source_wins", "target_wins"})  # the choices that settle a conflict (`fail` does not)

# --- names (4.1) -----------------------------------------------------------------------------------------


def taken_by_another(taken: dict[Hashable, Any], namespace: Hashable, object_id: Any) -> bool:
    """Whether another object holds `namespace` (kind, parent, lower-case name) on the target."""
    other = taken.get(namespace)
    return other is not None and other != object_id


def new_object_conflicts(
    *, kind: str, name: str, taken_by_other: bool, parent_in_base: bool, parent_on_target: bool
) -> list[Verdict]:
    """An object the source added is taken over with its id, unless the target has another object of its kind
    and name, or dropped the (older) database the table is in."""
    conflicts = []
    if taken_by_other:
        conflicts.append(Verdict(CONFLICT, "4.1", f"The target already has a {kind} named {name!r} (another object)."))
    if parent_in_base and not parent_on_target:
        conflicts.append(Verdict(CONFLICT, "4.1", "The target dropped the database this table is in."))
    return conflicts


def rename_conflict(*, base_name: str, source_name: str, taken_by_other: bool) -> Verdict | None:
    """A source rename onto a name another object holds on the target."""
    if source_name == base_name or not taken_by_other:
        return None
    return Verdict(CONFLICT, "name", f"The source renamed it to {source_name!r}, a name the target uses.")


def emptied_database_conflict(kept: list[str]) -> Verdict | None:
    """A database the source dropped that still holds objects on the target the source did not drop."""
    if not kept:
        return None
    return Verdict(CONFLICT, "4.2", f"The source dropped the database; the target has objects in it: {sorted(kept)}.")


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
    conflicts: list[dict], *, table: str, per_key: dict[str, str], table_choice: str | None, default: str
) -> list[dict[str, Any]]:
    """The choice of each conflicting key listed (`key`, `key_id`) that settles it, with its scope: the key's own,
    else the table's, else the default. A key whose choice is `fail` is left out: it stands."""
    fallback, fallback_scope = (table_choice, "table") if table_choice else (default, "default")
    choices = []
    for conflict in conflicts:
        choice = per_key.get(conflict["key_id"], fallback)
        if choice != FAIL:
            scope = "key" if conflict["key_id"] in per_key else fallback_scope
            choices.append(
                {"object": table, "scope": scope, "key": conflict["key"], "key_id": conflict["key_id"],
                 "choice": choice}
            )  # fmt: skip
    return choices


def keys_unresolved(*, listed: int, settled: int, total: int, table_choice: str | None, default: str) -> int:
    """Conflicting keys that stand: the listed ones not settled, and those past the list (counted, not listed)
    unless the table's choice or the default settles them."""
    fallback = table_choice or default
    return listed - settled + (total - listed if fallback == FAIL else 0)


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
