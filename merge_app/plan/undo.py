"""Undoing operations by what they did to files (docs/merge-semantics.md#merges-converge): a revert's undo of a
commit, and the undo a merge records of the source operations it declined. Pure: no ORM, no Spark.

A merge that keeps part of its target (`target_wins` on a table without a key, a dropped compaction, C*) leaves
the target without some of the source's operations. DESIGN 4.0 keeps that decision (a later merge never replays
those operations through the target), and 4.7 wants merges to converge (the target merged back into the source
leaves both with the same rows). Both hold when the merge commit records the undo of what it declined as an
operation of its own, as a revert records its undo: the target's state is then its own operations and that undo,
so merging the target back into the source carries the decision there instead of leaving the source as it was.
"""

from collections.abc import Iterable, Sequence
from typing import Any

from merge_app.planner import TABLE, ObjectDiff
from merge_app.rules import DML, TARGET_WINS, Op

UNDONE_FIELDS = ("segments_added", "segments_removed", "deltas_added", "deltas_removed")


def inverse_kind(kinds: Iterable[str], undone: dict[str, Any]) -> str:
    """The operation an undo of operations of these `kinds` is, by what it does to files (so that a later merge
    replaying it applies the rule cells and positional checks of what it does): a compaction's undo is a
    compaction; one that takes segments out or brings rows of segments back by position rewrites (an `update`, a
    `delete` if it adds nothing); one that only puts files back is an `insert`."""
    if all(kind == "compaction" for kind in kinds):
        return "compaction"
    if undone["segments_removed"] or undone["segments_touched"]:
        return "update" if undone["segments_added"] or undone["segments_touched"] else "delete"
    return "insert"


def net_file_changes(operations: Sequence[Op]) -> dict[str, list[str]]:
    """What these operations did to files, in order, net: a file one of them added and a later one removed (a delete
    file compacted away) is neither added nor removed."""
    net = {name: {} for name in UNDONE_FIELDS}  # dicts as ordered sets
    for op in operations:
        for kind in ("segments", "deltas"):
            added, removed = net[f"{kind}_added"], net[f"{kind}_removed"]
            for file_id in op.details.get(f"{kind}_removed", []):
                if file_id in added:
                    del added[file_id]
                else:
                    removed[file_id] = None
            for file_id in op.details.get(f"{kind}_added", []):
                if file_id in removed:
                    del removed[file_id]
                else:
                    added[file_id] = None
    return {name: list(files) for name, files in net.items()}


def undo_details(operations: Sequence[Op], changes: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The details of one operation that undoes `operations` (their file `changes`, net, if given; else as their
    details say): the files they added taken out, those they removed put back, and the segments whose rows they
    deleted or updated by position named (`segments_touched`: those rows come back), but for segments they wrote
    themselves (taken out whole)."""
    changes = changes if changes is not None else net_file_changes(operations)
    made = {s for op in operations for s in op.details.get("segments_added", [])}  # no rows of theirs come back
    return {
        "segments_added": list(changes.get("segments_removed", [])),
        "segments_removed": list(changes.get("segments_added", [])),
        "deltas_added": list(changes.get("deltas_removed", [])),
        "deltas_removed": list(changes.get("deltas_added", [])),
        "segments_touched": sorted({s for op in operations for s in op.details.get("segments_touched", [])} - made),
        "rows_inserted": sum(op.details.get("rows_deleted", 0) for op in operations),
        "rows_deleted": sum(op.details.get("rows_inserted", 0) for op in operations),
        "rows_updated": sum(op.details.get("rows_updated", 0) for op in operations),
    }  # fmt: skip


def declined(obj: ObjectDiff) -> list[Op]:
    """The source operations a merge declines on a table without a key, in order: all its data operations when the
    table is settled `target_wins` (the target keeps its table whole), else its compactions dropped by C* (the
    target keeps its own version of the segments they compacted). Not the updates and deletes A4/A5 discard: the
    target's overwrite replaced those rows, and it is a change of the target's that merging back replays."""
    if obj.kind != TABLE or obj.keyed or obj.source is None or obj.target is None:
        return []
    if obj.source.dropped or obj.target.dropped or obj.change != "changed_in_both":
        return []
    if obj.resolution == TARGET_WINS:
        return [op for op in obj.source_operations if op.op in DML]
    dropped = {pair.source for pair in obj.discarded if obj.source_operations[pair.source].op == "compaction"}
    return [op for index, op in enumerate(obj.source_operations) if index in dropped]


def declined_undo(obj: ObjectDiff) -> Op | None:
    """The operation a merge records of what it declined of a table (`declined`), as its own: the undo of those
    operations, named by what it does to files (`inverse_kind`), and the operations it undoes (`declines`: their
    identities). Its commit and position are the merge's, given when it is recorded. None when it declined nothing
    that changed files."""
    operations = declined(obj)
    if not operations:
        return None
    details = undo_details(operations)
    if not any(details[name] for name in (*UNDONE_FIELDS, "segments_touched")):
        return None
    details["declines"] = [[*op.identity, op.op] for op in operations]
    return Op("", 0, inverse_kind([op.op for op in operations], details), details)
