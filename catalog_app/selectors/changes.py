"""Row changes between two refs (docs/changes.md): for each table whose rows differ, `to`'s state against
`from`'s as a change stream, each record naming the commit that made it and the merge that brought it.

The rows come from the review's diff of two states (catalog_app.engine.row_diff): only the segments one state holds
with other deletes than the other, or holds and the other does not, are read (`TableFiles.changes_since`); a
segment both hold with the same deletes contributes nothing, so a compaction that changed no row, a restore or a
revert each come out as what they did to rows. The diff is kept as an Arrow file per pair of commits and table
(`row_diff.kept_write_later`), so a later page or the Arrow stream is a slice of it.

Which commit made a change is read from the file entries of `to`'s first-parent history, never from a second
record: a row `to` holds names the commit that made its file live on `to` (or took away the delete file that hid
it); a row `to` lost names the commit that removed its file or added the delete file listing its position (the
newest, when several do). A commit that is a merge and took that file entry from its source is followed into the
source's history (recursively), and the record names the merge as well. A change `to`'s history did not make (the
`from` side holds a change `to` never had) names no commit.
"""

import json
import threading
import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from django.conf import settings

from catalog_app.engine import row_diff
from catalog_app.engine.reads import READ_ERRORS, deleted_positions
from catalog_app.engine.segments import Column
from catalog_app.engine.types import arrow_type, json_value
from catalog_app.engine.warehouse import Warehouse
from catalog_app.models import Commit, FileEntry, ObjectKind, ObjectVersion
from catalog_app.selectors.merge_links import merge_requests_of
from catalog_app.selectors.objects import newest_on_chain, object_by_id, objects_at, objects_newest_by_id
from catalog_app.selectors.refs import Chain, ResolvedRef, commit_chain, commit_unexpired
from catalog_app.selectors.table_files import NO_FILES, TableFiles, table_columns, tables_files
from lakeui.errors import ApplicationError, NotFoundError

MESSAGE_UNREADABLE = (
    "The web process cannot read or compare the files of {table} (the warehouse's credentials, or a column type "
    "Arrow cannot compare); its changes are not served yet for such tables."
)
MERGE_DEPTH = 64  # merges of merges followed into their sources, at most
DESCRIBED_PAIRS = 16  # pairs of commits whose changed tables this process keeps (a consumer pages through one)
TOUCHED_COMMITS = 2000  # commits between two refs beyond which every table's state is compared, not the touched ones
KEY_MERGE_DEPTH = 8  # merges that wrote a keyed table's rows themselves, followed into their sources, at most
_LOW = np.int64(0xFFFFFFFF)
# Arrow columns beside the images: what made each change.
COMMIT, MERGE, MERGE_REQUEST, CHANGED = "_commit", "_merge", "_merge_request", "_changed"
MADE_BY = pa.dictionary(pa.int32(), pa.string())  # the commit and merge columns: a few distinct ids a batch


def tables_changed(*, source: ResolvedRef, target: ResolvedRef) -> list[dict[str, Any]]:
    """The tables whose data or definition differ between two refs (any direction), by name at `target` (else at
    `source`): per table its id, name, and whether it was added, dropped or changed, and how many segments differ.
    Metadata only (no file is read): the Compare page lists these and loads each table's rows when opened."""
    return [found for found, _, _ in _tables_changed(source, target)]


def _tables_changed(source: ResolvedRef, target: ResolvedRef) -> list[tuple[dict[str, Any], dict, dict]]:
    """`tables_changed`, each with the table's versions and files on both sides ({"from": ..., "to": ...})."""
    touched = _tables_touched(source, target)
    if touched is not None and not touched:
        return []
    sides = {}
    for name, ref in (("from", source), ("to", target)):
        if touched is None:
            databases = objects_at(ref.chain, kind=ObjectKind.DATABASE)
            tables = {t.object_id: t for t in objects_at(ref.chain, kind=ObjectKind.TABLE)}
        else:
            touched_tables = objects_newest_by_id(ref.chain, object_ids=list(touched))
            tables = {t.object_id: t for t in touched_tables if t.kind == ObjectKind.TABLE and not t.dropped}
            databases = objects_newest_by_id(ref.chain, object_ids=list({t.parent_id for t in tables.values()}))
        databases = {d.object_id: d.name for d in databases if not d.dropped}
        files = tables_files(ref.chain, table_ids=list(tables))
        sides[name] = (databases, tables, files)
    changed = []
    for table_id in sides["from"][1].keys() | sides["to"][1].keys():
        versions = [sides[n][1].get(table_id) for n in ("from", "to")]
        shown_side = "to" if versions[1] is not None else "from"
        databases, tables, _ = sides[shown_side]
        shown = tables[table_id]
        files = [sides[n][2].get(table_id, NO_FILES) for n in ("from", "to")]
        removed, added = files[1].changes_since(files[0])
        if versions[0] is None:
            change = "added"
        elif versions[1] is None:
            change = "dropped"
        elif removed or added or versions[0].state != versions[1].state:
            change = "changed"
        else:
            continue
        changed.append(({
            "table_id": str(table_id), "table": f"{databases.get(shown.parent_id, '?')}.{shown.name}",
            "change": change, "segments_changed": len(removed) + len(added),
            "definition_changed": versions[0] is not None and versions[1] is not None
            and versions[0].state != versions[1].state,
        }, dict(zip(("from", "to"), versions, strict=True)),
           dict(zip(("from", "to"), files, strict=True))))  # fmt: skip
    return sorted(changed, key=lambda t: t[0]["table"])


def _tables_touched(source: ResolvedRef, target: ResolvedRef) -> set[uuid.UUID] | None:
    """The tables that a commit on one ref's history and not on the other's wrote a version or a file entry of:
    the only ones whose state can differ (a catalog of 10,000 tables two commits apart reads two tables' files, not
    10,000). None when more than TOUCHED_COMMITS commits differ: reading every table's state is then cheaper."""
    differ = source.chain.difference(target.chain)
    if differ is None:
        return set()
    commits = list(Commit.objects.filter(differ).values_list("id", flat=True)[: TOUCHED_COMMITS + 1])
    if len(commits) > TOUCHED_COMMITS:
        return None
    versions = ObjectVersion.objects.filter(commit_id__in=commits, kind=ObjectKind.TABLE)
    files = FileEntry.objects.filter(commit_id__in=commits)
    return set(versions.values_list("object_id", flat=True)) | set(files.values_list("table_id", flat=True))


@dataclass
class _Made:
    """What made one file's change on a chain: the commit, its place there, and the outermost merge that brought it."""

    commit: str
    seq: int
    merge: str | None = None


def files_made(chain: Chain, wanted: dict[str, bool], depth: int = MERGE_DEPTH) -> dict[str, _Made]:
    """For each file id, the commit of the chain whose entry made the file's state `wanted` ({file id: removed?}),
    if the file's newest entry on the chain is such an entry; a merge that took that entry from its source is
    followed into the source's history, and named as the merge."""
    if not wanted:
        return {}
    entries = newest_on_chain(FileEntry.objects.filter(file_id__any=list(wanted)), chain, key="file_id")
    made = {
        str(file_id): _Made(commit_id, seq)
        for file_id, commit_id, seq, removed in entries.values_list("file_id", "commit_id", "seq", "removed")
        if removed == wanted[str(file_id)]
    }
    commits = {m.commit for m in made.values()}
    merges = dict(Commit.objects.filter(id__any=list(commits), merge_parent__isnull=False)
                  .values_list("id", "merge_parent_id"))  # fmt: skip
    for merge, parent in merges.items():
        files = {f: wanted[f] for f, m in made.items() if m.commit == merge}
        inner = files_made(commit_chain(Commit.objects.get(id=parent)), files, depth - 1) if depth > 0 else {}
        for file_id in files:
            found = inner.get(file_id)
            made[file_id] = _Made(found.commit if found else merge, made[file_id].seq, merge)
    return made


@dataclass
class Provenance:
    """Who made the changes of one table between two states: per record, an index into `made` (commit, merge and
    merge request), found from the segments and delete files the rows were read from (`row_diff.ORIGIN`)."""

    chain: Chain
    before: list[str]  # the segment ids the `from` side's rows were read from, by their place (ORIGIN >> 32)
    after: list[str]
    files: dict[str, TableFiles]  # "from", "to"
    warehouse: Warehouse
    made: list[tuple[str | None, str | None, int | None]] = field(default_factory=lambda: [(None, None, None)])
    _seqs: dict[str, int] = field(default_factory=dict)  # per file found, its entry's seq on `to`'s chain
    _covers: dict[int, np.ndarray] = field(default_factory=dict)  # per `before` place, the made index per position
    dropped_by: str | None = None  # the commit of `to`'s history that dropped the table (a drop removes no file)
    _lost: int = 0  # the index in `made` of what took a row `to` lost whose file change is not found

    @cached_property
    def _by_file(self) -> dict[str, int]:
        """The index in `made` of every file change the records can name, read in a few queries."""
        earlier, later = self.files["from"], self.files["to"]
        live_before = {str(s.id) for s in earlier.segments}
        live_after = {str(s.id): s for s in later.segments}
        wanted: dict[str, bool] = {}
        for segment in self.after:  # a row `to` holds: its segment added, or a delete file of it taken away
            if segment in live_before:
                wanted |= {str(d): True for d in self._deltas(earlier, segment) - self._deltas(later, segment)}
            else:
                wanted[segment] = False
        for segment in self.before:  # a row `to` lost: its segment removed, or a delete file added
            if segment in live_after:
                wanted |= {str(d): False for d in self._deltas(later, segment) - self._deltas(earlier, segment)}
            else:
                wanted[segment] = True
        made = files_made(self.chain, wanted)
        if self.dropped_by is not None:
            self._lost = len(self.made)
            self.made.append((self.dropped_by, None, None))
        requests = merge_requests_of(m.merge for m in made.values() if m.merge)
        self._seqs.update({f: m.seq for f, m in made.items()})
        index: dict[tuple, int] = {}
        by_file = {}
        for file_id, m in made.items():
            key = (m.commit, m.merge, requests.get(m.merge) if m.merge else None)
            if key not in index:
                index[key] = len(self.made)
                self.made.append(key)
            by_file[file_id] = index[key]
        return by_file

    @staticmethod
    def _deltas(files: TableFiles, segment: str) -> set[str]:
        return {str(d.id) for d in files.deltas.get(uuid.UUID(segment), [])}

    @cached_property
    def _after_made(self) -> np.ndarray:
        """Per `after` segment, the index in `made` of what made its rows live on `to`."""
        by_file, earlier, later = self._by_file, self.files["from"], self.files["to"]
        live_before = {str(s.id) for s in earlier.segments}
        out = np.zeros(len(self.after), dtype=np.int64)
        for place, segment in enumerate(self.after):
            if segment in live_before:  # deletes taken away: the newest such change
                gone = self._deltas(earlier, segment) - self._deltas(later, segment)
                known = sorted((self._seqs[d], by_file[d]) for d in gone if d in by_file)
                out[place] = known[-1][1] if known else 0
            else:
                out[place] = by_file.get(segment, 0)
        return out

    def _before_made(self, places: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Per row `to` lost (its segment's place in `before`, its position), the index in `made`."""
        by_file, earlier, later = self._by_file, self.files["from"], self.files["to"]
        live_after = {str(s.id): s for s in later.segments}
        out = np.zeros(len(places), dtype=np.int64)
        for place in np.unique(places):
            segment = self.before[int(place)]
            rows = places == place
            if segment not in live_after:
                out[rows] = by_file.get(segment, self._lost)
                continue
            if int(place) not in self._covers:  # the newest delete file listing each position, of those `to` added
                cover = np.zeros(live_after[segment].row_count, dtype=np.int64)
                added = self._deltas(later, segment) - self._deltas(earlier, segment)
                paths = {str(d.id): d.path for d in later.deltas.get(uuid.UUID(segment), [])}
                for _, delta in sorted((self._seqs.get(d, -1), d) for d in added):
                    cover[deleted_positions(self.warehouse, [paths[delta]]).to_numpy()] = by_file.get(delta, 0)
                self._covers[int(place)] = cover
            out[rows] = self._covers[int(place)][positions[rows]]
        return out

    def of(self, rows: pa.Table) -> np.ndarray:
        """The index in `made` of each laid-out change (`row_diff` layout with origins)."""
        after, before = (pc.fill_null(rows.column(side + row_diff.ORIGIN), -1).to_numpy()
                         for side in (row_diff._AFTER, row_diff._BEFORE))  # fmt: skip
        out = np.zeros(rows.num_rows, dtype=np.int64)
        lost = pc.equal(rows.column(row_diff.CHANGE), row_diff.DELETE).to_numpy(zero_copy_only=False)  # no str objects
        if (~lost).any():
            out[~lost] = self._after_made[after[~lost] >> 32]
        if lost.any():
            origin = before[lost]
            out[lost] = self._before_made(origin >> 32, origin & _LOW)
        return out


@dataclass
class TableChanges:
    """One table's changes between the two refs: described, counted, its records read a slice at a time."""

    table_id: str
    table: str
    change: str  # added | dropped | changed
    columns: list[dict]
    primary_key: list[str]
    counts: dict[str, int]
    total: int
    _rows: Any  # (offset, limit) -> the row_diff layout, with origins
    provenance: Provenance
    catalog: Any = None
    warehouse: Warehouse | None = None
    depth: int = KEY_MERGE_DEPTH
    _sources: dict[str, dict] = field(default_factory=dict)
    keep: Any = None  # () -> None: keep the whole diff as a file (after the page it was read for is answered)

    def describe(self) -> dict[str, Any]:
        return {
            "table": self.table, "table_id": self.table_id, "change": self.change, "columns": self.columns,
            "primary_key": self.primary_key, "counts": self.counts, "total": self.total,
        }  # fmt: skip

    def layout(self, offset: int, limit: int) -> pa.Table:
        offset = max(0, min(offset, self.total))
        return self._rows(offset, max(0, min(limit, self.total - offset)))

    def made_of(self, rows: pa.Table) -> tuple[np.ndarray, list[tuple[str | None, str | None, int | None]]]:
        """(commit, merge, merge request) of each laid-out change, as an index into a list of them. A keyed table's
        row that a merge wrote itself (a merge of keys both sides changed writes the merged rows anew) names the
        source's commit that made that key's row, when the merge took the source's row as it was (found in the
        source head's changes against the merge's first parent); a row the merge made of both sides' cells names
        the merge."""
        index = self.provenance.of(rows)
        made = list(self.provenance.made)  # read after `of`, which fills it
        by_merge = np.array([merge is not None and commit == merge for commit, merge, _ in made])
        own = np.flatnonzero(by_merge[index]) if self.primary_key and self.depth > 0 else []
        if not len(own):
            return index, made
        places = {m: i for i, m in enumerate(made)}
        names = [c["name"] for c in self.columns]
        values = {n: rows.column(n).to_pylist() for n in rows.column_names if n != row_diff.ORIGIN}
        for i in own.tolist():
            _, merge, request = made[index[i]]
            source = self._merge_source(merge)
            key, after = _key_and_after(values, i, self.primary_key, names)
            if key in source and source[key][0] == after and source[key][1][0] is not None:
                traced = (source[key][1][0], merge, request)
                if traced not in places:
                    places[traced] = len(made)
                    made.append(traced)
                index[i] = places[traced]
        return index, made

    def _merge_source(self, merge: str) -> dict[tuple, tuple]:
        """{key: (its row at the merge's source head, or None if deleted there; what made it)} of the keys the
        source head holds otherwise than the merge's first parent."""
        if merge not in self._sources:
            commit = Commit.objects.get(id=merge)
            parent, source = (Commit.objects.get(id=c) for c in (commit.parent_id, commit.merge_parent_id))
            sides = [ResolvedRef(catalog=self.catalog, kind="commit", name=c.id, commit=c, branch=None)
                     for c in (parent, source)]  # fmt: skip
            found = {"table_id": self.table_id, "table": self.table, "change": "changed"}
            side = _table_changes(*sides, found, warehouse=self.warehouse, depth=self.depth - 1)
            rows = side.layout(0, side.total)
            index, made = side.made_of(rows)
            names = [c["name"] for c in side.columns]
            values = {n: rows.column(n).to_pylist() for n in rows.column_names if n != row_diff.ORIGIN}
            self._sources[merge] = {
                key: (after, made[index[i]])
                for i in range(rows.num_rows)
                for key, after in [_key_and_after(values, i, self.primary_key, names)]
            }
        return self._sources[merge]

    def records(self, offset: int, limit: int) -> list[dict[str, Any]]:
        rows = self.layout(offset, limit)
        index, made = self.made_of(rows)
        names = [c["name"] for c in self.columns]
        listed = []
        for row, at in zip(rows.to_pylist(), index.tolist(), strict=True):
            commit, merge, request = made[at]
            change = row[row_diff.CHANGE]
            before = None if change == row_diff.INSERT else {n: json_value(row[row_diff._BEFORE + n]) for n in names}
            after = None if change == row_diff.DELETE else {n: json_value(row[row_diff._AFTER + n]) for n in names}
            image = after if after is not None else before
            listed.append({
                "table": self.table, "change": change,
                "key": {k: image[k] for k in self.primary_key} if self.primary_key else None,
                "before": before, "after": after,
                "changed": [n for n in names if before and after and before[n] != after[n]],
                "commit": commit, "merge": merge, "merge_request": request,
            })  # fmt: skip
        return listed

    def arrow_batches(self, batch_rows: int = 65536) -> Iterator[pa.RecordBatch]:
        """The records as Arrow: `_change`, every column before (`b:<name>`) and after (`a:<name>`), the changed
        columns' names, and what made each change."""
        schema = self.arrow_schema()
        names = [c["name"] for c in self.columns]
        for offset in range(0, self.total, batch_rows):
            rows = self.layout(offset, batch_rows)
            index, made = self.made_of(rows)
            columns = [rows.column(row_diff.CHANGE)]
            columns += [rows.column(row_diff._BEFORE + n) for n in names]
            columns += [rows.column(row_diff._AFTER + n) for n in names]
            columns += [_changed(rows, [n for n in names if n not in self.primary_key]), *_made_columns(index, made)]
            yield pa.RecordBatch.from_arrays([pa.chunked_array(c).combine_chunks() if isinstance(c, pa.ChunkedArray)
                                              else c for c in columns], schema=schema)  # fmt: skip

    def arrow_schema(self) -> pa.Schema:
        types = [(c["name"], arrow_type(c["type"])) for c in self.columns]
        return pa.schema(
            [(row_diff.CHANGE, pa.string())]
            + [(row_diff._BEFORE + n, t) for n, t in types]
            + [(row_diff._AFTER + n, t) for n, t in types]
            + [
                (CHANGED, pa.list_(pa.string())),
                (COMMIT, MADE_BY),
                (MERGE, MADE_BY),
                (MERGE_REQUEST, pa.int64()),
            ],
            metadata={"table": self.table, "table_id": self.table_id, "primary_key": json.dumps(self.primary_key)},
        )


def _made_columns(index: np.ndarray, made: list[tuple]) -> list[pa.Array]:
    """The commit, merge and merge request of each change (`index` into `made`): the two ids dictionary-encoded, a
    few distinct ids a batch (their strings sent once a batch, not once a row)."""
    columns = []
    for at in (0, 1):
        ids = [m[at] for m in made]
        missing = np.array([i is None for i in ids])[index]
        indices = pa.array(index.astype(np.int32), mask=missing)
        columns.append(pa.DictionaryArray.from_arrays(indices, pa.array(ids, pa.string())))
    return [*columns, pa.array([m[2] for m in made], pa.int64()).take(pa.array(index, pa.int64()))]


def _key_and_after(values: dict[str, list], i: int, key: list[str], names: list[str]) -> tuple[tuple, tuple | None]:
    """A laid-out change's key, and its row after (None for a delete), from the layout's columns as lists."""
    deleted = values[row_diff.CHANGE][i] == row_diff.DELETE
    side = row_diff._BEFORE if deleted else row_diff._AFTER
    after = None if deleted else tuple(values[row_diff._AFTER + n][i] for n in names)
    return tuple(values[side + k][i] for k in key), after


def _changed(rows: pa.Table, names: list[str]) -> pa.Array:
    """Per row, the names of the columns whose value differs before and after (none for an insert or a delete)."""
    both = pc.equal(rows.column(row_diff.CHANGE), "update").to_numpy(zero_copy_only=False)
    masks = []
    for name in names:
        b, a = rows.column(row_diff._BEFORE + name), rows.column(row_diff._AFTER + name)
        cell = pc.or_kleene(pc.fill_null(pc.not_equal(b, a), False), pc.not_equal(pc.is_null(b), pc.is_null(a)))
        masks.append(cell.to_numpy(zero_copy_only=False) & both)
    grid = np.stack(masks, axis=1) if masks else np.zeros((rows.num_rows, 0), dtype=bool)
    offsets = np.concatenate([[0], np.cumsum(grid.sum(axis=1))]).astype(np.int32)
    _, which = np.nonzero(grid)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(names, pa.string()).take(pa.array(which, pa.int64())))


@dataclass
class ChangeFeed:
    """Every changed table's records one after another (tables by name): a sequence a paginator slices."""

    source: str
    target: str
    tables: list[TableChanges]

    def __len__(self) -> int:
        return sum(t.total for t in self.tables)

    def keep(self) -> None:
        """Keep the diffs read for this answer as files, for the next page (`row_diff.kept_write_later`); called
        once the answer is made, so the first page does not wait for laying out every record."""
        for table in self.tables:
            if table.keep is not None:
                table.keep()

    def count(self) -> int:
        return len(self)

    def __getitem__(self, wanted: slice) -> list[dict[str, Any]]:
        start, stop = wanted.start or 0, wanted.stop if wanted.stop is not None else len(self)
        listed, first = [], 0
        for table in self.tables:
            low, high = max(start - first, 0), min(stop - first, table.total)
            if low < high:
                listed += table.records(low, high - low)
            first += table.total
        return listed


def changes_between(
    *, source: ResolvedRef, target: ResolvedRef, table: str = "", among: Collection[str] = ()
) -> ChangeFeed:
    """The row changes of `target`'s state against `source`'s (any two refs), of every changed table or of the one
    named `db.table` (at `target`, else at `source`; 404 if neither has it); `among`: of those named only (a
    subscription's tables, which either ref may lack)."""
    for ref in (source, target):
        commit_unexpired(ref.commit, None)
    pair = (source.commit.id, target.commit.id)
    changed = _described.get(pair)
    if changed is None:  # commits never change: what differs between two is read once per process (a few pairs)
        changed = _kept_in(_described, pair, _tables_changed(source, target), DESCRIBED_PAIRS)
    if table:
        if not _table_exists(table, source, target):
            raise NotFoundError("table_not_found", f"Neither ref has a table {table!r}.")
        changed = [t for t in changed if t[0]["table"] == table]
    if among:
        changed = [t for t in changed if t[0]["table"] in among]
    warehouse = Warehouse(settings.LAKEUI_WAREHOUSE)
    tables = [_table_changes(source, target, *found, warehouse=warehouse) for found in changed]
    return ChangeFeed(source.commit.id, target.commit.id, [t for t in tables if t.total or table])


_described: dict[tuple[str, str], list] = {}
_provenances: dict[tuple[str, str, str], Provenance] = {}
_keeping = threading.Lock()


def _kept_in(kept: dict, key: tuple, value: Any, size: int) -> Any:
    """Keep `value` under `key` (the oldest entries go beyond `size`); the value kept first wins a race."""
    with _keeping:
        value = kept.setdefault(key, value)
        while len(kept) > size:
            kept.pop(next(iter(kept)))
    return value


def _table_exists(name: str, *refs: ResolvedRef) -> bool:
    database, _, table = name.partition(".")
    for ref in refs:
        databases = {d.object_id for d in objects_at(ref.chain, kind=ObjectKind.DATABASE) if d.name == database}
        if any(t.parent_id in databases for t in objects_at(ref.chain, kind=ObjectKind.TABLE) if t.name == table):
            return True
    return False


def _kept_path(source: str, target: str, table_id: str) -> Path:
    return Path(settings.VAR_DIR) / "row-changes" / f"{source}-{target}-{table_id}.arrow"


def _table_changes(
    source: ResolvedRef,
    target: ResolvedRef,
    found: dict,
    versions: dict | None = None,
    files: dict | None = None,
    *,
    warehouse: Warehouse,
    depth: int = KEY_MERGE_DEPTH,
) -> TableChanges:
    """One table's changes; its `versions` and `files` on both sides read here unless given."""
    table_id = uuid.UUID(found["table_id"])
    if versions is None:
        versions = {n: object_by_id(ref.chain, object_id=table_id) for n, ref in (("from", source), ("to", target))}
    versions = {n: None if v is None or v.dropped else v for n, v in versions.items()}
    shown = versions["to"] or versions["from"]
    if files is None:
        files = {n: tables_files(ref.chain, table_ids=[table_id]).get(table_id, NO_FILES)
                 for n, ref in (("from", source), ("to", target))}  # fmt: skip
    files = {n: files[n] if versions[n] else NO_FILES for n in files}
    removed, added = files["to"].changes_since(files["from"])
    kept_in_to = [s for s in removed if s.id in {t.id for t in files["to"].segments}]
    reads = {
        "from": TableFiles(removed, files["from"].deltas).reads(),
        "to": TableFiles(kept_in_to + added, files["to"].deltas).reads(),
    }
    columns = table_columns(shown)
    by_id = {c.id: c.name for c in columns}
    key = [by_id[i] for i in shown.state.get("primary_key", []) if i in by_id]
    named = (source.commit.id, target.commit.id, found["table_id"])
    provenance = _provenances.get(named)
    if provenance is None:  # kept with the pair's tables: a later page of the pair reads no file entry again
        gone = object_by_id(target.chain, object_id=table_id) if versions["to"] is None else None
        provenance = Provenance(
            chain=target.chain, before=[r.id for r in reads["from"]], after=[r.id for r in reads["to"]], files=files,
            warehouse=warehouse, dropped_by=gone.commit_id if gone is not None and gone.dropped else None,
        )  # fmt: skip
        provenance = _kept_in(_provenances, named, provenance, DESCRIBED_PAIRS * 4)
    path = _kept_path(source.commit.id, target.commit.id, found["table_id"])
    kept = row_diff.kept_read(path)
    if kept is not None:
        counts, total = row_diff.counts_of(kept), kept.num_rows
        rows, keep = kept.slice, None
    else:
        try:
            sides = row_diff.read_sides_arrow(warehouse, columns, reads["from"], reads["to"], origins=True)
            changes = row_diff.changes_of(*sides, key)
        except (*READ_ERRORS, NotImplementedError) as error:  # credentials, or a type Arrow cannot compare
            raise ApplicationError(
                "changes_unreadable", MESSAGE_UNREADABLE.format(table=found["table"]), status=503,
                details={"table": found["table"], "error": str(error)[:300]},
            ) from error  # fmt: skip
        counts, total, rows = changes.counts, changes.total, changes.rows

        def keep(path=path, changes=changes, table=found["table"]) -> None:
            row_diff.kept_write_later(path, changes, {"table": table})

    return TableChanges(
        table_id=found["table_id"], table=found["table"], change=found["change"], columns=[_column(c) for c in columns],
        primary_key=key, counts=counts, total=total, _rows=rows, provenance=provenance, catalog=target.catalog,
        warehouse=warehouse, depth=depth, keep=keep,
    )  # fmt: skip


def _column(column: Column) -> dict:
    return {"id": column.id, "name": column.name, "type": column.type}
