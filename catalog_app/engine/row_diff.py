"""The rows that differ between two states of one table, computed in this process with pyarrow (no Spark job), and
kept as an Arrow file per pair of states so that every later page is a slice of a memory-mapped file.

A table with a primary key is compared by key: a key only before is deleted, only after inserted, on both sides with
some cell different updated (the changed cells named). A table without one is compared as a multiset of rows: a row
held more often after than before is added (as many times), less often deleted. Only the segments whose rows can
differ are read (the caller passes them); both sides are read in one schema, the `current` columns (a segment
written in an older one is projected onto it by column id, as Spark projects it: `reads.projected_arrow`). A segment
on both sides (only its deletes changed) is read once, and only the rows live on one side only are kept: a row live
on both is the same row, unchanged.

The first page is answered before the whole diff is laid out: `changes_of` finds which rows changed and counts
them, `Changes.rows` lays out only the rows of one page, and `kept_write_later` lays out and keeps the whole diff
after the page is answered (docs/README.md#review-shows-the-data: "its first page under 1 s").
"""

import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from catalog_app.engine.reads import deleted_positions, projected_arrow
from catalog_app.engine.segments import Column, SegmentRead
from catalog_app.engine.types import arrow_type, json_value
from catalog_app.engine.warehouse import Warehouse, arrow_filesystem

CHANGE = "_change"
# Where a row was read (`read_sides_arrow(origins=True)`): its segment's place in the side's list, shifted 32 bits
# left, plus its position in the segment's file. Carried through a diff beside the row, never compared.
ORIGIN = "_origin"
INSERT, UPDATE, DELETE = "insert", "update", "delete"
_BEFORE, _AFTER = "b:", "a:"
_ORDER = {DELETE: 0, UPDATE: 1, INSERT: 2}
_NONE = -1  # a position on the side a changed row is not on

logger = logging.getLogger(__name__)


def read_sides_arrow(
    warehouse: Warehouse,
    current: Sequence[Column],
    before: Sequence[SegmentRead],
    after: Sequence[SegmentRead],
    *,
    origins: bool = False,
) -> tuple[pa.Table, pa.Table]:
    """The rows live in `before`'s segments and not in `after`'s, and the reverse (their delta files applied), in
    the `current` schema (a segment written in an older one projected as Spark projects it). A segment on both
    sides is read once and gives only the rows its deletes on one side removed and not on the other; a segment
    whose rows no side keeps is not read. The segments are read in parallel (pyarrow decodes without the GIL).
    With `origins`, each side has an `ORIGIN` column too: where in that side's segments each row was read."""
    schema = pa.schema([(c.name, arrow_type(c.type)) for c in current])
    if origins:
        schema = schema.append(pa.field(ORIGIN, pa.int64()))
    theirs = {s.id: s for s in after}
    ours = {s.id for s in before}
    place = {id(s): i for i, s in enumerate(before)} | {id(s): i for i, s in enumerate(after)}

    def marked(rows: pa.Table, segment: SegmentRead, keep: np.ndarray) -> pa.Table:
        rows = _kept(rows, keep)
        if not origins:
            return rows
        at = (np.int64(place[id(segment)]) << np.int64(32)) + np.flatnonzero(keep).astype(np.int64)
        return rows.append_column(ORIGIN, pa.array(at, pa.int64()))

    jobs = [(s, theirs.get(s.id)) for s in before] + [(None, s) for s in after if s.id not in ours]

    def read(pair: tuple[SegmentRead | None, SegmentRead | None]) -> tuple[pa.Table | None, pa.Table | None]:
        b, a = pair
        segment = b or a
        filesystem, path = arrow_filesystem(warehouse.uri(segment.path))
        names = [c.name for c in segment.columns]
        if b is None or a is None:  # on one side only: every live row
            rows = pq.read_table(path, columns=names, filesystem=filesystem).select(names)
            rows = projected_arrow(rows, segment.columns, current)
            rows = marked(rows, segment, ~_deleted(warehouse, segment.deltas, rows.num_rows))
            return (rows, None) if b is not None else (None, rows)
        source = pq.ParquetFile(path, filesystem=filesystem)
        gone_after, gone_before = (_deleted(warehouse, s.deltas, source.metadata.num_rows) for s in (a, b))
        only_before, only_after = gone_after & ~gone_before, gone_before & ~gone_after
        if not only_before.any() and not only_after.any():
            return None, None
        rows = projected_arrow(source.read(columns=names).select(names), segment.columns, current)
        return marked(rows, b, only_before), marked(rows, a, only_after)

    if len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1)) as pool:
            parts = list(pool.map(read, jobs))
    else:
        parts = [read(job) for job in jobs]
    sides = []
    for side in (0, 1):
        tables = [part[side] for part in parts if part[side] is not None]
        sides.append(pa.concat_tables(tables) if tables else schema.empty_table())
    return sides[0], sides[1]


def _kept(rows: pa.Table, keep: np.ndarray) -> pa.Table:
    return rows if keep.all() else rows.filter(pa.array(keep))


def _deleted(warehouse: Warehouse, deltas: Sequence[str], rows: int) -> np.ndarray:
    gone = np.zeros(rows, dtype=bool)
    if deltas:
        gone[deleted_positions(warehouse, deltas).to_numpy()] = True
    return gone


@dataclass
class Changes:
    """The changed rows of a table, found and counted but laid out (as `diff_rows`'s table) only on request: a page
    is laid out from its own rows, the whole diff only to be kept. `rows(offset, limit)` is the slice of the whole
    diff, the same rows in the same order and layout."""

    counts: dict[str, int]
    total: int
    _rows: Callable[[int, int], pa.Table]

    def rows(self, offset: int, limit: int) -> pa.Table:
        offset = max(0, min(offset, self.total))
        return self._rows(offset, max(0, min(limit, self.total - offset)))

    def table(self) -> pa.Table:
        return self.rows(0, self.total)


def changes_of(before: pa.Table, after: pa.Table, key: Sequence[str]) -> Changes:
    """The changed rows of `before` to `after` (see `diff_rows`), counted, not yet laid out. An `ORIGIN` column is
    carried beside each row (`b:_origin`, `a:_origin`), not compared: a keyless row held n times more on one side
    carries the origin of the last of its copies there (the newest segment)."""
    names = [n for n in before.column_names if n != ORIGIN]
    if key and _one_integer_key(before, after, list(key)):
        return _by_integer_key(before, after, key[0], names)
    if key:
        return _laid_out(_by_key(before, after, list(key), names))
    return _as_multisets(before, after, names)


def diff_rows(before: pa.Table, after: pa.Table, key: Sequence[str]) -> pa.Table:
    """The changed rows: a `_change` column, then every column before (`b:<name>`) and after (`a:<name>`), null on
    the side a row is not on. Ordered by key (a keyed table) or by change then row values (one without)."""
    return changes_of(before, after, key).table()


def _laid_out(diff: pa.Table) -> Changes:
    return Changes(counts_of(diff), diff.num_rows, lambda offset, limit: diff.slice(offset, limit))


def _changes_column(codes: np.ndarray, labels: Sequence[str]) -> pa.Array:
    return pc.cast(pa.DictionaryArray.from_arrays(pa.array(codes, pa.int8()), pa.array(labels)), pa.string())


def _layout(change: pa.Array, before: pa.Table, after: pa.Table) -> pa.Table:
    columns: dict[str, Any] = {CHANGE: change}
    columns |= {_BEFORE + n: before.column(n) for n in before.column_names}
    columns |= {_AFTER + n: after.column(n) for n in after.column_names}
    return pa.table(columns)


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
    if np.array_equal(bks, aks):  # the same keys (every row updated, say): no search
        every = np.arange(len(bks), dtype=np.int64)
        return (every if border is None else border), (every if aorder is None else aorder)
    at = np.minimum(np.searchsorted(aks, bks), len(aks) - 1)
    found = aks[at] == bks
    bi, ai = np.nonzero(found)[0], at[found]
    return (bi if border is None else border[bi]), (ai if aorder is None else aorder[ai])


def _taken(rows: pa.Table, positions: np.ndarray) -> pa.Table:
    if len(positions) == rows.num_rows and np.array_equal(positions, np.arange(rows.num_rows)):
        return rows  # every row, in order: no copy
    return rows.take(pa.array(positions))


def _taken_values(values: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """`values[positions]`, without the copy when the positions are every one in order (every row updated)."""
    every = len(positions) == len(values) and _sorted(positions)  # unique positions, ascending: every one in order
    return values if every else values[positions]


def _at(rows: pa.Table, positions: np.ndarray) -> pa.Table:
    """The rows at `positions`, a row of nulls where a position is _NONE."""
    first = int(positions[0]) if len(positions) else 0
    if first >= 0 and len(positions) and positions[-1] - first == len(positions) - 1 and _sorted(positions):
        return rows.slice(first, len(positions))  # a run of rows (positions are unique): no copy
    return rows.take(pa.array(positions, mask=positions == _NONE))


def _by_integer_key(before: pa.Table, after: pa.Table, key: str, names: list[str]) -> Changes:
    """The common case (one integer key column) with numpy's sorted searches instead of a hash join: a million
    keys a side in a fraction of the join's time, and no copy of rows that need none. The changed rows are kept as
    positions on each side in key order; a page takes only its own rows."""
    bk, ak = before.column(key).to_numpy(), after.column(key).to_numpy()
    bi, ai = _matches(bk, ak)
    only_before, only_after = np.ones(len(bk), dtype=bool), np.ones(len(ak), dtype=bool)
    only_before[bi], only_after[ai] = False, False
    old, new = _taken(before, bi), _taken(after, ai)
    differs = np.zeros(len(bi), dtype=bool)
    for name in names:
        if name == key:  # matched by it: equal
            continue
        b, a = old.column(name), new.column(name)
        cell = pc.or_kleene(pc.fill_null(pc.not_equal(b, a), False), pc.not_equal(pc.is_null(b), pc.is_null(a)))
        differs |= cell.to_numpy(zero_copy_only=False)
    updated_b, updated_a = bi[differs], ai[differs]
    deleted, inserted = np.nonzero(only_before)[0], np.nonzero(only_after)[0]
    sizes = [len(updated_b), len(deleted), len(inserted)]
    none = np.full(max(sizes), _NONE, dtype=np.int64)
    b_at = np.concatenate([updated_b, deleted, none[: sizes[2]]]).astype(np.int64, copy=False)
    a_at = np.concatenate([updated_a, none[: sizes[1]], inserted]).astype(np.int64, copy=False)
    codes = np.repeat(np.array([0, 1, 2], dtype=np.int8), sizes)
    keys = np.concatenate([_taken_values(bk, updated_b), bk[deleted], ak[inserted]])
    order = None if _sorted(keys) else np.argsort(keys, kind="stable")

    def rows(offset: int, limit: int) -> pa.Table:
        chosen = slice(offset, offset + limit) if order is None else order[offset : offset + limit]
        change = _changes_column(codes[chosen], [UPDATE, DELETE, INSERT])
        return _layout(change, _at(before, b_at[chosen]), _at(after, a_at[chosen]))

    counts = {INSERT: sizes[2], UPDATE: sizes[0], DELETE: sizes[1]}
    return Changes(counts, sum(sizes), rows)


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
    every = before.column_names  # the compared columns and any carried one
    result = joined.select([_BEFORE + n for n in every] + [_AFTER + n for n in every] + keys)
    result = result.append_column(CHANGE, change).filter(keep)
    result = result.sort_by([(k, "ascending") for k in keys]).drop_columns(keys)
    return result.select([CHANGE, *[_BEFORE + n for n in every], *[_AFTER + n for n in every]])


def _as_multisets(before: pa.Table, after: pa.Table, names: list[str]) -> Changes:
    """Rows counted on each side by grouping on every column; a page sorts only the rows it needs (the first k of
    each change by value), and a row held n times more on one side is laid out n times."""
    (deleted, gone), (added, come) = _counted(before, after, names)
    groups = [(DELETE, deleted, gone), (INSERT, added, come)]  # in the diff's order ("delete" < "insert")
    nulls = {n: pa.nulls(0, before.schema.field(n).type) for n in before.column_names}

    def rows(offset: int, limit: int) -> pa.Table:
        parts, start = [], 0
        for change, values, times in groups:
            size = int(times.sum())
            low, high = max(offset - start, 0), min(offset + limit - start, size)
            start += size
            if low >= high:
                continue
            first = _first_by_value(values.select(names), min(high, values.num_rows))  # each row at least once: enough
            chosen = values.take(pa.array(np.repeat(first, times[first])[low:high]))
            empty = pa.table({n: pa.nulls(chosen.num_rows, c.type) for n, c in nulls.items()})
            sides = (chosen, empty) if change == DELETE else (empty, chosen)
            parts.append(_layout(pa.array([change] * chosen.num_rows, pa.string()), *sides))
        if not parts:
            return _layout(pa.array([], pa.string()), pa.table(nulls), pa.table(nulls))
        return pa.concat_tables(parts)

    total = [int(times.sum()) for _, _, times in groups]
    return Changes({INSERT: total[1], UPDATE: 0, DELETE: total[0]}, sum(total), rows)


def _row_codes(before: pa.Table, after: pa.Table, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """One integer per row, equal exactly when two rows are equal in every column (nulls equal to nulls): integer
    columns by value, strings, dates and the like by their index in one dictionary of both sides. None when a
    column is of a type without an exact code here (floats: NaN and -0.0), or the codes do not fit in 62 bits."""
    rows = before.num_rows + after.num_rows
    codes, span = np.zeros(rows, dtype=np.int64), 1
    for name in names:
        column = pa.chunked_array(
            before.column(name).chunks + after.column(name).chunks, before.schema.field(name).type
        )
        kind = column.type
        if pa.types.is_integer(kind) and kind != pa.uint64():
            nulls = column.null_count > 0
            valid = pc.is_valid(column).to_numpy(zero_copy_only=False) if nulls else None
            values = (pc.fill_null(column, 0) if nulls else column).to_numpy().astype(np.int64, copy=False)
            present = values if valid is None else values[valid]
            low, high = (int(present.min()), int(present.max())) if len(present) else (0, 0)
            width = high - low + 2
            if span * width >= 2**62:
                return None
            code = values - (low - 1) if valid is None else np.where(valid, values - (low - 1), 0)
        elif any(test(kind) for test in _CODED_BY_DICTIONARY):
            encoded = pc.dictionary_encode(column.combine_chunks())
            width = len(encoded.dictionary) + 1
            if span * width >= 2**62:
                return None
            code = pc.fill_null(encoded.indices.cast(pa.int64()), -1).to_numpy() + 1
        else:
            return None
        codes, span = codes * width + code, span * width
    return codes[: before.num_rows], codes[before.num_rows :]


_CODED_BY_DICTIONARY = (
    pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary, pa.types.is_boolean,
    pa.types.is_date, pa.types.is_timestamp, pa.types.is_time, pa.types.is_decimal,
)  # fmt: skip


def _distinct(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct codes in order, the position of the last row holding each, and how many rows hold it."""
    order = None if _sorted(codes) else np.argsort(codes, kind="stable")
    ordered = codes if order is None else codes[order]
    starts = (
        np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]])) if len(ordered) else np.empty(0, np.int64)
    )
    held = np.diff(np.append(starts, len(ordered)))
    last = starts + held - 1
    return ordered[starts], (last if order is None else order[last]), held


def _counted(before: pa.Table, after: pa.Table, names: list[str]) -> list[tuple[pa.Table, np.ndarray]]:
    """The distinct rows held more often before (and how many more times), and those held more often after."""
    coded = _row_codes(before, after, names)
    if coded is None:  # grouping on every column
        carried = ORIGIN in before.column_names
        sides = []
        for rows, sign in ((before, -1), (after, 1)):
            signed = rows.select(names).append_column("_s", pa.array(np.full(rows.num_rows, sign, dtype=np.int64)))
            if carried:  # each side's origin in a column of its own: a group takes the newest of the side it is on
                none = pa.nulls(rows.num_rows, pa.int64())
                own = rows.column(ORIGIN)
                signed = signed.append_column("_ob", own if sign < 0 else none)
                signed = signed.append_column("_oa", none if sign < 0 else own)
            sides.append(signed)
        aggregates = [("_s", "sum")] + ([("_ob", "max"), ("_oa", "max")] if carried else [])
        counted = pa.concat_tables(sides).group_by(names, use_threads=False).aggregate(aggregates)
        counts = counted.column("_s_sum").to_numpy()
        found = []
        for more, times, origin in ((counts < 0, -counts, "_ob_max"), (counts > 0, counts, "_oa_max")):
            distinct = counted.select(names + ([origin] if carried else [])).filter(pa.array(more))
            if carried:
                distinct = distinct.rename_columns([*names, ORIGIN])
            found.append((distinct, times[more]))
        return found
    (b_values, b_at, b_held), (a_values, a_at, a_held) = (_distinct(codes) for codes in coded)
    if np.array_equal(b_values, a_values):
        b_theirs, a_theirs = a_held, b_held
    else:  # how often the other side holds each distinct row: one sorted search
        where = np.minimum(np.searchsorted(a_values, b_values), max(len(a_values) - 1, 0))
        matched = a_values[where] == b_values if len(a_values) else np.zeros(len(b_values), dtype=bool)
        b_theirs = np.zeros(len(b_values), dtype=np.int64)
        b_theirs[matched] = a_held[where[matched]]
        a_theirs = np.zeros(len(a_values), dtype=np.int64)
        a_theirs[where[matched]] = b_held[matched]
    found = []
    for rows, at, held, theirs in ((before, b_at, b_held, b_theirs), (after, a_at, a_held, a_theirs)):
        more = held > theirs
        found.append((_taken(rows, at[more]), (held - theirs)[more]))
    return found


def _first_by_value(rows: pa.Table, k: int) -> np.ndarray:
    """The positions of the first `k` rows in the order of their values (every column ascending, nulls last)."""
    keys = [(n, "ascending") for n in rows.column_names]
    if k * 8 < rows.num_rows:
        try:
            chosen = pc.select_k_unstable(rows, k, sort_keys=keys)
            return pc.take(chosen, pc.sort_indices(rows.take(chosen), sort_keys=keys)).to_numpy()
        except pa.ArrowNotImplementedError:  # a type select_k does not order: sort all
            pass
    return pc.sort_indices(rows, sort_keys=keys).to_numpy()[:k]


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


def kept_write(path: Path, diff: pa.Table, metadata: dict[str, str], counts: dict[str, int] | None = None) -> None:
    """Keep a diff as an Arrow file (written aside, then renamed: a reader never sees half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {**metadata, "counts": json.dumps(counts if counts is not None else counts_of(diff))}
    table = diff.replace_schema_metadata({**(diff.schema.metadata or {}), **metadata})
    handle, aside = tempfile.mkstemp(dir=path.parent, suffix=".part")
    os.close(handle)
    try:
        with pa.OSFile(aside, "wb") as sink, ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=65536)
        os.replace(aside, path)
    finally:
        if os.path.exists(aside):
            os.remove(aside)


_keeper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="row-diff-keep")
_keeping: dict[str, Future] = {}
_keeping_lock = threading.RLock()


def kept_write_later(path: Path, changes: Changes, metadata: dict[str, str]) -> Future:
    """Lay out and keep the whole diff in a thread of this process, so that the page that found it is answered
    first. A thread, not a task: the rows are in this process's memory, and the file is a cache (if the process
    ends first, the next view computes the diff again). `kept_read` of the same path in this process waits for it;
    another process computes its own (the same file: commits never change)."""
    name = str(path)

    def keep() -> None:
        try:
            kept_write(path, changes.table(), metadata, counts=changes.counts)
        except Exception:  # a cache: the next view of the pair computes it again
            logger.exception("Keeping the row diff %s failed", path)

    def forget(future: Future) -> None:
        with _keeping_lock:
            if _keeping.get(name) is future:
                del _keeping[name]

    with _keeping_lock:
        future = _keeper.submit(keep)
        _keeping[name] = future
        future.add_done_callback(forget)
    return future


def kept_read(path: Path) -> pa.Table | None:
    """A kept diff, memory-mapped (a page reads only its own rows), or None; waits for its writing under way in
    this process (`kept_write_later`)."""
    with _keeping_lock:
        pending = _keeping.get(str(path))
    if pending is not None:
        pending.result()
    try:
        return ipc.open_file(pa.memory_map(str(path), "r")).read_all()
    except (FileNotFoundError, pa.ArrowInvalid):
        return None
