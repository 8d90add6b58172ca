"""Who made the values a ref holds (docs/provenance.md): the blame of a table at a ref and the
history of one key, derived from the history LakeUI keeps (file entries, operations, merge records), never from a
second per-row record that could drift from the data.

A keyed table's cell: the ref's first-parent history is walked from the newest commit back, commit by commit (only
those with a file entry of the table; a compaction is skipped, it changes no row), each commit's rows against its
parent's read as the change feed reads them (`row_diff`: only the segments the commit added, removed or changed the
deletes of). The first commit met that set a cell of a key still unsettled (an insert sets every cell, an update
those it changed) wrote the value the ref holds. When that commit is a merge, its source's history is walked the
same way for those cells (merges of merges too): the source's commit that last set the cell to the value the ref
holds wrote it, and the merge is a step of the chain that brought it; a value no source commit holds (a resolution
made it) names the merge. A cherry-pick names the commit it applied, the pick a step of the chain; a restore, a
revert and any other commit name themselves. The walk stops once every cell of the page's keys is settled.

A keyless table's row: the commit that made live the segment holding it (followed into a merge's source, as the
change feed does, `files_made`).

A cell a resolution settled (a merge's conflicting key or cell: source_wins, target_wins, a column rule) names it
and who chose it (`Writer.settled`), read from the merge's report and audit log by the app that keeps merges
(`settled_reader_register`); a merge that kept the target's value changes no file of the key, so each walked
history's merges are asked as well (`_Settlements`).

A keyed table is read by its key columns: a state's live keys in key order give its pages, and only the page's rows
are read whole; a commit's changes are read for the asked keys only. What never changes (a file's contents, a
commit's files and file changes, a table's version at a commit, a state's ordered keys) is kept per process
(`_Kept`), so a second question about a table reads little (docs/benchmarks.md#provenance).
"""

import bisect
import itertools
import json
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from django.conf import settings
from django.db import connection

from catalog_app.engine import row_diff
from catalog_app.engine.pruning import Bounds, segment_bounds
from catalog_app.engine.reads import READ_ERRORS, projected_arrow
from catalog_app.engine.segments import DELTA_POSITIONS, INLINE_VALUES, Column, SegmentRead
from catalog_app.engine.type_names import key_id
from catalog_app.engine.types import arrow_type, json_value
from catalog_app.engine.warehouse import Warehouse, arrow_filesystem
from catalog_app.models import Commit, DataFile, FileEntry, ObjectKind, ObjectVersion, Operation, SchemaVersion
from catalog_app.selectors.changes import files_made
from catalog_app.selectors.merge_links import commit_links_of
from catalog_app.selectors.objects import object_by_id, object_find, object_get
from catalog_app.selectors.refs import Chain, ResolvedRef, commit_chain
from catalog_app.selectors.table_files import (
    NO_FILES,
    TableFiles,
    stats_decoded,
    table_columns,
    tables_file_rows,
    tables_files,
)
from lakeui.errors import ApplicationError, NotFoundError

MERGE_DEPTH = 16  # merges of merges followed into their sources, at most
MAX_PAGE_SIZE = 500
BATCH = 64  # commits of a chain read at first (then four times as many each time)
_LOW = np.int64(0xFFFFFFFF)
MESSAGE_UNREADABLE = "The web process cannot read or compare the files of {table}; its blame is not served yet."


class _Kept:
    """Values kept per process, by name, the least recently used going beyond `budget` in all (a value weighs what
    `put` says; one heavier than half the budget is not kept). For what never changes: a file's contents, a
    commit's state."""

    def __init__(self, budget: int):
        self.budget, self.weight, self.items, self.lock = budget, 0, {}, threading.Lock()

    def get(self, name: Any) -> Any:
        with self.lock:
            found = self.items.pop(name, None)
            if found is not None:
                self.items[name] = found
            return None if found is None else found[0]

    def put(self, name: Any, value: Any, weight: int) -> Any:
        if weight > self.budget // 2:
            return value
        with self.lock:
            if name not in self.items:
                self.items[name] = (value, weight)
                self.weight += weight
            while self.weight > self.budget:
                self.weight -= self.items.pop(next(iter(self.items)))[1]
        return value


# Kept per process (files never change, nor does a commit's state): the positions each delta file lists, each
# segment's keys and whole rows, and each table state's live keys in key order (its pages).
_DELETES = _Kept(10_000_000)  # positions
_SEGMENT_KEYS = _Kept(8_000_000)  # keys
_SEGMENT_ROWS = _Kept(3_000_000)  # rows
_ORDERS = _Kept(4_000_000)  # keys
_SEGMENT_SETS = _Kept(1_000_000)  # keys of small segments as Python sets (what a walk asks of each commit)
SET_ROWS = 10_000
FRONT = 5_000  # a page ending within the first FRONT keys is found by the keys' bounds, not by ordering every key
PREFIX_BATCH = 16_384  # rows read at a time from the beginning of a large segment
FEW_KEYS = 8  # keys looked for one by one in a segment's key column (more: in a set)
_LARGE = frozenset({None})  # kept for a segment of more than SET_ROWS rows: no set of its keys
_FILES = _Kept(200_000)  # files of tables' states
_TOUCHES = _Kept(200_000)  # what commits did to tables' files (weighed by the files)
READ_THREADS = 4
COMMIT_FIELDS = ("id", "catalog_id", "seq", "line_id", "parent_id", "merge_parent_id")  # what a walk reads of each


def kept_clear() -> None:
    """Forget everything kept per process (a benchmark's cold start)."""
    for kept in (_DELETES, _SEGMENT_KEYS, _SEGMENT_SETS, _SEGMENT_ROWS, _ORDERS, _FILES, _TOUCHES, _TABLES, _FORKS):
        with kept.lock:
            kept.items.clear()
            kept.weight = 0


_FORKS = _Kept(100_000)  # line id -> the forks of its ancestors (a line's parentage never changes)


def _chain_of(commit: Commit) -> Chain:
    """`commit_chain`, the forks of the commit's line kept per process: a walk asks for the chain of each commit it
    reads, most of them on the same line."""
    forks = _FORKS.get(commit.line_id)
    if forks is None:
        forks = _FORKS.put(commit.line_id, commit_chain(commit).segments[1:], 1)
    return Chain(commit=commit, segments=((commit.line_id, commit.seq), *forks))


@contextmanager
def _readable(table_name: str) -> Iterator[None]:
    """A file the web process cannot read or compare answers 503 `blame_unreadable`, naming the table."""
    try:
        yield
    except (*READ_ERRORS, NotImplementedError) as error:
        raise ApplicationError(
            "blame_unreadable", MESSAGE_UNREADABLE.format(table=table_name), status=503,
            details={"table": table_name, "error": str(error)[:300]},
        ) from error  # fmt: skip


def _parallel(action: Callable, items: list) -> list:
    """`action` of each item, read on a few threads when there are several (pyarrow reads without the GIL)."""
    if len(items) < 2:
        return [action(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(len(items), READ_THREADS)) as pool:
        return list(pool.map(action, items))


def _files_on(chain: Chain, table_id: uuid.UUID) -> TableFiles:
    """The table's live files at the chain's commit (`tables_file_rows`), kept per process by commit."""
    name = (chain.commit.id, table_id)
    found = _FILES.get(name)
    if found is None:
        found = _kept_files(name, tables_file_rows(chain, table_ids=[table_id]).get(table_id, NO_FILES))
    return found


def _kept_files(name: Any, found: TableFiles) -> TableFiles:
    """`found` kept by `name`, and the positions of its small delete files, which its catalog rows hold: no file
    is read for them."""
    _FILES.put(name, found, len(found.segments) + sum(len(d) for d in found.deltas.values()) + 1)
    for path, positions in found.inline_positions().items():
        if _DELETES.get(path) is None:
            _DELETES.put(path, np.array(positions, np.int64), len(positions) + 1)
    return found


def _deleted_by(warehouse: Warehouse, deltas: Iterable[str]) -> np.ndarray:
    """The positions these delta files list, each file read once per process."""
    deltas = list(deltas)
    found = {d: _DELETES.get(d) for d in deltas}
    missing = [d for d, positions in found.items() if positions is None]

    def read(delta: str) -> np.ndarray:
        filesystem, path = arrow_filesystem(warehouse.uri(delta))
        column = pq.ParquetFile(path, filesystem=filesystem).read(columns=["pos"]).column(0)
        return column.combine_chunks().to_numpy(zero_copy_only=False).astype(np.int64)

    for delta, positions in zip(missing, _parallel(read, missing), strict=True):
        found[delta] = _DELETES.put(delta, positions, len(positions) + 1)
    return np.concatenate([found[d] for d in deltas]) if deltas else np.zeros(0, np.int64)


def _read_projected(
    warehouse: Warehouse, segment: SegmentRead, current: list[Column], *, upto: int | None = None
) -> tuple[pa.Table, bool]:
    """The rows of a segment's file (its deletes not applied), of the `current` columns only, projected onto them
    as `reads.projected_arrow` does (a column by its id; one the segment lacks as its default), and whether they are
    all of its rows. With `upto`, a large file is read only as far as the batch holding that position, when that
    is well short of its end (the first page of a table loaded in key order reads a few of its million rows).
    Read with a ParquetFile: a small file costs a third of `pq.read_table`'s."""
    written = {c.id: c for c in segment.columns}
    names = [written[c.id].name for c in current if c.id in written]
    filesystem, path = arrow_filesystem(warehouse.uri(segment.path))
    file = pq.ParquetFile(path, filesystem=filesystem)
    whole = upto is None or file.metadata.num_rows <= SET_ROWS or upto >= file.metadata.num_rows // 4
    if whole:
        rows = file.read(columns=names)
    else:
        batches = []
        for batch in file.iter_batches(batch_size=PREFIX_BATCH, columns=names):
            batches.append(batch)
            upto -= batch.num_rows
            if upto < 0:
                break
        rows = pa.Table.from_batches(batches)
    return projected_arrow(rows.select(names), segment.columns, current), whole


def _live(warehouse: Warehouse, read: SegmentRead, rows: int) -> np.ndarray:
    """Which of a segment's `rows` rows its delta files leave live."""
    live = np.ones(rows, dtype=bool)
    if read.deltas:
        gone = _deleted_by(warehouse, read.deltas)
        live[gone[gone < rows]] = False
    return live


# (commit ids, table id) -> {commit: {key_id: {column or "*": settlement}}} for those a merge, pick or revert made
# with a resolution that settled keys of the table (merge_app.selectors.provenance.cells_settled), registered by the
# app that keeps merges: catalog_app never imports it. With none registered, no cell names a resolution.
SettledReader = Callable[[list[str], str], dict[str, dict[str, dict[str, dict]]]]
_SETTLED_READERS: list[SettledReader] = []


def settled_reader_register(reader: SettledReader) -> SettledReader:
    if reader not in _SETTLED_READERS:
        _SETTLED_READERS.append(reader)
    return reader


def _settled_of(commit_ids: Iterable[str], table_id: uuid.UUID) -> dict[str, dict[str, dict[str, dict]]]:
    wanted = sorted(set(commit_ids))
    found: dict[str, dict] = {}
    if wanted:
        for reader in _SETTLED_READERS:
            found |= reader(wanted, str(table_id))
    return found


@dataclass(frozen=True)
class Writer:
    """Who wrote one cell (or row): the commit, and the merges and picks that brought it to the ref, the outermost
    (nearest the ref) first; `resolution` when a merge made the value itself; `settled` the resolution of the merge
    (or pick) nearest the ref that settled this cell in a conflict, with who chose it."""

    commit: str | None
    via: tuple[str, ...] = ()
    resolution: bool = False
    settled: dict | None = field(default=None, hash=False)


@dataclass
class _Touch:
    """What one commit did to the table's files: the statistics of the segments it made live (added, or a delete
    file of it taken away) and of those it took rows from (removed, or a delete file of it added), the segments it
    added, and whether it took a delete file away (or added a segment whose schema is not known: either may have
    made any row live)."""

    commit: Commit
    compaction: bool = False  # its only operation on the table: it changes no row
    live: list[dict] = field(default_factory=list)
    taken: list[dict] = field(default_factory=list)
    added: list[SegmentRead] = field(default_factory=list)
    unhid: bool = False
    segments: frozenset[uuid.UUID] = frozenset()  # those it removed, or added or removed delete files of


@dataclass
class _Table:
    """The table blamed: its id, name, current columns (older files are read projected to them) and key."""

    version: ObjectVersion
    name: str
    columns: list[Column]
    key: list[str]
    warehouse: Warehouse
    _diffs: dict[str, dict] = field(default_factory=dict)  # per commit, what it did to each key asked (or None)
    _files: dict[tuple, TableFiles] = field(default_factory=dict)  # per commit and segments, the table's files
    _plain_keys: set[tuple] = field(default_factory=set)  # keys found plain (`_plain`)
    _present: dict[str, bool] = field(default_factory=dict)  # per commit, whether the table is live there

    @property
    def table_id(self) -> uuid.UUID:
        return self.version.object_id

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def files_at(
        self, commit: Commit, segments: frozenset[uuid.UUID] | None = None, positions: dict | None = None
    ) -> TableFiles:
        """The table's live files at `commit` (of these `segments` only, and their delete files; of the segments
        `positions` names, only the delete files that may list one of its positions), NO_FILES where the table does
        not exist or was dropped, kept per process."""
        listed = None if positions is None else tuple(sorted((s, tuple(sorted(p))) for s, p in positions.items()))
        name = ("live", commit.id, self.table_id, segments, listed)
        if name not in self._files:
            found = _FILES.get(name)
            if found is None:
                chain = _chain_of(commit)
                if commit.id not in self._present:
                    version = object_by_id(chain, object_id=self.table_id)
                    self._present[commit.id] = version is not None and not version.dropped
                found = NO_FILES
                if self._present[commit.id]:
                    files = tables_file_rows(chain, table_ids=[self.table_id], segments=segments, positions=positions)
                    found = files.get(self.table_id, NO_FILES)
                _kept_files(name, found)
            self._files[name] = found
        return self._files[name]

    def _changed(self, touch: "_Touch", keys: list[tuple]) -> tuple[TableFiles, TableFiles]:
        """The segments a commit removed, added or changed the deletes of, before and after it, each side with of
        their delete files only those that may list a row of `keys` (its positions found by the segments' key
        columns): a thousand small delete files of a large segment are not listed to tell whether one key changed."""
        commit, changed = touch.commit, touch.segments
        made = changed | {uuid.UUID(r.id) for r in touch.added}
        if not commit.parent_id:
            return NO_FILES, self.files_at(commit, made)
        bare = self.files_at(commit.parent, changed, positions={s: () for s in changed})
        reads = TableFiles([s for s in bare.segments if self.may_set([s.stats or {}], keys)], {}).reads()
        positions = {s.id: () for s in bare.segments}  # a segment live only after the commit: all its delete files
        for read, held in zip(reads, self.segment_keys(reads), strict=True):
            positions[uuid.UUID(read.id)] = np.flatnonzero(_matching(held, self.key, keys)).tolist()
        return self.files_at(commit.parent, changed, positions), self.files_at(commit, made, positions)

    def diff(self, touch: "_Touch", keys: Iterable[tuple]) -> dict[tuple, tuple[str, dict | None, set[str]]]:
        """What a commit (`touch`) did to the rows of `keys` (against its first parent), by key: (change, the row
        after or None, the columns it set). Only the segments the commit added, removed or changed the deletes of
        are read (as the change feed reads a commit), and of those only the rows of `keys`: their key columns first
        (kept per process), then the rows of the keys found. A commit that only added segments inserted their rows:
        neither side's files are listed. Each key's answer is kept for the request."""
        commit = touch.commit
        keys = list(dict.fromkeys(keys))
        known = self._diffs.setdefault(commit.id, {})
        missing = [k for k in keys if k not in known]
        if missing:
            if touch.taken or touch.unhid:  # the segments it changed, before and after it (the rest are the same)
                earlier, later = self._changed(touch, missing)
                removed, added = later.changes_since(earlier)
                live = {s.id for s in later.segments}
                sides = [TableFiles(removed, earlier.deltas), TableFiles([s for s in removed if s.id in live] + added,
                                                                          later.deltas)]  # fmt: skip
                before, after = (
                    TableFiles([s for s in f.segments if self.may_set([s.stats or {}], missing)], f.deltas).reads()
                    for f in sides
                )  # fmt: skip
            else:  # touch.live holds the stats of touch.added's segments
                before = []
                after = [r for r, stats in zip(touch.added, touch.live, strict=True) if self.may_set([stats], missing)]
            sides = []
            with _readable(self.name):
                for reads in (before, after):
                    found = self.live_keys(reads, missing)
                    rows = self.rows_of(reads, found.column(row_diff.ORIGIN).to_numpy())
                    sides.append(rows.drop_columns([row_diff.ORIGIN]))
                changes = row_diff.changes_of(*sides, self.key)
            found = _by_key(changes.rows(0, changes.total), self.key, self.names)
            for key in missing:
                known[key] = found.get(key)
        return {k: known[k] for k in keys if known[k] is not None}

    def touching(self, chain: Chain) -> Iterator["_Touch"]:
        """The commits of the chain with a file entry of the table, newest first, compactions left out; each with
        what it did to the table's files (`_Touch`, kept per process by commit: a commit never changes)."""
        history = _History(self, chain)
        for place in range(len(history)):
            touch = history[place]
            if not touch.compaction:
                yield touch

    def touched(self, ids: list[str]) -> dict[str, "_Touch"]:
        """What each of these commits did to the table's files, by commit id: kept per process, the rest read."""
        found = {c: _TOUCHES.get((c, self.table_id)) for c in ids}
        missing = [c for c, touch in found.items() if touch is None]
        if missing:
            for touch in self._touches(missing):
                weight = len(touch.live) + len(touch.taken) + 1
                found[touch.commit.id] = _TOUCHES.put((touch.commit.id, self.table_id), touch, weight)
        return found

    def setting(self, chain: Chain, key: tuple) -> set[str] | None:
        """The commits of the chain that may have made a row of `key` live, in one query: those that added a
        segment whose catalog row does not rule the key out (a small segment keeps its keys' values: one of them
        must be the key's), or took a delete file away. None where the key is not plain (`_plain`): any may have."""
        if not self._plain([key]):
            return None
        on_chain = " OR ".join("(e.line_id = %s AND e.seq <= %s)" for _ in chain.segments)
        held = " AND ".join("(NOT COALESCE(f.stats -> %s ? %s, false) OR f.stats -> %s -> %s @> %s::jsonb)"
                            for _ in self.key_ids)  # fmt: skip
        entry, data = FileEntry._meta.db_table, DataFile._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT DISTINCT e.commit_id FROM {entry} e JOIN {data} f ON f.id = e.file_id"
                f" WHERE e.table_id = %s AND ({on_chain})"
                f" AND ((e.removed AND f.kind = %s) OR (NOT e.removed AND f.kind = %s AND {held}))",
                [self.table_id, *(n for segment in chain.segments for n in segment), DataFile.Kind.DELTA,
                 DataFile.Kind.SEGMENT, *(p for c, v in zip(self.key_ids, key, strict=True)
                                          for p in (str(c), INLINE_VALUES, str(c), INLINE_VALUES, json.dumps([v])))],
            )  # fmt: skip
            return {row[0] for row in cursor.fetchall()}

    def _touches(self, ids: list[str]) -> list["_Touch"]:
        commits = Commit.objects.filter(id__any=ids).only(*COMMIT_FIELDS)  # a parent read only when compared with
        ops: dict[str, set[str]] = {}
        for commit_id, op in Operation.objects.filter(commit_id__any=ids, object_id=self.table_id).values_list(
            "commit_id", "op"
        ):
            ops.setdefault(commit_id, set()).add(op)
        touched = {c.id: _Touch(c, compaction=ops.get(c.id) == {Operation.Op.COMPACTION}) for c in commits}
        rows = _entries_of(ids, self.table_id)
        schemas = {row[6] for row in rows} - {None}  # each schema's columns read once, not once per file
        written_in = {
            schema_id: tuple(Column.from_dict(c) for c in columns or [])
            for schema_id, columns in SchemaVersion.objects.filter(id__in=schemas).values_list("id", "columns")
        }  # fmt: skip
        for commit_id, removed, file_id, kind, path, stats, schema_id, segment_id, segment_stats in rows:
            touch = touched[commit_id]
            columns = written_in.get(schema_id, ())
            if removed or kind == DataFile.Kind.DELTA:
                touch.segments |= {file_id if kind == DataFile.Kind.SEGMENT else segment_id}
            if kind == DataFile.Kind.SEGMENT and not removed:
                touch.live.append(stats or {})
                touch.added.append(SegmentRead(id=str(file_id), path=path, columns=columns))
                touch.unhid = touch.unhid or not columns  # its schema unknown here: the full diff reads it
            elif kind == DataFile.Kind.DELTA and removed:
                touch.live.append(segment_stats or {})
                touch.unhid = True
            else:
                touch.taken.append((stats if kind == DataFile.Kind.SEGMENT else segment_stats) or {})
        return list(touched.values())

    def sets_any(self, touch: "_Touch", keys: Iterable[tuple]) -> bool:
        """Whether the segments a commit added hold a row of one of `keys` (their key columns read, their deletes
        left out, so the answer only widens): a commit that inserted or updated a key wrote its row there. A
        commit that took a delete file away may have brought back any row: True."""
        keys = list(keys)
        if touch.unhid or not keys:
            return bool(keys)
        if not touch.added:
            return False
        segments = touch.added
        if self._plain(keys):
            # Small segments' keys as sets, a lookup per key and no Arrow call per commit: from their catalog rows
            # (touch.live holds the added segments' stats), else read and kept.
            inline = [self.inline_keys(stats) for stats in touch.live]
            unread = [r for r, found in zip(segments, inline, strict=True) if found is None]
            try:
                read = self.segment_sets(unread)
            except (*READ_ERRORS, NotImplementedError):
                return True
            if any(k in found for found in [*inline, *read] if found is not None for k in keys):
                return True
            segments = [r for r, found in zip(unread, read, strict=True) if found is None]
            if not segments:
                return False
        try:
            rows = self._segment_keys(segments)
        except (*READ_ERRORS, NotImplementedError):
            return True  # the full diff says what it can
        if len(self.key) == 1:
            try:
                wanted = pa.array([k[0] for k in keys], rows.schema.field(self.key[0]).type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
                return True
            return bool(pc.any(pc.is_in(rows.column(self.key[0]), value_set=wanted)).as_py())
        held = set(zip(*(rows.column(k).to_pylist() for k in self.key), strict=True))
        return any(k in held for k in keys)

    def inline_keys(self, stats: dict) -> frozenset | None:
        """The keys a small segment holds, from its statistics (`INLINE_VALUES`, engine.writes.inline_values), or
        None where they are not kept."""
        listed = [(stats.get(str(i)) or {}).get(INLINE_VALUES) for i in self.key_ids]
        return None if any(values is None for values in listed) else frozenset(zip(*listed, strict=True))

    @property
    def key_ids(self) -> list[int]:
        return [c.id for name in self.key for c in self.columns if c.name == name]

    def _plain(self, keys: list[tuple]) -> bool:
        """Whether the key's columns are integers or strings and `keys` hold such Python values, so that they
        compare as Python values with the values read (a timestamp given as text would not). A walk asks it of
        each commit for the same keys: those found plain are remembered for the request."""
        unknown = [key for key in keys if key not in self._plain_keys]
        if not unknown:
            return True
        types = [next(c.type for c in self.columns if c.name == name) for name in self.key]
        kinds = [str if t == "string" else int if t in ("byte", "short", "int", "long") else None for t in types]
        plain = None not in kinds and all(
            type(value) is kind for key in unknown for value, kind in zip(key, kinds, strict=True)
        )  # fmt: skip
        if plain:
            self._plain_keys.update(unknown)
        return plain

    def segment_sets(self, segments: list[SegmentRead]) -> list[frozenset | None]:
        """Per segment, its keys as a set of tuples, kept per process; None for a segment of more than SET_ROWS
        rows (compared in Arrow)."""
        ids = tuple((c.id, c.type) for name in self.key for c in self.columns if c.name == name)
        found = {r.id: _SEGMENT_SETS.get((r.id, ids)) for r in segments}
        missing = [r for r in segments if found[r.id] is None]
        if missing:
            for read, keys in zip(missing, self.segment_keys(missing), strict=True):
                held = _LARGE
                if keys.num_rows <= SET_ROWS:
                    held = frozenset(zip(*(keys.column(k).to_pylist() for k in self.key), strict=True))
                found[read.id] = _SEGMENT_SETS.put((read.id, ids), held, len(held) + 1)
        return [None if found[r.id] is _LARGE else found[r.id] for r in segments]

    def _segment_keys(self, segments: list[SegmentRead]) -> pa.Table:
        """The key columns of these segments' rows (deletes left out)."""
        tables = self.segment_keys(segments)
        return pa.concat_tables(tables) if tables else pa.table({})

    def segment_keys(self, segments: list[SegmentRead]) -> list[pa.Table]:
        """Per segment, the key columns of every row it holds, in its file's order (deletes left out), kept per
        process by segment: a file never changes, so a later page, key or commit reads none of them again."""
        columns = [next(c for c in self.columns if c.name == name) for name in self.key]
        ids = self._key_types
        kept = {r.id: _SEGMENT_KEYS.get((r.id, ids)) for r in segments}
        missing = list({r.id: r for r in segments if kept[r.id] is None}.values())

        def read(segment: SegmentRead) -> pa.Table:
            return _read_projected(self.warehouse, segment, columns)[0].rename_columns(self.key)

        for segment, keys in zip(missing, _parallel(read, missing), strict=True):
            kept[segment.id] = _SEGMENT_KEYS.put((segment.id, ids), keys, keys.num_rows + 1)
        return [kept[r.id] for r in segments]

    def live_keys(self, reads: list[SegmentRead], keys: Iterable[tuple] | None = None) -> pa.Table:
        """The key columns of the live rows of these segments (their deletes applied), with their `ORIGIN` (place
        in `reads` << 32 | position); with `keys`, only rows whose first key column is one of theirs, and only the
        delete files of the segments holding such a row are read."""
        tables = self.segment_keys(reads)
        if not tables:
            schema = pa.schema([(c.name, arrow_type(c.type)) for c in self.columns if c.name in self.key])
            return schema.empty_table().select(self.key).append_column(row_diff.ORIGIN, pa.array([], pa.int64()))
        sizes = np.array([t.num_rows for t in tables], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        every = pa.concat_tables(tables)
        if keys is None:
            at = np.flatnonzero(
                np.concatenate([_live(self.warehouse, r, int(n)) for r, n in zip(reads, sizes, strict=True)])
            )
        else:
            at = np.flatnonzero(_matching(every, self.key, keys))
            places = np.searchsorted(starts, at, side="right") - 1
            keep = np.ones(len(at), dtype=bool)
            for place in np.unique(places).tolist():
                if reads[place].deltas:
                    rows = places == place
                    gone = _deleted_by(self.warehouse, reads[place].deltas)
                    keep[rows] = ~np.isin(at[rows] - starts[place], gone)
            at = at[keep]
        places = np.searchsorted(starts, at, side="right") - 1
        origin = (places.astype(np.int64) << np.int64(32)) + (at - starts[places])
        if keys is not None:  # a few rows: taken from their segments (a take across every chunk costs more)
            parts = [tables[p].take(pa.array(at[places == p] - starts[p])) for p in np.unique(places).tolist()]
            found = pa.concat_tables(parts) if parts else every.slice(0, 0)
        else:
            found = every.take(pa.array(at, pa.int64()))
        return found.append_column(row_diff.ORIGIN, pa.array(origin, pa.int64()))

    def front(self, files: TableFiles, reads: list[SegmentRead], needed: int) -> pa.Table | None:
        """The first `needed` live keys of the state (`files`, read as `reads`) in key order, with their `ORIGIN`,
        without ordering every key: the segments are taken by the low bound of their key (its statistics), and
        none whose low bound is above the `needed`-th key found so far is read; of a segment, only its smallest
        keys are checked against its delete files, and only the delete files whose position bounds may list one
        of them are read. None when the key has several columns or is not an integer or a string (every key is
        then ordered)."""
        column = next(c for c in self.columns if c.name == self.key[0])
        if len(self.key) != 1 or column.type not in ("int", "long", "string"):
            return None
        stats = [((s.stats or {}).get(str(column.id)) or {}) for s in files.segments]
        lows = [found.get("min") for found in stats]
        best = pa.table({self.key[0]: pa.array([], arrow_type(column.type)), row_diff.ORIGIN: pa.array([], pa.int64())})
        parts, unsorted = [best], 0
        limit = None  # the `needed`-th key found so far
        for place in sorted(range(len(reads)), key=lambda i: (0,) if lows[i] is None else (1, lows[i])):
            if limit is not None and lows[place] is not None and lows[place] > limit:
                break  # this segment and those after it hold no key below the ones found
            if INLINE_VALUES in stats[place]:  # a small segment's keys, in file order, from its catalog row
                values = pa.chunked_array([pa.array(stats[place][INLINE_VALUES], best.schema[0].type)])
            else:
                values = self.segment_keys([reads[place]])[0].column(0)
            if limit is not None:
                values = pc.if_else(pc.less_equal(values, pa.scalar(limit, values.type)), values, None)
            deltas = files.deltas.get(files.segments[place].id, [])
            found = self._smallest_live(deltas, values, needed)
            origins = (np.int64(place) << np.int64(32)) + found
            parts.append(pa.table([values.take(found).cast(best.schema[0].type), origins], schema=best.schema))
            unsorted += len(found)
            if unsorted >= needed or limit is None:  # ordered again once as many keys as a page came in
                best = _smallest(parts, needed)
                parts, unsorted = [best], 0
                limit = best.column(0)[needed - 1].as_py() if best.num_rows == needed else None
        return _smallest(parts, needed)

    def _smallest_live(self, deltas: list, values: pa.ChunkedArray, needed: int) -> np.ndarray:
        """The positions of the smallest `needed` live keys among `values` (a segment's keys; a null is no
        candidate), in no order: the smallest few candidates are checked against the delete files, more while too
        few of them are live."""
        count = values.length() - values.null_count
        wanted = needed
        while True:
            if wanted < count:  # every candidate up to the wanted-th smallest key (ties at it included)
                edge = pc.select_k_unstable(values, k=wanted, sort_keys=[("dummy", "ascending")])
                high = pc.max(values.take(edge))
                mask = pc.less_equal(values, high)
            else:
                mask = pc.is_valid(values)
            at = np.flatnonzero(pc.fill_null(mask, False).to_numpy(zero_copy_only=False))
            live = at[~np.isin(at, self._deleted_among(deltas, at))]
            if len(live) >= needed or wanted >= count:
                order = np.argsort(values.take(live).to_numpy(zero_copy_only=False), kind="stable")
                return live[order[:needed]]
            wanted *= 4

    def _deleted_among(self, deltas: list, positions: np.ndarray) -> np.ndarray:
        """The positions a segment's delete files list, of those files only whose position bounds (their
        statistics, `engine.writes.delta_stats`) may hold one of `positions` (sorted)."""
        listed = []
        for delta in deltas:
            bound = (delta.stats or {}).get(DELTA_POSITIONS) or {}
            low, high = bound.get("min"), bound.get("max")
            if low is not None and high is not None:
                at = np.searchsorted(positions, low)
                if at >= len(positions) or positions[at] > high:
                    continue
            listed.append(delta.path)
        return _deleted_by(self.warehouse, listed)

    def live_count(self, files: TableFiles) -> int:
        """How many rows the state holds (`TableFiles.live_rows`, the delete files it reads kept per process)."""
        return files.live_rows(self.warehouse, lambda deltas: _deleted_by(self.warehouse, deltas))

    def rows_of(self, reads: list[SegmentRead], origins: np.ndarray) -> pa.Table:
        """The whole rows (the current columns) at these origins of `reads`, in their order, with `ORIGIN`. A
        segment's rows are read whole and kept per process (small segments and a few large ones)."""
        origins = np.asarray(origins, dtype=np.int64)
        places = origins >> np.int64(32)
        parts, order = [], []
        for place in np.unique(places).tolist():
            at = np.flatnonzero(places == place)
            positions = origins[at] & _LOW
            segment = self._segment_rows(reads[place], int(positions.max()))
            parts.append(segment.take(pa.array(positions)))
            order.append(at)
        if not parts:
            return (
                pa.schema([(c.name, arrow_type(c.type)) for c in self.columns])
                .empty_table()
                .append_column(row_diff.ORIGIN, pa.array([], pa.int64()))
            )
        rows = pa.concat_tables(parts).take(pa.array(np.argsort(np.concatenate(order), kind="stable")))
        return rows.append_column(row_diff.ORIGIN, pa.array(origins, pa.int64()))

    @property
    def _key_types(self) -> tuple[tuple[int, str], ...]:
        """The key columns' ids and types, which name a segment's kept keys (a widened key column reads as its
        current type)."""
        return tuple((c.id, c.type) for name in self.key for c in self.columns if c.name == name)

    def _segment_rows(self, read: SegmentRead, upto: int) -> pa.Table:
        """A segment's rows at least as far as position `upto`: the whole segment, kept per process, unless only
        its beginning is needed (not kept). Where its key columns are kept, only the other columns are read."""
        name = (read.id, tuple(c.id for c in self.columns), tuple(c.type for c in self.columns))
        rows = _SEGMENT_ROWS.get(name)
        if rows is None:
            keys = _SEGMENT_KEYS.get((read.id, self._key_types))
            others = [c for c in self.columns if c.name not in self.key]
            if keys is None or not others:
                rows, whole = _read_projected(self.warehouse, read, self.columns, upto=upto)
            else:
                rows, whole = _read_projected(self.warehouse, read, others, upto=upto)
                keys = keys.slice(0, rows.num_rows)
                rows = pa.table({n: keys.column(n) if n in self.key else rows.column(n) for n in self.names})
            if whole:
                _SEGMENT_ROWS.put(name, rows, rows.num_rows + 1)
        return rows

    def may_set(self, made_live: list[dict], keys: Iterable[tuple]) -> bool:
        """Whether a commit that made live segments of these statistics may have set a row of one of `keys` (or,
        given the segments it took rows from, deleted one): a row a commit inserts or updates is in a segment it
        made live, so a commit whose segments' key ranges rule out every key set none of them (a commit that made
        none live set no row; a key column without statistics rules nothing out)."""
        if not made_live:
            return False
        columns = [c for c in self.columns if c.name in self.key]
        keys = list(keys)
        if self._plain(keys):  # a small segment's keys are in its statistics: it holds one of `keys` or not
            held, wanted = [self.inline_keys(stats) for stats in made_live], set(keys)
            if any(not found.isdisjoint(wanted) for found in held if found is not None):
                return True
            made_live = [stats for stats, found in zip(made_live, held, strict=True) if found is None]
            if not made_live:
                return False
        values = sorted_values(keys) if len(self.key) == 1 else None
        if values is not None:  # one key column: a segment's range holds a key if the first key >= its low is <= high
            plain = columns[0].type in ("int", "long", "string")  # pruned on (types.PRUNED_TYPES), JSON as it is
            for stats in made_live:
                if plain:
                    found = stats.get(str(columns[0].id))
                    bound = Bounds(found.get("min"), found.get("max"), None) if found is not None else None
                else:
                    bound = segment_bounds(stats, columns, written=None).get(self.key[0])  # a key only widens
                if bound is None or bound.low is None or bound.high is None:
                    return True
                try:
                    at = bisect.bisect_left(values, bound.low)
                    if at < len(values) and values[at] <= bound.high:
                        return True
                except TypeError:
                    return True
            return False
        for stats in made_live:
            known = segment_bounds(stats, columns, written=None)  # key columns: they only widen
            for key in keys:
                try:
                    if all(
                        name not in known or known[name].low is None or known[name].low <= value <= known[name].high
                        for name, value in zip(self.key, key, strict=True)
                    ):
                        return True
                except TypeError:  # a value the statistics do not compare with
                    return True
        return False


class _History:
    """The commits of a chain with a file entry of the table, newest first (`entries`: id, line, seq; compactions
    too), each one's `_Touch` read when first asked: with the commits after it (a batch, then four times as many
    each time, so that a walk back reads in few queries), or a chosen few at once (`read`)."""

    def __init__(self, table: _Table, chain: Chain):
        self.table, self.size = table, BATCH
        rows = FileEntry.objects.filter(chain.q(), table_id=table.table_id)
        self.entries = list(rows.values_list("commit_id", "line_id", "seq").distinct().order_by("-seq"))
        self.found: dict[str, _Touch] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, place: int) -> _Touch:
        commit_id = self.entries[place][0]
        if commit_id not in self.found:
            self.read(range(place, min(place + self.size, len(self.entries))))
            self.size *= 4
        return self.found[commit_id]

    def read(self, places: Iterable[int]) -> None:
        wanted = [self.entries[p][0] for p in places if self.entries[p][0] not in self.found]
        if wanted:
            self.found |= self.table.touched(wanted)

    def on(self, place: int, chain: Chain) -> bool:
        """Whether the commit at `place` is on the chain's first-parent history."""
        _, line, seq = self.entries[place]
        return _at_on_chain(line, seq, chain)


def _smallest(parts: list[pa.Table], needed: int) -> pa.Table:
    """The first `needed` rows of these tables by their first column."""
    rows = pa.concat_tables(parts)
    return rows.take(pc.sort_indices(rows, [(rows.column_names[0], "ascending")])).slice(0, needed)


def _entries_of(commit_ids: list[str], table_id: uuid.UUID) -> list[tuple]:
    """The file entries of these commits for the table, with their files (and a delete file's segment's statistics),
    in one plain query: (commit, removed, file id, kind, path, stats, schema version id, segment id, segment
    stats). Statistics are decoded once per distinct text (a thousand delete files of one segment name its statistics
    a thousand times)."""
    entry, data = FileEntry._meta.db_table, DataFile._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT e.commit_id, e.removed, f.id, f.kind, f.path, f.stats::text, f.schema_version_id, f.segment_id,"
            f" s.stats::text FROM {entry} e JOIN {data} f ON f.id = e.file_id LEFT JOIN {data} s ON s.id = f.segment_id"
            f" WHERE e.commit_id = ANY(%s) AND e.table_id = %s",
            [commit_ids, table_id],
        )
        return [
            (
                *row[:5],
                stats_decoded(row[5]) if row[5] else None,
                row[6],
                row[7],
                stats_decoded(row[8]) if row[8] else None,
            )
            for row in cursor.fetchall()
        ]


def _matching(rows: pa.Table, key: list[str], keys: Iterable[tuple]) -> np.ndarray:
    """Which of these rows' first key column holds the first value of one of `keys` (a mask): a few keys compared
    one by one (a million rows in a millisecond each), more looked up in a set of them."""
    wanted = list(dict.fromkeys(k[0] for k in keys))
    try:
        values = pa.array(wanted, rows.schema.field(key[0]).type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        message = f"{wanted[0]!r} is not a value of key column {key[0]!r}."
        raise ApplicationError("invalid_key", message) from None
    column = rows.column(key[0])
    if len(values) > FEW_KEYS:
        return pc.fill_null(pc.is_in(column, value_set=values), False).to_numpy(zero_copy_only=False)
    found = np.zeros(rows.num_rows, dtype=bool)
    for value in values:
        found |= pc.fill_null(pc.equal(column, value), False).to_numpy(zero_copy_only=False)
    return found


def sorted_values(keys: list[tuple]) -> list | None:
    """The values of one-column keys in order, or None if they do not compare (a None among them, mixed types)."""
    try:
        return sorted(k[0] for k in keys)
    except TypeError:
        return None


def _by_key(rows: pa.Table, key: list[str], names: list[str]) -> dict[tuple, tuple[str, dict | None, set[str]]]:
    """The laid-out changes by key: (change, the row after or None, the columns an update changed)."""
    found = {}
    for row in rows.to_pylist():
        change = row[row_diff.CHANGE]
        side = row_diff._BEFORE if change == row_diff.DELETE else row_diff._AFTER
        key_values = tuple(row[side + k] for k in key)
        after = None if change == row_diff.DELETE else {n: row[row_diff._AFTER + n] for n in names}
        before = {n: row[row_diff._BEFORE + n] for n in names} if change == row_diff.UPDATE else None
        changed = set(names) if change == row_diff.INSERT else {n for n in names if before and before[n] != after[n]}
        found[key_values] = (change, after, changed)
    return found


def _walk(
    table: _Table,
    head: Commit,
    pending: dict[tuple, set[str]],
    expected: dict[tuple, dict],
    via: tuple[str, ...],
    depth: int,
) -> dict[tuple, dict[str, Writer]]:
    """Walk `head`'s first-parent history back for the cells `pending` names: per key and cell, who wrote the value
    `expected` holds. Cells a merge's source (`via` not empty) last set to another value, or deleted, or never set,
    are left out: the caller's merge made them."""
    settled: dict[tuple, dict[str, Writer]] = {}
    pending = {k: set(cells) for k, cells in pending.items() if cells}
    chain = _chain_of(head)
    resolved = _Settlements(table, chain) if pending else None
    for touch in table.touching(chain):
        if not pending:
            break
        commit = touch.commit
        if via and table.may_set(touch.taken, pending):  # a source's delete: the merge made what it holds
            pass
        elif not table.may_set(touch.live, pending) or not table.sets_any(touch, pending):
            continue
        rows = table.diff(touch, pending)
        for key in [k for k in pending if k in rows]:
            change, after, changed = rows[key]
            if change == row_diff.DELETE:
                if via:  # the source deleted the key: what the merge holds it made itself
                    del pending[key]
                continue
            hit = pending[key] & changed
            if not hit:
                continue
            pending[key] -= hit
            if not pending[key]:
                del pending[key]
            if via:
                hit = {c for c in hit if after[c] == expected[key][c]}  # another value: not the source's
            if commit.merge_parent_id is not None and depth > 0:
                inner = _walk(table, commit.merge_parent, {key: hit}, expected, (*via, commit.id), depth - 1)
                found = inner.get(key, {})
                for cell in hit:
                    writer = found.get(cell) or Writer(commit.id, via, resolution=True)
                    settled.setdefault(key, {})[cell] = resolved.named(writer, commit, key, cell)
            else:
                for cell in hit:
                    settled.setdefault(key, {})[cell] = resolved.named(Writer(commit.id, via), commit, key, cell)
    return settled


class _Settlements:
    """The resolutions that settled cells of the table on a chain: those of its merges (a merge keeping the
    target's value changes no file of the key, so it is found here rather than in the walk), and of a commit that
    set a cell (a cherry-pick or a revert settled by a resolution)."""

    def __init__(self, table: _Table, chain: Chain):
        self.table = table
        merges = dict(
            Commit.objects.filter(chain.q(), catalog_id=chain.commit.catalog_id, merge_parent__isnull=False)
            .values_list("id", "seq")
        )  # fmt: skip
        found = _settled_of(merges, table.table_id) if merges else {}
        self.merges = sorted(((merges[c], s) for c, s in found.items()), key=lambda m: -m[0])  # newest first
        self.own: dict[str, dict] = {}

    def named(self, writer: Writer, commit: Commit, key: tuple, cell: str) -> Writer:
        """`writer` of a cell `commit` set on the chain, with the settlement nearest the ref: of a merge at or after
        `commit` on the chain, else of `commit` itself, else the one `writer` names (met inside a merge's source)."""
        wanted = key_id(key)
        for seq, settled in self.merges:
            if seq < commit.seq:
                break
            cells = settled.get(wanted)
            if cells and (cells.get(cell) or cells.get("*")):
                return replace(writer, settled=cells.get(cell) or cells["*"])
        if commit.merge_parent_id is None:
            if commit.id not in self.own:
                self.own[commit.id] = _settled_of([commit.id], self.table.table_id).get(commit.id, {})
            cells = self.own[commit.id].get(wanted)
            if cells and (cells.get(cell) or cells.get("*")):
                return replace(writer, settled=cells.get(cell) or cells["*"])
        return writer


# --- reading the table at the ref ----------------------------------------------------------------------------------


_TABLES = _Kept(10_000)  # (commit, database, table) -> the table's version there (a commit's state never changes)


def blame_table(resolved: ResolvedRef, *, database: str, table: str) -> _Table:
    name = (resolved.commit.id, database, table)
    version = _TABLES.get(name)
    if version is None:
        chain = resolved.chain
        found_db = object_get(chain, kind=ObjectKind.DATABASE, name=database)
        version = object_find(chain, kind=ObjectKind.TABLE, name=table, parent_id=found_db.object_id)
        if version is not None:
            _TABLES.put(name, version, 1)
    if version is None:
        raise NotFoundError("table_not_found", f"There is no table {database}.{table} at this ref.")
    columns = table_columns(version)
    by_id = {c.id: c.name for c in columns}
    key = [by_id[i] for i in version.state.get("primary_key", []) if i in by_id]
    return _Table(version, f"{database}.{table}", columns, key, Warehouse(settings.LAKEUI_WAREHOUSE))


ROW_DEPTH = 64  # a keyless row's steps back followed (into a merge's source, or past a rewrite), at most
Item = tuple[tuple, str, int]  # a keyless row: its values, its segment's id and its position in the segment's file


def _row_writers(table: _Table, chain: Chain, rows: pa.Table, segments: list[str], depth: int) -> list[Writer]:
    """Who wrote each row of a table without a key (`rows` read with their origins in `segments`): see
    `_writers_of_rows`."""
    origins = rows.column(row_diff.ORIGIN).to_pylist()
    values = [tuple(r.values()) for r in rows.drop_columns([row_diff.ORIGIN]).to_pylist()]
    items = [(v, segments[o >> 32], o & 0xFFFFFFFF) for v, o in zip(values, origins, strict=True)]
    return _writers_of_rows(table, chain.commit, items, depth, {})


def _writers_of_rows(table: _Table, head: Commit, items: list[Item], depth: int, known: dict) -> list[Writer]:
    """Who wrote each of `items` (rows live at `head`; rows without a key are told apart by their values alone).
    The newest commit of `head`'s first-parent history that made the row's segment live, or took away a delete
    file listing the row, holds it; that commit's rows compared with its parent's as the change feed compares them
    (multisets of values: `_sides`) say what it did: a row it added it wrote itself (a merge: its source's writer of
    an equal row, the merge appended to the chain, else the merge, a resolution); a row its parent held too it only
    carried (a compaction, a copy-on-write rewrite, a restore that left the row as it was), and the parent's writer
    of that row is named. `known`: what was read for this question (each commit's sides, a source's rows)."""
    chain = commit_chain(head)
    made = files_made(chain, dict.fromkeys({s for _, s, _ in items}, False), depth=0)
    newest = {i: (m.seq, m.commit) for i, (_, s, _) in enumerate(items) if (m := made.get(s)) is not None}
    for i, seq, commit_id in _unhidden(table, chain, items):
        if i not in newest or seq > newest[i][0]:
            newest[i] = (seq, commit_id)
    by_commit: dict[str, list[int]] = {}
    for i, (_, commit_id) in sorted(newest.items()):
        by_commit.setdefault(commit_id, []).append(i)
    writers = [Writer(None)] * len(items)
    commits = Commit.objects.in_bulk(list(by_commit))
    for commit_id, places in by_commit.items():
        commit = commits[commit_id]
        if depth <= 0:
            writers = [Writer(commit_id) if i in places else w for i, w in enumerate(writers)]
            continue
        held, inserted = _sides(table, commit, known)
        inserted, held = dict(inserted), {v: list(found) for v, found in held.items()}
        carried, fresh = [], []
        for i in places:
            value = items[i][0]
            if inserted.get(value, 0) > 0:
                inserted[value] -= 1
                fresh.append(i)
            elif held.get(value):
                carried.append((i, (value, *held[value].pop())))
            else:
                fresh.append(i)
        if carried:
            before = _writers_of_rows(table, commit.parent, [item for _, item in carried], depth - 1, known)
            for (i, _), writer in zip(carried, before, strict=True):
                writers[i] = writer
        if fresh and commit.merge_parent_id is not None:
            source = _held_at(table, commit.merge_parent, known)
            found = [(i, (items[i][0], *source[items[i][0]].pop())) for i in fresh if source.get(items[i][0])]
            inner = _writers_of_rows(table, commit.merge_parent, [item for _, item in found], depth - 1, known)
            for (i, _), writer in zip(found, inner, strict=True):
                writers[i] = replace(writer, via=(commit.id, *writer.via))
            fresh = [i for i in fresh if i not in {i for i, _ in found}]
        for i in fresh:
            writers[i] = Writer(commit.id, (), resolution=commit.merge_parent_id is not None)
    return writers


def _unhidden(table: _Table, chain: Chain, items: list[Item]) -> list[tuple[int, int, str]]:
    """(item, seq, commit) for each row of `items` a commit of the chain brought back by taking away a delete file
    listing it (the newest such entry on the chain of each delete file of the rows' segments)."""
    deltas = list(
        DataFile.objects.filter(kind=DataFile.Kind.DELTA, segment_id__in=list({s for _, s, _ in items}))
        .values_list("id", "segment_id", "path")
    )  # fmt: skip
    made = files_made(chain, {str(d): True for d, _, _ in deltas}, depth=0) if deltas else {}
    found = []
    for delta, segment, path in deltas:
        if (m := made.get(str(delta))) is not None:
            listed = set(_deleted_by(table.warehouse, [path]).tolist())
            found += [(i, m.seq, m.commit) for i, (_, s, at) in enumerate(items) if s == str(segment) and at in listed]
    return found


def _sides(table: _Table, commit: Commit, known: dict) -> tuple[dict[tuple, list[tuple[str, int]]], dict[tuple, int]]:
    """A commit of a table without a key against its first parent, as the change feed compares them (only the
    segments it added, removed or changed the deletes of): the rows the parent held there and the commit does not
    (by values: their segment and position at the parent), and how many more of each row the commit holds."""
    name = ("sides", commit.id)
    if name not in known:
        earlier = table.files_at(commit.parent) if commit.parent_id else NO_FILES
        later = table.files_at(commit)
        removed, added = later.changes_since(earlier)
        live = {s.id for s in later.segments}
        before_reads = TableFiles(removed, earlier.deltas).reads()
        after_reads = TableFiles([s for s in removed if s.id in live] + added, later.deltas).reads()
        try:
            before, after = row_diff.read_sides_arrow(
                table.warehouse, table.columns, before_reads, after_reads, origins=True
            )
        except (*READ_ERRORS, NotImplementedError) as error:
            raise ApplicationError(
                "blame_unreadable", MESSAGE_UNREADABLE.format(table=table.name), status=503,
                details={"table": table.name, "error": str(error)[:300]},
            ) from error  # fmt: skip
        held = _by_values(before, [r.id for r in before_reads])
        counted: dict[tuple, int] = {}
        for row in after.drop_columns([row_diff.ORIGIN]).to_pylist():
            counted[tuple(row.values())] = counted.get(tuple(row.values()), 0) + 1
        known[name] = (held, {v: n - len(held.get(v, [])) for v, n in counted.items() if n > len(held.get(v, []))})
    return known[name]


def _held_at(table: _Table, commit: Commit, known: dict) -> dict[tuple, list[tuple[str, int]]]:
    """The rows of a table without a key at a commit, by values: their segments and positions (a fresh copy)."""
    name = ("rows", commit.id)
    if name not in known:
        rows, segments = _rows_at(table, commit_chain(commit))
        known[name] = _by_values(rows, segments)
    return {v: list(found) for v, found in known[name].items()}


def _by_values(rows: pa.Table, segments: list[str]) -> dict[tuple, list[tuple[str, int]]]:
    found: dict[tuple, list[tuple[str, int]]] = {}
    origins = rows.column(row_diff.ORIGIN).to_pylist()
    for row, origin in zip(rows.drop_columns([row_diff.ORIGIN]).to_pylist(), origins, strict=True):
        found.setdefault(tuple(row.values()), []).append((segments[origin >> 32], origin & 0xFFFFFFFF))
    return found


def _rows_at(table: _Table, chain: Chain, key: tuple | None = None) -> tuple[pa.Table, list[str]]:
    """The table's rows at a commit with their origin (`row_diff.ORIGIN`), a keyed table's by key; and the ids of
    the segments the origins count in. With `key`, only the segments whose key statistics do not rule it out."""
    files = tables_files(chain, table_ids=[table.table_id]).get(table.table_id, NO_FILES)
    if key is not None:
        files = TableFiles([s for s in files.segments if table.may_set([s.stats or {}], [key])], files.deltas)
    reads = files.reads()
    with _readable(table.name):
        _, rows = row_diff.read_sides_arrow(table.warehouse, table.columns, [], reads, origins=True)
    if table.key:
        rows = rows.take(pc.sort_indices(rows, [(k, "ascending") for k in table.key]))
    else:
        rows = rows.take(pc.sort_indices(rows, [(row_diff.ORIGIN, "ascending")]))
    return rows, [r.id for r in reads]


def _keyed_rows_at(table: _Table, chain: Chain, *, page: int = 1, page_size: int = 0, key: tuple | None = None
                   ) -> tuple[int, pa.Table]:  # fmt: skip
    """A keyed table's rows at a commit, without reading more than its key columns whole: the live keys in key
    order (kept per process for the commit's state: a later page reads nothing but its rows), the page's slice,
    and the whole rows of those keys only. With `key`, only that key's, read from the segments whose key
    statistics do not rule it out. Returns (the rows counted, the page's rows)."""
    files = _files_on(chain, table.table_id)
    with _readable(table.name):
        if key is not None:
            files = TableFiles([s for s in files.segments if table.may_set([s.stats or {}], [key])], files.deltas)
            reads = files.reads()
            found = table.live_keys(reads, [key])
            origins = found.column(row_diff.ORIGIN).to_numpy()
            rows = _key_rows(table.rows_of(reads, origins), table, key)
            return rows.num_rows, rows
        reads = files.reads()
        name = (chain.commit.id, table.table_id, tuple(c.id for c in table.columns if c.name in table.key))
        ordered = _ORDERS.get(name)
        if ordered is None and page * page_size <= FRONT:
            kept = (*name, page * page_size)  # the first keys and the count of the state, kept as its order is
            found = _ORDERS.get(kept)
            if found is None and (front := table.front(files, reads, page * page_size)) is not None:
                found = _ORDERS.put(kept, (front, table.live_count(files)), front.num_rows + 1)
            if found is not None:
                front, count = found
                shown = front.slice((page - 1) * page_size, page_size)
                return count, table.rows_of(reads, shown.column(row_diff.ORIGIN).to_numpy())
        if ordered is None:
            live = table.live_keys(reads)
            ordered = live.take(pc.sort_indices(live, [(k, "ascending") for k in table.key]))
            _ORDERS.put(name, ordered, ordered.num_rows + 1)
        shown = ordered.slice((page - 1) * page_size, page_size)
        return ordered.num_rows, table.rows_of(reads, shown.column(row_diff.ORIGIN).to_numpy())


def key_parse(table: _Table, raw: str) -> tuple:
    """A key as the API takes it: a JSON array of the key's values in the key's column order (`[9]`), or for a
    one-column key the value alone (`9`)."""
    if not table.key:
        raise ApplicationError("no_primary_key", f"{table.name} has no primary key: blame it by row, without key.")
    try:
        value = json.loads(raw)
    except ValueError:
        raise ApplicationError("invalid_key", "key is a JSON array of the primary key's values, e.g. [9].") from None
    value = value if isinstance(value, list) else [value]
    if len(value) != len(table.key) or any(isinstance(v, dict | list) for v in value):
        raise ApplicationError(
            "invalid_key", f"key holds {len(table.key)} value(s), of {', '.join(table.key)}, as a JSON array."
        )
    return tuple(value)


def _key_rows(rows: pa.Table, table: _Table, key: tuple) -> pa.Table:
    mask = None
    for name, value in zip(table.key, key, strict=True):
        try:
            equal = pc.equal(rows.column(name), pa.scalar(value, rows.schema.field(name).type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            raise ApplicationError("invalid_key", f"{value!r} is not a value of key column {name!r}.") from None
        mask = equal if mask is None else pc.and_(mask, equal)
    return rows.filter(pc.fill_null(mask, False))


@dataclass
class Blame:
    """A page of a table's blame at a ref, as the API answers it."""

    count: int
    results: list[dict[str, Any]]
    commits: dict[str, dict[str, Any]]
    table: dict[str, Any]


def table_blame(
    *, resolved: ResolvedRef, database: str, table: str, page: int = 1, page_size: int = 50, key: str | None = None
) -> Blame:
    """One page of the table's rows at the ref (a keyed table's by key), each with who wrote it: per cell for a
    keyed table, per row for one without a key (see the module's description); or the one key `key` names."""
    if not 1 <= page_size <= MAX_PAGE_SIZE or page < 1:
        raise ApplicationError("invalid_input", f"page must be 1 or more and page_size 1 to {MAX_PAGE_SIZE}.")
    found = blame_table(resolved, database=database, table=table)
    wanted = key_parse(found, key) if key is not None else None
    if found.key:
        count, shown = _keyed_rows_at(found, resolved.chain, page=page, page_size=page_size, key=wanted)
        if wanted is not None and count == 0:
            raise NotFoundError("key_not_found", f"{found.name} holds no key {list(wanted)!r} at this ref.")
    else:
        rows, segments = _rows_at(found, resolved.chain)
        count, shown = rows.num_rows, rows.slice((page - 1) * page_size, page_size)
    listed = [{n: r[n] for n in found.names} for r in shown.to_pylist()]
    if found.key:
        keys = [tuple(r[k] for k in found.key) for r in listed]
        expected = dict(zip(keys, listed, strict=True))
        writers = _walk(found, resolved.commit, {k: set(found.names) for k in keys}, expected, (), MERGE_DEPTH)
        results = [
            {"key": dict(zip(found.key, k, strict=True)), "row": _json_row(row),
             "cells": {n: writers.get(k, {}).get(n, Writer(None)) for n in found.names}}
            for k, row in zip(keys, listed, strict=True)
        ]  # fmt: skip
    else:
        writers = _row_writers(found, resolved.chain, shown, segments, ROW_DEPTH)
        results = [{"key": None, "row": _json_row(row), "writer": w} for row, w in zip(listed, writers, strict=True)]
    commits = _described(results)
    for result in results:
        if "cells" in result:
            result["cells"] = {n: _shown(w, commits) for n, w in result["cells"].items()}
        else:
            result |= _shown(result.pop("writer"), commits)
    return Blame(count=count, results=results, commits=commits, table=_described_table(found))


def _json_row(row: dict) -> dict:
    return {n: json_value(v) for n, v in row.items()}


def _described_table(table: _Table) -> dict[str, Any]:
    return {"table": table.name, "table_id": str(table.table_id), "primary_key": table.key,
            "columns": [{"id": c.id, "name": c.name, "type": c.type} for c in table.columns]}  # fmt: skip


def _writers(results: list[dict]) -> Iterator[Writer]:
    for result in results:
        if "cells" in result:
            yield from result["cells"].values()
        elif "writer" in result:
            yield result["writer"]


def _described(results: list[dict]) -> dict[str, dict[str, Any]]:
    """Every commit the page names (writers, merges, picks, and the commits picks applied), described once."""
    ids = {c for w in _writers(results) for c in (w.commit, *w.via, (w.settled or {}).get("merge")) if c}
    links = commit_links_of(ids)
    ids |= {link["picked_from"] for link in links.values() if link.get("picked_from")}
    return commits_described(ids, links)


def commits_described(ids: set[str], links: dict[str, dict] | None = None) -> dict[str, dict[str, Any]]:
    """Each commit's author, time, message and the branch it was made on (the branch its line was made by, if it
    still exists), with what made it (a merge with its request, approvers and checks; a pick, a revert, a restore)."""
    links = commit_links_of(ids) if links is None else links
    commits = Commit.objects.filter(id__in=list(ids)).select_related("author", "line__branch")
    described = {}
    for commit in commits:
        link = links.get(commit.id)
        kind = link["kind"] if link else ("merge" if commit.merge_parent_id else "commit")
        described[commit.id] = {
            "id": commit.id, "kind": kind, "author": commit.author.username if commit.author else None,
            "created_at": commit.created_at.isoformat(), "message": commit.message,
            "branch": commit.line.branch.name if commit.line.branch_id else None,
            "parents": [p for p in (commit.parent_id, commit.merge_parent_id) if p],
            **({k: v for k, v in link.items() if k != "kind"} if link else {}),
        }  # fmt: skip
    return described


def _shown(writer: Writer, commits: dict[str, dict]) -> dict[str, Any]:
    """A writer as the API shows it: the commit that wrote the value (a pick's: the commit it applied) and the chain
    that brought it to the ref, from the writer to the ref (each a merge or a pick)."""
    if writer.commit is None:
        return {"commit": None, "chain": [], "resolution": False, "settled_by": None}
    chain = list(reversed(writer.via))
    commit = writer.commit
    picked = commits.get(commit, {}).get("picked_from")
    if picked and not writer.resolution:
        chain.insert(0, commit)
        commit = picked
    return {"commit": commit, "chain": chain, "resolution": writer.resolution, "settled_by": writer.settled}


# --- one key's history ---------------------------------------------------------------------------------------------


def key_history(*, resolved: ResolvedRef, database: str, table: str, key: str) -> dict[str, Any]:
    """Every version of one key reachable at the ref, newest first: each with its row (null once deleted), the
    columns it changed, the commit that made it and the merge (or pick) that brought it to the ref's history."""
    found = blame_table(resolved, database=database, table=table)
    wanted = key_parse(found, key)
    versions: list[dict[str, Any]] = []
    _versions(found, resolved.commit, wanted, (), MERGE_DEPTH, versions, stop=None)
    if not versions:
        raise NotFoundError("key_not_found", f"{found.name} never held a key {list(wanted)!r} at this ref.")
    ids = {c for v in versions for c in (v["commit"], *v["via"], (v.get("settled") or {}).get("merge"),
                                         *(k["merge"] for k in v["kept_by"])) if c}  # fmt: skip
    links = commit_links_of(ids)
    ids |= {link["picked_from"] for link in links.values() if link.get("picked_from")}
    commits = commits_described(ids, links)
    listed = []
    for v in versions:
        shown = _shown(Writer(v["commit"], v["via"], v["resolution"], v.get("settled")), commits)
        listed.append({
            "change": v["change"], "row": _json_row(v["row"]) if v["row"] is not None else None,
            "changed": sorted(v["changed"], key=found.names.index), **shown, "kept_by": v["kept_by"],
        })  # fmt: skip
    return {"key": dict(zip(found.key, wanted, strict=True)), "table": _described_table(found), "versions": listed,
            "commits": commits}  # fmt: skip


def _versions(
    table: _Table, head: Commit, key: tuple, via: tuple[str, ...], depth: int, out: list, stop: Chain | None
) -> None:
    """Append the versions of `key` made on `head`'s first-parent history, newest first; a merge's versions are
    its source's since the history it merged into (`stop`), and the merge's own when it made the value itself.

    Only the commits whose added segments hold the key are read (`sets_any`); a delete is looked for only where
    one must be: after the newest of them when the key is not live at `head` (in a merge's source without one: a
    delete of a key its target held), and before an insert that follows an older version (in a merge's source, its
    oldest insert too: the source may have deleted the row its target holds first). So a key's history costs a read
    per version, not per commit of the table."""
    chain = _chain_of(head)
    touches = _History(table, chain)
    count = len(touches)
    if stop is not None:  # the history the merge's source shares with the one it merged into is not its own
        count = next((p for p in range(count) if touches.on(p, stop)), count)
    setting = table.setting(chain, key)
    places = [p for p in range(count) if setting is None or touches.entries[p][0] in setting]
    touches.read(places)
    found: dict[int, tuple[str, dict | None, set[str]]] = {}
    for place in places:
        touch = touches[place]
        if not touch.compaction and table.may_set(touch.live, [key]) and table.sets_any(touch, [key]):
            record = table.diff(touch, [key]).get(key)
            if record is not None:
                found[place] = record
    if stop is not None:  # a merge's source: only the versions the history it merged into does not hold already
        held = next((p for p in sorted(found) if _reaches(stop, touches[p].commit)), None)
        if held is not None:
            found = {p: record for p, record in found.items() if p < held}
            count = held
    places = sorted(found)
    gaps = []  # (newest, oldest) places, exclusive, holding a delete of the key
    if places and found[places[0]][0] != row_diff.DELETE and not _still_live(table, head, touches[places[0]], key):
        gaps.append((-1, places[0]))
    elif not places and stop is not None and _keyed_rows_at(table, chain, key=key)[0] == 0:
        # a merge's source deleted a key the target held
        gaps.append((-1, count))
    for newer, older in itertools.pairwise(places):
        if found[newer][0] == row_diff.INSERT and found[older][0] != row_diff.DELETE:
            gaps.append((newer, older))
    if places and stop is not None and found[places[-1]][0] == row_diff.INSERT:
        # a merge's source inserted the key: it may have deleted the row the history it merged into holds first
        gaps.append((places[-1], count))
    for newer, older in gaps:
        for place in range(newer + 1, older):
            touch = touches[place]
            if not touch.compaction and table.may_set(touch.taken, [key]):
                record = table.diff(touch, [key]).get(key)
                if record is not None and record[0] == row_diff.DELETE:
                    if stop is None or not _reaches(stop, touch.commit):  # else the history merged into has it
                        found[place] = record
                    break
    kept = _kept_by(table, head, key, [touches[place].commit for place in sorted(found)])
    for place, kept_by in zip(sorted(found), kept, strict=True):
        commit = touches[place].commit
        change, after, changed = found[place]
        if commit.merge_parent_id is not None and depth > 0:
            inner: list[dict] = []
            parent = _chain_of(commit.parent) if commit.parent_id else None
            _versions(table, commit.merge_parent, key, (*via, commit.id), depth - 1, inner, parent)
            newest = inner[0] if inner else None
            settled = _key_settled(table, commit, key, changed)
            if newest is None or newest["row"] != after:  # the merge made this version itself
                out.append({"change": change, "row": after, "changed": changed, "commit": commit.id, "via": via,
                            "resolution": True, "settled": settled, "kept_by": kept_by})  # fmt: skip
            else:  # the version the merge took from its source (by a resolution, if `settled`)
                newest["settled"] = settled or newest["settled"]
                newest["kept_by"] = kept_by + newest["kept_by"]
            out.extend(inner)
        else:
            out.append({"change": change, "row": after, "changed": changed, "commit": commit.id, "via": via,
                        "resolution": False, "settled": _key_settled(table, commit, key, changed),
                        "kept_by": kept_by})  # fmt: skip


def _kept_by(table: _Table, head: Commit, key: tuple, made: list[Commit]) -> list[list[dict]]:
    """Per version of `key` the commits `made` made on `head`'s first-parent history (newest first), the
    resolutions that kept it against a merge's source: those of the merges after it there (and before the next
    version) that settled the key. Such a merge kept the target's version and so made none itself."""
    merges = _Settlements(table, commit_chain(head)).merges if made else []  # newest first
    wanted, kept, newer = key_id(key), [], None
    for commit in made:
        found = []
        for seq, settled in merges:
            cells = settled.get(wanted)
            if seq <= commit.seq:
                break
            if cells and (newer is None or seq < newer):
                found.append(next((cells[n] for n in ("*", *table.names) if n in cells), next(iter(cells.values()))))
        kept.append(found)
        newer = commit.seq
    return kept


def _still_live(table: _Table, head: Commit, touch: _Touch, key: tuple) -> bool:
    """Whether the row of `key` the commit (`touch`) wrote is still live at `head`: read from the segments it added
    alone, as they are at `head`. When not (a later commit deleted it, or a compaction moved it), the caller looks for
    a delete. A commit that took a delete file away may have made an older row live: the key looked for in every
    segment at `head`."""
    if touch.unhid:
        return _keyed_rows_at(table, _chain_of(head), key=key)[0] > 0
    made = [r for r, stats in zip(touch.added, touch.live, strict=True) if table.may_set([stats], [key])]
    files = table.files_at(head, frozenset(uuid.UUID(r.id) for r in made))
    with _readable(table.name):
        return table.live_keys(files.reads(), [key]).num_rows > 0


def _key_settled(table: _Table, commit: Commit, key: tuple, changed: set[str]) -> dict | None:
    """The resolution of a merge, pick or revert that settled a cell of `key` it changed (the whole row's, else
    the first changed column's in the table's order), or None."""
    settled = _settled_of([commit.id], table.table_id).get(commit.id, {}).get(key_id(key), {})
    if "*" in settled:
        return settled["*"]
    return next((settled[n] for n in table.names if n in changed and n in settled), None)


def _reaches(chain: Chain, commit: Commit) -> bool:
    """Whether `commit` is in the history of the chain's commit: on its first-parent history, or on a merged
    source's (merges of merges too). Only merges newer than `commit` can have brought it."""
    todo, seen = [chain], set()
    while todo:
        current = todo.pop()
        if _on_chain(commit, current):
            return True
        merged = Commit.objects.filter(current.q(), merge_parent__isnull=False, seq__gt=commit.seq)
        for source in merged.exclude(merge_parent_id__in=seen).select_related("merge_parent"):
            seen.add(source.merge_parent_id)
            if source.merge_parent.seq >= commit.seq:
                todo.append(commit_chain(source.merge_parent))
    return False


def _on_chain(commit: Commit, chain: Chain) -> bool:
    return _at_on_chain(commit.line_id, commit.seq, chain)


def _at_on_chain(line_id: int, seq: int, chain: Chain) -> bool:
    """Whether what was recorded on this line at this seq is on the chain's first-parent history."""
    return any(line_id == line and seq <= upto for line, upto in chain.segments)
