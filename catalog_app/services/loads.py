"""Loading incoming data into a table with one of the nine write strategies (DESIGN.md 3.1), as one commit.

Key strategies read only the segments whose key range (per-segment min/max of each key column) holds one of
the incoming keys, checked key by key; copy-on-write rewrites only the segments holding matched rows, and
merge-on-read writes delta files for the matched positions plus new segments for the new row versions,
rewriting none. Each load records the operations it amounts to in the merge rules' vocabulary (`update` of the
segments touched, `insert`, `delete`, `overwrite`, `alter_column`), one Operation each.
"""

import copy
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from django.conf import settings
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from catalog_app import schema
from catalog_app.engine import dml, files, incoming, keymatch, strategies
from catalog_app.engine.tables import Column, collected, file_in_partitions, in_schema, json_value, write_deltas
from catalog_app.job_specs import KEY_STRATEGIES, LoadSpec, Query, Rows, StoredFiles
from catalog_app.models import DataFile, ObjectVersion
from catalog_app.selectors.refs import commit_chain
from catalog_app.selectors.tables import TableFiles
from catalog_app.services.data import FEW_ROWS, DataChange, Op, Snapshot, select_frame
from catalog_app.services.tables import column_id_next
from lakeui.errors import ApplicationError, ConflictError

DRIVER_REWRITE_BYTES = 256 * 2**20  # copy-on-write: touched segments up to this size are copied on the driver
MESSAGE_UNSPLIT = (
    "{count} segments of the table were written before it was partitioned as it is now and may hold rows of several "
    "partitions; compact the table first (it splits them by partition), then overwrite partitions."
)
MESSAGE_DUPLICATE_KEYS = (
    "The incoming data holds keys more than once (e.g. {examples}); a {strategy} load needs one row per key. "
    "Nothing was committed."
)


# --- the load's fit to the table (checked at submit time and again on the worker) --------------------------


def load_table_check(spec: LoadSpec, columns: list[Column], partition_ids: list[int]) -> None:
    """The columns the strategy's fields name, checked against the table (its shape was checked when the spec
    was built, see job_specs.LoadSpec): an unknown one is a 400, never a fallback to another strategy."""
    by_name = {c.name: c for c in columns}
    if spec.key_columns is not None:
        unknown = [k for k in spec.key_columns if k not in by_name]
        if unknown:
            raise ApplicationError(
                "unknown_key_column", f"key_columns names columns the table does not have: {unknown}.",
                details={"columns": unknown},
            )  # fmt: skip
    if spec.watermark is not None and spec.watermark not in by_name:
        raise ApplicationError("unknown_column", f"watermark names a column the table does not have: {spec.watermark}.")
    if spec.strategy == "scd2":
        validity_columns([dataclasses.asdict(c) for c in columns], 0, spec)
    if spec.partition_column is not None:
        name = spec.partition_column
        if name not in by_name or by_name[name].id not in partition_ids:
            partitions = [c.name for c in columns if c.id in partition_ids]
            raise ApplicationError(
                "invalid_partition_column",
                f"partition_column must be one of the table's partition columns {partitions}, not {name!r}.",
            )


def validity_columns(columns: list[dict], last_column_id: int, spec: LoadSpec) -> tuple[list[dict], list[dict]]:
    """The table's columns with the scd2 validity columns (timestamps) added if it has neither yet, and the
    `alter_column` details of the additions. A table with only one of them, or with one of another type, is
    refused."""
    existing = {c["name"]: c for c in columns}
    names = (spec.valid_from_column, spec.valid_to_column)
    present = [name for name in names if name in existing]
    if len(present) == 1 or any(existing[name]["type"] != "timestamp" for name in present):
        raise ApplicationError(
            "invalid_validity_columns",
            f"The validity columns {list(names)} must both be timestamp columns of the table, or both be new.",
        )
    changes = []
    for offset, name in enumerate(names if not present else (), start=1):
        spec = {"name": name, "type": "timestamp"}
        columns, detail = schema.column_add(columns, spec, column_id=last_column_id + offset, table_has_rows=True)
        changes.append(detail)
    return columns, changes


def staged_remove(spark, warehouse, spec: LoadSpec) -> None:
    """Remove a staged load's folder (see services/data_jobs.staging_create): it has served its one load,
    whatever the outcome. Uploads through the API are left to garbage collection."""
    if isinstance(spec.source, StoredFiles) and spec.source.staged:
        files.delete_folder(spark, warehouse.uri(spec.source.path))


# --- the worker side --------------------------------------------------------------------------------------


def _incoming(spark, snapshot: Snapshot, spec: LoadSpec, cache, *, deferred: bool = False) -> DataFrame:
    """The incoming rows in the table's schema; `deferred` leaves their checks to the load's first pass (see
    `incoming.checked_frame`). A query's rows are cached where the load reads them more than once: each Spark
    action would run the query anew, and a query need not give the same rows twice (`current_timestamp()`)."""
    source = spec.source
    with _incoming_errors():
        if isinstance(source, Query):
            chain = commit_chain(snapshot.head)
            frame = select_frame(
                spark, catalog=snapshot.catalog, chain=chain, statement=source.statement, warehouse=snapshot.warehouse
            )
            if not _one_pass(spec):
                frame = cache(frame)
            return incoming.checked_frame(frame, frame.columns, snapshot.columns, deferred=deferred)
        if isinstance(source, Rows):  # at most MAX_JSON_ROWS: one segment per load
            return incoming.rows_frame(spark, list(source.rows), snapshot.columns).coalesce(1)
        uri = snapshot.warehouse.uri(source.path)
        return incoming.file_frame(spark, uri, source.format, snapshot.columns, deferred=deferred)


@contextmanager
def _incoming_errors() -> Iterator[None]:
    try:
        yield
    except incoming.IncomingError as exc:
        raise ApplicationError(exc.code, exc.message, details=exc.details) from None


def load_change(spark, snapshot: Snapshot, spec: LoadSpec, tag: str) -> DataChange:
    strategy = spec.strategy
    load_table_check(spec, snapshot.columns, snapshot.table.state["partition_by"])
    new_columns, column_changes = None, []
    if strategy == "scd2":
        state = snapshot.table.state
        last_id = column_id_next(snapshot.table) - 1  # ids never reused on any branch (merges match by id)
        columns, column_changes = validity_columns(state["columns"], last_id, spec)
        if column_changes:  # read and write in the schema the commit sets
            new_columns, table = columns, copy.copy(snapshot.table)
            table.state = {**state, "columns": columns, "last_column_id": last_id + 2}
            snapshot = dataclasses.replace(snapshot, table=table)
    partitions = list(spec.partitions) if spec.partitions else None
    if spec.overwrites_partitions:
        refuse_unsplit(snapshot.files, snapshot.table)
    with _cache_scope() as cache:
        # A key load's first pass (the key survey) also runs the incoming rows' checks; `incremental` first drops
        # all but the newest row per key, so its checks run on all rows before.
        deferred = strategy in KEY_STRATEGIES and strategy != "incremental"
        rows = _incoming(spark, snapshot, spec, cache, deferred=deferred)
        if strategy == "append_only":
            written = snapshot.write(rows, tag)
            # Given rows appended to a table without a key read nothing of it: what commits meanwhile cannot change
            # them. A query's rows may come from the table itself, and a key must stay unique.
            commutes = not isinstance(spec.source, Query) and not snapshot.table.state.get("primary_key")
            change = DataChange(
                Op.INSERT, new_segments=written, counts={"rows_inserted": _rows(written)}, commutes=commutes
            )
        elif strategy == "full_refresh":
            replaced = _segments_in_partitions(snapshot, partitions, rows)
            details = {"partitions": partitions} if partitions else {}
            change = _overwrite(snapshot, rows, replaced, tag, details)
        elif strategy == "snapshot":
            change = _snapshot_change(snapshot, rows, spec.partition_column, tag)
        else:
            known = _incoming_rows(snapshot, spec)
            change = _key_change(spark, snapshot, rows, spec, tag, cache, known_rows=known)
    return dataclasses.replace(change, strategy=strategy, new_columns=new_columns, column_changes=column_changes)


def _one_pass(spec: LoadSpec) -> bool:
    """Whether the load reads its incoming rows once: appending them, or replacing the whole table with them."""
    return spec.strategy == "append_only" or (spec.strategy == "full_refresh" and not spec.partitions)


def refuse_unsplit(files: TableFiles, table: ObjectVersion) -> None:
    """A partition overwrite replaces whole files: each segment must hold one partition (409 otherwise)."""
    unsplit = files.unsplit(table.state["partition_by"])
    if unsplit:
        message = MESSAGE_UNSPLIT.format(count=len(unsplit))
        raise ConflictError("unsplit_segments", message, details={"segments": [str(s.id) for s in unsplit[:100]]})


def _rows(written) -> int:
    return sum(w.row_count for w in written)


def _overwrite(snapshot: Snapshot, rows: DataFrame, replaced: list[DataFile], tag: str, details: dict):
    deleted = TableFiles(replaced, snapshot.files.deltas).live_rows(snapshot.warehouse)  # counted, not read
    written = snapshot.write(rows, tag)
    return DataChange(
        Op.OVERWRITE, new_segments=written, removed=snapshot.with_deltas(replaced),
        details=details or {"whole_table": True}, counts={"rows_inserted": _rows(written), "rows_deleted": deleted},
    )  # fmt: skip


def _snapshot_change(snapshot: Snapshot, rows: DataFrame, partition_column: str, tag: str) -> DataChange:
    """Overwrite the partitions present in the incoming data; other partitions' files stay as they are."""
    column = next(c for c in snapshot.columns if c.name == partition_column)
    present = collected(rows.select(F.col(f"`{column.name}`")).distinct())
    values = sorted((json_value(row[column.name]) for row in present), key=str)
    wanted = [{str(column.id): value} for value in values]
    replaced = [s for s in snapshot.files.segments if file_in_partitions(s.partition_values, wanted)]
    return _overwrite(snapshot, rows, replaced, tag, {"partitions": [{column.name: v} for v in values]})


def _key_ranges(snapshot: Snapshot, keys: list[str]) -> tuple[list[tuple[str, list]], set]:
    """Each live segment's min/max of every key column, and the segments without statistics for one (never
    pruned). A segment whose keys are all NULL holds no key that can match: in neither."""
    by_name = {c.name: c for c in snapshot.columns}
    ranges, unbounded = [], set()
    for segment in snapshot.files.segments:
        stats = [segment.stats.get(str(by_name[k].id)) for k in keys]
        if any(s is None for s in stats):
            unbounded.add(segment.id)
        elif all(s["min"] is not None for s in stats):
            ranges.append((str(segment.id), [value for s in stats for value in (s["min"], s["max"])]))
    return ranges, unbounded


@contextmanager
def _cache_scope() -> Iterator[Callable[[DataFrame], DataFrame]]:
    """A `cache` function whose frames are released at the end of the block: a worker runs many jobs."""
    cached: list[DataFrame] = []

    def cache(frame: DataFrame) -> DataFrame:
        cached.append(frame.cache())
        return frame

    try:
        yield cache
    finally:
        for frame in cached:
            frame.unpersist()


def _incoming_rows(snapshot: Snapshot, spec: LoadSpec) -> int | None:
    """How many rows are incoming, if known before reading them: JSON rows, a Parquet upload (its footer)."""
    if isinstance(spec.source, Rows):
        return len(spec.source.rows)
    if isinstance(spec.source, StoredFiles):
        return incoming.file_rows(snapshot.warehouse.uri(spec.source.path), spec.source.format)
    return None


def _key_change(
    spark, snapshot: Snapshot, rows: DataFrame, spec: LoadSpec, tag: str, cache, *, known_rows=None
) -> DataChange:
    strategy, keys = spec.strategy, list(spec.key_columns)
    if strategy == "incremental":
        rows = strategies.newest_per_key(rows, keys, spec.watermark)
    ranges, unbounded = _key_ranges(snapshot, keys)
    key_columns = [next(c for c in snapshot.columns if c.name == k) for k in keys]
    checks = incoming.check_columns(rows)
    survey, found = _survey(spark, rows, key_columns, ranges, checks, known_rows)
    with _incoming_errors():
        incoming.check_counts(survey.sums, snapshot.columns)
    rows, hit, duplicates = rows.drop(*checks), survey.segments, survey.repeated
    if duplicates:  # never for incremental: it kept one row per key
        message = MESSAGE_DUPLICATE_KEYS.format(examples=duplicates[:3], strategy=strategy)
        raise ApplicationError("duplicate_keys", message, details={"examples": duplicates})
    candidates = [s for s in snapshot.files.segments if s.id in unbounded or str(s.id) in hit]
    modify = DataChange(Op.DELETE if strategy == "delete_insert" else Op.UPDATE)
    matched = _driver_matches(snapshot, found, candidates, key_columns, strategy)
    if matched is None:
        out, per_segment = _spark_matches(spark, snapshot, rows, candidates, spec, tag, cache, modify)
    else:
        out, per_segment = _driver_plan(spark, snapshot, rows, matched, candidates, strategy, keys, tag, modify)
    modify.touched = [s for s in candidates if str(s.id) in per_segment]
    few = matched is not None and found.num_rows + sum(s.row_count for s in modify.touched) <= FEW_ROWS
    written = snapshot.write(out, tag, grouped=True, few=few)
    if snapshot.copy_on_write:
        modify.removed = snapshot.with_deltas(modify.touched)
    modify.counts = {"rows_deleted" if modify.op == Op.DELETE else "rows_updated": sum(per_segment.values())}
    modify.new_segments += [w for w in written if w.group == modify.op]
    inserted = [w for w in written if w.group == strategies.INSERT]
    insert = DataChange(Op.INSERT, new_segments=inserted, counts={"rows_inserted": _rows(inserted)})
    operations = [op for op in (modify, insert) if op.new_segments or op.new_deltas or op.removed]
    first, *more = operations or [modify]
    return dataclasses.replace(first, more=more, segments_read=candidates)


def _survey(spark, rows: DataFrame, keys: list[Column], ranges, checks: list[str], known_rows: int | None):
    """The key survey, and the incoming keys with the check flags as Arrow if there are few enough to collect
    (`LAKEUI_DRIVER_MATCH_ROWS`): then the survey is worked out from them on the driver, with no Spark job of
    its own. Else (or for float keys) it is a Spark job, and the keys are None. `known_rows` (the incoming rows,
    when known up front) spares collecting up to the limit of a load that is over it."""
    limit = settings.LAKEUI_DRIVER_MATCH_ROWS
    collect = keymatch.matchable(keys) and (known_rows is None or known_rows <= limit)
    found = keymatch.collect_keys(rows, keys, checks, limit) if collect else None
    if found is None:
        return strategies.key_survey(spark, rows, keys, ranges, summed=checks), None
    return keymatch.survey(found, keys, ranges, checks, limit=5), found


def _driver_matches(snapshot: Snapshot, found, candidates: list[DataFile], keys: list[Column], strategy: str):
    """The candidate rows the incoming keys match (see `keymatch.matched_positions`), found on the driver when
    the keys were collected and the candidates' rows are few enough; else None. Not for scd2, which compares
    the target rows' values."""
    if found is None or strategy == "scd2":
        return None
    reads = TableFiles(candidates, snapshot.files.deltas).reads()
    if sum(s.row_count for s in candidates) > settings.LAKEUI_DRIVER_MATCH_ROWS or not keymatch.readable(reads, keys):
        return None
    return keymatch.matched_positions(snapshot.warehouse, reads, keys, found)


def _driver_plan(spark, snapshot: Snapshot, rows, matched, candidates, strategy, keys, tag, modify: DataChange):
    """The rows to write and the rows replaced per segment, from the matches found on the driver: merge-on-read
    writes the delta files from them directly; copy-on-write rewrites only the touched segments without those
    rows, file by file on the driver when they are few and in the current schema, else in the Spark write."""
    names = [c.name for c in snapshot.columns]
    matched_keys = None if strategy == "delete_insert" else spark.createDataFrame(matched.select(keys))
    out = strategies.keyed_rows(strategy, rows, matched_keys, keys, names)
    if strategy == "insert":
        return out, {}
    replaced = keymatch.positions_by_segment(matched)
    per_segment = {segment: len(positions) for segment, positions in replaced.items()}
    if not snapshot.copy_on_write:
        modify.new_deltas = keymatch.write_position_deltas(snapshot.warehouse, snapshot.base, replaced, tag=tag)
        return out, per_segment
    touched = [s for s in candidates if str(s.id) in replaced]
    reads = TableFiles(touched, snapshot.files.deltas).reads()
    if (
        sum(s.size_bytes for s in touched) <= DRIVER_REWRITE_BYTES
        and in_schema(reads, snapshot.columns)
        and not {s.id for s in touched} & {s.id for s in snapshot.unsplit()}  # a copy holds one partition
    ):
        modify.new_segments = keymatch.rewrite_without(
            snapshot.warehouse, snapshot.base, reads, replaced, columns=snapshot.columns,
            partition_ids=snapshot.table.state["partition_by"], tag=f"{tag}-kept",
        )  # fmt: skip
        return out, per_segment
    kept = snapshot.read(spark, touched, dropped=replaced)
    return out.unionByName(strategies.tagged(kept, names, modify.op)), per_segment


def _spark_matches(spark, snapshot: Snapshot, rows, candidates, spec: LoadSpec, tag, cache, modify: DataChange):
    """The rows to write and the rows replaced per segment, matched by Spark: the candidates are read whole."""
    names = [c.name for c in snapshot.columns]
    target = snapshot.read(spark, candidates, positions=True)
    if len(candidates) <= 8:  # a few segments, read once for matching and rewriting
        target = cache(target)
    plan = _plan(spec, target, rows, names)
    if plan.matched is not None:
        cache(plan.matched)
    if plan.removed is None:
        return plan.rows, {}
    if snapshot.copy_on_write:  # the touched segments' other rows are rewritten
        per_segment = dml.count_per_segment(plan.removed)
        return plan.rows.unionByName(strategies.kept_rows(target, plan.removed, names, modify.op)), per_segment
    modify.new_deltas = write_deltas(snapshot.warehouse, snapshot.base, plan.removed, tag=tag)  # one per segment
    return plan.rows, {delta.segment_id: delta.row_count for delta in modify.new_deltas}


def _plan(spec: LoadSpec, target: DataFrame, rows: DataFrame, names: list[str]):
    strategy, keys = spec.strategy, list(spec.key_columns)
    if strategy == "insert":
        return strategies.insert_plan(target, rows, keys, names)
    if strategy == "update":
        return strategies.update_plan(target, rows, keys, names)
    if strategy == "delete_insert":
        return strategies.delete_insert_plan(target, rows, keys, names)
    if strategy == "scd2":
        return strategies.scd2_plan(
            target, rows, keys, names, valid_from=spec.valid_from_column, valid_to=spec.valid_to_column,
            now=datetime.now(UTC),
        )  # fmt: skip
    return strategies.update_plan(target, rows, keys, names, insert=True)  # upsert, incremental


# --- partitions (full_refresh with `partitions`) -----------------------------------------------------------


def _segments_in_partitions(snapshot: Snapshot, partitions: list[dict] | None, rows: DataFrame) -> list[DataFile]:
    """All live segments, or those of the given partitions (whose incoming rows must all fall in them)."""
    if not partitions:
        return list(snapshot.files.segments)
    by_name = {c.name: c for c in snapshot.columns}
    spec = [by_name[name] for name in _partition_names(snapshot)]
    wanted = [{str(c.id): partition.get(c.name) for c in spec} for partition in partitions]
    outside = rows.filter(~dml.rows_in_partitions(wanted, spec)).count()
    if outside:
        raise ApplicationError(
            "rows_outside_partitions", f"{outside} incoming rows are not in the partitions being overwritten."
        )
    return [s for s in snapshot.files.segments if file_in_partitions(s.partition_values, wanted)]


def _partition_names(snapshot: Snapshot) -> list[str]:
    by_id = {c.id: c.name for c in snapshot.columns}
    return [by_id[i] for i in snapshot.table.state["partition_by"]]
