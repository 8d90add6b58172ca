"""The rows that differ between two states of one table, computed in this process with pyarrow (no Spark job), and
kept as an Arrow file per pair of states so that every later page is a slice of a memory-mapped file.

A table with a primary key is compared by key: a key only before is deleted, only after inserted, on both sides with
some cell different updated (the changed cells named). A table without one is compared as a multiset of rows: a row
held more often after than before is added (as many times), less often deleted. Only the segments whose rows can
differ are read (the caller passes them); both sides are read in one schema, the `current` columns, and only when
every segment was written in it (else None: a worker's Spark projects older schemas).
"""

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from catalog_app.engine.reads import deleted_positions
from catalog_app.engine.segments import Column, SegmentRead, in_schema
from catalog_app.engine.types import arrow_type, json_value
from catalog_app.engine.warehouse import Warehouse, arrow_filesystem

CHANGE = "_change"
INSERT, UPDATE, DELETE = "insert", "update", "delete"
_BEFORE, _AFTER = "b:", "a:"
_ORDER = {DELETE: 0, UPDATE: 1, INSERT: 2}


def read_rows_here(warehouse: Warehouse, current: Sequence[Column], segments: Sequence[SegmentRead]) -> pa.Table | None:
    """Every live row of `segments` (their delta files applied), or None if one was written in another schema."""
    if not in_schema(segments, current):
        return None
    names = [c.name for c in current]
    schema = pa.schema([(c.name, arrow_type(c.type)) for c in current])
    parts = []
    for segment in segments:
        filesystem, path = arrow_filesystem(warehouse.uri(segment.path))
        rows = pq.read_table(path, columns=names, filesystem=filesystem).select(names).cast(schema)
        if segment.deltas:
            keep = np.ones(rows.num_rows, dtype=bool)
            keep[deleted_positions(warehouse, segment.deltas).to_numpy()] = False
            rows = rows.filter(pa.array(keep))
        parts.append(rows)
    return pa.concat_tables(parts) if parts else schema.empty_table()


def diff_rows(before: pa.Table, after: pa.Table, key: Sequence[str]) -> pa.Table:
    """The changed rows: a `_change` column, then every column before (`b:<name>`) and after (`a:<name>`), null on
    the side a row is not on. Ordered by key (a keyed table) or by change then row values (one without)."""
    names = before.column_names
    if key:
        return _by_key(before, after, list(key), names)
    return _as_multisets(before, after, names)


def _prefixed(rows: pa.Table, prefix: str) -> pa.Table:
    return rows.rename_columns([prefix + n for n in rows.column_names])


def _one_integer_key(before: pa.Table, after: pa.Table, key: list[str]) -> bool:
    if len(key) != 1:
        return False
    columns = (before.column(key[0]), after.column(key[0]))
    return all(pa.types.is_integer(c.type) and c.null_count == 0 for c in columns)


def _sorted(values: np.ndarray) -> bool:
    return bool(len(values) < 2 or np.all(values[1:] >= values[:-1]))


def _matches(bk: np.ndarray, ak: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions in `bk` and in `ak` of the keys both hold, in key order (keys unique on each side). Sides
    already in key order (as loads often write them) are not sorted again."""
    border = None if _sorted(bk) else np.argsort(bk, kind="stable")
    aorder = None if _sorted(ak) else np.argsort(ak, kind="stable")
    bks = bk if border is None else bk[border]
    aks = ak if aorder is None else ak[aorder]
    if not len(aks) or not len(bks):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    at = np.minimum(np.searchsorted(aks, bks), len(aks) - 1)
    found = aks[at] == bks
    bi, ai = np.nonzero(found)[0], at[found]
    return (bi if border is None else border[bi]), (ai if aorder is None else aorder[ai])


def _taken(rows: pa.Table, positions: np.ndarray) -> pa.Table:
    if len(positions) == rows.num_rows and np.array_equal(positions, np.arange(rows.num_rows)):
        return rows  # every row, in order: no copy
    return rows.take(pa.array(positions))


def _by_integer_key(before: pa.Table, after: pa.Table, key: str, names: list[str]) -> pa.Table:
    """The common case (one integer key column) with numpy's sorted searches instead of a hash join: a million
    keys a side in a fraction of the join's time, and no copy of rows that need none."""
    bk, ak = before.column(key).to_numpy(), after.column(key).to_numpy()
    bi, ai = _matches(bk, ak)
    only_before, only_after = np.ones(len(bk), dtype=bool), np.ones(len(ak), dtype=bool)
    only_before[bi], only_after[ai] = False, False
    old, new = _taken(before, bi), _taken(after, ai)
    differs = np.zeros(len(bi), dtype=bool)
    for name in names:
        b, a = old.column(name), new.column(name)
        cell = pc.or_kleene(pc.fill_null(pc.not_equal(b, a), False), pc.not_equal(pc.is_null(b), pc.is_null(a)))
        differs |= cell.to_numpy(zero_copy_only=False)
    if not differs.all():
        old, new = old.filter(pa.array(differs)), new.filter(pa.array(differs))
    deleted, inserted = before.filter(pa.array(only_before)), after.filter(pa.array(only_after))

    def part(b: pa.Table | None, a: pa.Table | None, rows: int) -> pa.Table:
        columns: dict[str, Any] = {}
        for name in names:
            column = b.column(name) if b is not None else pa.nulls(rows, before.schema.field(name).type)
            columns[_BEFORE + name] = column
        for name in names:
            columns[_AFTER + name] = a.column(name) if a is not None else pa.nulls(rows, after.schema.field(name).type)
        return pa.table(columns)

    result = pa.concat_tables([
        part(old, new, old.num_rows), part(deleted, None, deleted.num_rows), part(None, inserted, inserted.num_rows)
    ])  # fmt: skip
    codes = np.repeat(np.array([0, 1, 2], dtype=np.int8), [old.num_rows, deleted.num_rows, inserted.num_rows])
    change = pa.DictionaryArray.from_arrays(pa.array(codes), pa.array([UPDATE, DELETE, INSERT]))
    result = result.add_column(0, CHANGE, pc.cast(change, pa.string()))
    order = np.concatenate([old.column(key).to_numpy(), deleted.column(key).to_numpy(),
                            inserted.column(key).to_numpy()])  # fmt: skip
    return result if _sorted(order) else result.take(pa.array(np.argsort(order, kind="stable")))


def _by_key(before: pa.Table, after: pa.Table, key: list[str], names: list[str]) -> pa.Table:
    if _one_integer_key(before, after, key):
        return _by_integer_key(before, after, key[0], names)
    keys = [f"k:{k}" for k in key]
    left = _prefixed(before, _BEFORE)
    left = left.append_column("_b", pa.array(np.ones(left.num_rows, dtype=bool)))
    for k, name in zip(keys, key, strict=True):
        left = left.append_column(k, before.column(name))
    right = _prefixed(after, _AFTER)
    right = right.append_column("_a", pa.array(np.ones(right.num_rows, dtype=bool)))
    for k, name in zip(keys, key, strict=True):
        right = right.append_column(k, after.column(name))
    joined = left.join(right, keys=keys, join_type="full outer", use_threads=True)
    in_before, in_after = pc.is_valid(joined.column("_b")), pc.is_valid(joined.column("_a"))
    both = pc.and_(in_before, in_after)
    differs = pa.array(np.zeros(joined.num_rows, dtype=bool))
    changed_cells = {}
    for name in names:
        b, a = joined.column(_BEFORE + name), joined.column(_AFTER + name)
        cell = pc.or_kleene(
            pc.fill_null(pc.not_equal(b, a), False), pc.not_equal(pc.is_null(b), pc.is_null(a))
        )  # a null on one side only differs; nulls on both do not
        changed_cells[name] = cell
        differs = pc.or_(differs, cell)
    change = pc.if_else(both, pa.scalar(UPDATE), pc.if_else(in_before, pa.scalar(DELETE), pa.scalar(INSERT)))
    keep = pc.or_(pc.invert(both), differs)
    result = joined.select([_BEFORE + n for n in names] + [_AFTER + n for n in names] + keys)
    result = result.append_column(CHANGE, change).filter(keep)
    result = result.sort_by([(k, "ascending") for k in keys]).drop_columns(keys)
    return result.select([CHANGE, *[_BEFORE + n for n in names], *[_AFTER + n for n in names]])


def _as_multisets(before: pa.Table, after: pa.Table, names: list[str]) -> pa.Table:
    signed = pa.concat_tables([
        before.append_column("_s", pa.array(np.full(before.num_rows, -1, dtype=np.int64))),
        after.append_column("_s", pa.array(np.full(after.num_rows, 1, dtype=np.int64))),
    ])  # fmt: skip
    counted = signed.group_by(names, use_threads=False).aggregate([("_s", "sum")])
    counted = counted.filter(pc.not_equal(counted.column("_s_sum"), 0))
    counts = counted.column("_s_sum").to_numpy()
    rows = counted.take(pa.array(np.repeat(np.arange(len(counts)), np.abs(counts))))
    added = np.repeat(counts > 0, np.abs(counts))
    empty = {n: pa.nulls(rows.num_rows, rows.schema.field(n).type) for n in names}
    columns: dict[str, Any] = {CHANGE: pc.if_else(pa.array(added), pa.scalar(INSERT), pa.scalar(DELETE))}
    for name in names:
        columns[_BEFORE + name] = pc.if_else(pa.array(added), empty[name], rows.column(name))
    for name in names:
        columns[_AFTER + name] = pc.if_else(pa.array(added), rows.column(name), empty[name])
    result = pa.table(columns)
    order = [(CHANGE, "ascending")] + [(n, "ascending") for n in (_BEFORE + x for x in names)]
    order += [(_AFTER + n, "ascending") for n in names]
    return result.sort_by(order)


def counts_of(diff: pa.Table) -> dict[str, int]:
    kept = (diff.schema.metadata or {}).get(b"counts")
    if kept:
        return json.loads(kept)
    counted = dict(zip(*pc.value_counts(diff.column(CHANGE)).flatten(), strict=True)) if diff.num_rows else {}
    found = {str(k): int(v.as_py()) for k, v in counted.items()}
    return {k: found.get(k, 0) for k in (INSERT, UPDATE, DELETE)}


def page_of(diff: pa.Table, names: Sequence[str], *, offset: int, limit: int) -> list[dict[str, Any]]:
    """A page of the changed rows as JSON: change, before and after values, the changed cells' names."""
    rows = []
    for row in diff.slice(offset, limit).to_pylist():
        change = row[CHANGE]
        before = None if change == INSERT else [json_value(row[_BEFORE + n]) for n in names]
        after = None if change == DELETE else [json_value(row[_AFTER + n]) for n in names]
        cells = [n for i, n in enumerate(names) if before and after and before[i] != after[i]]
        rows.append({"change": change, "before": before, "after": after, "cells": cells})
    return rows


def kept_write(path: Path, diff: pa.Table, metadata: dict[str, str]) -> None:
    """Keep a diff as an Arrow file (written aside, then renamed: a reader never sees half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {**metadata, "counts": json.dumps(counts_of(diff))}
    table = diff.replace_schema_metadata({**(diff.schema.metadata or {}), **metadata})
    handle, aside = tempfile.mkstemp(dir=path.parent, suffix=".part")
    os.close(handle)
    with pa.OSFile(aside, "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=65536)
    os.replace(aside, path)


def kept_read(path: Path) -> pa.Table | None:
    """A kept diff, memory-mapped (a page reads only its own rows), or None."""
    try:
        return ipc.open_file(pa.memory_map(str(path), "r")).read_all()
    except (FileNotFoundError, pa.ArrowInvalid):
        return None
