"""Primary-key tables merged by key and cell (docs/merge-semantics.md#primary-key-tables): the service around the
engine's Spark steps.

For each side, the keys it inserted, updated or deleted since the ancestor are found by comparing only the rows
of the segments it touched (removed, or gave delete files) and wrote: the rest of the table is the ancestor's on
both sides. Keys changed on one side merge; keys changed on both sides merge when both made the same change or
changed different columns of the row (cell by cell), and conflict when they set one column to different values,
one deleted what the other updated, or both inserted one new key with different rows. `merge.granularity=row`
makes every key changed on both sides a conflict. A target overwrite discards the source's changes to keys that
existed at the ancestor in what it replaced (the whole table, or its partitions). Resolutions (`source_wins`,
`target_wins`) settle conflicts per key or per table.

Here: which segments each side changed (from the catalog), the engine's comparison of them, and the comparison
stored (`KeyComparison`) so the diff report, merge requests and the merge share it. Each key both changed is decided
by the plan (`plan.key_verdicts`), and so are the rows the merge writes for them. The reading and writing of rows
is the engine's (`catalog_app.engine.keys`): the merge writes delete files on the target's segments for the keys it
replaces and one new segment with their merged rows.
"""

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.db.models.fields.json import KT
from django.utils import timezone

from catalog_app.engine import keys as engine
from catalog_app.engine.segments import Column, WrittenFile
from catalog_app.engine.table_data import TableData
from catalog_app.engine.types import json_value, stat_value
from catalog_app.engine.warehouse import Warehouse
from catalog_app.selectors.table_files import NO_FILES, FileRow, TableFiles
from lakeui.errors import ApplicationError
from lakeui.fields import json_dumps
from merge_app import plan
from merge_app.job_specs import KeysSpec
from merge_app.models import KeyComparison, KeyConflict, Merge, MergeRequest
from merge_app.plan.keys import KeyResult, Row, discarding_overwrites

KEYS_JOB = KeysSpec.KIND
GRANULARITY = "merge.granularity"
MESSAGE_DOUBLED_KEY = (
    "The merge was stopped before writing anything: its result would hold these keys twice: {keys}. This is a bug "
    "in LakeUI's key merge; no branch changed."
)


@dataclass
class Sides:
    """A table's files at the ancestor and on each side, and the table as the engine reads it."""

    base: TableFiles
    source: TableFiles
    target: TableFiles
    table: engine.KeyTable

    def changes(self, side: TableFiles) -> tuple[engine.SideReads, int]:
        """What the engine reads of a side's changes, and how many segments that is."""
        touched, written = side.changes_since(self.base)  # the ancestor's segments it changed, the ones it wrote
        live = {s.id for s in side.segments}
        before = TableFiles(touched, self.base.deltas).reads()
        after = TableFiles([s for s in touched if s.id in live] + written, side.deltas).reads()
        return engine.SideReads(tuple(before), tuple(after)), len(touched) + len(written)


def compare(spark, sides: Sides, *, row_granularity: bool, target_overwrites: list[list[dict] | None]) -> tuple:
    """The comparison, and the source's changes of keys the target did not change (the engine's frame of keys
    and `_after`). `target_overwrites` holds what each of the target's overwrites since the ancestor replaced
    (`FilesRead.overwritten`)."""
    (src, src_read), (dest, dest_read) = sides.changes(sides.source), sides.changes(sides.target)
    changes = engine.key_changes(spark, sides.table, src, dest, target_overwrites=target_overwrites)
    value_columns = [c.name for c in sides.table.data.columns if c.name not in sides.table.keys]
    result = plan.key_verdicts(changes.both, sides.table.keys, value_columns, row_granularity=row_granularity)
    result.counts = {**changes.counts, **result.counts, "discarded_by_overwrite": changes.discarded,
                     "segments_read": src_read + dest_read}  # fmt: skip
    return result, changes.only


def replay(
    spark, sides: Sides, only, rows: list[Row], *, tag: str
) -> tuple[list[WrittenFile], list[WrittenFile], dict[str, int], list[FileRow]]:
    """Write the merge on the target: delete files for the keys whose row changes, and one segment with their new
    rows: those of the keys only the source changed (`only`), and `rows`, the plan's for the keys both changed
    (`plan.keys.key_rows`)."""
    # Where the target's rows of these keys can be: the ancestor's segments the source changed (a key it changed
    # is where the ancestor had it, unless the target changed it too), and every segment the target touched or
    # wrote. A touched one is not only where the target deleted rows: a restore, or a merge that took the other
    # side's files, gives an ancestor's segment back fewer deletes, and the rows it brings back (a key's older
    # row) live in a segment the target did not write.
    src_touched, _ = sides.source.changes_since(sides.base)
    dest_touched, dest_written = sides.target.changes_since(sides.base)
    scope = {s.id for s in [*src_touched, *dest_touched, *dest_written]}
    scanned = [s for s in sides.target.segments if s.id in scope]
    reads = TableFiles(scanned, sides.target.deltas).reads()
    try:
        segments, deltas = engine.key_merge_write(spark, sides.table, only, rows, reads, tag=tag,
                                                  others=_left_alone(sides, scope))  # fmt: skip
    except engine.DoubledKeyError as exc:
        doubled = [{k: json_value(v) for k, v in key.items()} for key in exc.keys]
        raise ApplicationError(
            "doubled_key", MESSAGE_DOUBLED_KEY.format(keys=doubled), details={"keys": doubled}, status=500
        ) from None
    figures = {"rows_replaced": sum(d.row_count for d in deltas), "rows_written": sum(s.row_count for s in segments),
               "segments_read": len(scanned)}  # fmt: skip
    touched_segments = [s for s in scanned if str(s.id) in {d.segment_id for d in deltas}]
    return segments, deltas, figures, touched_segments


def _left_alone(sides: Sides, scope: set) -> list:
    """The target's segments the key merge does not scan, each with its first key column's bounds (statistics, as
    values of the column's type: dates, timestamps and decimals compare with the merged keys)."""
    first = next(c for c in sides.table.data.columns if c.name == sides.table.keys[0])
    others = [s for s in sides.target.segments if s.id not in scope]
    bounds = [s.stats.get(str(first.id), {}) for s in others]
    reads = TableFiles(others, sides.target.deltas).reads()
    return [
        engine.KeyedSegment(read, stat_value(b.get("min"), first.type), stat_value(b.get("max"), first.type))
        for read, b in zip(reads, bounds, strict=True)
    ]


@dataclass
class KeyRun:
    sides: Sides
    result: KeyResult
    only: Any  # the engine's frame of the keys only the source changed

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
    files = {side: diff.files.of(side, ids) for side in ("base", "source", "target")}  # as the diff read them
    runs = {}
    for obj in keyed:
        state = obj.merged_state
        columns = [Column.from_dict(c) for c in state["columns"]]
        names = {c.id: c.name for c in columns}
        data = TableData(
            Warehouse(settings.LAKEUI_WAREHOUSE), f"{diff.catalog.id}/{obj.object_id}", tuple(columns),
            tuple(state["partition_by"]), tuple(state["primary_key"]),
        )  # fmt: skip
        table = engine.KeyTable(data, keys=tuple(names[i] for i in state["primary_key"]))
        sides = Sides(
            base=files["base"].get(obj.object_id, NO_FILES), source=files["source"].get(obj.object_id, NO_FILES),
            target=files["target"].get(obj.object_id, NO_FILES), table=table,
        )  # fmt: skip
        result, only = compare(
            spark, sides, row_granularity=state["properties"].get(GRANULARITY) == "row",
            target_overwrites=[diff.files.overwritten(op, obj.object_id) for op in discarding_overwrites(obj)],
        )  # fmt: skip
        _stored(diff, obj.object_id, result)
        runs[obj.object_id] = KeyRun(sides, result, only)
    return runs


@transaction.atomic
def _stored(diff, table_id, result: KeyResult) -> None:
    """Store a table's comparison: its counts, and every conflicting key a row (`KeyConflict`, copied in one
    statement). A comparison stored already for these heads (a second job for them) is the same one: its row,
    locked here, is written over."""
    comparison, created = KeyComparison.objects.update_or_create(
        table_id=table_id, base=diff.base.id, source_head=diff.source_head.id, target_head=diff.target_head.id,
        defaults={"catalog": diff.catalog, "counts": result.counts, "created_at": timezone.now()},  # kept anew
    )  # fmt: skip
    if not created:
        comparison.conflict_rows.all().delete()
    table = KeyConflict._meta.db_table
    with connection.cursor() as cursor, cursor.copy(
        f"COPY {table} (comparison_id, position, key_id, conflict) FROM STDIN"
    ) as copy:  # fmt: skip
        for position, conflict in enumerate(result.conflicts):
            copy.write_row((comparison.id, position, conflict["key_id"], json_dumps(conflict)))


KEPT_FOR = timedelta(days=1)  # a key comparison no merge made and no open request plans on, kept this long
EXPIRE_EVERY = 3600.0  # seconds between two rounds of `key_comparisons_expire` in one worker
_expired_at = [float("-inf")]


def key_comparisons_expire(*, kept_for: timedelta = KEPT_FOR) -> int:
    """Delete the key comparisons stored more than `kept_for` ago that no merge, pick or revert was made with (the
    blame reads those: which cells a resolution settled) and no open merge request plans on: a diff's or an old
    plan's, of heads that have moved on, made again if a diff of them is read. Their conflicts go with them. Run
    by the workers' upkeep, once an hour in each (`EXPIRE_EVERY`). The number of comparisons deleted."""
    if time.monotonic() - _expired_at[0] < EXPIRE_EVERY:
        return 0
    _expired_at[0] = time.monotonic()
    heads = {"base": OuterRef("base"), "source_head": OuterRef("source_head"), "target_head": OuterRef("target_head")}
    merged = Merge.objects.filter(dry_run=False, commit__isnull=False, **heads)
    planned = (
        MergeRequest.objects.filter(state=MergeRequest.State.OPEN)
        .annotate(base=KT("plan__base"), source_head=KT("plan__heads__source"), target_head=KT("plan__heads__target"))
        .filter(**heads)
    )
    old = KeyComparison.objects.filter(created_at__lt=timezone.now() - kept_for)
    _, deleted = old.exclude(Exists(merged)).exclude(Exists(planned)).delete()
    return deleted.get(KeyComparison._meta.label, 0)
