"""Key matching on the driver, with Arrow, for key loads small enough to hold their keys in memory.

A key load (docs/api.md#write-strategies) must find which segments may hold an incoming key, and which of their rows do.
For a load of up to some million keys, that is cheaper on the driver than as Spark jobs: Spark reads and checks the
incoming rows once and sends their keys (with the check flags) here as Arrow; the segments are pruned key by key against
the catalog's per-segment min/max; the candidate segments' key columns are read from their Parquet files (only those
columns), their deleted positions dropped, and joined with the incoming keys. What comes back are the matched (segment,
position, key) rows. Spark still reads, checks, transforms and writes every incoming row. In copy-on-write mode, a few
touched segments written in the current schema are copied here, file by file, without their replaced rows
(`rewrite_without`): a filter on positions, with no row changed or converted.

Keys are compared in the table's types; float and double keys are left to Spark (NaN and -0.0 compare there as
Spark's joins define, which Arrow's do not).
"""

import bisect
import datetime
import functools
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame

from catalog_app.engine.reads import deleted_positions
from catalog_app.engine.segment_writes import describe_deltas, describe_segments
from catalog_app.engine.segments import POSITION, SEGMENT_ID, Column, SegmentRead, WrittenFile
from catalog_app.engine.strategies import Survey
from catalog_app.engine.types import arrow_type, json_value, stat_value, utc_naive
from catalog_app.engine.warehouse import Warehouse, arrow_filesystem, data_folder, delta_folder

COPY_BATCH_ROWS = 256 * 1024  # rows a segment copy holds in memory at a time


def key_arrow_type(type_name: str) -> pa.DataType | None:
    """The Arrow type keys of this column type are compared in, or None where Arrow and Spark may disagree."""
    return None if type_name in ("float", "double") else arrow_type(type_name)


def matchable(keys: Sequence[Column]) -> bool:
    return all(key_arrow_type(k.type) is not None for k in keys)


def collect_keys(frame: DataFrame, keys: Sequence[Column], extra: Sequence[str], limit: int) -> pa.Table | None:
    """The key columns (in the table's types) and the `extra` columns of `frame`'s rows, or None if it has more
    than `limit` rows. One Spark pass, stopped after `limit` + 1 rows."""
    names = [k.name for k in keys]
    table = frame.select(*[f"`{n}`" for n in [*names, *extra]]).limit(limit + 1).toArrow()
    if table.num_rows > limit:
        return None
    for key in keys:
        index = table.schema.get_field_index(key.name)
        table = table.set_column(index, key.name, table.column(index).cast(key_arrow_type(key.type)))
    return table


def survey(found: pa.Table, keys: Sequence[Column], ranges, summed: Sequence[str], *, limit: int) -> Survey:
    """`strategies.key_survey` worked out from the collected keys (`collect_keys`), with no Spark job: the
    segments whose ranges hold an incoming key, up to `limit` repeated keys (as JSON) and the sums of `summed`."""
    repeated = repeated_keys(found, [k.name for k in keys], limit=limit)
    return Survey(
        segments_hit(found, keys, ranges),
        [{name: json_value(value) for name, value in key.items()} for key in repeated],
        {name: pc.sum(found[name]).as_py() or 0 for name in summed},
    )


def repeated_keys(table: pa.Table, keys: Sequence[str], limit: int) -> list[dict[str, Any]]:
    """Up to `limit` keys that occur more than once (rows with a NULL key never match: not counted)."""
    counted = _present(table, keys).group_by(list(keys)).aggregate([([], "count_all")])
    repeated = counted.filter(pc.greater(counted["count_all"], 1)).select(list(keys)).slice(0, limit)
    return [{name: utc_naive(value) for name, value in key.items()} for key in repeated.to_pylist()]


def _present(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The rows whose key columns are all set: a NULL key matches nothing."""
    valid = [pc.is_valid(table.column(k)) for k in keys if table.column(k).null_count]
    return table.filter(functools.reduce(pc.and_, valid)) if valid else table


class _Sorted:
    """A sorted Arrow array as a sequence of Python values, for `bisect`."""

    def __init__(self, array: pa.Array) -> None:
        self.array = array

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, index: int) -> Any:
        return self.array[index].as_py()


def segments_hit(table: pa.Table, keys: Sequence[Column], ranges: Sequence[tuple[str, list]]) -> set[str]:
    """The segments whose key range holds at least one incoming key, checked per key (not against the batch's
    overall range): the keys sorted by the first column, each segment's slice of them found by binary search,
    and the slice checked against the segment's range of the other key columns. `ranges` as `key_survey` takes
    them."""
    names = [k.name for k in keys]
    present = _present(table.select(names), names)
    ordered = present.take(pc.sort_indices(present, sort_keys=[(names[0], "ascending")]))
    first = _Sorted(ordered.column(0).combine_chunks())
    hit = set()
    for segment, bounds in ranges:
        low, high = (_bound(bounds[i], keys[0].type) for i in (0, 1))
        start, stop = bisect.bisect_left(first, low), bisect.bisect_right(first, high)
        if start >= stop:
            continue
        inside = ordered.slice(start, stop - start)
        for i, key in enumerate(keys[1:], start=1):
            low, high = (pa.scalar(_bound(b, key.type), key_arrow_type(key.type)) for b in bounds[2 * i : 2 * i + 2])
            column = inside.column(i)
            inside = inside.filter(pc.and_(pc.greater_equal(column, low), pc.less_equal(column, high)))
        if inside.num_rows:
            hit.add(segment)
    return hit


def _bound(value: Any, type_name: str) -> Any:
    """A catalog statistic as the Python value Arrow gives for the column type (timestamps tz-aware, in UTC)."""
    bound = stat_value(value, type_name)
    return bound.replace(tzinfo=datetime.UTC) if type_name == "timestamp" else bound


def readable(segments: Sequence[SegmentRead], keys: Sequence[Column]) -> bool:
    """Whether every segment was written with all the key columns (a key column added later reads as its
    default: left to Spark)."""
    return all({k.id for k in keys} <= {c.id for c in segment.columns} for segment in segments)


def matched_positions(
    warehouse: Warehouse, segments: Sequence[SegmentRead], keys: Sequence[Column], incoming: pa.Table
) -> pa.Table:
    """The live rows of `segments` whose key is one of `incoming`'s: SEGMENT_ID, POSITION and the key columns,
    one row per matched table row. Reads only the key columns and the delta files of `segments`."""
    names = [k.name for k in keys]
    wanted = _present(incoming.select(names), names)
    parts = []
    for segment in segments:
        filesystem, path = arrow_filesystem(warehouse.uri(segment.path))
        written = {c.id: c.name for c in segment.columns}
        rows = pq.read_table(path, columns=[written[k.id] for k in keys], filesystem=filesystem)
        rows = pa.table(
            {k.name: rows.column(i).cast(key_arrow_type(k.type)) for i, k in enumerate(keys)}
            | {POSITION: pa.array(np.arange(rows.num_rows, dtype=np.int64))}
        )
        if segment.deltas:
            rows = rows.filter(pc.invert(pc.is_in(rows[POSITION], deleted_positions(warehouse, segment.deltas))))
        rows = rows.join(wanted, names, join_type="left semi")
        parts.append(rows.append_column(SEGMENT_ID, pa.array([segment.id] * rows.num_rows, pa.string())))
    if not parts:
        schema = pa.schema([*[(k.name, key_arrow_type(k.type)) for k in keys], (POSITION, pa.int64()),
                            (SEGMENT_ID, pa.string())])  # fmt: skip
        return schema.empty_table()
    return pa.concat_tables(parts)


def positions_by_segment(matched: pa.Table) -> dict[str, pa.Array]:
    """The matched positions of each segment, sorted."""
    ordered = matched.sort_by([(SEGMENT_ID, "ascending"), (POSITION, "ascending")])
    segments, positions = ordered.column(SEGMENT_ID).combine_chunks(), ordered.column(POSITION).combine_chunks()
    runs = pc.run_end_encode(segments)
    starts = [0, *runs.run_ends.to_pylist()]
    return {
        segment: positions.slice(starts[i], starts[i + 1] - starts[i])
        for i, segment in enumerate(runs.values.to_pylist())
    }


def write_position_deltas(
    warehouse: Warehouse, base: str, positions: Mapping[str, pa.Array], *, tag: str
) -> list[WrittenFile]:
    """One delta file per segment of `positions`, laid out as `writes.write_deltas` lays out Spark's."""
    if not positions:
        return []
    target = delta_folder(base, tag)
    for segment, listed in positions.items():
        filesystem, path = arrow_filesystem(warehouse.uri(f"{target}/__segment={segment}"))
        filesystem.create_dir(path, recursive=True)
        pq.write_table(pa.table({"pos": listed}), f"{path}/part-{uuid.uuid4()}.parquet", filesystem=filesystem)
    return describe_deltas(warehouse, base, target)


def rewrite_without(
    warehouse: Warehouse,
    base: str,
    segments: Sequence[SegmentRead],
    dropped: Mapping[str, pa.Array],
    *,
    columns: Sequence[Column],
    partition_ids: Sequence[int],
    tag: str,
    key_ids: Sequence[int] = (),
) -> list[WrittenFile]:
    """Copy-on-write of `segments` (written in the current schema: `segments.in_schema`): each one's rows but its
    deleted and `dropped` positions, in the same order and schema (field ids kept), as a new segment; a segment with
    no row left gives none."""
    target = data_folder(base, tag)
    written = 0
    for segment in segments:
        filesystem, path = arrow_filesystem(warehouse.uri(segment.path))
        with filesystem.open_input_file(path) as handle:
            source = pq.ParquetFile(handle)  # the file alone: no partition columns taken from its path
            keep = np.ones(source.metadata.num_rows, dtype=bool)
            keep[dropped.get(segment.id, pa.array([], pa.int64())).to_numpy()] = False
            if segment.deltas:
                keep[deleted_positions(warehouse, segment.deltas).to_numpy()] = False
            if keep.any():
                _copy_rows(source, keep, warehouse.uri(f"{target}/part-{uuid.uuid4()}.parquet"))
                written += 1
    return describe_segments(warehouse, base, target, columns, partition_ids, key_ids) if written else []


def _copy_rows(source: pq.ParquetFile, keep: np.ndarray, uri: str) -> None:
    """The `keep` rows of `source` to a new file at `uri`, a batch at a time (a segment is never whole in memory),
    with its schema and metadata."""
    filesystem, path = arrow_filesystem(uri)
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    start = 0
    with pq.ParquetWriter(path, source.schema_arrow, filesystem=filesystem) as writer:
        for batch in source.iter_batches(batch_size=COPY_BATCH_ROWS):
            kept = batch.filter(pa.array(keep[start : start + batch.num_rows]))
            start += batch.num_rows
            if kept.num_rows:
                writer.write_batch(kept)
