"""What a merge commit records of each object, and what its audit log says the merge discarded and superseded
(docs/merge-semantics.md#which-changes-a-merge-replays): later merges read these records to count every operation
once, so they are decided here, with the rest of the plan, and the writer only adds what it measured (the ids of
the files it wrote) and records them in this order.

Pure: no ORM, no Spark. `merge_app/services/merge_writer.py` applies them.
"""

import uuid
from dataclasses import dataclass, field
from typing import Any

from merge_app.plan.lineage import discarded_whole
from merge_app.plan.objects import TABLE, ObjectDiff
from merge_app.plan.rules import DML, SOURCE_WINS, TARGET_WINS, Op
from merge_app.plan.writes import Write

MERGE, REVERT, CHERRY_PICK = "merge", "revert", "cherry_pick"  # how the source's operations came to be replayed
# What a key comparison's report holds that the operation does not record: its lists, the columns it settled in.
LISTS = ("listed", "choices", "settled_cells", "stale_picks", "types", "not_null")
KEY_MERGE_POSITION = -1  # the position a key merge's operation names in the source head (it has none of its own)


@dataclass(frozen=True)
class Record:
    """One operation the merge commit records, of one object. `replay`: a source operation replayed, to which the
    writer adds the segments a revert's undo put back (`put_back`), which it wrote."""

    object_id: uuid.UUID
    kind: str
    op: str
    details: dict[str, Any]
    replay: bool = False


@dataclass
class Records:
    """What the merge commit records of one object it writes, in order, and the audit log's account of it."""

    operations: list[Record] = field(default_factory=list)
    replayed: list[str] = field(default_factory=list)  # the kinds of the source operations replayed, in order
    discarded: list[dict[str, Any]] = field(default_factory=list)
    superseded: list[dict[str, Any]] = field(default_factory=list)


def origin(op: Op, kind: str) -> dict[str, Any]:
    """What a replayed operation records of the operation it replays, so that later merges count it once
    (`merge_app.selectors.diff._operations`). A merge's names its source commit and position; a cherry-pick's is its
    own commit's, picked from another (`picked_from`: a later merge of the other does not replay it again); a
    revert's undoing operation is the revert's own."""
    if kind == MERGE:
        return {"merged_from": op.commit, "origin_position": op.position}
    if kind == REVERT:
        return {}
    return {"picked_from": list(op.identity)}


def object_records(obj: ObjectDiff, write: Write, kind: str) -> Records:
    """What the merge commit records of an object it writes (`write`, from `writes.object_write`): its creation,
    the source operations it replays (all but those discarded whole, and a table merged by state records its data
    change itself: `key_merge_record`), the target operations a table's `source_wins` superseded, and the operations
    a taken version carries that the merge does not replay (`held`)."""
    records = Records()
    how = write.how
    if how == "created":
        create = next((op for op in obj.source_operations if op.op == "create"), None)
        details = {"name": obj.source.name, **obj.source.state, **(origin(create, kind) if create else {})}
        records.operations.append(Record(obj.object_id, obj.kind, "create", details))
    discarded = {pair.source: pair for pair in obj.discarded}
    whole = discarded_whole(obj.source_operations, obj.discarded)
    for index, op in enumerate(obj.source_operations):
        if op.op == "create" or (how in ("merged_by_key", "rows_kept") and op.op in DML):
            continue
        pair = discarded.get(index)
        if pair is not None:
            records.discarded.append(
                {"object": obj.name, "object_id": str(obj.object_id), "op": op.op, "commit": op.commit,
                 "note": pair.decided.note, "reason": pair.decided.reason, "files": list(pair.decided.discarded)}
            )  # fmt: skip
        if index in whole:
            continue  # else only some of its files are discarded (a merge-on-read delete, A5)
        details = {k: v for k, v in op.details.items() if k != "deltas_on"} | origin(op, kind)
        records.operations.append(Record(obj.object_id, obj.kind, op.op, details, replay=True))
        records.replayed.append(op.op)
    if obj.source_wins and obj.source_wins.superseded:
        ops = [obj.target_operations[index] for index in obj.source_wins.superseded]
        details = {"choice": SOURCE_WINS, "superseded": [[op.commit, op.position] for op in ops]}
        records.operations.append(Record(obj.object_id, obj.kind, "resolve", details))
        records.superseded = [
            {"object": obj.name, "object_id": str(obj.object_id), "op": op.op, "commit": op.commit} for op in ops
        ]
    if how == "rows_taken" and obj.held:
        # The source's version carries these too: a later pick or merge of one of them finds it held here.
        held = {"held": [list(identity) for identity in obj.held]}
        records.operations.append(Record(obj.object_id, obj.kind, "resolve", held))
    return records


def declined(obj: ObjectDiff) -> Record | None:
    """A table whose source changes the merge declines, whole (`target_wins`) or in part (discarded): its state on
    the target is the target's own decision now, recorded so that a later merge from this side into a branch that
    changed nothing since takes it (`selectors.diff._target_is_base_plus`)."""
    if not (obj.merges and obj.kind == TABLE and (obj.resolution == TARGET_WINS or obj.discarded)):
        return None
    choice = "target_wins" if obj.resolution == TARGET_WINS else "discarded"
    return Record(obj.object_id, obj.kind, "resolve", {"declined": choice})


def key_merge_record(obj: ObjectDiff, figures: dict[str, Any], files: dict[str, list[str]], source_head: str) -> Record:
    """The operation a primary-key table merged by key records: its written files, the comparison (`by_key`, its
    lists left out) and the figures of the rows written, an
    `update` if it replaced rows, else an `insert`. Its rows replay the source's changes of the table all at once:
    recorded under the source head, so that a later merge whose base holds that head does not bring them back."""
    by_key = obj.keys and {k: v for k, v in obj.keys.items() if k not in LISTS}
    details = {**files, "by_key": by_key, **figures, "merged_from": source_head,
               "origin_position": KEY_MERGE_POSITION}  # fmt: skip
    return Record(obj.object_id, obj.kind, "update" if figures["rows_replaced"] else "insert", details)
