"""The diff of two refs: their common ancestor, every object either side changed since it, the operations of each
side, and the verdict of every source x target operation pair with the rule cell that decided it.

This report is the one source for the merge, its dry run, merge requests and the UI: the merge applies exactly
what it says (see services/merges.py).
"""

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from catalog_app.models import Catalog, Commit, DataFile, ObjectKind, ObjectVersion, Operation
from catalog_app.selectors.objects import newest_on_chain, object_by_id
from catalog_app.selectors.refs import Chain, commit_chain, ref_resolve
from lakeui.errors import ApplicationError
from merge_app import rules, states
from merge_app.models import KeyComparison
from merge_app.rules import CONFLICT, DISCARDED, DML, OK, PENDING, Facts, Op, Verdict
from merge_app.selectors.graph import CommitGraph

MERGED_KINDS = (ObjectKind.DATABASE, ObjectKind.TABLE)
KIND_ORDER = {ObjectKind.DATABASE: 0, ObjectKind.TABLE: 1}
WRITES_DATA = frozenset({"insert", "update", "overwrite"})
ROW_CHANGES = frozenset({"insert", "delete", "update", "overwrite"})
NOT_MERGED = "not_merged"
CHOICES = ("fail", "source_wins", "target_wins")
KEYS_IN_REPORT = 20  # conflicting keys listed per table in the report; the rest through the keys endpoint


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
    base: ObjectVersion | None
    source: ObjectVersion | None
    target: ObjectVersion | None
    source_operations: list[Op] = field(default_factory=list)
    target_operations: list[Op] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    issues: list[Verdict] = field(default_factory=list)  # conflicts of the object as a whole (4.1, names)
    merged_state: dict[str, Any] | None = None
    key_mode: bool = False  # a primary-key table whose rows both sides changed: merged by key (4.4)
    keys: dict[str, Any] | None = None  # the key comparison: counts, `unresolved`, conflicts listed, choices
    resolution: str | None = None  # a whole-table resolution that settles its conflicts

    @property
    def rule_table(self) -> str | None:
        return self.kind if self.kind in MERGED_KINDS and self.change == "changed_in_both" else None

    @property
    def conflicts(self) -> list[Verdict]:
        unresolved = [p.decided for p in self.pairs if p.decided.verdict == CONFLICT and p.resolved is None]
        return [*self.issues, *unresolved]

    @property
    def pending(self) -> bool:
        return any(pair.decided.verdict == PENDING for pair in self.pairs)

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


@dataclass
class MergeDiff:
    catalog: Catalog
    source: str
    target: str
    source_head: Commit
    target_head: Commit
    base: Commit
    base_history: set[str]
    source_commits: list[str]
    objects: list[ObjectDiff]
    resolution: dict[str, Any] = field(default_factory=dict)

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
        return [entry for obj in self.objects for entry in (obj.keys or {}).get("choices", [])] + [
            {"object": obj.name, "scope": "table", "choice": obj.resolution} for obj in self.objects if obj.resolution
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
) -> MergeDiff:
    resolution = resolution_check(resolution)
    graph = CommitGraph.of(catalog)
    base_id = graph.merge_base(source_head.id, target_head.id)
    base = Commit.objects.get(id=base_id)
    base_history = graph.ancestors(base_id)
    src_commits = graph.changes_since(source_head.id, base_history)
    dest_commits = graph.changes_since(target_head.id, base_history)
    src_ops, dest_ops = _operations(src_commits), _operations(dest_commits)
    chains = {"base": commit_chain(base), "source": source_chain, "target": target_chain}
    object_ids = set(src_ops) | set(dest_ops)
    versions = {side: _versions(chain, object_ids) for side, chain in chains.items()}
    parents = {v.parent_id for side in versions.values() for v in side.values() if v.parent_id} - object_ids
    for side, chain in chains.items():
        versions[side] |= _versions(chain, parents)
    taken = _live_names(target_chain, [v for v in versions["source"].values() if v.object_id in object_ids])
    objects = [
        _object_diff(object_id, src_ops.get(object_id, []), dest_ops.get(object_id, []), versions, taken, target_chain)
        for object_id in object_ids
    ]
    objects = [obj for obj in objects if obj is not None]
    objects.sort(key=lambda obj: (KIND_ORDER.get(obj.kind, 2), obj.name))
    diff = MergeDiff(
        catalog=catalog, source=source, target=target, source_head=source_head, target_head=target_head, base=base,
        base_history=base_history, source_commits=src_commits, objects=objects, resolution=resolution,
    )  # fmt: skip
    keyed = [obj for obj in objects if obj.key_mode]
    stored = KeyComparison.objects.filter(
        table_id__in=[obj.object_id for obj in keyed], base=base.id, source_head=source_head.id,
        target_head=target_head.id,
    )  # fmt: skip
    results = {row.table_id: {"counts": row.counts, "conflicts": row.conflicts} for row in stored}
    for obj in keyed:
        keys_attach(obj, results.get(obj.object_id), resolution)
    for obj in objects:
        pairs_resolve(obj, resolution)
    return diff


def resolution_check(resolution: dict | None) -> dict[str, Any]:
    """`{"default": fail | source_wins | target_wins, "tables": {"db.t": choice}, "keys": {"db.t": {key_id:
    choice}}}`; the default settles data conflicts only, a table's choice also its DDL conflicts."""
    resolution = resolution or {}
    if not isinstance(resolution, dict) or set(resolution) - {"default", "tables", "keys"}:
        raise ApplicationError("invalid_resolution", "resolution takes `default`, `tables` and `keys`.")
    choices = [resolution.get("default", "fail"), *resolution.get("tables", {}).values()]
    choices += [choice for keys in resolution.get("keys", {}).values() for choice in keys.values()]
    if any(choice not in CHOICES for choice in choices):
        raise ApplicationError("invalid_resolution", f"A resolution is one of {CHOICES}.")
    return resolution


def keys_attach(obj: ObjectDiff, result: dict | None, resolution: dict) -> None:
    """Decide a primary-key table's data pairs from its key comparison (None: not run yet)."""
    if result is not None:
        per_key = resolution.get("keys", {}).get(obj.name, {})
        fallback = resolution.get("tables", {}).get(obj.name) or resolution.get("default", "fail")
        choices = []
        for conflict in result["conflicts"]:
            choice = per_key.get(conflict["key_id"], fallback)
            if choice != "fail":
                scope = "key" if conflict["key_id"] in per_key else "table"
                choices.append(
                    {"object": obj.name, "scope": scope, "key": conflict["key"], "key_id": conflict["key_id"],
                     "choice": choice}
                )  # fmt: skip
        settled = len(choices) if fallback == "fail" else result["counts"]["conflicts"]
        unresolved = result["counts"]["conflicts"] - settled
        obj.keys = {
            **result["counts"], "unresolved": unresolved, "choices": choices,
            "listed": result["conflicts"][:KEYS_IN_REPORT],
        }  # fmt: skip
    obj.pairs = []
    _decide_pairs(obj)


def pairs_resolve(obj: ObjectDiff, resolution: dict) -> None:
    """Settle the object's conflicting pairs with a whole-table resolution: the table's own choice settles any
    conflict, the default only conflicts between two data operations."""
    table_choice = resolution.get("tables", {}).get(obj.name)
    default = resolution.get("default", "fail")
    settled = []
    for index, pair in enumerate(obj.pairs):
        if pair.decided.verdict != CONFLICT or pair.decided.note == "4.4":
            continue
        data = obj.source_operations[pair.source].op in DML and obj.target_operations[pair.target].op in DML
        choice = table_choice or (default if data else None)
        if choice in ("source_wins", "target_wins"):
            obj.pairs[index] = replace(pair, resolved=choice)  # Pair is frozen
        settled.append(obj.pairs[index].resolved)
    if settled and all(settled):
        obj.resolution = table_choice or default


def _operations(commit_ids: list[str]) -> dict[uuid.UUID, list[Op]]:
    order = {commit_id: index for index, commit_id in enumerate(commit_ids)}
    rows = sorted(Operation.objects.filter(commit_id__in=commit_ids), key=lambda o: (order[o.commit_id], o.position))
    deltas = [d for row in rows for d in row.details.get("deltas_added", [])]
    owner = {str(i): str(s) for i, s in DataFile.objects.filter(id__in=deltas).values_list("id", "segment_id")}
    by_object: dict[uuid.UUID, list[Op]] = {}
    for row in rows:
        details = row.details
        if details.get("deltas_added"):
            details = {**details, "deltas_on": {d: owner.get(d) for d in details["deltas_added"]}}
        by_object.setdefault(row.object_id, []).append(Op(row.commit_id, row.position, row.op, details))
    return by_object


def _versions(chain: Chain, object_ids: set) -> dict[uuid.UUID, ObjectVersion]:
    """The newest version on the chain of each object. Picked here from the chain's versions of those objects (a
    few per object), which is faster for many objects than one correlated subquery per row."""
    if not object_ids:
        return {}
    newest: dict[uuid.UUID, ObjectVersion] = {}
    rows = ObjectVersion.objects.filter(chain.q(), catalog_id=chain.commit.catalog_id, object_id__in=object_ids)
    for version in rows:
        if version.object_id not in newest or version.seq > newest[version.object_id].seq:
            newest[version.object_id] = version
    return newest


def _live_names(chain: Chain, wanted: list[ObjectVersion]) -> dict[tuple, uuid.UUID]:
    """Which objects of the target hold the names the source's objects have: (kind, parent, name) -> id."""
    if not wanted:
        return {}
    named = ObjectVersion.objects.filter(
        chain.q(), catalog_id=chain.commit.catalog_id, name__in={v.name for v in wanted},
        kind__in=[*MERGED_KINDS, ObjectKind.VIEW],
    ).values_list("object_id", flat=True)  # fmt: skip
    live = [v for v in _versions(chain, set(named)).values() if not v.dropped]
    return {_namespace(v): v.object_id for v in live}


def _namespace(version: ObjectVersion) -> tuple:
    kind = ObjectKind.TABLE if version.kind == ObjectKind.VIEW else version.kind
    return (kind, version.parent_id, version.name.lower())


def _display_name(version: ObjectVersion, versions: dict) -> str:
    if version.parent_id is None:
        return version.name
    for side in ("source", "target", "base"):
        parent = versions[side].get(version.parent_id)
        if parent is not None:
            return f"{parent.name}.{version.name}"
    return version.name


def _object_diff(object_id, src_ops, dest_ops, versions, taken, target_chain) -> ObjectDiff | None:
    base, src, dest = (versions[side].get(object_id) for side in ("base", "source", "target"))
    if base is None and (src is None or src.dropped) and (dest is None or dest.dropped):
        return None  # created and dropped again on a side: nothing to compare or merge
    if base is None:
        change = "added_in_source" if src is not None and not src.dropped else "added_in_target"
    elif src_ops and dest_ops:
        change = "changed_in_both"
    else:
        change = "changed_in_source" if src_ops else "changed_in_target"
    shown = src if src is not None else dest
    obj = ObjectDiff(
        kind=shown.kind, object_id=object_id, name=_display_name(shown, versions), change=change, base=base,
        source=src, target=dest, source_operations=src_ops, target_operations=dest_ops,
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


def _check_new(obj: ObjectDiff, versions: dict, taken: dict) -> None:
    """4.1: a new object is taken over with its id, unless the target has another of its kind and name."""
    other = taken.get(_namespace(obj.source))
    if other is not None and other != obj.object_id:
        obj.issues.append(
            Verdict(CONFLICT, "4.1", f"The target already has a {obj.kind} named {obj.name!r} (another object).")
        )
    if obj.source.parent_id is not None and versions["base"].get(obj.source.parent_id) is not None:
        database = versions["target"].get(obj.source.parent_id)
        if database is None or database.dropped:
            obj.issues.append(Verdict(CONFLICT, "4.1", "The target dropped the database this table is in."))
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
    if kept:
        obj.issues.append(
            Verdict(CONFLICT, "4.2", f"The source dropped the database; the target has objects in it: {sorted(kept)}.")
        )


def _check_name(obj: ObjectDiff, taken: dict) -> None:
    if obj.source.name == obj.base.name:
        return
    other = taken.get(_namespace(obj.source))
    if other is not None and other != obj.object_id:
        obj.issues.append(
            Verdict(CONFLICT, "name", f"The source renamed it to {obj.source.name!r}, a name the target uses.")
        )


def _key_mode(obj: ObjectDiff) -> bool:
    if obj.kind != ObjectKind.TABLE or obj.target is None or not obj.target.state.get("primary_key"):
        return False
    return any(op.op in ROW_CHANGES for op in obj.source_operations) and any(
        op.op in ROW_CHANGES for op in obj.target_operations
    )


def _decide_pairs(obj: ObjectDiff) -> None:
    table = rules.RULE_TABLES[obj.kind]
    facts = Facts(key_mode=obj.key_mode, keys=obj.keys)
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
    obj.merged_state = merged


def diff_as_dict(diff: MergeDiff) -> dict[str, Any]:
    """The report as JSON: what the API returns and the merge audit log keeps."""
    return {
        "source": {"ref": diff.source, "head": diff.source_head.id},
        "target": {"ref": diff.target, "head": diff.target_head.id},
        "base": diff.base.id,
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
        "conflicts": [_verdict_as_dict(issue) for issue in obj.issues],
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
