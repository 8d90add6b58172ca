"""Which operations count as a side's changes since the base (docs/merge-semantics.md#which-changes-a-merge-replays),
decided on plain values: no ORM, no Spark. `merge_app/selectors/diff.py` reads the operations recorded on a side's
first-parent chain, in commit order, for `side_changes`; and drops those the other side holds with `not_held`, and
the picks of operations the base holds (`picked_in_base`). What a taken version carries is `carried`. Which
tables a merge takes the source's version of, as the target holds them as the base has them, is decided here too
(`target_unchanged`, on the tables the selector compared with the base: `compared_with_base`, `held_as_at_base`).
"""

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from merge_app.plan.objects import TABLE
from merge_app.plan.rules import Op

RESOLVE = "resolve"  # what a merge recorded of its choices: `held`, `superseded`, `declined`
Identity = tuple[str, int, uuid.UUID]  # an operation's origin commit and position, and its object


def side_changes(
    rows: Iterable[tuple[str, int, uuid.UUID, str, dict[str, Any]]], since: set[str]
) -> tuple[list[tuple[uuid.UUID, Op]], set[uuid.UUID], set[Identity]]:
    """A side's changes since the base, from the operations its head's first-parent chain recorded (`rows`: commit,
    position, object id, kind, details, in commit order; `since`: the side's commits since the base): each original
    operation once, as the side has it, first where it was first recorded (`Op.applied`: where it was last). The side's
    state was built along that chain, so it says what the side holds: its commits' own operations, and of each merge
    commit on it the operations it made itself (key merges, deletes in mixed segments) and those it replayed, each under
    the operation it came from (`merged_from`, `origin_position`). An operation a merge replayed whose origin the base
    already holds is not a change since the base; one that no merge on the chain replayed (discarded, or settled by
    `target_wins`) is not part of the side's state; what a merge's `source_wins` superseded on this side is no change of
    it (the merge took the other side's version of those files instead, `resolutions.source_wins_scope`: that side's
    change).
    Also returns every object an operation on the chain touched (a primary-key table among them is compared by state,
    whatever the operations say) and the identity of every operation the chain holds (what a merge that took the other
    side's version of a table `held` among them), so that one both sides hold, cherry-picked, counts on neither."""
    rows = list(rows)
    superseded = {
        (commit, position, object_id)
        for _, _, object_id, kind, details in rows if kind == RESOLVE
        for commit, position in details.get("superseded", [])
    }  # fmt: skip
    picked: dict[Identity, tuple[uuid.UUID, Op]] = {}
    applied: dict[Identity, int] = {}  # where the chain last recorded each (`Op.applied`)
    held: set[Identity] = set()
    for index, (commit_id, position, object_id, kind, details) in enumerate(rows):
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
            applied[origin, origin_position, object_id] = index
    touched = {object_id for _, _, object_id, _, _ in rows}
    changes = [(object_id, replace(op, applied=applied[key])) for key, (object_id, op) in picked.items()]
    return changes, touched, held


def not_held(ops: dict[uuid.UUID, list[Op]], held: set[Identity]) -> dict[uuid.UUID, list[Op]]:
    """A side's operations less those the other side holds too (`held`), per object; an object left with none is
    left out."""
    kept = {object_id: [op for op in side if (*op.identity, object_id) not in held] for object_id, side in ops.items()}
    return {object_id: side for object_id, side in kept.items() if side}


def picked_originals(sides: Iterable[Mapping[uuid.UUID, list[Op]]]) -> set[str]:
    """The commits the cherry-picked operations of these sides were picked from: the facts `picked_in_base` needs of
    the commit graph are which of them the merge base's history holds."""
    return {op.identity[0] for ops in sides for side in ops.values() for op in side if op.details.get("picked_from")}


def picked_in_base(sides: Iterable[Mapping[uuid.UUID, list[Op]]], base_holds: set[str]) -> set[Identity]:
    """The identities of the cherry-picked operations of these sides whose original the merge base's history holds
    (`base_holds`: those of `picked_originals` it does): no change of either side since the base, as an operation
    both sides hold is not (docs/merge-semantics.md#revert-and-cherry-pick)."""
    return {
        (*op.identity, object_id) for ops in sides for object_id, side in ops.items() for op in side
        if op.details.get("picked_from") and op.identity[0] in base_holds
    }  # fmt: skip


def carried(source_held: set[Identity], base_held: set[Identity]) -> set[Identity]:
    """The operations a version of a table the merge takes from the source carries with it: those the source's
    first-parent chain holds down to where it meets the base's (`source_held`), less those the base's chain holds
    down to there (`base_held`). They include operations the base's history declined that the source's made, so
    that a later cherry-pick of one of them onto the target finds it held, as its rows are."""
    return source_held - base_held


def held_by_object(held: set[Identity], object_ids: set[uuid.UUID]) -> dict[uuid.UUID, frozenset[tuple[str, int]]]:
    """The identities of the operations a side holds, for each of these objects."""
    by_object: dict[uuid.UUID, set[tuple[str, int]]] = {}
    for commit, position, object_id in held:
        if object_id in object_ids:
            by_object.setdefault(object_id, set()).add((commit, position))
    return {object_id: frozenset(ids) for object_id, ids in by_object.items()}


def compared_with_base(
    source_changed: set[uuid.UUID], target_operations: dict[uuid.UUID, list[Op]], target_touched: set[uuid.UUID]
) -> set[uuid.UUID]:
    """The tables whose target state a merge compares with the base's (`held_as_at_base`): those the source changed
    that the target overwrote since the base (a restore is one). Without an overwrite the target's operations replay
    to the same rows, and the files of a table both sides appended to are not read (the table's size does not count,
    only the change)."""
    overwrote = {t for t, ops in target_operations.items() if any(op.op == "overwrite" for op in ops)}
    return source_changed & target_touched & overwrote


def held_as_at_base(
    table_ids: set[uuid.UUID],
    versions: Mapping[str, Mapping[uuid.UUID, Any]],
    files: Mapping[str, Mapping[uuid.UUID, frozenset[str]]],
    side: str = "target",
) -> set[uuid.UUID]:
    """Of these tables without a key (`compared_with_base`), those the target holds as the base has them: the same
    definition (name, database, state) and the same live files, segments and delete files alike, whatever the
    target's commits since the base did to them in between (docs/merge-semantics.md#which-changes-a-merge-replays).
    `versions`: side -> table id -> its version; `files`: "base" and `side` -> table id -> its live files' ids (a
    table with none may be left out); `side`: the side compared with the base, the target unless said."""
    same = set()
    for table_id in _keyless_live(table_ids, versions, side):
        base, dest = versions["base"][table_id], versions[side][table_id]
        defined = (dest.name, dest.parent_id, dest.state) == (base.name, base.parent_id, base.state)
        if defined and files["base"].get(table_id, frozenset()) == files[side].get(table_id, frozenset()):
            same.add(table_id)
    return same


def _keyless_live(
    table_ids: set[uuid.UUID], versions: Mapping[str, Mapping[uuid.UUID, Any]], side: str
) -> set[uuid.UUID]:
    """Of these tables, those without a key that both the base and `side` hold, dropped by neither."""
    live = set()
    for table_id in table_ids:
        base, other = versions["base"].get(table_id), versions[side].get(table_id)
        if base is None or other is None or base.kind != TABLE or base.state.get("primary_key"):
            continue
        if not base.dropped and not other.dropped:
            live.add(table_id)
    return live


def held_otherwise(
    table_ids: set[uuid.UUID],
    versions: Mapping[str, Mapping[uuid.UUID, Any]],
    files: Mapping[str, Mapping[uuid.UUID, frozenset[str]]],
) -> set[uuid.UUID]:
    """Of these tables without a key, those the source holds otherwise than the base (another definition or other
    live files), where the target's head is the base: the source's version is the merge's, whatever records say (a
    fast-forward, as git's). The tables are those an operation touched on the two heads' first-parent chains down to
    where they meet (the selector's): a state differs from the base's only by what those chains recorded. Counted
    as the source's changes (`target_unchanged`), they make merging back converge where the source's first-parent
    chain holds a version the base declined and recorded nothing since (unkeyed model seed 306: `b3` had kept its
    rows against `b1`'s empty table, `target_wins`; merged into `b1` from a virtual base, nothing was replayed and
    nothing recorded, and merging `b1` back into `b3` took nothing)."""
    live = _keyless_live(table_ids, versions, "source")
    return live - held_as_at_base(live, versions, files, side="source")


def target_unchanged(
    *, from_base: bool, source_changed: set[uuid.UUID], target_touched: set[uuid.UUID], held: set[uuid.UUID]
) -> set[uuid.UUID]:
    """The tables the source changed whose source version the merge takes, as the target holds them as the base
    has them (the three-way merge of a side that did not change; docs/merge-semantics.md#merges-converge): where the
    target's first-parent chain since the base leads back to the base itself (`from_base`), those no operation on it
    touched; and those held as at the base by state (`held`, `held_as_at_base`: a target that overwrote the table and
    took the base's files back)."""
    untouched = source_changed - target_touched if from_base else set()
    return untouched | (held & source_changed)
