"""The diff of two refs: their common ancestor, every object either side changed since it, the operations of each
side, and the verdict of every source x target operation pair with the rule cell that decided it.

This report is the one source for the merge, its dry run, merge requests and the UI: the merge applies exactly
what it says (see services/merges.py).
"""

import uuid
from dataclasses import dataclass, field, fields, replace
from typing import Any

from django.db.models import F, Window
from django.db.models.functions import RowNumber

from catalog_app.models import Catalog, Commit, DataFile, ObjectKind, ObjectVersion, Operation
from catalog_app.selectors.objects import newest_on_chain, object_by_id
from catalog_app.selectors.refs import Chain, commit_chain, ref_resolve
from catalog_app.selectors.table_files import NO_FILES, tables_files
from lakeui.errors import ApplicationError, ConflictError
from lakeui.memory import gc_paused
from merge_app import rules, semantics, states
from merge_app.models import KeyComparison, VirtualBase
from merge_app.rules import CHOICES, CONFLICT, DISCARDED, OK, PENDING, SOURCE_WINS, Facts, Op, Verdict
from merge_app.selectors.graph import CommitGraph, Sides

MERGED_KINDS = (ObjectKind.DATABASE, ObjectKind.TABLE)
KIND_ORDER = {ObjectKind.DATABASE: 0, ObjectKind.TABLE: 1}
WRITES_DATA = frozenset({"insert", "update", "overwrite"})
ROW_CHANGES = frozenset({"insert", "delete", "update", "overwrite"})
NOT_MERGED = "not_merged"
KEYS_IN_REPORT = 20  # conflicting keys listed per table in the report; the rest through the keys endpoint
REVERT, CHERRY_PICK = "revert", "cherry_pick"
REVERTED = frozenset({"insert", "delete", "update", "overwrite", "compaction"})  # operations a revert undoes
MESSAGE_CRISS_CROSS = (
    "{source!r} and {target!r} have {count} merge bases ({bases}): each side merged the other after both moved "
    "(a criss-cross history). The bases are merged into one virtual base first, on a worker."
)


class BasesNotMerged(ConflictError):
    """Two heads with several merge bases whose virtual base has not been made yet: a worker makes it
    (services.merges.bases_merge) and the diff is made again."""

    def __init__(self, *, source: str, target: str, bases: list[str]) -> None:
        shown = ", ".join(commit_id[:12] for commit_id in bases)
        message = MESSAGE_CRISS_CROSS.format(source=source, target=target, count=len(bases), bases=shown)
        super().__init__("multiple_merge_bases", message, details={"bases": bases})
        self.bases = bases


@dataclass(frozen=True)
class ExplicitBase:
    """A merge whose base is given instead of found (docs/merge-semantics.md#revert-and-cherry-pick): a cherry-pick
    merges `commit` into the target from the commit's parent; a revert merges the commit's parent into the target
    from the commit itself, the commit's operations inverted."""

    kind: str  # REVERT | CHERRY_PICK
    commit: Commit

    @property
    def base(self) -> Commit:
        return self.commit if self.kind == REVERT else self.commit.parent

    @property
    def source_head(self) -> Commit:
        return self.commit.parent if self.kind == REVERT else self.commit


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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
    source_wins: rules.SourceWins | None = None  # what a table choice `source_wins` settles (no primary key)
    reverting: bool = False  # the source's operations undo a commit's (a revert): judged by the files they share

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
        return [pair for pair in self.pairs if pair.decided.verdict == DISCARDED]

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
class MergeDiff:
    catalog: Catalog
    source: str
    target: str
    source_head: Commit
    target_head: Commit
    base: Commit
    source_commits: list[str]  # the commits reachable from the source head and not from the target's (4.0)
    objects: list[ObjectDiff]
    resolution: dict[str, Any] = field(default_factory=dict)
    bases: list[str] = field(default_factory=list)  # the merge bases; with several, `base` is their virtual base
    explicit: ExplicitBase | None = None  # a revert or a cherry-pick: the base was given

    @property
    def conflicts(self) -> list[ObjectDiff]:
        return [obj for obj in self.objects if obj.verdict == CONFLICT]

    @property
    def mergeable(self) -> bool:
        return not self.conflicts and not self.pending

    @property
    def pending(self) -> list[ObjectDiff]:
        """Primary-key tables whose key comparison has not run (it runs on a worker)."""
        return [obj for obj in self.objects if obj.verdict == PENDING]

    @property
    def resolution_log(self) -> list[dict[str, Any]]:
        tables = self.resolution.get("tables", {})
        return [entry for obj in self.objects for entry in (obj.keys or {}).get("choices", [])] + [
            {"object": obj.name, "scope": "table" if obj.name in tables else "default", "choice": obj.resolution}
            for obj in self.objects
            if obj.resolution
        ]

    @property
    def up_to_date(self) -> bool:
        return not any(obj.merges for obj in self.objects)


def merge_diff(*, catalog: Catalog, source: str, target: str, resolution: dict | None = None) -> MergeDiff:
    """The diff of two refs (branches, tags or commits) as it is now."""
    src = ref_resolve(catalog=catalog, ref=source)
    dest = ref_resolve(catalog=catalog, ref=target)
    return merge_diff_of(
        catalog=catalog, source=source, target=target, source_head=src.commit, target_head=dest.commit,
        source_chain=src.chain, target_chain=dest.chain, resolution=resolution,
    )  # fmt: skip


@gc_paused()
def merge_diff_of(
    *,
    catalog: Catalog,
    source: str,
    target: str,
    source_head: Commit,
    target_head: Commit,
    source_chain: Chain,
    target_chain: Chain,
    resolution: dict | None = None,
    compared: dict[uuid.UUID, dict] | None = None,
    explicit: ExplicitBase | None = None,
) -> MergeDiff:
    """The diff at two given heads. A primary-key table changed on both sides takes its key comparison from
    `compared` (table id -> counts and conflicts, all of them: a comparison made in this process) or as stored
    for these heads; without either it is pending."""
    resolution = resolution_check(resolution)
    graph = CommitGraph(catalog.id)
    if explicit is None:
        sides = graph.sides(source_head.id, target_head.id)
        base = _base(catalog, sides.bases, source=source, target=target)
        src_ops, src_touched, src_held = _operations(graph, source_head.id, sides.source)
    else:
        base = explicit.base
        sides = Sides(bases=[base.id], source=[explicit.commit.id], target=graph.sides(base.id, target_head.id).target)
        if explicit.kind == REVERT:
            src_ops = _inverse_operations(explicit.commit)
            src_touched, src_held = set(src_ops), set()
        else:
            src_ops, src_touched, src_held = _operations(graph, explicit.commit.id, sides.source)
    dest_ops, dest_touched, dest_held = _operations(graph, target_head.id, sides.target)
    # An operation both sides hold (one side cherry-picked it from the other), or a pick of one the base holds, is
    # no change of either. A revert's undoing operations are new: the target holds the operations they undo.
    if explicit is None or explicit.kind != REVERT:
        in_base = _picked_in_base(graph, [src_ops, dest_ops], base.id)
        src_ops, dest_ops = _not_held(src_ops, dest_held | in_base), _not_held(dest_ops, src_held | in_base)
    chains = {"base": commit_chain(base), "source": source_chain, "target": target_chain}
    object_ids = set(src_ops) | set(dest_ops) | src_touched | dest_touched
    versions = {side: _versions(chain, object_ids) for side, chain in chains.items()}
    data_changed = _keyed_data_changes(versions, chains)
    # A table without a key is compared by the operations each side made since the base; one that only a merge's
    # replay of the base's own history touched is no change. A keyed table is compared by state.
    object_ids = set(src_ops) | set(dest_ops) | {i for i, changed in data_changed.items() if any(changed.values())}
    parents = {v.parent_id for side in versions.values() for v in side.values() if v.parent_id} - object_ids
    for side, chain in chains.items():
        versions[side] |= _versions(chain, parents)
    wanted = [v for v in versions["source"].values() if v.object_id in object_ids]
    taken = _live_names(target_chain, wanted, versions["target"])
    objects = [
        _object_diff(
            object_id,
            src_ops.get(object_id, []),
            dest_ops.get(object_id, []),
            versions,
            taken,
            target_chain,
            data_changed.get(object_id),
            reverting=explicit is not None and explicit.kind == REVERT,
        )
        for object_id in object_ids
    ]
    objects = [obj for obj in objects if obj is not None]
    if explicit is None or explicit.kind != REVERT:  # a revert's own check is its pairs' (rules.revert_verdict)
        _check_segments_present(objects, source_chain, target_chain)
    objects.sort(key=lambda obj: (KIND_ORDER.get(obj.kind, 2), obj.name))
    diff = MergeDiff(
        catalog=catalog, source=source, target=target, source_head=source_head, target_head=target_head, base=base,
        source_commits=sides.source, objects=objects, resolution=resolution, bases=sides.bases, explicit=explicit,
    )  # fmt: skip
    keyed = [obj for obj in objects if obj.key_mode]
    results = dict(compared or {})
    unread = [obj.object_id for obj in keyed if obj.object_id not in results]
    if unread:  # the comparisons not made in this process, as stored for these heads
        stored = KeyComparison.objects.filter(
            table_id__any=unread, base=base.id, source_head=source_head.id, target_head=target_head.id
        )
        results |= {row.table_id: {"counts": row.counts, "conflicts": row.conflicts} for row in stored}
    for obj in keyed:
        keys_attach(obj, results.get(obj.object_id), resolution)
    for obj in objects:
        pairs_resolve(obj, resolution)
    return diff


def _base(catalog: Catalog, bases: list[str], *, source: str, target: str) -> Commit:
    """The merge base; in a criss-cross history the bases merged into one (docs/merge-semantics.md)."""
    if len(bases) == 1:
        return Commit.objects.get(id=bases[0])
    virtual = VirtualBase.objects.filter(catalog=catalog, bases=virtual_base_key(bases)).first()
    if virtual is None:
        raise BasesNotMerged(source=source, target=target, bases=bases)
    return virtual.commit


def virtual_base_key(bases: list[str]) -> str:
    return ",".join(sorted(bases))


def merge_diff_again(diff: MergeDiff, compared: dict[uuid.UUID, dict] | None = None) -> MergeDiff:
    """The same diff made anew at the same heads: after its primary-key tables were compared by key."""
    return merge_diff_of(
        catalog=diff.catalog, source=diff.source, target=diff.target, source_head=diff.source_head,
        target_head=diff.target_head, source_chain=commit_chain(diff.source_head),
        target_chain=commit_chain(diff.target_head), resolution=diff.resolution, compared=compared,
        explicit=diff.explicit,
    )  # fmt: skip


def resolution_check(resolution: dict | None) -> dict[str, Any]:
    """`{"default": fail | source_wins | target_wins, "tables": {"db.t": choice}, "keys": {"db.t": {key_id:
    choice}}}`; the default settles data conflicts only, a table's choice also its DDL conflicts."""
    resolution = resolution or {}
    if not isinstance(resolution, dict) or set(resolution) - {"default", "tables", "keys"}:
        raise ApplicationError("invalid_resolution", "resolution takes `default`, `tables` and `keys`.")
    tables, keys = resolution.get("tables", {}), resolution.get("keys", {})
    if (
        not isinstance(tables, dict)
        or not isinstance(keys, dict)
        or not all(isinstance(k, dict) for k in keys.values())
    ):
        raise ApplicationError(
            "invalid_resolution", "`tables` maps a table to a choice; `keys` maps a table to {key id: choice}."
        )
    choices = [resolution.get("default", "fail"), *tables.values()]
    choices += [choice for per_key in keys.values() for choice in per_key.values()]
    if any(not isinstance(choice, str) or choice not in CHOICES for choice in choices):
        raise ApplicationError("invalid_resolution", f"A resolution is one of {CHOICES}.")
    return resolution


def keys_attach(obj: ObjectDiff, result: dict | None, resolution: dict) -> None:
    """Decide a primary-key table's data pairs from its key comparison (None: not run yet)."""
    if result is not None:
        chosen = semantics.choices_of(resolution, obj.name)
        per_key = resolution.get("keys", {}).get(obj.name, {})
        choices = semantics.key_choices(result["conflicts"], table=obj.name, per_key=per_key, **chosen)
        unresolved = semantics.keys_unresolved(
            listed=len(result["conflicts"]), settled=len(choices), total=result["counts"]["conflicts"], **chosen
        )
        obj.keys = {
            **result["counts"], "unresolved": unresolved, "choices": choices,
            "listed": result["conflicts"][:KEYS_IN_REPORT],
        }  # fmt: skip
    obj.pairs = []
    _decide_pairs(obj)
    if not any(pair.cell == "4.4" for pair in obj.pairs):
        # No pair of data operations shows the comparison (one side's changes of the rows are all replays of the
        # other's, or picks of them): the table's own verdict is the comparison's.
        decided = rules.key_verdict(obj.keys)
        if decided.verdict != OK:
            obj.issues.append(decided)


def pairs_resolve(obj: ObjectDiff, resolution: dict) -> None:
    """Settle the object's conflicting pairs with a whole-table resolution: the table's own choice settles any
    conflict, the default only conflicts of data (between two data operations, or of the table's data whole)."""
    chosen = semantics.choices_of(resolution, obj.name)
    settled = []
    for index, pair in enumerate(obj.pairs):
        if pair.decided.verdict != CONFLICT or pair.decided.note == "4.4":
            continue
        src_op, dest_op = obj.source_operations[pair.source].op, obj.target_operations[pair.target].op
        choice = semantics.pair_choice(src_op, dest_op, **chosen)
        if choice is not None:
            obj.pairs[index] = replace(pair, resolved=choice)  # Pair is frozen
        settled.append(choice)
    if obj.data_issues:  # conflicts of the table's data as a whole, which its choice or the default settles
        settled.append(semantics.data_choice(**chosen))
    obj.resolution = semantics.table_resolution(settled, **chosen)
    if obj.resolution == SOURCE_WINS and obj.kind == ObjectKind.TABLE and not obj.key_mode:
        _source_wins(obj)


def _source_wins(obj: ObjectDiff) -> None:
    """A table without a key settled `source_wins`: the target takes the source's version of the segments in
    conflict and keeps its other changes (rules.source_wins_scope). A table the target dropped, or whose data the
    target lacks (R*), is taken from the source whole."""
    if obj.source_wins is not None or obj.target.dropped or obj.source.dropped or obj.data_issues:
        return
    conflicting = [(pair.source, pair.target) for pair in obj.pairs if pair.resolved == SOURCE_WINS]
    scope = rules.source_wins_scope(obj.source_operations, obj.target_operations, conflicting)
    if scope.mixed:
        obj.issues.append(
            Verdict(
                CONFLICT, "source_wins",
                "source_wins cannot settle this table: the target rewrote rows it inserted itself together with "
                "the segments in conflict, so taking the source's version of those would drop them. Settle it "
                "with target_wins, or compact less on the target.",
            )
        )  # fmt: skip
        return
    obj.source_wins = scope
    if obj.merged_state is None:
        _merge_state(obj)


def _operations(
    graph: CommitGraph, head: str, commits: list[str]
) -> tuple[dict[uuid.UUID, list[Op]], set[uuid.UUID], set[tuple]]:
    """A side's changes since the base (docs/merge-semantics.md#which-changes-a-merge-replays), per object in commit
    order: each original operation of the side's commits once, as the side has it. The side's state was built along
    its head's first-parent chain, so that chain says what the side holds: its commits' own operations, and of each
    merge commit on it the operations it made itself (key merges, deletes in mixed segments) and those it replayed,
    each under the operation it came from. An operation a merge replayed whose origin the base already holds is not
    a change since the base; one that no merge on the chain replayed (discarded, or settled by `target_wins`) is not
    part of the side's state. Also returns every object an operation on that chain touched (a primary-key table
    among them is compared by state, `_keyed_data_changes`, whatever the operations say) and the identity
    (`Op.identity`) of every operation the chain holds, so that one both sides hold, cherry-picked, counts on
    neither."""
    since = set(commits)
    chain = graph.first_parents(head, since)
    picked: dict[tuple[str, int, uuid.UUID], tuple[uuid.UUID, Op]] = {}
    rows = Operation.objects.filter(commit_id__any=chain).values_list(
        "commit_id", "position", "object_id", "op", "details"
    )
    rows = sorted(rows, key=lambda r: (graph.node(r[0]).seq, r[1]))
    # What a merge's `source_wins` superseded on this side is no change of it: the merge took the other side's
    # version of those files instead (rules.source_wins_scope), and it is that side's change.
    superseded = {
        (commit, position, object_id)
        for _, _, object_id, kind, details in rows if kind == Operation.Op.RESOLVE
        for commit, position in details["superseded"]
    }  # fmt: skip
    held = set()
    for commit_id, position, object_id, kind, details in rows:
        if kind == Operation.Op.RESOLVE:
            continue
        origin, origin_position = details.pop("merged_from", None), details.pop("origin_position", None)
        if origin is None or origin_position is None:  # the commit's own (merges made before 4.0 count as own)
            origin, origin_position = commit_id, position
        op = Op(origin, origin_position, kind, details)
        held.add((*op.identity, object_id))
        if origin not in since:
            continue  # replayed from the base's history: both sides hold it
        if (origin, origin_position, object_id) in superseded:
            continue
        picked.setdefault((origin, origin_position, object_id), (object_id, op))
    touched = {object_id for _, _, object_id, _, _ in rows}
    ordered = sorted(picked.values(), key=lambda entry: (graph.node(entry[1].commit).seq, entry[1].position))
    return _by_object(ordered), touched, held


def _picked_in_base(graph: CommitGraph, sides: list[dict[uuid.UUID, list[Op]]], base: str) -> set[tuple]:
    """The identities of cherry-picked operations whose original the base's history holds."""
    picked = {(*op.identity, object_id) for ops in sides for object_id, side in ops.items() for op in side
              if op.details.get("picked_from")}  # fmt: skip
    originals = {commit for commit, _, _ in picked}
    held = {commit for commit in originals if not graph.sides(commit, base).source}  # reachable from the base
    return {identity for identity in picked if identity[0] in held}


def _inverse_kind(kind: str, undone: dict[str, Any]) -> str:
    """The operation an undo is, by what it does to files (so that a later merge replaying it applies the rule
    cells and positional checks of what it does): a compaction's undo is a compaction; one that takes segments out
    or brings rows of segments back by position rewrites (an `update`, a `delete` if it adds nothing); one that
    only puts files back is an `insert`."""
    if kind == "compaction":
        return kind
    if undone["segments_removed"] or undone["segments_touched"]:
        return "update" if undone["segments_added"] or undone["segments_touched"] else "delete"
    return "insert"


def _not_held(ops: dict[uuid.UUID, list[Op]], held: set[tuple]) -> dict[uuid.UUID, list[Op]]:
    kept = {object_id: [op for op in side if (*op.identity, object_id) not in held] for object_id, side in ops.items()}
    return {object_id: side for object_id, side in kept.items() if side}


def _by_object(ordered: list[tuple[uuid.UUID, Op]]) -> dict[uuid.UUID, list[Op]]:
    """Operations per object, in order, each delete file they add named with its segment (`deltas_on`)."""
    deltas = [d for _, op in ordered for d in op.details.get("deltas_added", [])]
    owner = {str(i): str(s) for i, s in DataFile.objects.filter(id__any=deltas).values_list("id", "segment_id")}
    by_object: dict[uuid.UUID, list[Op]] = {}
    for object_id, op in ordered:
        if op.details.get("deltas_added"):
            op = replace(op, details={**op.details, "deltas_on": {d: owner.get(d) for d in op.details["deltas_added"]}})
        by_object.setdefault(object_id, []).append(op)
    return by_object


def _inverse_operations(commit: Commit) -> dict[uuid.UUID, list[Op]]:
    """What a revert of `commit` changes, as operations of the revert (docs/merge-semantics.md#revert-and-cherry-pick):
    each data operation of the commit (own or replayed by a merge) undone by its inverse, newest first: the files it
    added taken out, those it removed put back. A commit that changed a definition (created, dropped, renamed or
    altered an object) is not reverted: its definitions are left to the user."""
    rows = Operation.objects.filter(commit_id=commit.id).order_by("-position")
    rows = rows.values_list("position", "object_id", "op", "details")
    ddl = sorted({op for _, _, op, _ in rows if op not in REVERTED and op != Operation.Op.RESOLVE})
    if ddl:
        raise ApplicationError(
            "revert_unsupported",
            f"Commit {commit.id[:12]} changed definitions ({', '.join(ddl)}): only commits that changed rows (loads, "
            "deletes, updates, compactions, merges of those) can be reverted; change the definitions back by hand.",
            details={"operations": ddl},
        )
    inverse = []
    for position, object_id, kind, details in rows:
        if kind == Operation.Op.RESOLVE:
            continue
        undone = {
            "segments_added": details.get("segments_removed", []),
            "segments_removed": details.get("segments_added", []),
            "deltas_added": details.get("deltas_removed", []), "deltas_removed": details.get("deltas_added", []),
            # the segments whose rows it deleted or updated by position: their rows come back
            "segments_touched": details.get("segments_touched", []),
            "rows_inserted": details.get("rows_deleted", 0), "rows_deleted": details.get("rows_inserted", 0),
            "rows_updated": details.get("rows_updated", 0), "reverts": [commit.id, position, kind],
        }  # fmt: skip
        inverse.append((object_id, Op(commit.id, position, _inverse_kind(kind, undone), undone)))
    return _by_object(inverse)


def _versions(chain: Chain, object_ids: set, known: dict | None = None) -> dict[uuid.UUID, Version]:
    """The newest version on the chain of each object (or as `known` has it already), in one query."""
    known = known or {}
    found = {object_id: known[object_id] for object_id in object_ids if object_id in known}
    wanted = set(object_ids) - set(found)
    if not wanted:
        return found
    rows = ObjectVersion.objects.filter(chain.q(), catalog_id=chain.commit.catalog_id, object_id__any=wanted)
    newest = rows.annotate(n=Window(RowNumber(), partition_by=F("object_id"), order_by=F("seq").desc())).filter(n=1)
    return found | {row[2]: Version(*row) for row in newest.values_list(*VERSION_FIELDS)}


def _live_names(chain: Chain, wanted: list[Version], known: dict) -> dict[tuple, uuid.UUID]:
    """Which objects of the target hold the names the source's objects have: (kind, parent, name) -> id. `known`:
    the target's versions loaded already."""
    if not wanted:
        return {}
    named = ObjectVersion.objects.filter(
        chain.q(), catalog_id=chain.commit.catalog_id, name__any={v.name for v in wanted},
        kind__in=[*MERGED_KINDS, ObjectKind.VIEW],
    ).values_list("object_id", flat=True)  # fmt: skip
    live = [v for v in _versions(chain, set(named), known).values() if not v.dropped]
    return {_namespace(v): v.object_id for v in live}


def _namespace(version: Version) -> tuple:
    kind = ObjectKind.TABLE if version.kind == ObjectKind.VIEW else version.kind
    return (kind, version.parent_id, version.name.lower())


def _display_name(version: Version, versions: dict) -> str:
    if version.parent_id is None:
        return version.name
    for side in ("source", "target", "base"):
        parent = versions[side].get(version.parent_id)
        if parent is not None:
            return f"{parent.name}.{version.name}"
    return version.name


def _object_diff(
    object_id, src_ops, dest_ops, versions, taken, target_chain, data_changed, *, reverting: bool
) -> ObjectDiff | None:
    base, src, dest = (versions[side].get(object_id) for side in ("base", "source", "target"))
    if base is None and (src is None or src.dropped) and (dest is None or dest.dropped):
        return None  # created and dropped again on a side: nothing to compare or merge
    changed = {"source": bool(src_ops), "target": bool(dest_ops)}
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
        keyed=data_changed is not None, data_changed=data_changed, reverting=reverting,
    )  # fmt: skip
    if obj.kind not in MERGED_KINDS or change == "added_in_target":
        return obj
    if change == "added_in_source":
        _check_new(obj, versions, taken)
        return obj
    if change == "changed_in_both":
        obj.key_mode = _key_mode(obj)
        if not obj.key_mode:
            _decide_pairs(obj)
    if src.dropped and obj.kind == ObjectKind.DATABASE and dest is not None and not dest.dropped:
        _check_emptied(obj, versions, target_chain)
    if not src.dropped:
        _check_name(obj, taken)
        if not obj.conflicts and not (dest is not None and dest.dropped):
            _merge_state(obj)
    return obj


def _check_segments_present(objects: list[ObjectDiff], source_chain: Chain, target_chain: Chain) -> None:
    """A source operation that changed rows of a segment by position (a delete, an update, a compaction) replays
    only where that segment is: on the target, or written by the source itself. A segment the target's own
    operations removed is for the rule tables (A4/A5, F*, R*). One the target never had, because a merge on one
    side kept a table the other side had changed (`target_wins`, a discard), is a conflict here: the replay would
    miss the rows or keep them twice. An operation none of whose files the source still has (a later overwrite
    replaced them) has nothing left to replay."""
    wanted: dict[uuid.UUID, ObjectDiff] = {}
    for obj in objects:
        if obj.kind != ObjectKind.TABLE or not obj.merges or obj.source.dropped or obj.keyed:
            continue
        if any(op.op in rules.REWRITES for op in obj.source_operations):
            wanted[obj.object_id] = obj
    if not wanted:
        return
    live = {
        side: tables_files(chain, table_ids=list(wanted))
        for side, chain in (("source", source_chain), ("target", target_chain))
    }
    for table_id, obj in wanted.items():
        source, target = (set(live[side].get(table_id, NO_FILES).by_id()) for side in ("source", "target"))
        # An operation's effect lives on in the files the source still has, or in what later rewrites (compactions,
        # copy-on-write) made of its files; one that only removed files has its effect too.
        lives = set(source)
        for op in reversed(obj.source_operations):
            if op.op in rules.REWRITES and op.added & lives:
                lives |= op.removed
        positional = [
            op for op in obj.source_operations if op.op in rules.REWRITES and (op.added & lives or not op.added)
        ]
        addressed = set().union(*(op.touched | op.removed for op in positional))
        addressed -= set().union(*(op.added for op in obj.source_operations))
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


def _check_new(obj: ObjectDiff, versions: dict, taken: dict) -> None:
    """4.1: a new object is taken over with its id, unless the target has another of its kind and name."""
    parent = obj.source.parent_id
    database = versions["target"].get(parent) if parent is not None else None
    taken_by_other = semantics.taken_by_another(taken, _namespace(obj.source), obj.object_id)
    obj.issues += semantics.new_object_conflicts(
        kind=obj.kind, name=obj.name, taken_by_other=taken_by_other,
        parent_in_base=parent is not None and versions["base"].get(parent) is not None,
        parent_on_target=database is not None and not database.dropped,
    )  # fmt: skip
    obj.merged_state = obj.source.state


def _check_emptied(obj: ObjectDiff, versions: dict, target_chain: Chain) -> None:
    """A database the source dropped must not hold objects the target still has and the source did not drop."""
    children = ObjectVersion.objects.filter(catalog_id=obj.target.catalog_id, parent_id=obj.object_id)
    dropped_by_source = {i for i, v in versions["source"].items() if v.dropped}
    kept = [
        child.name
        for child in newest_on_chain(children, target_chain, key="object_id").filter(dropped=False)
        if child.object_id not in dropped_by_source
    ]
    conflict = semantics.emptied_database_conflict(kept)
    if conflict is not None:
        obj.issues.append(conflict)


def _check_name(obj: ObjectDiff, taken: dict) -> None:
    taken_by_other = semantics.taken_by_another(taken, _namespace(obj.source), obj.object_id)
    conflict = semantics.rename_conflict(
        base_name=obj.base.name, source_name=obj.source.name, taken_by_other=taken_by_other
    )
    if conflict is not None:
        obj.issues.append(conflict)


def _key_mode(obj: ObjectDiff) -> bool:
    """A primary-key table whose rows both sides changed since the base (their files differ from the base's): it
    is merged three-way by key. If only one side changed them, the merge takes that side's rows as they are."""
    return obj.keyed and all(obj.data_changed.values())


def _keyed_data_changes(versions: dict, chains: dict[str, Chain]) -> dict[uuid.UUID, dict[str, bool]]:
    """For each primary-key table live at the base and on both sides: whether each side's files (segments and
    delete files) differ from the base's. Only the files say whether a side changed the rows; the operations on a
    side since the base may be replays of either side, settled resolutions or changes undone since."""
    keyed = [
        object_id for object_id, base in versions["base"].items()
        if base.kind == ObjectKind.TABLE and not base.dropped
        and all(_keyed_live(versions[side].get(object_id)) for side in ("source", "target"))
    ]  # fmt: skip
    if not keyed:
        return {}
    files = {side: tables_files(chain, table_ids=keyed) for side, chain in chains.items()}
    ids = {side: {k: set(f.get(k, NO_FILES).by_id()) for k in keyed} for side, f in files.items()}
    return {k: {side: ids[side][k] != ids["base"][k] for side in ("source", "target")} for k in keyed}


def _keyed_live(version: Version | None) -> bool:
    return version is not None and not version.dropped and bool(version.state.get("primary_key"))


def _decide_pairs(obj: ObjectDiff) -> None:
    table = rules.RULE_TABLES[obj.kind]
    facts = Facts(key_mode=obj.key_mode, keyed=obj.keyed, keys=obj.keys, reverting=obj.reverting)
    if obj.kind == ObjectKind.TABLE and obj.target is not None:
        facts.dest_columns = {column["id"]: column for column in obj.target.state["columns"]}
        facts.src_wrote_data = any(
            op.op in WRITES_DATA and op.details.get("segments_added") for op in obj.source_operations
        )
        facts.src_changed_rows = any(op.op in ROW_CHANGES for op in obj.source_operations)
    for i, src_op in enumerate(obj.source_operations):
        for j, dest_op in enumerate(obj.target_operations):
            cell, decided = rules.verdict(table, src_op, dest_op, facts)
            obj.pairs.append(Pair(i, j, cell, decided))


def _merge_state(obj: ObjectDiff) -> None:
    base, src, dest = obj.base.state, obj.source.state, obj.target.state
    if obj.kind == ObjectKind.DATABASE:
        obj.merged_state = states.database_state_merge(base, src, dest)
        return
    merged = states.table_state_merge(base, src, dest)
    duplicates = states.duplicate_column_names(merged["columns"])
    if duplicates:
        obj.issues.append(
            Verdict(CONFLICT, "A6", f"After the merge two columns would be named {duplicates[0]!r}; rename one.")
        )
    if obj.change == "changed_in_both":
        written = {side: _segments_written(ops) for side, ops in (("source", obj.source_operations),
                                                                  ("target", obj.target_operations))}  # fmt: skip

        def nulls(side: str) -> set[int]:
            stats = DataFile.objects.filter(id__in=written[side]).values_list("stats", flat=True)
            return {
                c["id"] for c in merged["columns"] for s in stats if (s or {}).get(str(c["id"]), {}).get("nulls", 1)
            }

        wrote = {side: bool(ids) for side, ids in written.items()}
        for problem in states.table_problems(base, src, dest, merged, wrote=wrote, nulls=nulls):
            obj.issues.append(Verdict(CONFLICT, "4.0", problem))
    obj.merged_state = merged


def _may_be_null(stats: dict | None, column_id: int) -> bool:
    return bool((stats or {}).get(str(column_id), {}).get("nulls", 1))


def _segments_written(operations: list[Op]) -> list[str]:
    return [segment for op in operations if op.op in WRITES_DATA for segment in op.details.get("segments_added", [])]


@gc_paused()
def diff_as_dict(diff: MergeDiff) -> dict[str, Any]:
    """The report as JSON: what the API returns and the merge audit log keeps."""
    return {
        "source": {"ref": diff.source, "head": diff.source_head.id},
        "target": {"ref": diff.target, "head": diff.target_head.id},
        "base": diff.base.id,
        "bases": diff.bases,
        "virtual_base": len(diff.bases) > 1,
        "mergeable": diff.mergeable,
        "up_to_date": diff.up_to_date,
        "resolution": diff.resolution,
        "counts": {
            "objects": len(diff.objects),
            "conflicts": len(diff.conflicts),
            "discarded": sum(len(obj.discarded) for obj in diff.objects),
        },
        "objects": [_object_as_dict(obj) for obj in diff.objects],
    }


def _op_as_dict(op: Op) -> dict[str, Any]:
    details = {key: value for key, value in op.details.items() if key != "deltas_on"}
    return {"commit": op.commit, "position": op.position, "op": op.op, "details": details}


def _verdict_as_dict(decided: Verdict) -> dict[str, Any]:
    return {"verdict": decided.verdict, "note": decided.note, "reason": decided.reason}


def _object_as_dict(obj: ObjectDiff) -> dict[str, Any]:
    table = rules.RULE_TABLES.get(obj.rule_table) if obj.rule_table else None
    return {
        "kind": obj.kind,
        "object_id": str(obj.object_id),
        "name": obj.name,
        "change": obj.change,
        "verdict": obj.verdict,
        "rule_table": table.name if table else None,
        "source_operations": [_op_as_dict(op) for op in obj.source_operations],
        "target_operations": [_op_as_dict(op) for op in obj.target_operations],
        "pairs": [
            {
                "source": pair.source,
                "target": pair.target,
                "row": obj.source_operations[pair.source].op,
                "column": obj.target_operations[pair.target].op,
                "cell": pair.cell,
                **_verdict_as_dict(pair.decided),
                "resolved": pair.resolved,
                "discarded_files": list(pair.decided.discarded),
            }
            for pair in obj.pairs
        ],
        "conflicts": [_verdict_as_dict(issue) for issue in [*obj.issues, *obj.data_issues] if issue.verdict != PENDING],
        "resolution": obj.resolution,
        "keys": obj.keys,
    }


def overwritten_partitions(overwrite: Op, object_id: uuid.UUID) -> list[dict[str, Any]] | None:
    """The partitions a table's `overwrite` replaced, values by column id, or None for the whole table. The
    operation names the partition columns; the names are read in the table's schema at the overwrite's commit,
    since a rename later would mislead."""
    partitions = overwrite.details.get("partitions")
    if not partitions:
        return None
    chain = commit_chain(Commit.objects.get(id=overwrite.commit))
    version = object_by_id(chain, object_id=object_id)
    ids = {column["name"]: str(column["id"]) for column in version.state["columns"]}
    return [{ids.get(name, f"gone:{name}"): value for name, value in partition.items()} for partition in partitions]
