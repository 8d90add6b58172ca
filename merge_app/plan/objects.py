"""The merge plan's values (docs/architecture.md#the-path-of-a-merge), and its first stage.

Pure: plain values in, plain values out; no ORM, no Spark. `merge_app/selectors/diff.py` reads what storage holds of
the three sides (the graph finds the base, each side's operations since it, the objects' versions, the files where
they matter) into `PlanInputs`; `object_diffs` makes an `ObjectDiff` of every object either side changed (its
change, its versions and operations on each side, whether it is merged by key), which the later stages decide
(`merge_app.plan.decide`).
"""

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import merge_app.plan.rules as rules
from lakeui.errors import ApplicationError
from merge_app.plan.rules import CONFLICT, DISCARDED, OK, PENDING, Op, Verdict

DATABASE, TABLE, VIEW = "database", "table", "view"  # the object kinds of catalog_app's models
MERGED_KINDS = (DATABASE, TABLE)
KIND_ORDER = {DATABASE: 0, TABLE: 1}
WRITES_DATA = frozenset({"insert", "update", "overwrite"})
ROW_CHANGES = frozenset({"insert", "delete", "update", "overwrite"})
NOT_MERGED = "not_merged"
SIDES = ("base", "source", "target")


@dataclass(frozen=True, slots=True)
class Version:
    """An object's version as the diff reads it: the ObjectVersion row's fields, read as plain values (a diff of
    many objects reads tens of thousands; model instances cost most of its time)."""

    id: int
    catalog_id: uuid.UUID
    object_id: uuid.UUID
    kind: str
    parent_id: uuid.UUID | None
    name: str
    seq: int
    dropped: bool
    state: dict[str, Any]


VERSION_FIELDS = tuple(f.name for f in fields(Version))


@dataclass(frozen=True, slots=True)
class Pair:
    source: int  # index into the object's source operations
    target: int
    cell: str
    decided: Verdict
    resolved: str | None = None  # the resolution that settles this conflict


@dataclass
class ObjectDiff:
    kind: str
    object_id: uuid.UUID
    name: str  # `db` or `db.table`, as the source has it (the target's name if the source has none)
    change: str  # added_in_source | added_in_target | changed_in_source | changed_in_target | changed_in_both
    base: Version | None
    source: Version | None
    target: Version | None
    source_operations: list[Op] = field(default_factory=list)
    target_operations: list[Op] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    issues: list[Verdict] = field(default_factory=list)  # conflicts of the object as a whole (4.1, names)
    data_issues: list[Verdict] = field(default_factory=list)  # of its data as a whole: a data resolution settles them
    merged_state: dict[str, Any] | None = None
    keyed: bool = False  # a primary-key table: its rows merge as states, by key, never by position (4.4)
    data_changed: dict[str, bool] | None = None  # keyed: whether each side's files differ from the base's
    key_mode: bool = False  # a primary-key table whose rows both sides changed: merged by key (4.4)
    keys: dict[str, Any] | None = None  # the key comparison: counts, `unresolved`, conflicts listed, choices
    resolution: str | None = None  # a whole-table resolution that settles its conflicts
    # A6 settled by the resolution's `schema`: by column id, {"type": a type both sides' values fit} or
    # {"fill": the value of the rows written without the column} (`_schema_settled`)
    schema: dict[int, dict] = field(default_factory=dict)
    # the columns of the merged state whose type is not a widening of a side's: that side's values are checked to
    # fit on Spark before the merge writes (`states.value_casts`): {"side", "column_id", "column", "type", "to"}
    casts: list[dict] = field(default_factory=list)
    source_wins: rules.SourceWins | None = None  # what a table choice `source_wins` settles (no primary key)
    reverting: bool = False  # the source's operations undo a commit's (a revert): judged by the files they share
    target_unchanged: bool = False  # no key, and the target holds it as the base has it: the source's version wins
    # source operations dropped whole against no target operation: a compaction of segments the target holds in no
    # version (`_check_segments_present`); `target` is -1
    dropped: list[Pair] = field(default_factory=list)
    # target_unchanged: the operations the source's version carries that are not among `source_operations` (replays
    # of operations the base's history made, which the target may have declined); the merge records them as held
    held: list[tuple[str, int]] = field(default_factory=list)

    @property
    def rule_table(self) -> str | None:
        return self.kind if self.kind in MERGED_KINDS and self.change == "changed_in_both" else None

    @property
    def conflicts(self) -> list[Verdict]:
        unresolved = [p.decided for p in self.pairs if p.decided.verdict == CONFLICT and p.resolved is None]
        issues = [issue for issue in self.issues if issue.verdict != PENDING]
        return [*issues, *(self.data_issues if self.resolution is None else []), *unresolved]

    @property
    def pending(self) -> bool:
        return any(decided.verdict == PENDING for decided in [*self.issues, *(p.decided for p in self.pairs)])

    @property
    def discarded(self) -> list[Pair]:
        found = [pair for pair in self.pairs if pair.decided.verdict == DISCARDED]  # asked often: kept plain
        return found + self.dropped if self.dropped else found

    @property
    def verdict(self) -> str:
        if self.kind not in MERGED_KINDS:
            return NOT_MERGED
        if self.conflicts:
            return CONFLICT
        if self.pending:
            return PENDING
        return DISCARDED if self.discarded else OK

    @property
    def merges(self) -> bool:
        """Whether the merge writes anything for this object."""
        return self.kind in MERGED_KINDS and self.change in ("added_in_source", "changed_in_source", "changed_in_both")


@dataclass(frozen=True)
class PlanInputs:
    """What the planner decides from, as `merge_app/selectors/diff.py` read it for two heads and their base."""

    versions: Mapping[str, Mapping[uuid.UUID, Version]]  # per side (SIDES): the newest version of each object read
    source_operations: Mapping[uuid.UUID, list[Op]]  # each side's changes since the base, per object, in order
    target_operations: Mapping[uuid.UUID, list[Op]]
    object_ids: frozenset[uuid.UUID]  # the objects to compare: those either side changed
    keyed_changes: Mapping[uuid.UUID, Mapping[str, bool]]  # primary-key tables: whether each side's files differ
    taken: Mapping[tuple, uuid.UUID]  # the target's live names the source's objects have: namespace -> id
    # Tables the source rewrote by position: each side's live files, file id -> the segment a delete file deletes
    # from (None for a segment); where segments reached the source after its overwrite by operations the base holds,
    # also `origins`, the target's segments' older ones (`overwrite_taken_back`).
    live_files: Mapping[uuid.UUID, Mapping[str, Mapping[str, str | frozenset[str] | None]]]
    target_children: Mapping[uuid.UUID, list[tuple[uuid.UUID, str]]]  # databases the source dropped: target's
    segment_stats: Mapping[str, dict]  # column statistics of the segments either side wrote (NOT NULL checks)
    reverting: bool = False  # the source's operations undo a commit's (a revert)
    # tables the source changed that the target holds as the base has them (`operations.target_unchanged`): its
    # first-parent chain since the base leads back to the base and touched them not, or its definition and live
    # files are the base's (`operations.held_as_at_base`)
    target_unchanged: frozenset[uuid.UUID] = frozenset()
    # per object: the identity (`Op.identity`) of every operation the source's first-parent chain since the base holds
    source_held: Mapping[uuid.UUID, frozenset[tuple[str, int]]] = field(default_factory=dict)
    # tables the source inserted into whose target's last overwrite is a restore that lacks the segments inserted: of
    # each file of the restore's result, the older segments whose rows it holds (`restored_rewrites`)
    restored_origins: Mapping[uuid.UUID, Mapping[str, frozenset[str]]] = field(default_factory=dict)


def keyed_changes(files: Mapping[uuid.UUID, Mapping[str, frozenset[str]]]) -> dict[uuid.UUID, dict[str, bool]]:
    """For each primary-key table live at the base and on both sides (its file ids per side): whether each side's
    files (segments and delete files) differ from the base's. Only the files say whether a side changed the rows;
    the operations on a side since the base may be replays of either side, settled resolutions or changes undone
    since."""
    return {k: {side: ids[side] != ids["base"] for side in ("source", "target")} for k, ids in files.items()}


def object_diffs(inputs: PlanInputs, schema: Mapping[str, dict]) -> list[ObjectDiff]:
    """The plan's first stage: every object either side changed, with its change, its versions and operations on
    each side and whether it is merged by key, in no order; `schema`: the resolution's schema settlements, by table
    name (`_schema_settled`)."""
    objects = [_object_diff(inputs, object_id, schema) for object_id in inputs.object_ids]
    return [obj for obj in objects if obj is not None]


def _display_name(version: Version, versions: dict) -> str:
    if version.parent_id is None:
        return version.name
    for side in ("source", "target", "base"):
        parent = versions[side].get(version.parent_id)
        if parent is not None:
            return f"{parent.name}.{version.name}"
    return version.name


def _object_diff(inputs: PlanInputs, object_id: uuid.UUID, schema: Mapping[str, dict]) -> ObjectDiff | None:
    versions = inputs.versions
    src_ops, dest_ops = inputs.source_operations.get(object_id, []), inputs.target_operations.get(object_id, [])
    data_changed = inputs.keyed_changes.get(object_id)
    if data_changed is None and object_id in inputs.target_unchanged:
        dest_ops = []  # it holds the table as the base has it: what its operations since did, they undid
    base, src, dest = (versions[side].get(object_id) for side in SIDES)
    if base is not None and base.dropped:  # dropped at the base (a drop, or a restore to before it was made):
        base = None  # one a side has again (a restore brought it back) is new on that side, as one never made
    if base is None and (src is None or src.dropped) and (dest is None or dest.dropped):
        return None  # created and dropped again on a side: nothing to compare or merge
    changed = {"source": bool(src_ops) or object_id in inputs.target_unchanged, "target": bool(dest_ops)}
    if data_changed is not None:  # a keyed table: a side whose rows differ from the base's changed it
        changed = {side: changed[side] or data_changed[side] for side in changed}
    if base is None:
        change = "added_in_source" if src is not None and not src.dropped else "added_in_target"
    elif changed["source"] and changed["target"]:
        change = "changed_in_both"
    else:
        change = "changed_in_source" if changed["source"] else "changed_in_target"
    shown = src if src is not None else dest
    obj = ObjectDiff(
        kind=shown.kind, object_id=object_id, name=_display_name(shown, versions), change=change, base=base,
        source=src, target=dest, source_operations=src_ops, target_operations=dest_ops,
        keyed=data_changed is not None, data_changed=data_changed, reverting=inputs.reverting,
        target_unchanged=data_changed is None and change == "changed_in_source"
        and object_id in inputs.target_unchanged,
    )  # fmt: skip
    if obj.kind == TABLE and change == "changed_in_both" and schema.get(obj.name):
        obj.schema = _schema_settled(obj, schema[obj.name])
    if obj.target_unchanged:  # it becomes the source's version: it holds what that version holds
        replayed = {op.identity for op in src_ops}
        obj.held = sorted(inputs.source_held.get(object_id, frozenset()) - replayed)
    if change == "changed_in_both" and obj.kind in MERGED_KINDS:
        obj.key_mode = _key_mode(obj)
    return obj


def _key_mode(obj: ObjectDiff) -> bool:
    """A primary-key table whose rows both sides changed since the base (their files differ from the base's): it
    is merged three-way by key. If only one side changed them, the merge takes that side's rows as they are."""
    return obj.keyed and all(obj.data_changed.values())


def _schema_settled(obj: ObjectDiff, given: dict[str, dict]) -> dict[int, dict]:
    """A table's schema settlements (`{column: {"type": t} | {"fill": v}}`, by the names the target has, else the
    source) by column id. 400 `unknown_column` for a column of neither side."""
    ids = {c["name"]: c["id"] for side in (obj.source, obj.target) for c in side.state["columns"]}
    unknown = sorted(set(given) - set(ids))
    if unknown:
        raise ApplicationError("unknown_column", f"{obj.name!r} has no column {unknown[0]!r} to settle.",
                               details={"table": obj.name, "column": unknown[0], "columns": sorted(ids)})  # fmt: skip
    return {ids[name]: settlement for name, settlement in given.items()}
