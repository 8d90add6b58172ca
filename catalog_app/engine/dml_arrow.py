"""Small deletes and updates done in this process with pyarrow, with no Spark job: the rows a predicate matches in a
few candidate segments (`positions_matching`), and an update's new row versions (`updated_rows`), written then by
`writes.write_segments_arrow` exactly as Spark writes them. Each raises `Unsupported` where Arrow could not give
exactly what Spark gives (see `predicate_arrow`, and `read_columns` here), and the job does that part with Spark.

Segments are read as Spark reads them (`reads.read_segments`): columns matched by Parquet field id (by name in a
file without ids), an older schema projected onto the current one (renamed columns by id, widened types cast up,
a column added since with no default as NULL), the union of the live delta files' positions left out. A column
added since with a default is left to Spark (Spark casts the JSON default in the session's time zone).
"""

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from catalog_app.engine.predicate_arrow import Unsupported, assigned, matching
from catalog_app.engine.predicate_parser import Expr
from catalog_app.engine.reads import READ_ERRORS, deleted_positions
from catalog_app.engine.segments import Column, SegmentRead
from catalog_app.engine.strategies import GROUP
from catalog_app.engine.types import arrow_type
from catalog_app.engine.warehouse import Warehouse, arrow_filesystem

ARROW_ROWS = 10_000  # an update of up to this many rows computes and writes its new row versions here
_FIELD_ID = b"PARQUET:field_id"

__all__ = ["ARROW_ROWS", "Unsupported", "positions_matching", "read_columns", "updated_rows"]


def _file_columns(source: pq.ParquetFile, segment: SegmentRead, wanted: Sequence[Column]) -> list[str | None]:
    """The file's column holding each `wanted` column (current schema), or None for a column the segment was
    written without."""
    fields = source.schema_arrow
    ids = {int(f.metadata[_FIELD_ID]): f.name for f in fields if f.metadata and _FIELD_ID in f.metadata}
    written = {c.id: c for c in segment.columns}
    names = []
    for column in wanted:
        if column.id not in written:
            if column.default is not None or column.fill:
                raise Unsupported(f"column {column.name!r} added with a default since the segment was written")
            names.append(None)
            continue
        name = ids.get(column.id) if ids else written[column.id].name
        if name is None or fields.get_field_index(name) < 0:
            raise Unsupported(f"column {column.name!r} not found in {segment.path}")
        names.append(name)
    return names


def read_columns(
    warehouse: Warehouse, segment: SegmentRead, wanted: Sequence[Column], *, row_groups: Sequence[int] | None = None
) -> tuple[pa.Table, int]:
    """The `wanted` columns (current schema) of every row of `segment` (deleted ones too), or of its `row_groups`,
    in the columns' Arrow types; and the position of the first row read."""
    filesystem, path = arrow_filesystem(warehouse.uri(segment.path))
    with filesystem.open_input_file(path) as handle:
        source = pq.ParquetFile(handle)
        names = _file_columns(source, segment, wanted)
        present = sorted({name for name in names if name is not None})
        if row_groups is None:
            read, first = source.read(columns=present), 0
        else:
            read = source.read_row_groups(list(row_groups), columns=present)
            first = sum(source.metadata.row_group(g).num_rows for g in range(row_groups[0]))
        rows = read.num_rows if present else source.metadata.num_rows
    if row_groups is not None and not present:
        rows = sum(source.metadata.row_group(g).num_rows for g in row_groups)
    arrays = []
    for column, name in zip(wanted, names, strict=True):
        target = arrow_type(column.type)
        if name is None:
            arrays.append(pa.nulls(rows, target))
            continue
        try:
            arrays.append(read.column(name).cast(target, safe=True).combine_chunks())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise Unsupported(f"column {column.name!r} of {segment.path} as {column.type}: {exc}") from None
    return pa.table(arrays, names=[c.name for c in wanted]) if wanted else pa.table({}), first


def _live(warehouse: Warehouse, segment: SegmentRead, rows: int) -> np.ndarray:
    keep = np.ones(rows, dtype=bool)
    if segment.deltas:
        keep[deleted_positions(warehouse, segment.deltas).to_numpy()] = False
    return keep


def positions_matching(
    warehouse: Warehouse, columns: Sequence[Column], candidates: Sequence[SegmentRead], where: Expr, *, time_zone: str
) -> dict[str, pa.Array]:
    """The live positions `where` matches in each of `candidates` (segments without a match left out), sorted, as
    `keymatch.positions_by_segment` gives them. Reads only the predicate's columns."""
    named = where.columns()
    wanted = [c for c in columns if c.name in named]
    types = {c.name: c.type for c in columns}
    found: dict[str, pa.Array] = {}
    try:
        for segment in candidates:
            rows, _ = read_columns(warehouse, segment, wanted)
            count = _row_count(warehouse, segment) if not wanted else rows.num_rows
            keep = _live(warehouse, segment, count)
            live = np.flatnonzero(keep)
            rows = rows.filter(pa.array(keep)) if wanted else pa.table({"_": pa.nulls(len(live))})
            hit = live[matching(where, rows, types, time_zone=time_zone)]
            if len(hit):
                found[segment.id] = pa.array(hit.astype(np.int64), pa.int64())
    except READ_ERRORS as exc:  # a file this process cannot read (credentials): Spark reads it
        raise Unsupported(f"reading here: {exc}") from None
    return found


def _row_count(warehouse: Warehouse, segment: SegmentRead) -> int:
    filesystem, path = arrow_filesystem(warehouse.uri(segment.path))
    with filesystem.open_input_file(path) as handle:
        return pq.ParquetFile(handle).metadata.num_rows


def rows_at(warehouse: Warehouse, segment: SegmentRead, columns: Sequence[Column], positions: pa.Array) -> pa.Table:
    """The rows of `segment` at `positions` (sorted), in the current `columns`: only their row groups are read."""
    filesystem, path = arrow_filesystem(warehouse.uri(segment.path))
    with filesystem.open_input_file(path) as handle:
        footer = pq.ParquetFile(handle).metadata
    starts = np.cumsum([0, *(footer.row_group(g).num_rows for g in range(footer.num_row_groups))])
    wanted = positions.to_numpy()
    groups = sorted(set(np.searchsorted(starts, wanted, side="right") - 1))
    parts = []
    for group in groups:  # one row group at a time: a segment is never read whole for a few rows
        rows, first = read_columns(warehouse, segment, columns, row_groups=[group])
        inside = wanted[(wanted >= first) & (wanted < first + rows.num_rows)] - first
        parts.append(rows.take(pa.array(inside)))
    return pa.concat_tables(parts)


def updated_rows(
    warehouse: Warehouse,
    columns: Sequence[Column],
    segments: Sequence[SegmentRead],
    positions: Mapping[str, pa.Array],
    assignments: Mapping[str, Expr],
    *,
    time_zone: str,
) -> pa.Table:
    """The new versions of the rows at `positions` (by segment id; of `segments`): the table's `columns`, the
    assignments applied (each computed from the row's old values), and GROUP the segment each row comes from (as
    `dml.by_origin` tags them)."""
    by_id = {segment.id: segment for segment in segments}
    try:
        parts = []
        for segment_id, found in positions.items():
            rows = rows_at(warehouse, by_id[segment_id], columns, found)
            parts.append(rows.append_column(GROUP, pa.array([segment_id] * rows.num_rows, pa.string())))
    except READ_ERRORS as exc:
        raise Unsupported(f"reading here: {exc}") from None
    old = pa.concat_tables(parts)
    types = {c.name: c.type for c in columns}
    new = {c.name: assigned(assignments[c.name], old, types, c, time_zone=time_zone) for c in columns
           if c.name in assignments}  # fmt: skip
    return pa.table({c.name: new.get(c.name, old.column(c.name)) for c in columns} | {GROUP: old.column(GROUP)})


def positions_removed(
    warehouse: Warehouse,
    segment: SegmentRead,
    columns: Sequence[Column],
    *,
    after: Sequence[str] | None,
    rewrites: Sequence[SegmentRead] = (),
) -> np.ndarray:
    """The live positions of `segment` (its `deltas` applied) that a commit removed: those its delete files `after`
    list (the segment kept in place, merge-on-read), or, when it rewrote the segment (`after` None, copy-on-write),
    those whose rows its `rewrites` do not hold, row for row (a row the table holds twice is kept as often as the
    rewrites hold it). Sorted."""
    count = _row_count(warehouse, segment)
    live = np.flatnonzero(_live(warehouse, segment, count))
    if after is not None:
        gone = np.unique(deleted_positions(warehouse, after).to_numpy()) if after else np.array([], np.int64)
        return np.intersect1d(live, gone)
    kept: dict[tuple, int] = {}
    for rewrite in rewrites:
        rows, _ = read_columns(warehouse, rewrite, columns)
        keep = _live(warehouse, rewrite, rows.num_rows)
        for row in zip(*(c.to_pylist() for c in rows.filter(pa.array(keep)).columns), strict=True):
            kept[row] = kept.get(row, 0) + 1
    rows, _ = read_columns(warehouse, segment, columns)
    removed = []
    values = list(zip(*(c.to_pylist() for c in rows.columns), strict=True)) if columns else [()] * count
    for position in live:
        row = values[position]
        if kept.get(row):
            kept[row] -= 1
        else:
            removed.append(position)
    return np.array(removed, np.int64)
