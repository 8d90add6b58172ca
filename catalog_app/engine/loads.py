"""A load's Spark and Arrow work (docs/api.md#write-strategies): the incoming rows in the table's schema, the segments
they replace or whose rows they update or delete, and the files written, as plain results. The service checks the load
against the table first and records the outcome in the catalog (services/load_changes.py).

Key strategies read only the segments whose key range (per-segment min/max of each key column) holds one of the
incoming keys, checked key by key; copy-on-write rewrites only the segments holding matched rows, and
merge-on-read writes delta files for the matched positions plus new segments for the new row versions, rewriting
none. A refusal of the data is an `incoming.IncomingError`.

A small `insert`, `update`, `upsert` or `delete_insert` (JSON rows or a Parquet upload of up to
`loads_arrow.ARROW_ROWS` rows, into candidate segments of up to `driver_match_rows` rows) runs no Spark job: it is
read, matched and written here with pyarrow (`_key_change_arrow`), as the Spark path would have written it; what
Arrow cannot do exactly goes to Spark (`loads_arrow.Unsupported`).
"""

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from catalog_app.engine import dml, incoming, keymatch, loads_arrow, strategies
from catalog_app.engine.dml import FEW_ROWS
from catalog_app.engine.frames import cache_scope, cached, collected
from catalog_app.engine.reads import READ_ERRORS
from catalog_app.engine.segment_writes import write_deltas, write_segments_arrow
from catalog_app.engine.segments import Column, SegmentRead, WrittenFile, file_in_partitions, in_schema
from catalog_app.engine.session import time_zone
from catalog_app.engine.table_data import TableData
from catalog_app.engine.types import json_value
from catalog_app.job_specs import KEY_STRATEGIES, LoadSpec, Query, Rows, StoredFiles

logger = logging.getLogger(__name__)

DRIVER_REWRITE_BYTES = 256 * 2**20  # copy-on-write: touched segments up to this size are copied on the driver
INSERT, UPDATE, DELETE, OVERWRITE = "insert", "update", "delete", "overwrite"  # the operations a load amounts to
MESSAGE_DUPLICATE_KEYS = (
    "The incoming data holds keys more than once (e.g. {examples}); a {strategy} load needs one row per key. "
    "Nothing was committed."
)


@dataclass(frozen=True)
class LiveSegment:
    """A live segment as a load plans with it: the catalog's figures of it. `unsplit`: written before the table was
    partitioned as it is now."""

    id: str
    row_count: int
    size_bytes: int
    stats: dict[str, Any]
    partition_values: dict[str, Any]
    unsplit: bool = False


@dataclass(frozen=True)
class LoadTable:
    """The table a load reads and writes: its data, its live segments in the order they became live, its write mode,
    and `reads`: what to read of some of those segments (by id, in that order, with their live delta files), made
    only for the segments a load reads (a table may have many)."""

    data: TableData
    segments: tuple[LiveSegment, ...]
    copy_on_write: bool
    reads: Callable[[Sequence[str]], list[SegmentRead]]

    def reads_of(self, segments: Sequence[LiveSegment]) -> list[SegmentRead]:
        return self.reads([segment.id for segment in segments])


@dataclass
class LoadOperation:
    """One operation a load amounts to (`op`: INSERT, UPDATE, DELETE or OVERWRITE). `replaced`: the segments whose
    rows it replaces wholly (an overwrite); `touched`: those whose rows it updated or deleted (by id)."""

    op: str
    new_segments: list[WrittenFile] = field(default_factory=list)
    new_deltas: list[WrittenFile] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class LoadResult:
    operations: list[LoadOperation]
    segments_read: list[str] | None = None  # the segments a key load read (by id); None: as the operations say


def load_write(
    spark: SparkSession,
    table: LoadTable,
    spec: LoadSpec,
    tag: str,
    *,
    query_rows: DataFrame | None = None,
    driver_match_rows: int,
    here_rows: int | None = None,
) -> LoadResult:
    """Write what `spec` loads into `table`. `query_rows`: a Query source's rows (the service resolves the tables
    it reads); `driver_match_rows`: up to how many incoming keys and candidate rows are matched on the driver;
    `here_rows` (default `loads_arrow.ARROW_ROWS`, and no more than `driver_match_rows`): up to how many incoming rows
    a key load is done here with pyarrow, with no Spark job."""
    strategy = spec.strategy
    here = min(loads_arrow.ARROW_ROWS if here_rows is None else here_rows, driver_match_rows)
    if strategy in loads_arrow.STRATEGIES and here > 0:
        try:
            return _key_change_arrow(spark, table, spec, tag, limit=here, driver_match_rows=driver_match_rows)
        except loads_arrow.Unsupported as why:
            logger.info("loading with Spark: %s", why)
    partitions = list(spec.partitions) if spec.partitions else None
    with cache_scope():
        # A key load's first pass (the key survey) also runs the incoming rows' checks; `incremental` first drops
        # all but the newest row per key, so its checks run on all rows before.
        deferred = strategy in KEY_STRATEGIES and strategy != "incremental"
        rows = _incoming(spark, table, spec, query_rows, deferred=deferred)
        if strategy == "append_only":
            written = table.data.write(rows, tag)
            return LoadResult([LoadOperation(INSERT, new_segments=written, counts={"rows_inserted": _rows(written)})])
        if strategy == "full_refresh":
            replaced = _segments_in_partitions(table, partitions, rows)
            details = {"partitions": partitions} if partitions else {}
            return LoadResult([_overwrite(table, rows, replaced, tag, details)])
        if strategy == "snapshot":
            return LoadResult([_snapshot_change(table, rows, spec.partition_column, tag)])
        known = _incoming_rows(table, spec)
        return _key_change(spark, table, rows, spec, tag, known_rows=known, driver_match_rows=driver_match_rows)


def _incoming(
    spark, table: LoadTable, spec: LoadSpec, query_rows: DataFrame | None, *, deferred: bool = False
) -> DataFrame:
    """The incoming rows in the table's schema; `deferred` leaves their checks to the load's first pass (see
    `incoming.checked_frame`). A query's rows are cached where the load reads them more than once: each Spark
    action would run the query anew, and a query need not give the same rows twice (`current_timestamp()`)."""
    source, columns = spec.source, list(table.data.columns)
    if isinstance(source, Query):
        frame = query_rows
        if not _one_pass(spec):
            frame = cached(frame)
        return incoming.checked_frame(frame, frame.columns, columns, deferred=deferred)
    if isinstance(source, Rows):  # at most LAKEUI_MAX_ROWS: one segment per load
        return incoming.rows_frame(spark, list(source.rows), columns).coalesce(1)
    uri = table.data.warehouse.uri(source.path)
    return incoming.file_frame(spark, uri, source.format, columns, deferred=deferred)


def _one_pass(spec: LoadSpec) -> bool:
    """Whether the load reads its incoming rows once: appending them, or replacing the whole table with them."""
    return spec.strategy == "append_only" or (spec.strategy == "full_refresh" and not spec.partitions)


def _rows(written) -> int:
    return sum(w.row_count for w in written)


def _overwrite(table: LoadTable, rows: DataFrame, replaced: list[LiveSegment], tag: str, details: dict):
    """The rows deleted (the replaced segments' live rows) are counted by the catalog, not read: see
    services/load_changes.py."""
    written = table.data.write(rows, tag)
    return LoadOperation(
        OVERWRITE, new_segments=written, replaced=[s.id for s in replaced],
        details=details or {"whole_table": True}, counts={"rows_inserted": _rows(written)},
    )  # fmt: skip


def _snapshot_change(table: LoadTable, rows: DataFrame, partition_column: str, tag: str) -> LoadOperation:
    """Overwrite the partitions present in the incoming data; other partitions' files stay as they are."""
    column = next(c for c in table.data.columns if c.name == partition_column)
    present = collected(rows.select(F.col(f"`{column.name}`")).distinct())
    values = sorted((json_value(row[column.name]) for row in present), key=str)
    wanted = [{str(column.id): value} for value in values]
    replaced = [s for s in table.segments if file_in_partitions(s.partition_values, wanted)]
    return _overwrite(table, rows, replaced, tag, {"partitions": [{column.name: v} for v in values]})


def _key_ranges(table: LoadTable, keys: list[str]) -> tuple[list[tuple[str, list]], set[str]]:
    """Each live segment's min/max of every key column, and the segments without statistics for one (never
    pruned). A segment whose keys are all NULL holds no key that can match: in neither."""
    by_name = {c.name: c for c in table.data.columns}
    ranges, unbounded = [], set()
    for segment in table.segments:
        stats = [segment.stats.get(str(by_name[k].id)) for k in keys]
        if any(s is None for s in stats):
            unbounded.add(segment.id)
        elif all(s["min"] is not None for s in stats):
            ranges.append((segment.id, [value for s in stats for value in (s["min"], s["max"])]))
    return ranges, unbounded


def _incoming_rows(table: LoadTable, spec: LoadSpec) -> int | None:
    """How many rows are incoming, if known before reading them: JSON rows, a Parquet upload (its footer)."""
    if isinstance(spec.source, Rows):
        return len(spec.source.rows)
    if isinstance(spec.source, StoredFiles):
        return incoming.file_rows(table.data.warehouse.uri(spec.source.path), spec.source.format)
    return None


def _key_change(
    spark, table: LoadTable, rows: DataFrame, spec: LoadSpec, tag: str, *, known_rows, driver_match_rows: int
) -> LoadResult:
    strategy, keys = spec.strategy, list(spec.key_columns)
    columns = list(table.data.columns)
    if strategy == "incremental":
        rows = strategies.newest_per_key(rows, keys, spec.watermark)
    ranges, unbounded = _key_ranges(table, keys)
    key_columns = [next(c for c in columns if c.name == k) for k in keys]
    checks = incoming.check_columns(rows)
    survey, found = _survey(spark, rows, key_columns, ranges, checks, known_rows, driver_match_rows)
    incoming.check_counts(survey.sums, columns, examples=incoming.check_examples(rows))
    rows, hit, duplicates = rows.drop(*checks), survey.segments, survey.repeated
    if duplicates:  # never for incremental: it kept one row per key
        message = MESSAGE_DUPLICATE_KEYS.format(examples=duplicates[:3], strategy=strategy)
        raise incoming.IncomingError("duplicate_keys", message, details={"examples": duplicates})
    candidates = [s for s in table.segments if s.id in unbounded or s.id in hit]
    modify = LoadOperation(DELETE if strategy == "delete_insert" else UPDATE)
    matched = _driver_matches(table, found, candidates, key_columns, strategy, driver_match_rows)
    if matched is None:
        out, per_segment = _spark_matches(spark, table, rows, candidates, spec, tag, modify)
    else:
        out, per_segment = _driver_rewrite(spark, table, rows, matched, candidates, strategy, keys, tag, modify)
    touched = [s for s in candidates if s.id in per_segment]
    modify.touched = [s.id for s in touched]
    few = matched is not None and found.num_rows + sum(s.row_count for s in touched) <= FEW_ROWS
    written = table.data.write(out, tag, grouped=True, few=few)
    modify.counts = {"rows_deleted" if modify.op == DELETE else "rows_updated": sum(per_segment.values())}
    modify.new_segments += [w for w in written if w.group == modify.op]
    inserted = [w for w in written if w.group == strategies.INSERT]
    insert = LoadOperation(INSERT, new_segments=inserted, counts={"rows_inserted": _rows(inserted)})
    return LoadResult([modify, insert], segments_read=[s.id for s in candidates])


def _survey(
    spark, rows: DataFrame, keys: list[Column], ranges, checks: list[str], known_rows: int | None, limit: int
) -> tuple[strategies.Survey, pa.Table | None]:
    """The key survey, and the incoming keys with the check flags as Arrow if there are few enough to collect
    (`limit`): then the survey is worked out from them on the driver, with no Spark job of its own. Else (or for
    float keys) it is a Spark job, and the keys are None. `known_rows` (the incoming rows, when known up front)
    spares collecting up to the limit of a load that is over it."""
    collect = keymatch.matchable(keys) and (known_rows is None or known_rows <= limit)
    found = keymatch.collect_keys(rows, keys, checks, limit) if collect else None
    if found is None:
        return strategies.key_survey(spark, rows, keys, ranges, summed=checks), None
    return keymatch.survey(found, keys, ranges, checks, limit=5), found


def _driver_matches(
    table: LoadTable, found, candidates: list[LiveSegment], keys: list[Column], strategy: str, limit: int
):
    """The candidate rows the incoming keys match (see `keymatch.matched_positions`), found on the driver when
    the keys were collected and the candidates' rows are few enough (`limit`); else None. Not for scd2, which
    compares the target rows' values."""
    if found is None or strategy == "scd2":
        return None
    reads = table.reads_of(candidates)
    if sum(s.row_count for s in candidates) > limit or not keymatch.readable(reads, keys):
        return None
    return keymatch.matched_positions(table.data.warehouse, reads, keys, found)


def _key_change_arrow(spark, table: LoadTable, spec: LoadSpec, tag: str, *, limit: int, driver_match_rows: int):
    """`_key_change` with the driver path's matching (`_driver_matches`, `_driver_rewrite`) and no Spark job: the
    incoming rows read here (`loads_arrow.incoming_rows`), the rows to write tagged here (`loads_arrow.keyed_rows`)
    and written by `write_segments_arrow`. Everything that could send the load to Spark (`Unsupported`) is decided
    before a file is written. Repeated incoming keys go to Spark too, which refuses them with its examples."""
    data, strategy, keys = table.data, spec.strategy, list(spec.key_columns)
    columns = list(data.columns)
    key_columns = [next(c for c in columns if c.name == k) for k in keys]
    if not keymatch.matchable(key_columns):
        raise loads_arrow.Unsupported("float or double keys")
    rows = loads_arrow.incoming_rows(data.warehouse, spec.source, columns, limit=limit, time_zone=time_zone(spark))
    ranges, unbounded = _key_ranges(table, keys)
    survey = keymatch.survey(rows, key_columns, ranges, [], limit=1)
    if survey.repeated:
        raise loads_arrow.Unsupported("incoming keys repeated")
    candidates = [s for s in table.segments if s.id in unbounded or s.id in survey.segments]
    reads = table.reads_of(candidates)
    if sum(s.row_count for s in candidates) > driver_match_rows or not keymatch.readable(reads, key_columns):
        raise loads_arrow.Unsupported("candidate segments too large, or written without a key column")
    try:
        matched = keymatch.matched_positions(data.warehouse, reads, key_columns, rows)
    except READ_ERRORS as exc:
        raise loads_arrow.Unsupported(f"reading here: {exc}") from None
    replaced = {} if strategy == "insert" else keymatch.positions_by_segment(matched)
    touched = [s for s in candidates if s.id in replaced]
    touched_reads = [r for r in reads if r.id in replaced]
    if table.copy_on_write and touched and not _copyable(touched, touched_reads, data.columns):
        raise loads_arrow.Unsupported("copy-on-write of segments too large, in an older schema or unsplit")
    out = loads_arrow.keyed_rows(strategy, rows, matched, keys)
    modify = LoadOperation(DELETE if strategy == "delete_insert" else UPDATE, touched=[s.id for s in touched])
    if touched and table.copy_on_write:
        modify.new_segments = keymatch.rewrite_without(
            data.warehouse, data.base, touched_reads, replaced, columns=columns,
            partition_ids=list(data.partition_ids), tag=f"{tag}-kept", key_ids=data.key_ids,
        )  # fmt: skip
    elif touched:
        modify.new_deltas = keymatch.write_position_deltas(data.warehouse, data.base, replaced, tag=tag)
    written = write_segments_arrow(
        data.warehouse, data.base, out, columns, partition_ids=list(data.partition_ids), tag=tag,
        group_column=strategies.GROUP, key_ids=data.key_ids,
    )  # fmt: skip
    replaced_rows = sum(len(positions) for positions in replaced.values())
    modify.counts = {"rows_deleted" if modify.op == DELETE else "rows_updated": replaced_rows}
    modify.new_segments += [w for w in written if w.group == modify.op]
    inserted = [w for w in written if w.group == strategies.INSERT]
    insert = LoadOperation(INSERT, new_segments=inserted, counts={"rows_inserted": _rows(inserted)})
    return LoadResult([modify, insert], segments_read=[s.id for s in candidates])


def _copyable(touched: Sequence[LiveSegment], reads: Sequence[SegmentRead], columns) -> bool:
    """Whether copy-on-write copies the `touched` segments here without their replaced rows (`rewrite_without`):
    few bytes of them, written in the current schema, each holding one partition."""
    return (
        sum(s.size_bytes for s in touched) <= DRIVER_REWRITE_BYTES
        and in_schema(reads, columns)
        and not any(s.unsplit for s in touched)
    )


def _driver_rewrite(spark, table: LoadTable, rows, matched, candidates, strategy, keys, tag, modify: LoadOperation):
    """The rows to write and the rows replaced per segment, from the matches found on the driver: merge-on-read
    writes the delta files from them directly; copy-on-write rewrites only the touched segments without those
    rows, file by file on the driver when they are few and in the current schema, else in the Spark write."""
    data = table.data
    names = [c.name for c in data.columns]
    matched_keys = None if strategy == "delete_insert" else spark.createDataFrame(matched.select(keys))
    out = strategies.keyed_rows(strategy, rows, matched_keys, keys, names)
    if strategy == "insert":
        return out, {}
    replaced = keymatch.positions_by_segment(matched)
    per_segment = {segment: len(positions) for segment, positions in replaced.items()}
    if not table.copy_on_write:
        modify.new_deltas = keymatch.write_position_deltas(data.warehouse, data.base, replaced, tag=tag)
        return out, per_segment
    touched = [s for s in candidates if s.id in replaced]
    reads = table.reads_of(touched)
    if _copyable(touched, reads, data.columns):
        modify.new_segments = keymatch.rewrite_without(
            data.warehouse, data.base, reads, replaced, columns=list(data.columns),
            partition_ids=list(data.partition_ids), tag=f"{tag}-kept", key_ids=data.key_ids,
        )  # fmt: skip
        return out, per_segment
    kept = data.read(spark, reads, dropped=replaced)
    return out.unionByName(strategies.tagged(kept, names, modify.op)), per_segment


def _spark_matches(spark, table: LoadTable, rows, candidates, spec: LoadSpec, tag, modify: LoadOperation):
    """The rows to write and the rows replaced per segment, matched by Spark: the candidates are read whole."""
    data = table.data
    names = [c.name for c in data.columns]
    target = data.read(spark, table.reads_of(candidates), positions=True)
    if len(candidates) <= 8:  # a few segments, read once for matching and rewriting
        target = cached(target)
    rewrite = _rewrite(spec, target, rows, names)
    if rewrite.matched is not None:
        cached(rewrite.matched)
    if rewrite.removed is None:
        return rewrite.rows, {}
    if table.copy_on_write:  # the touched segments' other rows are rewritten
        per_segment = dml.count_per_segment(rewrite.removed)
        return rewrite.rows.unionByName(strategies.kept_rows(target, rewrite.removed, names, modify.op)), per_segment
    modify.new_deltas = write_deltas(data.warehouse, data.base, rewrite.removed, tag=tag)  # one per segment
    return rewrite.rows, {delta.segment_id: delta.row_count for delta in modify.new_deltas}


def _rewrite(spec: LoadSpec, target: DataFrame, rows: DataFrame, names: list[str]):
    strategy, keys = spec.strategy, list(spec.key_columns)
    if strategy == "insert":
        return strategies.insert_rewrite(target, rows, keys, names)
    if strategy == "update":
        return strategies.update_rewrite(target, rows, keys, names)
    if strategy == "delete_insert":
        return strategies.delete_insert_rewrite(target, rows, keys, names)
    if strategy == "scd2":
        return strategies.scd2_rewrite(
            target, rows, keys, names, valid_from=spec.valid_from_column, valid_to=spec.valid_to_column,
            now=datetime.now(UTC),
        )  # fmt: skip
    return strategies.update_rewrite(target, rows, keys, names, insert=True)  # upsert, incremental


# --- partitions (full_refresh with `partitions`) -----------------------------------------------------------


def _segments_in_partitions(table: LoadTable, partitions: list[dict] | None, rows: DataFrame) -> list[LiveSegment]:
    """All live segments, or those of the given partitions (whose incoming rows must all fall in them)."""
    if not partitions:
        return list(table.segments)
    by_name = {c.name: c for c in table.data.columns}
    spec = [by_name[name] for name in _partition_names(table)]
    wanted = [{str(c.id): partition.get(c.name) for c in spec} for partition in partitions]
    outside = rows.filter(~dml.rows_in_partitions(wanted, spec)).count()
    if outside:
        raise incoming.IncomingError(
            "rows_outside_partitions", f"{outside} incoming rows are not in the partitions being overwritten."
        )
    return [s for s in table.segments if file_in_partitions(s.partition_values, wanted)]


def _partition_names(table: LoadTable) -> list[str]:
    by_id = {c.id: c.name for c in table.data.columns}
    return [by_id[i] for i in table.data.partition_ids]
