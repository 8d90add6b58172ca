"""Which operations count as a side's changes since the base (docs/merge-semantics.md#which-changes-a-merge-replays),
decided on plain values: no ORM, no Spark. `merge_app/selectors/diff.py` reads the operations recorded on a side's
first-parent chain, in commit order, for `side_changes`; and drops those the other side holds with `not_held`.
"""

import uuid
from collections.abc import Iterable
from typing import Any

from merge_app.plan.rules import Op

RESOLVE = "resolve"  # what a merge recorded of its choices: `held`, `superseded`, `declined`
Identity = tuple[str, int, uuid.UUID]  # an operation's origin commit and position, and its object


def side_changes(
    rows: Iterable[tuple[str, int, uuid.UUID, str, dict[str, Any]]], since: set[str]
) -> tuple[list[tuple[uuid.UUID, Op]], set[uuid.UUID], set[Identity]]:
    """A side's changes since the base, from the operations its head's first-parent chain recorded (`rows`: commit,
    position, object id, kind, details, in commit order; `since`: the side's commits since the base): each
    original operation once, as the side has it, first where it was first recorded. The side's state was built
    along that chain, so it says what the side holds: its commits' own operations, and of each merge commit on it
    the operations it made itself (key merges, deletes in mixed segments) and those it replayed, each under the
    operation it came from (`merged_from`, `origin_position`). An operation a merge replayed whose origin the base
    already holds is not a change since the base; one that no merge on the chain replayed (discarded, or settled by
    `target_wins`) is not part of the side's state; what a merge's `source_wins` superseded on this side is no
    change of it (the merge took the other side's version of those files instead, `rules.source_wins_scope`: that
    side's change). Also returns every object an operation on the chain touched (a primary-key table among them is
    compared by state, whatever the operations say) and the identity of every operation the chain holds (what a
    merge that took the other side's version of a table `held` among them), so that one both sides hold,
    cherry-picked, counts on neither."""
    rows = list(rows)
    superseded = {
        (commit, position, object_id)
        for _, _, object_id, kind, details in rows if kind == RESOLVE
        for commit, position in details.get("superseded", [])
    }  # fmt: skip
    picked: dict[Identity, tuple[uuid.UUID, Op]] = {}
    held: set[Identity] = set()
    for commit_id, position, object_id, kind, details in rows:
        if kind == RESOLVE:
            held |= {(commit, at, object_id) for commit, at in details.get("held", [])}
            continue
        details = dict(details)
        origin, origin_position = details.pop("merged_from", None), details.pop("origin_position", None)
        if origin is None or origin_position is None:  # the commit's own (merges made before 4.0 count as own)
            origin, origin_position = commit_id, position
        op = Op(origin, origin_position, kind, details)
        held.add((*op.identity, object_id))
        if origin in since and (origin, origin_position, object_id) not in superseded:
            picked.setdefault((origin, origin_position, object_id), (object_id, op))
    touched = {object_id for _, _, object_id, _, _ in rows}
    return list(picked.values()), touched, held


def not_held(ops: dict[uuid.UUID, list[Op]], held: set[Identity]) -> dict[uuid.UUID, list[Op]]:
    """A side's operations less those the other side holds too (`held`), per object; an object left with none is
    left out."""
    kept = {object_id: [op for op in side if (*op.identity, object_id) not in held] for object_id, side in ops.items()}
    return {object_id: side for object_id, side in kept.items() if side}


def held_by_object(held: set[Identity], object_ids: set[uuid.UUID]) -> dict[uuid.UUID, frozenset[tuple[str, int]]]:
    """The identities of the operations a side holds, for each of these objects."""
    by_object: dict[uuid.UUID, set[tuple[str, int]]] = {}
    for commit, position, object_id in held:
        if object_id in object_ids:
            by_object.setdefault(object_id, set()).add((commit, position))
    return {object_id: frozenset(ids) for object_id, ids in by_object.items()}
