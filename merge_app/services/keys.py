"""Primary-key tables merged by key and cell (DESIGN.md 4.4), on Spark.

For each side, the keys it inserted, updated or deleted since the ancestor are found by comparing only the rows
of the segments it touched (removed, or gave delete files) and wrote: the rest of the table is the ancestor's on
both sides. Keys changed on one side merge; keys changed on both sides merge when both made the same change or
changed different columns of the row (cell by cell), and conflict when they set one column to different values,
one deleted what the other updated, or both inserted one new key with different rows. `merge.granularity=row`
makes every key changed on both sides a conflict. A target overwrite discards the source's changes to keys that
existed at the ancestor in what it replaced (the whole table, or its partitions). Resolutions (`source_wins`,
`target_wins`) settle conflicts per key or per table.

The comparison is stored (`KeyComparison`) so the diff report, merge requests and the merge itself share it; the
merge writes the result as delete files on the target's segments for the keys it replaces and one new segment
with their merged rows.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from catalog_app.engine import dml
from catalog_app.engine import keys as engine
from catalog_app.engine.reads import read_segments
from catalog_app.engine.segments import POSITION, SEGMENT_ID, Column, WrittenFile
from catalog_app.engine.types import json_value
from catalog_app.engine.warehouse import Warehouse
from catalog_app.engine.writes import write_deltas, write_segments
from catalog_app.models import DataFile
from catalog_app.selectors.refs import commit_chain
from catalog_app.selectors.tables import NO_FILES, TableFiles, tables_files
from merge_app import semantics
from merge_app.models import KeyComparison
from merge_app.rules import SOURCE_WINS
from merge_app.selectors.diff import overwritten_partitions

KEYS_JOB = "merge_keys"
GRANULARITY = "merge.granularity"
MAX_LISTED = 10_000  # conflicting keys kept for the report; the counts are always complete


@dataclass
class Sides:
    """A table's files at the ancestor and on each side, and the columns to compare them in."""

    base: TableFiles
    source: TableFiles
    target: TableFiles
    columns: list[Column]
    keys: list[str]
    path: str  # `<catalog id>/<table id>`
    warehouse: Warehouse
    partition_ids: tuple[int, ...] = ()  # the merged table's partition spec: the rows the merge writes follow it


@dataclass
class KeyResult:
    counts: dict[str, Any] = field(default_factory=dict)
    conflicts: list[dict] = field(default_factory=list)  # each: key, key_id, changes, base, source, target, cells
    # For the merge in this process: rows as Spark gave them, by key id (None: the key is deleted).
    merged: dict[str, tuple[tuple, tuple | None]] = field(default_factory=dict)
    source_rows: dict[str, tuple[tuple, tuple | None]] = field(default_factory=dict)


def _read(spark, sides: Sides, files: TableFiles, segments: list[DataFile], *, positions=False) -> DataFrame:
    chosen = TableFiles(segments, files.deltas).reads()
    return read_segments(spark, sides.warehouse, sides.path, sides.columns, chosen, positions=positions)


def _side_changes(spark, sides: Sides, side: TableFiles) -> tuple[DataFrame, int]:
    touched, written = side.changes_since(sides.base)  # the ancestor's segments it changed, the ones it wrote
    live = {s.id for s in side.segments}
    before = _read(spark, sides, sides.base, touched)
    after = _read(spark, sides, side, [s for s in touched if s.id in live] + written)
    names = [c.name for c in sides.columns]
    return engine.changes_by_key(before, after, sides.keys, names), len(touched) + len(written)


def _json(values: dict | None) -> dict | None:
    return None if values is None else {k: json_value(v) for k, v in values.items()}


def _replaced(overwrites: list[list[dict] | None], columns: list[Column]) -> SparkColumn:
    """Whether the ancestor's row (`_before`) is one the target's overwrites replaced: any row for a whole-table
    overwrite (None), else a row of one of their partitions (a partition column dropped since matches any)."""
    if any(partitions is None for partitions in overwrites):
        return F.lit(True)
    return dml.rows_in_partitions([p for partitions in overwrites for p in partitions], columns, struct=engine.BEFORE)


def compare(
    spark, sides: Sides, *, row_granularity: bool, target_overwrites: list[list[dict] | None]
) -> tuple[KeyResult, DataFrame]:
    """The comparison, and the source's changes of keys the target did not change (keys, `_after`).
    `target_overwrites` holds what each of the target's overwrites since the ancestor replaced (see
    `overwritten_partitions`)."""
    src, src_read = _side_changes(spark, sides, sides.source)
    dest, dest_read = _side_changes(spark, sides, sides.target)
    src, dest = src.cache(), dest.cache()
    discarded = 0
    if target_overwrites:  # src changes to the ancestor's rows the overwrites replaced are discarded
        kept = src.filter((F.col(engine.CHANGE) == engine.INSERT) | ~_replaced(target_overwrites, sides.columns))
        kept = kept.cache()
        discarded = src.count() - kept.count()
        src = kept
    result = KeyResult()
    value_columns = [c.name for c in sides.columns if c.name not in sides.keys]
    both = engine.both_changed(src, dest, sides.keys).collect()
    for row in both:
        key = tuple(row[k] for k in sides.keys)
        key_id = json.dumps([json_value(v) for v in key], separators=(",", ":"))
        base, mine, theirs = (None if row[n] is None else row[n].asDict() for n in ("base", "src", "dest"))
        cells, merged = semantics.row_merge(
            row["src_change"], row["dest_change"], base, mine, theirs, value_columns, row_granularity=row_granularity
        )
        if merged is None:
            result.source_rows[key_id] = (key, None if mine is None else tuple(mine.values()))
            result.conflicts.append(
                {"key": dict(zip(sides.keys, [json_value(v) for v in key], strict=True)), "key_id": key_id,
                 "source_change": row["src_change"], "target_change": row["dest_change"],
                 "base": _json(base), "source": _json(mine), "target": _json(theirs), "cells": cells}
            )  # fmt: skip
        elif (merged or None) != theirs:  # the target does not hold the merged row yet
            result.merged[key_id] = (key, tuple(merged.values()) if merged else None)
    counts: dict[str, Any] = {}
    for name, frame in (("source", src), ("target", dest)):
        by_change = dict(frame.groupBy(engine.CHANGE).count().collect())
        counts[name] = {change: by_change.get(change, 0) for change in (engine.INSERT, engine.UPDATE, engine.DELETE)}
    merged_cells = sum(1 for key_id, (_, row) in result.merged.items() if row is not None)
    counts |= {"both": len(both), "merged_cell_by_cell": merged_cells, "conflicts": len(result.conflicts),
               "discarded_by_overwrite": discarded, "segments_read": src_read + dest_read}  # fmt: skip
    result.counts = counts
    only = engine.only_changed(src, dest, sides.keys).select(*sides.keys, engine.AFTER)
    return result, only


def replay(
    spark, sides: Sides, result: KeyResult, only: DataFrame, choices: dict[str, str], *, tag: str
) -> tuple[list[WrittenFile], list[WrittenFile], dict[str, int], list[DataFile]]:
    """Write the merge on the target: delete files for the keys whose row changes, and one segment with their new
    rows. `choices` maps a conflicting key (its `key_id`) to source_wins or target_wins."""
    rows = list(result.merged.values())
    rows += [row for key_id, row in result.source_rows.items() if choices.get(key_id) == SOURCE_WINS]
    replaced = only
    if rows:
        schema = T.StructType([*(only.schema[k] for k in sides.keys), only.schema[engine.AFTER]])
        replaced = replaced.unionByName(spark.createDataFrame([(*key, row) for key, row in rows], schema))
    replaced = replaced.cache()
    touched, _ = sides.source.changes_since(sides.base)
    _, dest_written = sides.target.changes_since(sides.base)
    scope = {s.id for s in touched} | {s.id for s in dest_written}
    scanned = [s for s in sides.target.segments if s.id in scope]
    current = _read(spark, sides, sides.target, scanned, positions=True)
    hit = engine.rows_with_keys(current, replaced, sides.keys).select(SEGMENT_ID, POSITION)
    deltas = write_deltas(sides.warehouse, sides.path, hit, tag=tag)  # none where no row is hit
    replaced_count = sum(d.row_count for d in deltas)
    new_rows = replaced.filter(F.col(engine.AFTER).isNotNull()).select(f"{engine.AFTER}.*")
    segments = [
        s for s in write_segments(
            sides.warehouse, sides.path, new_rows.coalesce(1), sides.columns, partition_ids=sides.partition_ids,
            tag=tag,
        )
        if s.row_count
    ]  # fmt: skip
    figures = {"rows_replaced": replaced_count, "rows_written": sum(s.row_count for s in segments),
               "segments_read": len(scanned)}  # fmt: skip
    touched_segments = [s for s in scanned if str(s.id) in {d.segment_id for d in deltas}]
    return segments, deltas, figures, touched_segments


@dataclass
class KeyRun:
    sides: Sides
    result: KeyResult
    only: DataFrame

    def compared(self) -> dict[str, Any]:
        """The comparison as the diff takes it: the counts, and every conflicting key."""
        return {"counts": self.result.counts, "conflicts": self.result.conflicts}


def key_runs(spark, diff) -> dict:
    """Compare the primary-key tables of a diff by key on Spark, and store each comparison for the report (the
    diff made again takes it: `selectors.diff.merge_diff_again`)."""
    keyed = [obj for obj in diff.objects if obj.key_mode and obj.merged_state is not None]
    if not keyed:
        return {}
    ids = [obj.object_id for obj in keyed]
    chains = {"base": commit_chain(diff.base), "source": commit_chain(diff.source_head),
              "target": commit_chain(diff.target_head)}  # fmt: skip
    files = {side: tables_files(chain, table_ids=ids) for side, chain in chains.items()}
    runs = {}
    for obj in keyed:
        state = obj.merged_state
        columns = [Column.from_dict(c) for c in state["columns"]]
        names = {c.id: c.name for c in columns}
        sides = Sides(
            base=files["base"].get(obj.object_id, NO_FILES), source=files["source"].get(obj.object_id, NO_FILES),
            target=files["target"].get(obj.object_id, NO_FILES), columns=columns,
            keys=[names[i] for i in state["primary_key"]], path=f"{diff.catalog.id}/{obj.object_id}",
            warehouse=Warehouse(settings.LAKEUI_WAREHOUSE), partition_ids=tuple(state["partition_by"]),
        )  # fmt: skip
        result, only = compare(
            spark, sides, row_granularity=state["properties"].get(GRANULARITY) == "row",
            target_overwrites=[
                overwritten_partitions(op, obj.object_id) for op in obj.target_operations if op.op == "overwrite"
            ],
        )  # fmt: skip
        KeyComparison.objects.update_or_create(
            table_id=obj.object_id, base=diff.base.id, source_head=diff.source_head.id,
            target_head=diff.target_head.id,
            defaults={"catalog": diff.catalog, "counts": result.counts, "conflicts": result.conflicts[:MAX_LISTED]},
        )  # fmt: skip
        runs[obj.object_id] = KeyRun(sides, result, only)
    return runs
