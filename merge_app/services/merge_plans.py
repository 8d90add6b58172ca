"""The plan of a merge (docs/merge-semantics.md): `merge_plan`, the one plan step every merge workflow shares
(merge-request plans, dry runs, merges; the diff page and the API diff through `services/diff_reads.py`, which
answers at once and leaves the key comparison to a job): the base, each side's changes, the verdicts and the key
comparison of primary-key tables, in one plan that nothing changes once made. In a criss-cross history the merge
bases are merged into one virtual base first (`bases_merge`), on a worker.
"""

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.conf import settings

from catalog_app.engine.reads import fill_problem, first_misfit
from catalog_app.engine.segments import Column
from catalog_app.engine.warehouse import Warehouse
from catalog_app.models import Catalog, Commit
from catalog_app.selectors.refs import commit_by_id
from catalog_app.selectors.table_files import NO_FILES
from catalog_app.spark import spark_session
from lakeui.errors import ApplicationError, ConflictError
from merge_app.models import VirtualBase
from merge_app.plan.objects import TABLE
from merge_app.plan.rules import LEAVE_OUT
from merge_app.selectors.diff import BasesNotMerged, MergeDiff, merge_diff, merge_diff_again, virtual_base_key
from merge_app.services import keys
from merge_app.services.pipeline import MergeRun

MESSAGE_MOVED = "{which} {ref!r} has moved since the merge was planned: its head is {head}."
MESSAGE_BASES_CONFLICT = "The merge bases ({bases}) of this criss-cross history conflict with each other. "


@dataclass(frozen=True)
class Planned:
    """What the plan step gives, made once by `merge_plan`: the diff, with the base, each side's changes and the
    decisions of the plan (`diff.plan`, the one `merge_app.plan.Plan`: verdicts, writes, records, from the key
    comparisons of primary-key tables changed on both sides); in a worker, also the comparisons' rows, which the
    merge writes (`key_runs`). Not a plan of its own: the step's result, which nothing changes once made."""

    diff: MergeDiff
    key_runs: Mapping[uuid.UUID, keys.KeyRun] = field(default_factory=dict)


def merge_plan(
    *,
    catalog: Catalog,
    source: str,
    target: str,
    resolution: dict | None = None,
    expected_heads: dict[str, str] | None = None,
    in_worker: bool = False,
) -> Planned:
    """The one plan step of merge-request plans, dry runs and merges (and, through `merge_diff_read`, of the diff
    page and the API diff). Primary-key tables changed on both sides are compared by key: here on Spark when this
    process is a worker (`in_worker`: the merge needs the rows). Elsewhere nothing waits for a worker: a table whose
    comparison is stored for these heads takes it, one not compared yet stays pending, and a criss-cross history
    whose virtual base is not made yet raises `BasesNotMerged` (`merge_diff_read` answers both with the job that
    makes them). Raises `branch_moved` when a head is not the expected one."""
    diff = merge_diff_with_bases(catalog=catalog, source=source, target=target, resolution=resolution,
                                 in_worker=in_worker)  # fmt: skip
    _check_heads(diff, expected_heads)
    if in_worker:
        return keys_compared(diff)
    return Planned(diff)


def keys_compared(diff: MergeDiff) -> Planned:
    """In a worker: the plan of a diff, its columns given a type that is not a widening checked against the values
    (`values_fit`), its primary-key tables changed on both sides compared by key on Spark."""
    if any(obj.casts or _filled(obj) for obj in diff.objects):
        values_fit(spark_session(), diff)
    if not any(obj.key_mode for obj in diff.objects):
        return Planned(diff)
    runs = keys.key_runs(spark_session(), diff)
    return Planned(merge_diff_again(diff, {table_id: run.compared() for table_id, run in runs.items()}), runs)


def values_fit(spark, diff: MergeDiff) -> None:
    """Each side's values of the columns the merged table gives a type that is not a widening of the side's
    (`ObjectDiff.casts`, docs/merge-semantics.md#schema-conflicts-in-a-resolution), and each fill by an expression
    in the rows of a side written without its column, read on Spark: 400 `schema_type_lossy` naming the first value
    that the type cannot hold exactly, `invalid_fill` the first row whose fill is not a value of the column. Nothing
    is written before."""
    warehouse = Warehouse(settings.LAKEUI_WAREHOUSE)
    for obj in diff.objects:
        base = f"{diff.catalog.id}/{obj.object_id}"
        for cast in obj.casts:
            side = cast["side"]
            columns = [Column.from_dict(c) for c in getattr(obj, side).state["columns"]]
            [column] = [c for c in columns if c.id == cast["column_id"]]
            misfit = first_misfit(spark, warehouse, base, columns, _reads(diff, side, obj), column, cast["to"])
            if misfit is not None:
                raise ApplicationError(
                    "schema_type_lossy",
                    f"Column {cast['column']!r} of {obj.name!r} cannot become {cast['to']}: the {side}'s "
                    f"{cast['type']} value {misfit!r} does not fit it (cast and back, it is not the same value).",
                    details={"table": obj.name, "column": cast["column"], "side": side, "type": cast["type"],
                             "wanted": cast["to"], "value": misfit},
                )  # fmt: skip
        merged = [Column.from_dict(c) for c in (obj.merged_state or {}).get("columns", []) if obj.kind == TABLE]
        for column in [c for c in merged if c.fill]:
            for side in ("source", "target"):
                version = getattr(obj, side)
                if version is None or version.dropped or column.id in {c["id"] for c in version.state["columns"]}:
                    continue  # a side without the table has no rows to fill (a table only the source has, say)
                problem = fill_problem(spark, warehouse, base, _reads(diff, side, obj), column)
                if problem is not None:
                    raise ApplicationError(
                        "invalid_fill", f"The fill of column {column.name!r} of {obj.name!r} is refused: {problem}.",
                        details={"table": obj.name, "column": column.name, "side": side, "problem": problem},
                    )  # fmt: skip


def _filled(obj) -> bool:
    return obj.kind == TABLE and any(c.get("fill") for c in (obj.merged_state or {}).get("columns", []))


def _reads(diff: MergeDiff, side: str, obj) -> list:
    return diff.files.of(side, [obj.object_id]).get(obj.object_id, NO_FILES).reads()


def merge_diff_with_bases(
    *, catalog: Catalog, source: str, target: str, resolution: dict | None, in_worker: bool
) -> MergeDiff:
    """The diff of two refs; in a criss-cross history their merge bases are merged into one virtual base first
    (`bases_merge`) when this process is a worker. Elsewhere a virtual base not made yet raises `BasesNotMerged`:
    the web never waits for the worker that makes it (`merge_diff_read`)."""
    try:
        return merge_diff(catalog=catalog, source=source, target=target, resolution=resolution)
    except BasesNotMerged as unmerged:
        if not in_worker:
            raise
        bases_merge(catalog=catalog, bases=unmerged.bases)
    return merge_diff(catalog=catalog, source=source, target=target, resolution=resolution)


def bases_merge(*, catalog: Catalog, bases: list[str]) -> Commit:
    """The virtual base of several merge bases, as git's recursive strategy makes it: the bases merged into one
    another in turn (each merge planned as any merge, and through virtual bases of its own if it has several), into
    a commit no branch points to. Made once per set of bases (`VirtualBase`). A key the bases conflict on is left
    out of it (LEAVE_OUT): each side's row of that key is then a change of its own, which the merge takes where
    only one side has it or both have the same row, and is a conflict of the merge otherwise, settled like any
    other. Any other conflict between the bases is a conflict of the merge (409 `merge_conflict`, naming them)."""
    key = virtual_base_key(bases)
    known = VirtualBase.objects.filter(catalog=catalog, bases=key).first()
    if known is not None:
        return known.commit
    current = commit_by_id(bases[0])
    run = MergeRun()
    for other in bases[1:]:
        planned = merge_plan(catalog=catalog, source=other, target=current.id, resolution={"default": LEAVE_OUT},
                          in_worker=True)  # fmt: skip
        if not planned.diff.mergeable:
            error = run.refused(planned.diff, dry_run=True, log={"virtual_base_of": bases})
            error.message = MESSAGE_BASES_CONFLICT.format(bases=", ".join(b[:12] for b in bases)) + error.message
            raise error
        message = f"Virtual merge base: {other[:12]} merged into {current.id[:12]}"
        current = run.result(planned.diff, run.writer(planned.diff, planned.key_runs), parent=current, message=message)
    virtual, _ = VirtualBase.objects.get_or_create(catalog=catalog, bases=key, defaults={"commit": current})
    return virtual.commit


def _check_heads(diff: MergeDiff, expected: dict[str, str] | None) -> None:
    for which, ref, head in (("source", diff.source, diff.source_head), ("target", diff.target, diff.target_head)):
        wanted = (expected or {}).get(which)
        if wanted and not head.id.startswith(wanted):
            message = MESSAGE_MOVED.format(which=which.capitalize(), ref=ref, head=head.id)
            raise ConflictError("branch_moved", message, details={which: head.id})
