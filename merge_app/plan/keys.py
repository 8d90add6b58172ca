"""A primary-key table's merge by key, decided on plain values (docs/merge-semantics.md#primary-key-tables).

The engine compares the two sides on Spark and hands over each key both sides changed since the ancestor, with its
three rows (`catalog_app.engine.keys.BothChanged`). Here, each such key's verdict (`key_verdicts`: merged cell by
cell, or a conflict with its cells), and, once the resolution settled the conflicts (`key_choices`, from the decided
object), the rows the merge writes for them (`key_rows`). The service around it (`merge_app/services/keys.py`) only
reads and writes rows.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import merge_app.plan.semantics as semantics
from catalog_app.engine.type_names import json_value, key_id
from merge_app.plan.rules import LEAVE_OUT, SOURCE_WINS, Op

Row = tuple[tuple, tuple | None]  # a key's values and its merged row's (None: the key is deleted)


@dataclass
class KeyResult:
    counts: dict[str, Any] = field(default_factory=dict)
    conflicts: list[dict] = field(default_factory=list)  # each: key, key_id, changes, base, source, target, cells
    # For the merge in this process: rows as Spark gave them, by key id (None: the key is deleted).
    merged: dict[str, Row] = field(default_factory=dict)
    source_rows: dict[str, Row] = field(default_factory=dict)
    # The three rows of each conflicting key as Spark gave them (base, source, target; None where there is none):
    # a key column rules settle is written from them (`key_rows`).
    conflict_rows: dict[str, tuple[tuple, dict | None, dict | None, dict | None]] = field(default_factory=dict)
    value_columns: list[str] = field(default_factory=list)


def _json(values: dict | None) -> dict | None:
    return None if values is None else {k: json_value(v) for k, v in values.items()}


def key_verdicts(
    both: Iterable[Any], keys: Sequence[str], value_columns: list[str], *, row_granularity: bool
) -> KeyResult:
    """Each key both sides changed (`both`: its values, each side's change and the three rows, as
    `catalog_app.engine.keys.BothChanged` holds them), decided by `semantics.row_merge`: merged (kept in `merged`
    when the target does not hold the merged row yet) or a conflict (listed in key order, the order they are paged
    in, with its three rows). `counts` holds how many keys both changed, merged cell by cell and conflict."""
    result, changed = KeyResult(value_columns=value_columns), 0
    for change in sorted(both, key=lambda change: change.key):
        changed += 1
        kid = key_id(change.key)
        cells, merged = semantics.row_merge(
            change.source_change, change.target_change, change.base, change.source, change.target, value_columns,
            row_granularity=row_granularity,
        )  # fmt: skip
        if merged is None:
            result.source_rows[kid] = (change.key, None if change.source is None else tuple(change.source.values()))
            result.conflict_rows[kid] = (change.key, change.base, change.source, change.target)
            result.conflicts.append(
                {"key": dict(zip(keys, [json_value(v) for v in change.key], strict=True)), "key_id": kid,
                 "source_change": change.source_change, "target_change": change.target_change,
                 "base": _json(change.base), "source": _json(change.source), "target": _json(change.target),
                 "cells": cells}
            )  # fmt: skip
        elif (merged or None) != change.target:  # the target does not hold the merged row yet
            result.merged[kid] = (change.key, tuple(merged.values()) if merged else None)
    result.counts = {
        "both": changed, "merged_cell_by_cell": sum(1 for _, row in result.merged.values() if row is not None),
        "conflicts": len(result.conflicts),
    }  # fmt: skip
    return result


def discarding_overwrites(obj: Any) -> list[Op]:
    """The target's overwrites since the ancestor that discard the source's changes of the keys they replaced (A4/A5
    by key): a load's. A restore is recorded as an overwrite of the table's files, but it is a change of state like
    any other (docs/merge-semantics.md#restore), compared key by key."""
    return [op for op in obj.target_operations if op.op == "overwrite" and not op.details.get("restore")]


def key_choices(keys: dict) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """A decided table's choice for each conflicting key (its `key_id`: source_wins, target_wins, columns or
    leave_out), and the cells column rules, expressions and picks settled (key id -> column -> value as JSON, as
    the preview showed them), from the object's `keys` report."""
    choices = {c["key_id"]: c["choice"] for c in keys["choices"] if "key_id" in c}
    cells = {c["key_id"]: {column: cell["result"] for column, cell in c["cells"].items()}
             for c in keys["choices"] if "cells" in c}  # fmt: skip
    return choices, cells


def key_rows(
    result: KeyResult, choices: dict[str, str], cells: dict[str, dict[str, Any]], types: dict[str, str]
) -> list[Row]:
    """The rows the merge writes for the keys both sides changed: each merged one the target lacks; each conflict
    settled cell by cell (`columns`: the target's row with the source's changes of the other cells and the settled
    cells, `types` parsing them), unless that is the target's row; the source's row where the source wins; a delete
    where the key is left out (the bases of a virtual base). A key the target wins is not written."""
    rows = list(result.merged.values())
    for kid, settled in cells.items():
        if choices.get(kid) != semantics.COLUMNS:
            continue
        key, base, source, target = result.conflict_rows[kid]
        values = {column: semantics.cell_value(value, types[column]) for column, value in settled.items()}
        merged = semantics.row_settled(base, source, target, result.value_columns, values)
        if merged != target:
            rows.append((key, tuple(merged.values())))
    rows += [row for kid, row in result.source_rows.items() if choices.get(kid) == SOURCE_WINS]
    rows += [(key, None) for kid, (key, _) in result.source_rows.items() if choices.get(kid) == LEAVE_OUT]
    return rows
