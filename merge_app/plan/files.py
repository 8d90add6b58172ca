"""The file-level outcome of a merge of a table without a key (docs/architecture.md#the-path-of-a-merge): which of
the target's files the merge drops, which it keeps (and which of those mix overwritten partitions with others) and
which of the source's it takes over, decided from plain values (each side's live files by id, the source's operations
since the base, the pairs the rules discarded); and the schema version each file taken over reads with on the target
(`schema_takeover`).

Pure: no ORM, no Spark. The writer (`merge_app/services/merge_writer.py`, `MergeWriter`) reads the files, applies this
plan and logs it, so what the audit log says a merge did to the files is what it did.
"""

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from catalog_app.engine.segments import file_in_partitions, partitioned_by
from merge_app.plan.lineage import (
    discarded_whole,
    replaced_later,
    restored_by_target,
    restored_results,
    rewrites_of_source_rows,
    rewritten_by_target,
    segment_origins,
)
from merge_app.plan.objects import ObjectDiff, Pair
from merge_app.plan.rules import Op

SEGMENT, DELTA = "segment", "delta"  # DataFile.Kind's values


class File(Protocol):
    """What the plan needs of a file: a `catalog_app.selectors.table_files.FileRow` or a DataFile."""

    id: Any
    kind: str
    segment_id: Any
    partition_values: dict


@dataclass(frozen=True)
class FilePlan:
    removed: list  # the target's files the merge drops
    kept: list  # the target's own files it keeps
    added: list  # the source's files it takes over
    partitions: list[dict[str, Any]]  # partitions a source overwrite replaced (values by column id)
    put_back: list["PutBack"] = field(default_factory=list)  # segments a revert takes over with some of their rows
    mixed: list[str] = field(default_factory=list)  # kept segments (ids) that may hold rows of `partitions` and others

    @property
    def taken_over(self) -> list:
        """The files the target takes over by reference: the source's it takes, then each segment a revert puts back
        with the delete files an earlier revert wrote for it."""
        return [*self.added, *(f for p in self.put_back for f in [p.segment, *(p.masks or [])])]


@dataclass(frozen=True)
class PutBack:
    """A segment of the source whose rows the reverted commit removed (by delete file or by rewriting it) on a target
    that holds the segment in no version: the target declined it (`target_wins`, a discard), so the revert brings
    back only the rows the commit removed (docs/merge-semantics.md#revert-and-cherry-pick), not the segment's other
    rows. The writer reads which rows those are (`source_deltas` against `base_deltas`, or against `rewrites`), or
    takes the delete files that say so (`masks`) where an earlier revert wrote them and a merge replays it."""

    segment: File  # the source's segment
    source_deltas: list = field(default_factory=list)  # its delete files there
    base_deltas: list = field(default_factory=list)  # its delete files after the reverted commit (merge-on-read)
    rewrites: list = field(default_factory=list)  # the segments the reverted commit rewrote it into (copy-on-write)
    in_place: bool = True  # the reverted commit kept the segment (merge-on-read), else it rewrote it
    masks: list | None = None  # the delete files an earlier revert wrote for it (a replayed revert)


def file_plan(
    *,
    base: Mapping[str, File],
    source: Mapping[str, File],
    target: Mapping[str, File],
    operations: Sequence[Op],
    discarded: Sequence[Pair],
    contested: frozenset[str] = frozenset(),
    overwrites: Sequence[list[dict[str, Any]] | None] = (),
    source_rows: Iterable[str] = (),
    restored_on_target: Iterable[str] = (),
    rewritten_on_target: Mapping[str, frozenset[str]] | None = None,
) -> FilePlan:
    """Which files the target drops, keeps and takes over for a table replayed by file. `base`, `source`, `target`:
    each side's live files by id (as text); `operations`: the source's since the base, `discarded` the pairs that
    discarded (some of) their files; `contested`: the files a table's `source_wins` takes the source's version of;
    `overwrites`: the partitions each source overwrite that is replayed replaced (None: the whole table);
    `source_rows`: the target's segments a copy-on-write delete wrote of rows the source still has;
    `restored_on_target`: the result of the target's last overwrite since the base where a restore made it
    (`restored_by_target`); `rewritten_on_target`: the target's live segments its operations since the base wrote by
    rewriting others, with the segments whose rows each holds (`rewritten_by_target`; `files_named` names them).

    The source's changes are its operations since the base (docs/merge-semantics.md#which-changes-a-merge-replays),
    not the difference of its files from the base's: where a merge on the source kept its own side (target_wins, a
    discard), its files differ from the base's by what it did not take, and that is no change to replay. What the
    source took out is taken out of the target's files wherever the target got them: from the base, or by a
    cherry-pick of the source's (a revert of the picked commit takes out the picked copy:
    docs/merge-semantics.md#a-revert-after-a-pick)."""
    # An operation discarded whole (a dropped compaction, an A4/A5 update or delete of older rows) is not replayed, so
    # the target keeps the files it would have replaced, wherever the target got them; the audit log lists it as
    # discarded and the writer records no operation for it.
    whole = discarded_whole(operations, discarded)
    # What a later whole-table overwrite replaced is not added, where the source holds it again by an operation the
    # merge does not replay (`replaced_later`).
    replaced = replaced_later(operations, whole)
    added_by, removed_by, removed_otherwise = set(), set(), set()  # removed_otherwise: by an operation not an overwrite
    for index, op in enumerate(operations):
        added_by |= op.added if index not in replaced else set()
        removed_by |= op.taken_out
        if op.op != "overwrite":
            removed_otherwise |= op.taken_out
    not_taken = {file for pair in discarded for file in pair.decided.discarded}
    not_removed = set()
    for index in whole:
        not_removed |= operations[index].taken_out
    # A restore replayed takes its whole result while it stands (`restored_results`: no later whole-table overwrite
    # replaced it), files as old as the base among them (`Op.restored`), also those an earlier source operation wrote
    # that a pair discarded (a restore to a point after an update A4 discarded: its files are rows of the restore's
    # result, and were lost).
    restored = restored_results(operations, whole)
    not_taken -= restored
    # A segment both sides hold that a replayed source overwrite replaced: the source holds it again since the
    # overwrite (a merge took it back with another side's version of the table, which no operation since the base
    # records). Its
    # rows there are the source's rows after the overwrite, and the target keeps those of them it holds too, as it
    # keeps any other rows both sides have: the segment with both sides' delete files. Without the source's, rows
    # the source had deleted stayed; and the base's delete files, which the overwrite took out with the segment, went
    # and brought older rows back (unkeyed model seed 2: `main` overwrote, then took `b2`'s table, which held the
    # base's segments with every row deleted; merged into `b1`, three of those rows came back, two as second
    # versions of a row).
    # A replayed overwrite's result that stands (a restore's, `restored`, or the files another overwrite wrote) is its
    # own, not a segment it replaced.
    results = restored | {
        fid for index, op in enumerate(operations) if op.op == "overwrite" and index not in whole | replaced
        for fid in op.added
    }  # fmt: skip
    again = {
        fid for fid, f in target.items()
        if fid in source and fid not in results and any(in_scope(f, partitions) for partitions in overwrites)
    }  # fmt: skip
    held = set(base) | set(target)
    removed = {
        fid for fid in held
        if fid in removed_by and fid not in source and fid not in not_removed
        and not (fid in target and str(target[fid].segment_id) in again and fid not in removed_otherwise)
    }  # fmt: skip
    if contested:
        removed |= {fid for fid, f in target.items() if fid not in source and derived(f, contested)}
    kept_rows = set(source_rows)
    # A source rewrite a pair discarded (A4/A5 against the target's restore or overwrite, C*) is as if not made: the
    # source's version of the rows it rewrote is the segments they came from, so a replayed source overwrite older
    # than them keeps the target's version of those segments as it keeps any other rows the source still has (unkeyed
    # model seed 83: the source overwrote, took rows 1 and 2 back by a merge and deleted row 2 copy-on-write; against
    # the target's restore that kept their segment, the delete was discarded and the overwrite took the segment out,
    # with row 1).
    origins = segment_origins(operations)
    kept_rows |= {
        origin for fid in not_taken if fid in source for origin in origins.get(fid, ()) if origin not in source
    }
    for partitions in overwrites:
        removed |= {
            fid for fid, f in target.items()
            if fid not in source and fid not in kept_rows and in_scope(f, partitions)
        }  # fmt: skip
    removed |= {fid for fid, f in target.items() if f.kind == DELTA and str(f.segment_id) in removed}
    # The deletes the target put since on a segment of a replayed overwrite's result go with the rest of the target's
    # rows: the result is the overwrite's own, delete files included (as a copy-on-write delete's rewrite of the
    # segment is replaced and the segment comes back). Kept, they deleted rows of a restore's result (unkeyed model
    # seed 46), or of the overwrite's, whose new versions the overwrite replaced (seed 324: a pick of an overwrite
    # onto a target that had restored the table to it and updated two of its rows since lost both).
    removed |= {
        fid for fid, f in target.items() if f.kind == DELTA and fid not in source and str(f.segment_id) in results
    }
    kept = [f for fid, f in target.items() if fid not in source and fid not in removed]
    # A file the source added or puts back whose rows the target holds is the target's already, whatever the target
    # did to its rows since: taken again, it would hold them twice. The target holds them by a restore to a point
    # after the source's insert, by reference (unkeyed model seed 91: a pick of an insert onto a target that had
    # restored its segment and then updated one of its rows copy-on-write appended the segment again), or by a
    # rewrite of the file into segments it keeps (unkeyed model seed 322: `main` had merged an insert and compacted
    # its segment; a pick of a revert of a restore that had taken the segment out put it back beside the compacted
    # copy). Not where the merge takes those segments out: a replayed source overwrite replaces them, and the
    # source's own file of the rows comes in (seed 324: an overwrite whose rows the target had updated since).
    target_holds = set(restored_on_target)
    for fid, came in (rewritten_on_target or {}).items():
        target_holds |= came if fid in target and fid not in removed else set()
    # A segment of a replayed restore's result is the target's by that restore, whole: a revert's undo of a later
    # source change of it is undone by file, not put back as on a target that holds the segment in no version (unkeyed
    # model seed 63: the undo of a copy-on-write delete of a segment the source's restore held, replayed onto a
    # target whose overwrite had replaced it, put the segment back with every row masked, and its rows were lost).
    put_back = [
        found for index, op in enumerate(operations) if index not in whole
        for found in puts_back(op, base=base, source=source, target=target)
        if str(found.segment.id) not in not_taken | restored | target_holds
    ]  # fmt: skip
    put_back_ids = {str(p.segment.id) for p in put_back}
    # A segment a replayed restore brings back that the target lacks comes with the source's delete files on it, the
    # restore's and those the source put since by operations the merge does not replay (the base holds them): its
    # rows are the source's as the source holds them (unkeyed model seed 316: two updates the base holds had deleted
    # rows of the restored segments; without their delete files the old versions came back beside the new).
    restored_anew = {fid for fid in restored if fid not in target}
    added = [
        f for fid, f in source.items()
        if ((fid in added_by and fid not in base and fid not in target_holds) or fid in restored
            or (f.kind == DELTA and str(f.segment_id) in again | restored_anew)
            or (contested and derived(f, contested)))
        and fid not in target
        and fid not in not_taken and fid not in put_back_ids
    ]  # fmt: skip
    live_segments = {fid for fid, f in target.items() if f.kind == SEGMENT and fid not in removed}
    live_segments |= {str(f.id) for f in added if f.kind == SEGMENT} | put_back_ids
    added = [f for f in added if f.kind == SEGMENT or str(f.segment_id) in live_segments]
    partitions = [p for parts in overwrites if parts for p in parts]
    return FilePlan(removed=[target[fid] for fid in sorted(removed & set(target))], kept=kept, added=added,
                    partitions=partitions, put_back=put_back, mixed=mixed_segments(kept, partitions))  # fmt: skip


def mixed_segments(kept: Iterable[File], partitions: Sequence[Mapping[str, Any]]) -> list[str]:
    """The target's kept segments that may hold rows of the overwritten `partitions` among others: written before
    the table was partitioned by their columns, they cannot be dropped whole, so the writer reads them and writes
    delete files for those rows. Ids as text, in the target's order."""
    columns = {column for partition in partitions for column in partition}
    if not columns:
        return []
    return [str(f.id) for f in kept if f.kind == SEGMENT and not partitioned_by(f.partition_values, columns)]


class Schema(Protocol):
    """What the plan needs of a schema version: a `catalog_app.selectors.objects.SchemaRow`."""

    id: int
    visible: bool
    commit_id: str


class TakenFile(File, Protocol):
    """A file taken over by reference, with the schema version it reads with where it was read (`FileRow`)."""

    schema_version: Schema | None


@dataclass(frozen=True)
class Taken:
    """A file the target takes over, with the schema version it reads with there (None for a delete file) and that
    version's visibility on the target. `copy`: the target's history lacks `version`, so the file reads with an
    invisible copy of it, made by the writer (one per version: `TakeOver.copies`)."""

    file: TakenFile
    version: Schema | None
    visible: bool | None
    copy: bool = False


@dataclass(frozen=True)
class TakeOver:
    """How the target takes over a table's files by reference (`schema_takeover`), and what the audit log says of the
    schema versions the source's commits made (docs/merge-semantics.md#schema-versions)."""

    files: list[Taken]
    copies: list[Schema]  # the versions copied invisible into the target's history, each once, in the files' order
    invisible: list[Schema]  # the source's versions kept as those copies
    discarded: list[Schema]  # the source's versions no merged segment was written with


def schema_takeover(
    files: Sequence[TakenFile], *, history: Collection[int], made: Sequence[Schema], commits: Collection[str]
) -> TakeOver:
    """The schema version each of `files` reads with on the target: its own where the target's history has it
    (`history`: its version ids), else an invisible copy of it. Of the visible versions the source's commits
    (`commits`) made (`made`, in their order), those copied are kept invisible, the others discarded."""
    taken, copies = [], {}
    for file in files:
        version = file.schema_version if file.kind == SEGMENT else None
        if version is None:
            taken.append(Taken(file, None, None))
        elif version.id in history:
            taken.append(Taken(file, version, version.visible))
        else:
            copies.setdefault(version.id, version)
            taken.append(Taken(file, version, False, copy=True))
    listed = [version for version in made if version.commit_id in commits and version.visible]
    return TakeOver(
        files=taken, copies=list(copies.values()), invisible=[v for v in listed if v.id in copies],
        discarded=[v for v in listed if v.id not in copies],
    )  # fmt: skip


def puts_back(
    op: Op, *, base: Mapping[str, File], source: Mapping[str, File], target: Mapping[str, File]
) -> list[PutBack]:
    """The segments whose removed rows a revert's undo (`op`) brings back onto a target that holds them in no
    version: neither the segment nor what the reverted commit made of it. Where the target holds either, taking the
    commit's files out and the segment's back in (`file_plan`) is exact."""
    if not op.details.get("reverts"):
        return []
    origins, recorded = op.details.get("segments_from", {}), op.details.get("put_back", {})
    found = []
    for sid in sorted(op.added | op.touched | set(recorded)):
        segment = source.get(sid)
        if segment is None or segment.kind != SEGMENT or sid in target:
            continue
        rewrites = [base[fid] for fid in sorted(op.removed) if fid in base and origins.get(fid, sid) == sid]
        if any(str(f.id) in target for f in rewrites):
            continue
        if sid in recorded:
            found.append(PutBack(segment, masks=[source[m] for m in recorded[sid] if m in source]))
        else:
            found.append(PutBack(segment, _deltas_on(source, sid), _deltas_on(base, sid), rewrites, sid in base))
    return found


def _deltas_on(files: Mapping[str, File], segment: str) -> list:
    return [f for f in files.values() if f.kind == DELTA and str(f.segment_id) == segment]


def object_file_plan(
    obj: ObjectDiff,
    *,
    base: Mapping[str, File],
    source: Mapping[str, File],
    target: Mapping[str, File],
    overwrites: Sequence[list[dict[str, Any]] | None],
) -> FilePlan:
    """`file_plan` of a planned object (`objects.ObjectDiff`): its source operations, discarded pairs and
    `source_wins` scope. `overwrites`: the partitions of each of its source overwrites that are replayed."""
    return file_plan(
        base=base, source=source, target=target, operations=obj.source_operations, discarded=obj.discarded,
        contested=obj.source_wins.files if obj.source_wins else frozenset(), overwrites=overwrites,
        source_rows=rewrites_of_source_rows(obj, source)[0] if overwrites else (),
        restored_on_target=restored_by_target(obj.target_operations),
        rewritten_on_target=rewritten_by_target(obj.target_operations, target),
    )  # fmt: skip


def taken_plan(*, source: Mapping[str, File], target: Mapping[str, File]) -> FilePlan:
    """The files of a table whose version the merge takes from the source (`source_wins` for a whole table without
    a key, or a primary-key table whose rows only the source changed), by reference: the target drops its files the
    source lacks and takes over the source's it lacks."""
    removed = [target[fid] for fid in sorted(set(target) - set(source))]
    added = [f for fid, f in source.items() if fid not in target]
    return FilePlan(removed=removed, kept=[], added=added, partitions=[])


def replayed_overwrites(obj: ObjectDiff) -> list[Op]:
    """The source's overwrites of a table the merge replays (not discarded)."""
    discarded = {pair.source for pair in obj.discarded}
    return [op for index, op in enumerate(obj.source_operations) if op.op == "overwrite" and index not in discarded]


def files_named(obj: ObjectDiff, how: str) -> set[str] | None:
    """The only files a table replayed by file needs to know on each side when the source's operations since the
    base only add files (appends, merge-on-read deletes): those they add, and the segments their delete files are
    on. Its file plan is then the same as on the table's whole file sets, read at a cost that follows the change,
    not the table. None when it needs those (the source removed or overwrote files, its version is taken by
    `source_wins`, or the table merges otherwise: by key, taken or kept whole)."""
    if how not in ("replayed", "created") or obj.source_wins is not None:
        return None
    named = set()
    for op in obj.source_operations:
        if op.op == "overwrite" or op.removed or op.details.get("deltas_removed"):
            return None
        named |= op.added | {segment for segment in op.details.get("deltas_on", {}).values() if segment}
    # The target's rewrites of those files: where it still holds one, it holds their rows (`rewritten_by_target`).
    return named | {new for new, came in segment_origins(obj.target_operations).items() if came & named}


def derived(file: File, files: frozenset[str]) -> bool:
    """Whether a file is one of `files` or a delete file of one of them."""
    return str(file.id) in files or (file.segment_id is not None and str(file.segment_id) in files)


def in_scope(file: File, partitions: list[dict[str, Any]] | None) -> bool:
    """Whether a segment is among those a source overwrite replaced: the whole table (None), or its partitions
    (values by column id, as `merge_app.selectors.diff.FilesRead.overwritten` reads them)."""
    return file.kind == SEGMENT and (partitions is None or file_in_partitions(file.partition_values, partitions))
