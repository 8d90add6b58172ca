"""The diff of two refs: their common ancestor, every object either side changed since it, the operations of each
side, and the verdict of every source x target operation pair with the rule cell that decided it.

This module reads (the storage side of the plan): the graph gives the base and each side's commits, and here each
side's operations since the base, the objects' versions and the files where they matter are read into the
plan's `PlanInputs`; `merge_app/plan/`, pure, decides. The report is the one source for the merge, its dry
run, merge requests and the UI: the merge applies exactly what it says (see services/merge_writer.py).
"""

import json
import uuid
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from django.db.models import Prefetch

from catalog_app.models import Catalog, Commit, ObjectKind
from catalog_app.selectors.commits import commit_operation_rows, objects_touched, operation_rows, operations_adding
from catalog_app.selectors.objects import (
    object_by_id,
    object_children,
    object_find,
    object_ids_named,
    objects_newest_rows,
)
from catalog_app.selectors.refs import Chain, commit_by_id, commit_chain, ref_resolve
from catalog_app.selectors.table_files import (
    NO_FILES,
    TableFiles,
    commit_file_changes,
    file_segments,
    file_stats,
    files_live_on,
    tables_file_rows,
)
from lakeui.errors import ApplicationError, ConflictError
from lakeui.memory import gc_paused
from merge_app import plan
from merge_app.models import KeyComparison, KeyConflict, VirtualBase
from merge_app.plan import Plan, lineage, resolutions, rules, semantics, states
from merge_app.plan import objects as plan_objects
from merge_app.plan.conflicts import namespace
from merge_app.plan.objects import (
    MERGED_KINDS,
    PENDING,
    VERSION_FIELDS,
    ObjectDiff,
    PlanInputs,
    Version,
)
from merge_app.plan.operations import (
    carried,
    compared_with_base,
    held_as_at_base,
    held_by_object,
    held_otherwise,
    not_held,
    picked_in_base,
    picked_originals,
    side_changes,
    target_unchanged,
)
from merge_app.plan.records import MERGE, REVERT
from merge_app.plan.resolutions import resolution_check
from merge_app.plan.rules import CHOICES, CONFLICT, LEAVE_OUT, Op, Verdict
from merge_app.plan.undo import undo_operations
from merge_app.selectors.graph import CommitGraph, Sides

# Conflicting keys a plan made from a stored comparison reads, in order (the diff's; a merge compares its keys anew,
# a request's plan too, and a request's preview pages through all of them); the counts are complete.
MAX_LISTED = 10_000
MESSAGE_CRISS_CROSS = (
    "{source!r} and {target!r} have {count} merge bases ({bases}): each side merged the other after both moved "
    "(a criss-cross history). The bases are merged into one virtual base first, on a worker."
)


class BasesNotMerged(ConflictError):
    """Two heads with several merge bases whose virtual base has not been made yet: a worker makes it
    (services.merge_plans.bases_merge) and the diff is made again."""

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


@dataclass
class FilesRead:
    """The live files of tables on the three sides (base, source, target), read once for the diff, the key
    comparison and the merge's writer: each asks for the tables it needs, and only those not read yet are read
    (as plain values, `tables_file_rows`). The chains are fixed commits' chains, so what was read holds."""

    chains: dict[str, Chain]
    files: dict[str, dict[uuid.UUID, TableFiles]] = field(default_factory=lambda: {s: {} for s in plan_objects.SIDES})
    read: dict[str, set[uuid.UUID]] = field(default_factory=lambda: {s: set() for s in plan_objects.SIDES})

    def of(self, side: str, table_ids: list[uuid.UUID]) -> dict[uuid.UUID, TableFiles]:
        """The files of these tables on `side`, by table id (tables without files are left out)."""
        unread = [table_id for table_id in dict.fromkeys(table_ids) if table_id not in self.read[side]]
        if unread:
            self.files[side] |= tables_file_rows(self.chains[side], table_ids=unread)
            self.read[side] |= set(unread)
        files = self.files[side]
        return {table_id: files[table_id] for table_id in table_ids if table_id in files}

    def named(self, named: dict[uuid.UUID, set[str]]) -> dict[str, dict[uuid.UUID, TableFiles]]:
        """Of each table's files named (by id, as text), those live on each side, without reading the table's others
        unless they were read already: a table of a thousand segments that the source appended one to costs one.
        The sides' unread ones in one read (`files_live_on`)."""
        unread = {side: {t: ids for t, ids in named.items() if t not in self.read[side] and ids} for side in self.read}
        sides = [side for side, tables in unread.items() if tables]
        ids = {file_id for side in sides for file_ids in unread[side].values() for file_id in file_ids}
        found = files_live_on({side: self.chains[side] for side in sides}, file_ids=ids) if ids else {}
        answer = {}
        for side in self.read:
            read = self.of(side, [t for t in named if t in self.read[side]])
            answer[side] = {t: _only(files, named[t]) for t, files in read.items()}
            # Read by id: only named files, each of its own table (a file is of one table).
            answer[side] |= {t: files for t, files in found.get(side, {}).items() if t in unread[side]}
        return answer

    def overwritten(self, overwrite: Op, object_id: uuid.UUID) -> list[dict[str, Any]] | None:
        """The partitions a table's `overwrite` replaced, values by column id, or None for the whole table: what the
        plan's file plans and the key comparison are told. The operation names the partition columns; the names are
        read in the table's schema at the overwrite's commit, since a rename later would mislead."""
        partitions = overwrite.details.get("partitions")
        if not partitions:
            return None
        chain = commit_chain(commit_by_id(overwrite.commit))
        version = object_by_id(chain, object_id=object_id)
        ids = {column["name"]: str(column["id"]) for column in version.state["columns"]}
        return [{ids.get(name, f"gone:{name}"): value for name, value in partition.items()} for partition in partitions]


def _only(files: TableFiles, ids: set[str]) -> TableFiles:
    """A table's files restricted to these ids."""
    deltas = {s: kept for s, listed in files.deltas.items() if (kept := [d for d in listed if str(d.id) in ids])}
    return TableFiles(segments=[s for s in files.segments if str(s.id) in ids], deltas=deltas)


@dataclass(frozen=True)
class MergeDiff:
    catalog: Catalog
    source: str
    target: str
    source_head: Commit
    target_head: Commit
    base: Commit
    source_commits: list[str]  # the commits reachable from the source head and not from the target's (4.0)
    plan: Plan
    resolution: dict[str, Any] = field(default_factory=dict)
    bases: list[str] = field(default_factory=list)  # the merge bases; with several, `base` is their virtual base
    explicit: ExplicitBase | None = None  # a revert or a cherry-pick: the base was given
    inputs: PlanInputs | None = None  # what the plan was made from: planned again with key comparisons, no read
    files: FilesRead | None = None  # the tables' files read so far, for the key comparison and the writer

    @property
    def objects(self) -> list[ObjectDiff]:
        """Every object either side changed, decided by the plan, in report order."""
        return self.plan.objects

    # Computed once: the objects are decided when the diff is made (planned again, it is a new diff), and a merge of
    # 10,000 tables asks these several times.
    @cached_property
    def verdicts(self) -> dict[uuid.UUID, str]:
        """Each object's verdict (each is worked out from its pairs and issues)."""
        return {obj.object_id: obj.verdict for obj in self.objects}

    @cached_property
    def conflicts(self) -> list[ObjectDiff]:
        return [obj for obj in self.objects if self.verdicts[obj.object_id] == CONFLICT]

    @property
    def mergeable(self) -> bool:
        return not self.conflicts and not self.pending

    @cached_property
    def pending(self) -> list[ObjectDiff]:
        """Primary-key tables whose key comparison has not run (it runs on a worker)."""
        return [obj for obj in self.objects if self.verdicts[obj.object_id] == PENDING]

    @property
    def resolution_log(self) -> list[dict[str, Any]]:
        """Each resolution applied: a key's choice, a column rule (with the count of cells it settled and a sample of
        them, `semantics.settled_cells`; the keys it settled are not listed one by one), each cell a reviewer picked
        (with its three inputs, the result and who picked it), each column type or fill settling a schema conflict
        (A6), a table's choice or the default."""
        tables = self.resolution.get("tables", {})
        keys = [
            entry for obj in self.objects for entry in (obj.keys or {}).get("choices", [])
            if entry["choice"] != semantics.COLUMNS
        ]  # fmt: skip
        columns = [
            {"object": obj.name, "scope": rule["scope"], "column": column, "choice": rule["rule"],
             "cells": rule["cells"], "sample": [cell for cell in settled["sample"] if cell["rule"] == name]}
            for obj in self.objects for column, settled in (obj.keys or {}).get("settled_cells", {}).items()
            for name, rule in settled["rules"].items() if name != semantics.PICK
        ]  # fmt: skip
        picks = [
            {"object": obj.name, "scope": "cell", "key": entry["key"], "key_id": entry["key_id"], "column": column,
             "choice": semantics.PICK, **{k: cell[k] for k in ("base", "source", "target", "result")},
             "chosen_by": cell.get("by")}
            for obj in self.objects for entry in (obj.keys or {}).get("choices", [])
            for column, cell in entry.get("cells", {}).items() if cell["rule"] == semantics.PICK
        ]  # fmt: skip
        schema = [
            {"object": obj.name, "scope": "schema", "column": column["name"], "choice": obj.schema[column["id"]]}
            for obj in self.objects if obj.schema and obj.merged_state
            for column in obj.merged_state["columns"] if column["id"] in obj.schema
        ]  # fmt: skip
        return (
            keys
            + columns
            + picks
            + schema
            + [
                {"object": obj.name, "scope": "table" if obj.name in tables else "default", "choice": obj.resolution}
                for obj in self.objects
                if obj.resolution
            ]
        )

    @property
    def up_to_date(self) -> bool:
        """Nothing to merge: the target's history holds the source head (git's "Already up to date"), or a revert
        or a pick changes nothing. A source whose every operation the target holds (picked, or declined by a merge)
        but whose head it does not still merges, changing no file, so that the target's history holds the head:
        merging back then finds the target as the base and converges (docs/merge-semantics.md#merges-converge)."""
        if self.explicit is None:
            return not self.source_commits
        return not any(obj.merges for obj in self.objects)


def resolution_columns_check(*, catalog: Catalog, refs: list[str], resolution: dict[str, Any] | None) -> None:
    """A checked resolution's column rules, cell picks and fills by an expression (`resolution_check`) against the
    tables they name as `refs` (the merge's source and target) hold them, where the merge is asked for: 400
    `unknown_table` for a table neither holds, `column_rules_keyless` for one without a primary key (rules and
    picks), and `semantics.column_rules_check`'s (`resolutions.cell_picks_check`'s, `semantics.fill_expression`'s)
    for the columns. A column the target has is checked with its type there, one only the source has with the
    source's. The plan checks them again against the table it merges."""
    rules, picks = (resolution or {}).get("columns", {}), (resolution or {}).get("cells", {})
    fills = {
        table: {column: s["fill"][semantics.EXPRESSION] for column, s in settled.items()
                if isinstance(s.get("fill"), dict)}
        for table, settled in (resolution or {}).get("schema", {}).items()
    }  # fmt: skip
    fills = {table: found for table, found in fills.items() if found}
    if not rules and not picks and not fills:
        return
    chains = [ref_resolve(catalog=catalog, ref=ref).chain for ref in refs]
    for table in {*rules, *picks, *fills}:
        database, _, name = table.partition(".")
        found = []
        for chain in chains:
            db = object_find(chain, kind=ObjectKind.DATABASE, name=database)
            version = db and object_find(chain, kind=ObjectKind.TABLE, name=name, parent_id=db.object_id)
            if version is not None:
                found.append(version.state)
        if not found:
            raise ApplicationError("unknown_table", f"{table!r} is a table of neither side, for its column rules.",
                                   details={"table": table})  # fmt: skip
        by_name: dict[str, dict] = {}
        for state in found:  # the target's last: its type wins
            by_name |= {c["name"]: c for c in state["columns"]}
        for column, text in fills.get(table, {}).items():
            if column in by_name:  # else `unknown_column`, from the plan
                others = {name: c["type"] for name, c in by_name.items() if name != column}
                semantics.fill_expression(text, table=table, column=column, type_name=by_name[column]["type"],
                                          types=others)  # fmt: skip
        if table not in rules and table not in picks:
            continue
        if not found[-1].get("primary_key"):
            message = f"{table!r} has no primary key: column rules settle the conflicting cells of keyed tables only."
            raise ApplicationError("column_rules_keyless", message, details={"table": table})
        names = {c["id"]: c["name"] for state in found for c in state["columns"]}
        keys = [names.get(i) for i in found[-1]["primary_key"]]
        if table in rules:
            semantics.column_rules_check(rules[table], table=table, columns=list(by_name.values()), keys=keys)
        if table in picks:
            resolutions.cell_picks_check(picks[table], table=table, columns=list(by_name.values()))


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
    for these heads; without either it is pending. The resolution was checked where it came in (a user's takes
    only CHOICES); the merge of a virtual base's bases also leaves keys out (LEAVE_OUT)."""
    resolution = resolution_check(resolution, choices=(*CHOICES, LEAVE_OUT))
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
        originals = picked_originals([src_ops, dest_ops])
        in_base = picked_in_base([src_ops, dest_ops], {c for c in originals if graph.reaches(base.id, c)})
        src_ops, dest_ops = not_held(src_ops, dest_held | in_base), not_held(dest_ops, src_held | in_base)
    chains = {"base": commit_chain(base), "source": source_chain, "target": target_chain}
    files = FilesRead(chains)
    # Where the target's head is the base, the tables whose state the source may hold otherwise than the base with no
    # record since (`plan.operations.held_otherwise`)
    apart = _touched_apart(graph, source_head.id, base.id) if explicit is None and base.id == target_head.id else set()
    object_ids = set(src_ops) | set(dest_ops) | src_touched | dest_touched | apart
    decoded: dict[str, Any] = {}  # object states by their JSON text
    versions = {side: _versions(chain, object_ids, decoded) for side, chain in chains.items()}
    keyed_changes = plan_objects.keyed_changes(_keyed_files(versions, files))
    # The tables whose source version the merge takes, as the target holds them as the base has them (the plan's
    # `target_unchanged`; a table only a merge on the source's chain touched, declining changes, counts: its state is
    # that decision): by the target's chain, and by state, as a primary-key table's rows are told, for a merge only
    # (a cherry-pick or a revert applies its commit's operations, and one the target holds, picked, then restored to
    # before it, is up to date, not its table taken again): the files of the tables the plan names are read.
    source_changed = set(src_ops) | src_touched
    apart -= source_changed
    source_changed |= held_otherwise(apart, versions, _file_ids(files, apart, ("base", "source")))
    with_base = compared_with_base(source_changed, dest_ops, dest_touched) if explicit is None else set()
    held = held_as_at_base(with_base, versions, _file_ids(files, with_base))
    unchanged = target_unchanged(
        from_base=_target_is_base_plus(graph, target_head.id, sides.target, base.id), source_changed=source_changed,
        target_touched=dest_touched, held=held,
    )  # fmt: skip
    # Taking the source's version, the target holds what that version holds (a later pick of one of those
    # operations finds it held, as the rows are).
    source_carried = set()
    if unchanged and (explicit is None or explicit.kind != REVERT):
        taken_from = explicit.commit.id if explicit else source_head.id
        source_carried = carried(*_held_apart(graph, taken_from, base.id, unchanged))
    # A table without a key is compared by the operations each side made since the base; one that only a merge's
    # replay of the base's own history touched is no change. A keyed table is compared by state.
    object_ids = set(src_ops) | set(dest_ops) | {i for i, changed in keyed_changes.items() if any(changed.values())}
    object_ids |= {i for i in unchanged if i not in keyed_changes}
    parents = {v.parent_id for side in versions.values() for v in side.values() if v.parent_id} - object_ids
    for side, chain in chains.items():
        versions[side] |= _versions(chain, parents, decoded)
    wanted = [v for v in versions["source"].values() if v.object_id in object_ids]
    inputs = PlanInputs(
        versions=versions, source_operations=src_ops, target_operations=dest_ops, object_ids=frozenset(object_ids),
        keyed_changes=keyed_changes, taken=_live_names(target_chain, wanted, versions["target"], decoded),
        live_files=_rewritten_files(src_ops, files),
        target_children=_dropped_children(versions, object_ids, chains),
        segment_stats=_written_stats(src_ops, dest_ops, versions),
        reverting=explicit is not None and explicit.kind == REVERT, target_unchanged=frozenset(unchanged),
        source_held=held_by_object(source_carried, unchanged), restored_origins=_restored_origins(src_ops, dest_ops),
    )  # fmt: skip
    diff = MergeDiff(
        catalog=catalog, source=source, target=target, source_head=source_head, target_head=target_head, base=base,
        source_commits=sides.source, plan=Plan([]), resolution=resolution, bases=sides.bases, explicit=explicit,
        inputs=inputs, files=files,
    )  # fmt: skip
    return _planned(diff, compared)


def _planned(diff: MergeDiff, compared: dict[uuid.UUID, dict] | None) -> MergeDiff:
    """The diff with its objects decided by the planner: the key comparisons of the primary-key tables it merges by
    key from `compared` (made in this process) or as stored for these heads."""
    results = dict(compared or {})
    unread = [table_id for table_id in plan.key_merged(diff.inputs) if table_id not in results]
    if unread:
        stored = KeyComparison.objects.filter(
            table_id__any=unread, base=diff.base.id, source_head=diff.source_head.id, target_head=diff.target_head.id
        )
        first = KeyConflict.objects.filter(position__lt=MAX_LISTED).order_by("position")
        for row in stored.prefetch_related(Prefetch("conflict_rows", queryset=first, to_attr="first")):
            results[row.table_id] = {"counts": row.counts, "conflicts": [kept.conflict for kept in row.first]}
    kind = diff.explicit.kind if diff.explicit is not None else MERGE
    return replace(diff, plan=plan.merge(diff.inputs, resolution=diff.resolution, compared=results, kind=kind))


def _base(catalog: Catalog, bases: list[str], *, source: str, target: str) -> Commit:
    """The merge base; in a criss-cross history the bases merged into one (docs/merge-semantics.md)."""
    if len(bases) == 1:
        return commit_by_id(bases[0])
    virtual = VirtualBase.objects.filter(catalog=catalog, bases=virtual_base_key(bases)).first()
    if virtual is None:
        raise BasesNotMerged(source=source, target=target, bases=bases)
    return virtual.commit


def virtual_base_key(bases: list[str]) -> str:
    return ",".join(sorted(bases))


def merge_diff_again(diff: MergeDiff, compared: dict[uuid.UUID, dict] | None = None) -> MergeDiff:
    """The same diff planned again from what it read: after its primary-key tables were compared by key."""
    return _planned(diff, compared)


def _operations(
    graph: CommitGraph, head: str, commits: list[str], object_ids: set[uuid.UUID] | None = None
) -> tuple[dict[uuid.UUID, list[Op]], set[uuid.UUID], set[tuple]]:
    """A side's changes since the base, per object in commit order (`plan.operations.side_changes`, from the
    operations its head's first-parent chain recorded), every object an operation on that chain touched, and the
    identity of every operation the chain holds."""
    since = set(commits)
    chain = graph.first_parents(head, since)
    rows = sorted(operation_rows(commit_ids=chain, object_ids=object_ids), key=lambda r: (graph.node(r[0]).seq, r[1]))
    picked, touched, held = side_changes(rows, since)
    ordered = sorted(picked, key=lambda entry: (graph.node(entry[1].commit).seq, entry[1].position))
    return _by_object(ordered), touched, held


def _target_is_base_plus(graph: CommitGraph, head: str, commits: list[str], base: str) -> bool:
    """Whether the target's state is the base's with its first-parent chain's changes since: the chain leads back
    to the base itself (not to a commit that merged it, or to a virtual base's bases), so a table no operation on
    it touched has the base's files."""
    chain = graph.first_parents(head, set(commits))
    return (graph.node(chain[0]).parent if chain else head) == base


def _file_ids(
    files: FilesRead, table_ids: set[uuid.UUID], sides: tuple[str, str] = ("base", "target")
) -> dict[str, dict[uuid.UUID, frozenset[str]]]:
    """The ids of these tables' live files (segments and delete files) on two sides: the base and the target."""
    if not table_ids:
        return {side: {} for side in sides}
    live = {side: files.of(side, list(table_ids)) for side in sides}
    return {side: {t: frozenset(found.by_id()) for t, found in tables.items()} for side, tables in live.items()}


def _touched_apart(graph: CommitGraph, source: str, base: str) -> set[uuid.UUID]:
    """The objects an operation touched on the source's and the base's first-parent chains down to where they meet:
    the only ones whose state can differ between the two."""
    commits = [commit for chain in graph.first_parents_apart(source, base) for commit in chain]
    return objects_touched(commit_ids=commits) if commits else set()


def _held_apart(graph: CommitGraph, source: str, base: str, tables: set[uuid.UUID]) -> tuple[set[tuple], set[tuple]]:
    """The identities of the operations on `tables` the source's first-parent chain holds down to where it meets the
    base's, and those the base's chain holds down to there (for `plan.operations.carried`). Only the operations on
    `tables` are read: the chains may be long (a branch merged into `main` meets it where it forked), their
    operations need not."""
    source_chain, base_chain = graph.first_parents_apart(source, base)
    return _operations(graph, source, source_chain, tables)[2], _operations(graph, base, base_chain, tables)[2]


def _by_object(ordered: list[tuple[uuid.UUID, Op]]) -> dict[uuid.UUID, list[Op]]:
    """Operations per object, in order, each delete file they add named with its segment (`deltas_on`)."""
    deltas = [d for _, op in ordered for d in op.details.get("deltas_added", [])]
    owner = {str(i): str(s) for i, s in file_segments(deltas).items()}
    by_object: dict[uuid.UUID, list[Op]] = {}
    for object_id, op in ordered:
        if op.details.get("deltas_added"):
            op = replace(op, details={**op.details, "deltas_on": {d: owner.get(d) for d in op.details["deltas_added"]}})
        by_object.setdefault(object_id, []).append(op)
    return by_object


def _inverse_operations(commit: Commit) -> dict[uuid.UUID, list[Op]]:
    """What a revert of `commit` changes, as operations of the revert (`plan.undo.undo_operations`): from the
    commit's operations and what it did to its first parent's files (`commit_file_changes`)."""
    rows = commit_operation_rows(commit_id=commit.id)
    return _by_object(undo_operations(commit.id, rows, commit_file_changes(commit.id)))


def _versions(
    chain: Chain, object_ids: set, decoded: dict[str, Any], known: dict | None = None
) -> dict[uuid.UUID, Version]:
    """The newest version on the chain of each object (or as `known` has it already), in one query. `decoded`: the
    states decoded so far, by their JSON text; the three sides mostly hold the same state of an object, and decoding
    is most of the read (the states are read, never changed)."""
    known = known or {}
    found = {object_id: known[object_id] for object_id in object_ids if object_id in known}
    wanted = set(object_ids) - set(found)
    if not wanted:
        return found
    newest = objects_newest_rows(chain, object_ids=wanted, fields=VERSION_FIELDS, state_as_text=True)
    for *fields, text in newest:
        state = decoded.get(text)
        if state is None:
            state = decoded[text] = json.loads(text)
        found[fields[2]] = Version(*fields, state)
    return found


def _live_names(chain: Chain, wanted: list[Version], known: dict, decoded: dict[str, Any]) -> dict[tuple, uuid.UUID]:
    """Which objects of the target hold the names the source's objects have: (kind, parent, name) -> id. `known`:
    the target's versions loaded already."""
    if not wanted:
        return {}
    named = object_ids_named(chain, names={v.name for v in wanted}, kinds=[*MERGED_KINDS, ObjectKind.VIEW])
    live = [v for v in _versions(chain, set(named), decoded, known).values() if not v.dropped]
    return {namespace(v): v.object_id for v in live}


def _keyed_files(versions: dict, files: FilesRead) -> dict[uuid.UUID, dict[str, frozenset[str]]]:
    """The file ids, per side, of each primary-key table live at the base and on both sides."""
    keyed = [
        object_id for object_id, base in versions["base"].items()
        if base.kind == ObjectKind.TABLE and not base.dropped
        and all(_keyed_live(versions[side].get(object_id)) for side in ("source", "target"))
    ]  # fmt: skip
    if not keyed:
        return {}
    live = {side: files.of(side, keyed) for side in plan_objects.SIDES}
    return {k: {side: frozenset(f.get(k, NO_FILES).by_id()) for side, f in live.items()} for k in keyed}


def _keyed_live(version: Version | None) -> bool:
    return version is not None and not version.dropped and bool(version.state.get("primary_key"))


def _rewritten_files(src_ops: dict, files: FilesRead) -> dict[uuid.UUID, dict[str, dict]]:
    """The source's and target's live files of each table whose source operations rewrote rows by position or
    overwrote it (whatever the target did since the base: the source may have taken back segments its overwrite
    removed, `plan.lineage.overwrite_taken_back`): file id -> the segment a delete file deletes from (None for a
    segment). A replayed overwrite's file plan reads both sides' files anyway. Where segments reached the source
    after its overwrite by operations the base holds, also `origins`: of the target's segments the source lacks and
    of those that reached the source so, the older segments whose rows each holds."""
    wanted = [
        table_id for table_id, ops in src_ops.items()
        if any(op.op in rules.REWRITES or op.op == "overwrite" for op in ops)
    ]  # fmt: skip
    if not wanted:
        return {}
    live = {side: files.of(side, wanted) for side in ("source", "target")}
    answer = {
        t: {side: {fid: f.segment_id and str(f.segment_id) for fid, f in live[side].get(t, NO_FILES).by_id().items()}
            for side in live}
        for t in wanted
    }  # fmt: skip
    for t, sides in answer.items():
        brought = lineage.brought_after_overwrite(src_ops[t], sides["source"], sides["target"])
        if brought:
            older = {fid for fid, segment in sides["target"].items() if segment is None and fid not in sides["source"]}
            sides["origins"] = _rewrite_origins(t, older | brought)
    return answer


def _restored_origins(src_ops: dict, dest_ops: dict) -> dict[uuid.UUID, dict[str, frozenset[str]]]:
    """Of each table the source inserted segments into that the target's last overwrite, a restore, does not hold
    (`lineage.restored_by_target`), the older segments whose rows each file of the restore's result holds
    (`plan.lineage.restored_rewrites`)."""
    found = {}
    for table_id, ops in src_ops.items():
        restored = lineage.restored_by_target(dest_ops.get(table_id, []))
        if restored and lineage.inserted_segments(ops) - restored:
            found[table_id] = _rewrite_origins(table_id, restored)
    return found


def _rewrite_origins(table_id: uuid.UUID, segments: set[str]) -> dict[str, frozenset[str]]:
    """The older segments whose rows each of these holds, followed back through the rewrites that wrote them on any
    line (an update's, a copy-on-write delete's, a compaction's: `Op.origins` of their operations)."""
    parents: dict[str, frozenset[str]] = {}
    asked, frontier = set(), set(segments)
    while frontier:
        asked |= frontier
        for commit_id, position, op, details in operations_adding(
            object_id=table_id, segment_ids=frontier, ops=rules.REWRITES
        ):
            for new, came in Op(str(commit_id), position, op, details).origins.items():
                if new in frontier:
                    parents[new] = parents.get(new, frozenset()) | came
        frontier = set().union(*(parents.get(fid, ()) for fid in frontier)) - asked

    def older(fid: str) -> frozenset[str]:
        seen, todo = set(), [fid]
        while todo:
            for parent in parents.get(todo.pop(), ()):
                if parent not in seen:
                    seen.add(parent)
                    todo.append(parent)
        return frozenset(seen)

    return {fid: older(fid) for fid in segments}


def _dropped_children(versions: dict, object_ids: set, chains: dict[str, Chain]) -> dict[uuid.UUID, list]:
    """The target's live objects (id, name) in each database the source dropped and the target still has."""
    dropped = [
        object_id for object_id in object_ids
        if (src := versions["source"].get(object_id)) is not None and src.dropped and src.kind == ObjectKind.DATABASE
        and (dest := versions["target"].get(object_id)) is not None and not dest.dropped
    ]  # fmt: skip
    answer = {}
    for database_id in dropped:
        answer[database_id] = object_children(chains["target"], parent_id=database_id)
    return answer


def _written_stats(src_ops: dict, dest_ops: dict, versions: dict) -> dict[str, dict]:
    """The column statistics of the segments both sides' operations wrote, for tables both changed where a side made
    a column NOT NULL since the base: the only check that reads them (`states.table_problems`, rows written
    meanwhile that may hold NULL in it). A three-way merge of the columns makes no column NOT NULL that neither side
    made so."""
    both = {t for t in set(src_ops) & set(dest_ops) if _made_not_null(versions, t)}
    segments = {s for side in (src_ops, dest_ops) for t in both for s in states.segments_written(side[t])}
    if not segments:
        return {}
    return {str(i): stats for i, stats in file_stats(segments).items()}


def _made_not_null(versions: dict, table_id: uuid.UUID) -> bool:
    """Whether the source or the target made a column of the table NOT NULL since the base (`states.made_not_null`)."""
    base = versions["base"].get(table_id)
    if base is None or base.kind != ObjectKind.TABLE:
        return False
    sides = [v.state for v in (versions["source"].get(table_id), versions["target"].get(table_id)) if v is not None]
    return states.made_not_null(base.state, sides)


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
        "objects": [_object_as_dict(obj, diff.verdicts[obj.object_id]) for obj in diff.objects],
    }


def _op_as_dict(op: Op) -> dict[str, Any]:
    details = {key: value for key, value in op.details.items() if key != "deltas_on"}
    return {"commit": op.commit, "position": op.position, "op": op.op, "details": details}


def _verdict_as_dict(decided: Verdict) -> dict[str, Any]:
    as_dict = {"verdict": decided.verdict, "note": decided.note, "reason": decided.reason}
    if decided.settles:  # a schema conflict: the column and how a resolution settles it (`{"type": ...}`, fill)
        as_dict["settles"] = dict(zip(("column", "by", "type"), decided.settles, strict=True))
    return as_dict


def _object_as_dict(obj: ObjectDiff, verdict: str) -> dict[str, Any]:
    table = rules.RULE_TABLES.get(obj.rule_table) if obj.rule_table else None
    return {
        "kind": obj.kind,
        "object_id": str(obj.object_id),
        "name": obj.name,
        "change": obj.change,
        "verdict": verdict,
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
        "dropped_operations": [
            {
                "source": pair.source,
                "row": obj.source_operations[pair.source].op,
                "cell": pair.cell,
                **_verdict_as_dict(pair.decided),
                "discarded_files": list(pair.decided.discarded),
            }
            for pair in obj.dropped
        ],
        "conflicts": [_verdict_as_dict(issue) for issue in [*obj.issues, *obj.data_issues] if issue.verdict != PENDING],
        "resolution": obj.resolution,
        "keys": obj.keys,
    }
