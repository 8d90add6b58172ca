"""The merge plan's fifth stage (docs/architecture.md#the-path-of-a-merge): what the rule tables cannot see pair by
pair, told by the lineage of a table's segments (docs/merge-semantics.md#tables-without-a-primary-key). A source
change of rows by position replays only where the target holds the segment it addressed, as the source saw it; a
source overwrite replaces the target's rows but those the source still has; a source insert whose rows the target's
restore holds rewritten cannot be told apart. Each is a conflict of the table's data (R*), or a compaction dropped
(C*). The facts of a side's segments' lineage the other stages ask too are here: where a rewritten segment's rows
came from (`segment_origins`), and what a later overwrite replaced (`replaced_later`, `restored_results`). Plain values
in and out.
"""

import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence

import merge_app.plan.rules as rules
from merge_app.plan.objects import ROW_CHANGES, TABLE, ObjectDiff, Pair
from merge_app.plan.rules import CONFLICT, DISCARDED, Op, Verdict


def segment_origins(ops: Iterable[Op]) -> dict[str, frozenset[str]]:
    """Of the segments these operations (one side's, in order) wrote by rewriting rows (an update's new rows, a
    copy-on-write rewrite's kept rows, a compaction's), the segments they did not write whose rows each holds:
    followed back through the side's own rewrites (`segments_from` where it was recorded, else every segment the
    operation rewrote). A segment the source wrote from an older one holds the older one's rows: a target overwrite
    that replaced the older one replaced them too (A4/A5). The undo of a commit that rewrote no rows (an overwrite's,
    `undo.undo_operations`) puts back segments that hold their own rows, not those of the files it takes out
    (unkeyed model seed 248)."""
    origins: dict[str, frozenset[str]] = {}
    for op in ops:
        for new, came in op.origins.items():
            origins[new] = frozenset().union(*(origins.get(segment, {segment}) for segment in came))
    return origins


def replaced_later(ops: Sequence[Op], skip: Collection[int] = ()) -> set[int]:
    """The indices of these operations (one side's) whose files a later whole-table overwrite among them replaced,
    later as the side applied them (`Op.applied`); `skip`: the indices of those not replayed. What such an operation
    wrote is not the side's change, even where the side holds those files again: an operation the merge does not
    replay brought them back (unkeyed model seed 303: `b2` restored the table, overwrote it, then cherry-picked
    another branch's restore, which the merge base holds; the merge took the first restore's result back with it)."""
    last = last_overwrite(ops, skip, whole_table=True)
    if last is None:
        return set()
    return {index for index, op in enumerate(ops) if (op.applied, index) < (ops[last].applied, last)}


def last_overwrite(ops: Sequence[Op], skip: Collection[int] = (), *, whole_table: bool = False) -> int | None:
    """The index of the last of these operations' overwrites (of the whole table only, with `whole_table`), not
    counting those in `skip`; last as the side applied them (`Op.applied`), not as they are listed: a merge may replay
    an overwrite older than the side's own after it. None where there is none."""
    overwrites = [
        (op.applied, index) for index, op in enumerate(ops)
        if index not in skip and op.op == "overwrite" and (op.details.get("whole_table") or not whole_table)
    ]  # fmt: skip
    return max(overwrites)[1] if overwrites else None


def restored_results(ops: Sequence[Op], skip: Collection[int] = ()) -> set[str]:
    """The files of these operations' restores' results that are still theirs (`Op.restored`): of the restores
    replayed (not in `skip`), those no later whole-table overwrite replaced (`replaced_later`)."""
    gone = set(skip) | replaced_later(ops, skip)
    return set().union(*(op.restored for index, op in enumerate(ops) if index not in gone))


def lineage_check(
    objects: list[ObjectDiff],
    live_files: Mapping[uuid.UUID, Mapping[str, Mapping]],
    restored_origins: Mapping[uuid.UUID, Mapping[str, frozenset[str]]],
) -> None:
    """The conflicts of each table's data its segments' lineage shows (`ObjectDiff.data_issues`), and the source
    compactions it drops (`ObjectDiff.dropped`): positional replays onto segments the target lacks
    (`_check_segments_present`), an overwrite against rows the target rewrote or holds from before the base
    (`_check_overwrite_lineage`), an insert the target's restore holds rewritten (`_check_restored_rewrites`).
    `live_files` and `restored_origins` as `PlanInputs` holds them."""
    _check_segments_present(objects, live_files)
    _check_overwrite_lineage(objects, live_files)
    _check_restored_rewrites(objects, restored_origins)


def _check_segments_present(objects: list[ObjectDiff], live_files: Mapping[uuid.UUID, Mapping[str, Mapping]]) -> None:
    """A source operation that changed rows of a segment by position (a delete, an update, a compaction) replays
    only where that segment is, as the source saw it: on the target, or written by the source itself. A segment the
    target's own operations removed or changed is for the rule tables (A4/A5, F*, R*). One the target never had,
    or has with deletes the source never saw, because a merge on one side kept a table the other side had changed
    (`target_wins`, a discard), is a conflict here: the replay would miss the rows, keep them twice or bring back
    rows the target deleted. An operation none of whose files the source still has (a later overwrite replaced
    them) has nothing left to replay; where the later change that took them out is not replayed, what is left of it
    cannot be told (`_taken_out_unreplayed`), a conflict too. `live_files`: the source's and the target's files of
    each table whose source operations rewrote rows by position."""
    wanted: dict[uuid.UUID, ObjectDiff] = {}
    for obj in objects:
        if obj.kind != TABLE or not obj.merges or obj.source.dropped or obj.keyed or obj.target_unchanged:
            continue
        if any(op.op in rules.REWRITES for op in obj.source_operations):
            wanted[obj.object_id] = obj
    for table_id, obj in wanted.items():
        source, target = (set(live_files[table_id][side]) for side in ("source", "target"))
        _drop_compactions_of_missing(obj, target)
        # An operation's effect lives on in the files the source still has, or in what later rewrites (compactions,
        # copy-on-write) made of its files; one that only removed files has its effect too.
        lives = set(source)
        for op in reversed(obj.source_operations):
            if op.op in rules.REWRITES and op.added & lives:
                lives |= op.removed
        # One the rules discarded whole (C*, A4/A5) or that was dropped above is not replayed: nothing of it is
        # looked for on the target (unkeyed model seed 94: a pick of a compaction a target overwrite discards).
        discarded = discarded_whole(obj.source_operations, obj.discarded)
        # The segments the replayed rewrites address, and those they rewrite from the source's version (a compaction,
        # a copy-on-write delete or update, an update by position), less those an earlier source operation wrote:
        # the source's own. One a later operation writes again is not: a revert of a compaction brings back segments
        # that may never have been on the target (unkeyed model seed 121: `main` updated a row `b1` then declined,
        # and compacted and reverted the compaction; merged into `b1`, the revert brought the update with it).
        addressed: set[str] = set()
        rewritten: set[str] = set()
        written: set[str] = set()
        for index, op in enumerate(obj.source_operations):
            if op.op in rules.REWRITES and (op.added & lives or not op.added) and index not in discarded:
                addressed |= (op.touched - _put_back_whole(op) | op.removed) - written
                rewritten |= (op.removed | op.touched if op.op == "update" else op.removed) - written
            written |= op.added
        addressed -= set().union(*(op.removed for op in obj.target_operations))
        missing = addressed - target
        if missing:
            obj.data_issues.append(
                Verdict(
                    CONFLICT, "R*",
                    f"The source changed rows of segment(s) {rules.segments_named(missing)} by position, and the "
                    "target does not have them (a merge on one side kept its own version of the table): the "
                    "change cannot be replayed.",
                )
            )  # fmt: skip
        replaced = _taken_out_unreplayed(obj.source_operations, source, discarded) & target
        if replaced:
            obj.data_issues.append(
                Verdict(
                    CONFLICT, "R*",
                    f"The source changed rows of segment(s) {rules.segments_named(replaced)} by position, and later "
                    "took that change's files out by a change the merge does not replay (a cherry-pick of an "
                    "operation the merge base holds): what is left of it cannot be told by file.",
                )
            )  # fmt: skip
        # A rewrite made from the source's version of a segment: the target's deletes on it that the source never
        # had would be undone.
        seen = set(source) | set().union(*(op.added for op in obj.target_operations))
        seen |= {d for op in obj.source_operations for d in op.details.get("deltas_removed", [])}
        unseen = {live_files[table_id]["target"][fid] for fid in target - seen} & rewritten
        if unseen:
            obj.data_issues.append(
                Verdict(
                    CONFLICT, "R*",
                    f"The source rewrote rows of segment(s) {rules.segments_named(unseen)} by position, and the "
                    "target has deletes on them the source never had (a merge on one side kept its own version of "
                    "the table): the change would bring those rows back.",
                )
            )  # fmt: skip


def _taken_out_unreplayed(operations: Sequence[Op], source: set[str], discarded: set[int]) -> set[str]:
    """The segments a replayed source delete or update addressed whose files (delete files, new segments) the source
    no longer has, where no later source operation the merge replays took them out: a change the merge does not
    replay did (a cherry-pick of an operation the merge base holds is no change since the base, overwrite as it
    may). Replayed by what its files left on the source, it would change nothing of what it addressed, though the
    source has none of those rows (merge-on-read: the target kept a row's old version), or take a segment out whose
    other rows no rewrite brings back (copy-on-write: a row was lost). Unkeyed model seed 292. The segments it
    addressed that earlier source rewrites wrote count as those they were written from (`segment_origins`):
    the replay of those rewrites takes the older segments out, and nothing of what they became is left to bring in
    (unkeyed model seed 341: `main` updated a row of a segment, rewrote its rewrite three times, and took the last
    rewrite out by merging a restore the base holds; the merge took the first segment out of `b3`, which held it
    again, and three rows were lost)."""
    origins = segment_origins(operations)
    found: set[str] = set()
    for index, op in enumerate(operations):
        if op.op not in rules.TOUCHING or index in discarded:
            continue
        later = [o for j, o in enumerate(operations) if j > index and j not in discarded]
        out = set().union(*(o.taken_out for o in later))
        deltas_on = op.details.get("deltas_on", {})
        if any(deltas_on.get(f) not in out for f in op.added - source - out):
            found |= op.addressed | set().union(*(origins.get(segment, ()) for segment in op.addressed))
    return found


def _put_back_whole(op: Op) -> set[str]:
    """The segments a revert's undo puts back whole: the reverted commit rewrote them copy-on-write, and the undo takes
    its rewrites out and the segment itself back in. Their rows come back with the segment, by reference, not by
    position in the target's copy of it: the target holds what the commit made of them (the rewrites, which the undo
    addresses) and need not hold the segment (unkeyed model seed 98: `b1` had taken `main`'s copy-on-write update of
    row 1, and a revert on `main` that put the updated segment back was refused as R*)."""
    if not op.details.get("reverts"):
        return set()
    origins = op.details.get("segments_from", {})
    return {segment for segment in op.touched & op.added if any(origins.get(f) == segment for f in op.removed)}


def discarded_whole(operations: Sequence[Op], discarded: Iterable[Pair]) -> set[int]:
    """The indexes of the source operations these discarded pairs discard whole: a compaction (C* drops all of it),
    or an operation none of whose files is taken over (A4/A5 of older rows only). A merge does not replay them: the
    target keeps the files they would have replaced, and no operation is recorded for them."""
    return {
        pair.source for pair in discarded
        if operations[pair.source].op == "compaction" or set(pair.decided.discarded) >= operations[pair.source].added
    }  # fmt: skip


def _drop_compactions_of_missing(obj: ObjectDiff, target: set[str]) -> None:
    """A source compaction of segments the target holds in no version (a merge on one side kept its own version of
    the table, or compacted them itself before the other side's merge declined that) changes no row: it is dropped
    (C*), as against a target that changed those segments, and on the same condition: the source changed no rows of
    the table, which would live in its output only or address it."""
    if any(op.op in ROW_CHANGES for op in obj.source_operations):
        return
    discarded = {pair.source for pair in obj.discarded}
    for index, op in enumerate(obj.source_operations):
        missing = op.removed - target
        if op.op != "compaction" or not missing or index in discarded:
            continue
        reason = (
            f"The target holds segment(s) {rules.segments_named(missing)} the source compacted in no version (a merge "
            "on one side kept its own version of the table): the compaction, which changes no row, is dropped."
        )
        obj.dropped.append(Pair(index, -1, "C*", Verdict(DISCARDED, "C*", reason, tuple(sorted(op.added)))))


def rewrites_of_source_rows(obj: ObjectDiff, source_files: Iterable[str]) -> tuple[set[str], list[Op]]:
    """A source overwrite replaces the target's rows but those the source still has (rows that reached it after the
    overwrite, by operations the target holds too). Where the target rewrote such rows since the base, its new
    segments hold them: those a copy-on-write delete wrote (the rows it kept) stay on the target (the first set),
    and the rewrites whose new segments may also hold rows the source never had (an update's new versions, a
    compaction's other segments) are returned (the second), which the planner refuses."""
    # A restore's result is its own, not rows the source kept from before an older overwrite (issue 53)
    restored = restored_results(obj.source_operations)
    lineage, kept, mixed = set(source_files) - restored, set(), []
    for op in obj.target_operations:
        if op.op in rules.REWRITES and op.removed & lineage:
            # Of a delete that rewrote several segments, only the rewrites of those the source has (by the segments
            # each came from, `Op.origins`; unkeyed model seed 193: `b3` deleted a row of a segment the
            # source has and one of a segment its overwrite replaced, in one delete, and the second rewrite's rows
            # stayed).
            written = {new for new, came in op.origins.items() if came & lineage}
            if op.op == "delete":
                kept |= written
                lineage |= written
            else:
                mixed.append(op)
    return kept, mixed


def _check_overwrite_lineage(objects: list[ObjectDiff], live_files: Mapping[uuid.UUID, Mapping[str, Mapping]]) -> None:
    """A source overwrite against a target's update or compaction of rows the source still has (see
    `rewrites_of_source_rows`), or one after which the source took back segments the target holds in no version,
    against a target that holds rows older than the base the overwrite would take out (`overwrite_taken_back`), or
    one that did not take out files of the operations it counts as replacing (`kept_past_overwrite`): which rows to
    keep cannot be told by file, so it is a conflict."""
    for obj in objects:
        files = live_files.get(obj.object_id)
        if (
            files is None
            or obj.keyed
            or obj.target_unchanged
            or not any(op.op == "overwrite" for op in obj.source_operations)
        ):
            continue
        _, mixed = rewrites_of_source_rows(obj, files["source"])
        if mixed:
            segments = set().union(*(op.removed for op in mixed)) & set(files["source"])
            obj.data_issues.append(
                Verdict(
                    CONFLICT, "R*",
                    f"The source's overwrite replaces the target's rows, but the source still has the rows of "
                    f"segment(s) {rules.segments_named(segments)}, which the target rewrote since the base "
                    f"({', '.join(sorted({op.op for op in mixed}))}): the rows to keep cannot be told apart.",
                )
            )  # fmt: skip
            continue
        taken_back, older = overwrite_taken_back(obj, files["source"], files["target"], files.get("origins", {}))
        if taken_back and older:
            obj.data_issues.append(
                Verdict(
                    CONFLICT, "R*",
                    f"The source's overwrite replaces the target's rows, but the source took back segment(s) "
                    f"{rules.segments_named(taken_back)} after it, which the target holds in no version: the "
                    f"target's segment(s) {rules.segments_named(older)}, which the overwrite would take out, may "
                    f"hold their rows in another version, and the rows to keep cannot be told apart.",
                )
            )  # fmt: skip
            continue
        kept = kept_past_overwrite(obj, files["source"])
        if kept:
            obj.data_issues.append(
                Verdict(
                    CONFLICT, "R*",
                    f"The source holds segment(s) {rules.segments_named(kept)}, written before its last overwrite as "
                    f"its history records them, which that overwrite did not take out (a merge replayed it after them "
                    f"and kept them): whether they are its change or rows it replaced cannot be told by file.",
                )
            )  # fmt: skip
            continue
        brought = restore_replaced(obj, files["source"], files["target"])
        if brought:
            obj.data_issues.append(
                Verdict(
                    CONFLICT, "R*",
                    f"The source's restore replaces the target's rows, but its result is gone from the source by no "
                    f"change the merge replays: segment(s) {rules.segments_named(brought)} reached the source after "
                    f"it and hold rows of it now, beside others: the rows to take cannot be told apart.",
                )
            )  # fmt: skip


def _check_restored_rewrites(objects: list[ObjectDiff], restored_origins: Mapping[uuid.UUID, Mapping]) -> None:
    """A source insert whose rows the target's restore holds rewritten (`restored_rewrites`): which of them the
    target holds cannot be told by file, so it is a conflict."""
    for obj in objects:
        origins = restored_origins.get(obj.object_id)
        hit = restored_rewrites(obj, origins) if origins and not obj.keyed and not obj.target_unchanged else set()
        if hit:
            obj.data_issues.append(
                Verdict(
                    CONFLICT, "R*",
                    f"The source inserted segment(s) {rules.segments_named(hit)}, and the target's restore holds "
                    f"rows of them rewritten into other segments: which of their rows the target holds cannot be "
                    f"told by file (taken again, those rows would be there twice).",
                )
            )  # fmt: skip


def inserted_segments(operations: Sequence[Op]) -> set[str]:
    """The segments these operations (a side's since the base) inserted: an insert's (a load's append, or one a
    merge or a pick replayed), and those the undo of a commit that rewrote no rows (an overwrite's) puts back, which
    hold rows of their own as an insert's do (`segment_origins`)."""
    return {
        segment for op in operations if op.op == "insert" or op.puts_back_own
        for segment in op.details.get("segments_added", [])
    }  # fmt: skip


def restored_rewrites(obj: ObjectDiff, origins: Mapping[str, frozenset[str]]) -> set[str]:
    """The segments the source inserted that the target's last overwrite, a restore, holds in no version by
    reference but rewritten (`origins`: of each file of the restore's result, the older segments whose rows it
    holds): the restore holds some of their rows, in the versions the insert wrote or changed since, and maybe not
    others (rows deleted or updated before the rewrite). Taken again, those it holds would be there twice; not
    taken, the others would be lost (unkeyed model seed 235: a pick of an insert of rows 30 to 32 onto `b2`, whose
    restore held rows 31 and 32 in the segment a copy-on-write update of row 30 had rewritten the insert's into)."""
    restored = restored_by_target(obj.target_operations)
    rewritten = set().union(*(origins.get(fid, frozenset()) for fid in restored))
    return (inserted_segments(obj.source_operations) - restored) & rewritten


def overwrite_taken_back(
    obj: ObjectDiff,
    source_files: Mapping[str, str | None],
    target_files: Mapping[str, str | None],
    origins: Mapping[str, frozenset[str]],
) -> tuple[set[str], set[str]]:
    """The segments a replayed source overwrite removed that the source holds again (a later merge brought them
    back: rows the source still has), where the target holds them in no version; and the target's segments the
    overwrite would take out that hold rows older than the base (or were made from such since: an update's, a
    compaction's, a copy-on-write delete's), not new rows the target wrote since. Those may hold the taken-back
    segments' rows in another version (the target's line compacted or rewrote them before the base), or the target
    may have declined or deleted them: which of its rows the overwrite replaces cannot be told by file without each
    segment's history from before the base, and whatever the target did since, be it a delete, an update by delete
    file or a change of the table's properties only (unkeyed model seed 95: `main` overwrote, took back by a merge
    the uncompacted segment of row 1, which `b1`'s line held compacted since before the base; by file the overwrite
    took out `b1`'s compacted segment with row 1). Also, as taken back, the segments that reached the source after
    its overwrite by operations the base holds, which the target holds rewritten (`origins`: of the target's
    segments the source lacks and of the taken-back ones, the older segments whose rows each holds). A target that
    changed nothing since the base takes the source's table instead (`ObjectDiff.target_unchanged`)."""
    source = set(source_files)
    restored = restored_results(obj.source_operations)
    discarded = {pair.source for pair in obj.discarded}
    overwrites = [
        op for index, op in enumerate(obj.source_operations) if op.op == "overwrite" and index not in discarded
    ]  # fmt: skip
    removed = set().union(*(op.removed for op in overwrites))
    own = set().union(*(op.removed for op in obj.target_operations))
    taken_back = {fid for fid in removed & source if fid not in target_files and fid not in own and fid not in restored}
    if overwrites:
        # Or reached the source after the overwrite by an operation the base holds, and the target holds them
        # rewritten, by an update or a compaction older than the base (`origins`; unkeyed model seed 205: `b1`
        # overwrote, then merged `b2`, which replayed `b2`'s insert of rows 2 and 3; `main` held their segment
        # rewritten by its update of row 3, and the overwrite took row 2 out with it).
        # Or holds rows of a segment the target holds rewritten too: both rewrote one older segment (unkeyed model
        # seed 264: the source took the base's table back after its restore, with a segment a copy-on-write delete had
        # written of row 5's; the target's restore held another rewrite of it, with row 5 and a row the target had
        # updated since, and the overwrite took both out).
        rewritten = set().union(*(older for fid, older in origins.items() if fid in target_files))
        brought = brought_after_overwrite(obj.source_operations, source_files, target_files)
        # One the target's own rewrite removed is for `rewrites_of_source_rows`; one its overwrite (a restore) took
        # out, with a rewrite of its rows in the overwrite's result (seed 264), is taken back all the same.
        rewrote = set().union(*(op.removed for op in obj.target_operations if op.op in rules.REWRITES))
        sibling = {fid for fid in brought if origins.get(fid, frozenset()) & rewritten}
        taken_back |= {fid for fid in brought & rewritten | sibling if fid not in rewrote and fid not in restored}
    kept, _ = rewrites_of_source_rows(obj, source)
    new = _new_rows_written(obj.target_operations)
    older = {
        fid for fid, segment in target_files.items()
        if segment is None and fid not in source and fid not in kept and fid not in new
    }  # fmt: skip
    return taken_back, older


def kept_past_overwrite(obj: ObjectDiff, source_files: Mapping[str, str | None]) -> set[str]:
    """The segments the source holds that its operations a later whole-table overwrite replaced wrote
    (`replaced_later`), where that overwrite, as recorded, did not take them out nor keep them as its result (a
    restore keeps the segments of its point). Such an overwrite came to the source by a merge after them, older than
    they are on the side that made it (a merge replays an overwrite to keep the rows the source still has: unkeyed
    model seed 338, where `main` restored the table and took `x`'s overwrite and insert after it, and `b1`, which had
    them already, merged `main`; merged into `b2`, the plan took neither and `b2` was left empty). Where the
    overwrite took them out and an operation the merge does not replay brought them back, they are not the source's
    change (seed 303); where it never took them out they are, and by file the two cannot be told apart for certain:
    a conflict, not rows lost."""
    operations = obj.source_operations
    skip = discarded_whole(operations, obj.discarded)
    replaced = replaced_later(operations, skip)
    if not replaced:
        return set()
    last = operations[last_overwrite(operations, skip, whole_table=True)]
    written = set().union(*(operations[index].added for index in replaced))
    return (written & set(source_files)) - last.taken_out - last.restored


def restore_replaced(
    obj: ObjectDiff, source_files: Mapping[str, str | None], target_files: Mapping[str, str | None]
) -> set[str]:
    """The segments that reached the source after its overwrite (`brought_after_overwrite`), where files of the
    result of a restore it replays are gone from the source by no operation it recorded: one the merge base holds
    replaced them, and those segments may hold the restore's rows, its change, beside rows that are not (unkeyed model
    seed 323: `main` restored the table and later held the base's segments again instead of the restore's file; the
    merge took neither, and four rows of the restore's result were lost)."""
    operations = obj.source_operations
    restored = restored_results(operations, discarded_whole(operations, obj.discarded))
    gone = restored - set(source_files) - set().union(*(op.taken_out for op in operations))
    return brought_after_overwrite(operations, source_files, target_files) - restored if gone else set()


def brought_after_overwrite(
    operations: Sequence[Op], source_files: Mapping[str, str | None], target_files: Mapping[str, str | None]
) -> set[str]:
    """After a source overwrite, the segments the source holds that none of its operations since the base wrote
    (a merge brought them by operations the base holds, after the overwrite or back from before it) and the target
    lacks."""
    if not any(op.op == "overwrite" for op in operations):
        return set()
    written = set().union(*(op.added for op in operations))
    return {fid for fid, segment in source_files.items() if segment is None} - written - set(target_files)


def _new_rows_written(operations: Sequence[Op]) -> set[str]:
    """The segments these operations (a side's since the base) wrote of new rows only: an insert's, a load's
    overwrite's (not a restore's result, nor a revert's files put back), and what later rewrites made of those
    alone."""
    new: set[str] = set()
    for op in operations:
        if op.op in ("insert", "overwrite") and not op.details.get("reverts"):
            new |= op.added - op.restored
        elif op.op in rules.REWRITES and (op.removed | op.addressed) and (op.removed | op.addressed) <= new:
            new |= op.added
    return new


def restored_by_target(operations: Sequence[Op]) -> set[str]:
    """The files of the result of the target's last overwrite (`operations`: the target's since the base), where a
    restore made it (`Op.restored`): the target holds their rows, or what its later operations made of them. Empty
    where its last overwrite is a load's (it replaced them) or it made none. Last as the target applied them
    (`Op.applied`), not as they are listed: a merge into the target may replay an overwrite older than its restore
    after it (unkeyed model seed 228: `b2` restored the table, then took `main`'s older overwrite by a merge; a pick of
    an insert whose segment the restore had held added nothing, and its row was lost)."""
    last = last_overwrite(operations)
    return operations[last].restored if last is not None else set()


def rewritten_by_target(operations: Sequence[Op], target: Iterable[str]) -> dict[str, frozenset[str]]:
    """The target's live segments (`target`: its live files' ids) that its operations since the base (`operations`)
    wrote by rewriting others (a compaction's, a copy-on-write change's), with the segments whose rows each holds
    (`segment_origins`)."""
    origins = segment_origins(operations)
    return {fid: origins[fid] for fid in target if fid in origins}
