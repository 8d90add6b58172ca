"""What a revert changes (docs/merge-semantics.md#revert-and-cherry-pick), decided on plain values: no ORM, no Spark.

A revert of a commit is a merge whose source operations are the commit's undone: per table, one undo of the commit's
data operations (own or replayed by a merge), by what the commit did to its first parent's files: the files it added
taken out, those it removed put back, the rows it deleted by position brought back. Not by its operations' details:
a merge that replayed an overwrite replaced the target's files, while the operation names the source's. A commit that
changed a definition (created, dropped, renamed or altered an object) is not reverted: its definitions are left to
the user. `merge_app/selectors/diff.py` reads the commit's operations and file changes for `undo_operations`.
"""

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from lakeui.errors import ApplicationError
from merge_app.plan.operations import RESOLVE
from merge_app.plan.rules import REWRITES, Op

REVERTED = frozenset({"insert", "delete", "update", "overwrite", "compaction"})  # operations a revert undoes


def undo_operations(
    commit_id: str,
    rows: Iterable[tuple[int, uuid.UUID, str, dict[str, Any]]],
    changes: Mapping[uuid.UUID, Mapping[str, list[str]]],
) -> list[tuple[uuid.UUID, Op]]:
    """The revert's operations, one per table the commit changed rows of: from the commit's operations (`rows`:
    position, object id, kind, details) and what it did to each table's files (`changes`: table id -> its
    segments and delete files added and removed). 400 `revert_unsupported` for a commit that changed definitions."""
    rows = list(rows)
    ddl = sorted({kind for _, _, kind, _ in rows if kind not in REVERTED and kind != RESOLVE})
    if ddl:
        raise ApplicationError(
            "revert_unsupported",
            f"Commit {commit_id[:12]} changed definitions ({', '.join(ddl)}): only commits that changed rows (loads, "
            "deletes, updates, compactions, merges of those) can be reverted; change the definitions back by hand.",
            details={"operations": ddl},
        )
    by_table: dict[uuid.UUID, list[tuple[int, str, dict]]] = {}
    for position, object_id, kind, details in rows:
        if kind != RESOLVE:
            by_table.setdefault(object_id, []).append((position, kind, details))
    undone = []
    for object_id, ops in by_table.items():
        files = changes.get(object_id, {})
        position, kind, _ = ops[-1]  # the first of them
        details = {
            "segments_added": files.get("segments_removed", []), "segments_removed": files.get("segments_added", []),
            "deltas_added": files.get("deltas_removed", []), "deltas_removed": files.get("deltas_added", []),
            # the segments whose rows it deleted or updated by position: their rows come back
            "segments_touched": sorted({s for _, _, done in ops for s in done.get("segments_touched", [])}),
            # which segment each segment it wrote by rewriting came from (copy-on-write): `plan.files.puts_back`
            "segments_from": {k: v for _, _, done in ops for k, v in done.get("segments_from", {}).items()},
            "rows_inserted": sum(done.get("rows_deleted", 0) for _, _, done in ops),
            "rows_deleted": sum(done.get("rows_inserted", 0) for _, _, done in ops),
            "rows_updated": sum(done.get("rows_updated", 0) for _, _, done in ops),
            "reverts": [commit_id, position, kind],
            # whether the commit rewrote rows (a delete, an update, a compaction): else the segments the undo puts
            # back hold rows of their own, not those of the files it takes out (`lineage.segment_origins`)
            "rewrote": any(k in REWRITES for _, k, _ in ops),
        }  # fmt: skip
        undone.append((object_id, Op(commit_id, position, undo_kind([k for _, k, _ in ops], details), details)))
    return undone


def undo_kind(kinds: list[str], undone: dict[str, Any]) -> str:
    """The operation an undo of operations of these `kinds` is, by what it does to files (so that a later merge
    replaying it applies the rule cells and positional checks of what it does): a compaction's undo is a
    compaction; one that takes segments out or brings rows of segments back by position rewrites (an `update`, a
    `delete` if it adds nothing); one that only puts files back is an `insert`."""
    if all(kind == "compaction" for kind in kinds):
        return "compaction"
    if undone["segments_removed"] or undone["segments_touched"]:
        return "update" if undone["segments_added"] or undone["segments_touched"] else "delete"
    return "insert"
