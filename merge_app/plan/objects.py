"""The merge planner (docs/merge-semantics.md): given what storage holds of the three sides, decide the merge.

Pure: plain values in, plain values out; no ORM, no Spark. `merge_app/selectors/diff.py` reads the inputs (the
graph finds the base, each side's operations since it, the objects' versions, the files where they matter) into a
`PlanInputs`, and `plan_objects` decides every object: its change, the verdict of every source x target operation
pair with the rule cell that decided it (`rules.py`), the conflicts of the object as a whole (names, new objects,
emptied databases, positional replays onto segments the target lacks), a primary-key table's key comparison (4.4)
and the resolution that settles what it can, and the merged state. The writer (`services/merge_writer.py`) applies the
plan; a plan is made again from the same inputs, with no read, once the key comparisons are known.
"""

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import merge_app.plan.rules as rules
import merge_app.plan.semantics as semantics
import merge_app.plan.states as states
from catalog_app.engine.type_names import is_widening, parse_type
from lakeui.errors import ApplicationError
from merge_app.plan.rules import CHOICES, CONFLICT, DISCARDED, OK, PENDING, SOURCE_WINS, Facts, Op, Verdict

DATABASE, TABLE, VIEW = "database", "table", "view"  # the object kinds of catalog_app's models
MERGED_KINDS = (DATABASE, TABLE)
KIND_ORDER = {DATABASE: 0, TABLE: 1}
WRITES_DATA = frozenset({"insert", "update", "overwrite"})
ROW_CHANGES = frozenset({"insert", "delete", "update", "overwrite"})
NOT_MERGED = "not_merged"
KEYS_IN_REPORT = 20  # conflicting keys listed per table in the report; the rest through the keys endpoint
MAX_CELL_PICKS = 10_000  # cells a resolution picks, in all
RESOLUTION_PARTS = frozenset({"default", "tables", "keys", "columns", "cells", "schema"})
MAX_KEY_ID = 1_000  # characters of a key id (the key's values as a JSON list)
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
    # A6 settled by the resolution's `schema`: by column id, {"type": a type both sides' values widen to} or
    # {"fill": the value of the rows written without the column} (`_schema_settled`)
    schema: dict[int, dict] = field(default_factory=dict)
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


def key_merged(inputs: PlanInputs) -> list[uuid.UUID]:
    """The primary-key tables the plan merges by key (both sides changed their rows): those that need a key
    comparison."""
    return [
        table_id for table_id, changed in inputs.keyed_changes.items()
        if table_id in inputs.object_ids and all(changed.values()) and inputs.versions["base"].get(table_id)
    ]  # fmt: skip


def plan_objects(
    inputs: PlanInputs, *, resolution: dict[str, Any], compared: Mapping[uuid.UUID, dict]
) -> list[ObjectDiff]:
    """Every object either side changed, decided, in report order (databases, then tables, by name). A primary-key
    table merged by key takes its key comparison from `compared` (table id -> counts and conflicts); without one it
    is pending."""
    schema = (resolution or {}).get("schema", {})
    objects = [_object_diff(inputs, object_id, schema) for object_id in inputs.object_ids]
    objects = [obj for obj in objects if obj is not None]
    if not inputs.reverting:  # a revert's own check is its pairs' (rules.revert_verdict)
        _check_segments_present(objects, inputs.live_files)
        _check_overwrite_lineage(objects, inputs.live_files)
        _check_restored_rewrites(objects, inputs.restored_origins)
    objects.sort(key=lambda obj: (KIND_ORDER.get(obj.kind, 2), obj.name))
    for obj in objects:
        if obj.key_mode:
            keys_attach(obj, compared.get(obj.object_id), resolution)
    for obj in objects:
        pairs_resolve(obj, resolution, inputs.segment_stats)
    return objects


def resolution_check(resolution: dict | None, *, choices: tuple[str, ...] = CHOICES) -> dict[str, Any]:
    """`{"default": fail | source_wins | target_wins, "tables": {"db.t": choice | {"choice": choice, "columns":
    {column: rule}, "schema": {column: {"type": t} | {"fill": v}}}}, "keys": {"db.t": {key_id: choice}}, "cells":
    {"db.t": {key_id: {column: pick}}}}`; the default settles data conflicts only, a table's choice also its DDL
    conflicts; a table's column rules and cell picks settle the conflicting cells of its keys
    (`semantics.key_settle`), its schema settlements its A6 conflicts (`_schema_applied`). Given back with the column
    rules and the schema settlements apart (`"columns": {"db.t": {column: rule}}`, `"schema": {"db.t": ...}`, forms
    it also takes) and each table's choice a string. `choices`: the planner's own callers also pass LEAVE_OUT (a
    virtual base's)."""
    resolution = resolution or {}
    if not isinstance(resolution, dict) or set(resolution) - RESOLUTION_PARTS:
        raise ApplicationError("invalid_resolution", f"resolution takes {', '.join(sorted(RESOLUTION_PARTS))}.")
    tables, keys = resolution.get("tables", {}), resolution.get("keys", {})
    columns = resolution.get("columns", {})
    if (
        not isinstance(tables, dict)
        or not isinstance(keys, dict)
        or not isinstance(columns, dict)
        or not all(isinstance(k, dict) for k in keys.values())
    ):
        raise ApplicationError(
            "invalid_resolution", "`tables` maps a table to a choice; `keys` maps a table to {key id: choice}."
        )
    tables, columns, schema = dict(tables), dict(columns), dict(resolution.get("schema", {}))
    for table, given in list(tables.items()):
        if not isinstance(given, dict):
            continue
        if set(given) - {"choice", "columns", "schema"}:
            raise ApplicationError("invalid_resolution", f"A table's resolution ({table!r}) takes `choice`, "
                                   "`columns` and `schema`.", details={"table": table})  # fmt: skip
        if "columns" in given:
            columns[table] = {**columns.get(table, {}), **semantics.column_rules_shape(given["columns"], table=table)}
        if "schema" in given:
            schema[table] = semantics.schema_settlements_shape(given["schema"], table=table)
        if "choice" in given:
            tables[table] = given["choice"]
        else:
            del tables[table]
    for table, given in columns.items():
        semantics.column_rules_shape(given, table=table)
    chosen = [resolution.get("default", "fail"), *tables.values()]
    chosen += [choice for per_key in keys.values() for choice in per_key.values()]
    if any(not isinstance(choice, str) or choice not in choices for choice in chosen):
        raise ApplicationError("invalid_resolution", f"A resolution is one of {CHOICES}.")
    checked = {**resolution, "tables": tables} if "tables" in resolution else dict(resolution)
    if columns:
        checked["columns"] = {table: rules for table, rules in columns.items() if rules}
    if "cells" in resolution:
        checked["cells"] = cell_picks_shape(resolution["cells"])
    if schema:
        checked["schema"] = {table: settled for table, settled in schema.items() if settled}
    return checked


def cell_picks_shape(cells: Any) -> dict[str, dict[str, dict[str, dict]]]:
    """`{"db.t": {key id: {column: pick}}}` checked for its shape (`semantics.cell_pick_parse`; the values against
    the table's columns where it is merged, `keys_attach`). Raises `invalid_cell_pick`."""

    def bad(message: str, **details: Any) -> ApplicationError:
        return ApplicationError("invalid_cell_pick", message, details=details)

    if not isinstance(cells, dict) or not all(isinstance(keys, dict) for keys in cells.values()):
        raise bad("`cells` maps a table to {key id: {column: pick}}.")
    if sum(len(columns) for keys in cells.values() for columns in keys.values()) > MAX_CELL_PICKS:
        raise bad(f"A resolution picks at most {MAX_CELL_PICKS} cells.")
    for table, keys in cells.items():
        for key_id, columns in keys.items():
            if not isinstance(key_id, str) or len(key_id) > MAX_KEY_ID or not isinstance(columns, dict):
                raise bad(f"A key of {table!r} is its key id (the key's values as a JSON list) with its cells.",
                          table=table)  # fmt: skip
            for column, pick in columns.items():
                if not isinstance(column, str) or not semantics.COLUMN_NAME.fullmatch(column):
                    raise bad(f"{str(column)[:64]!r} is not a column name.", table=table, key_id=key_id)
                try:
                    semantics.cell_pick_parse(pick)
                except ValueError as wrong:
                    raise bad(f"Cell {column!r} of key {key_id} of {table!r}: {wrong}.", table=table, key_id=key_id,
                              column=column) from None  # fmt: skip
    return {table: keys for table, keys in cells.items() if keys}


def keys_attach(obj: ObjectDiff, result: dict | None, resolution: dict) -> None:
    """Decide a primary-key table's data pairs from its key comparison (None: not run yet)."""
    if result is not None:
        chosen = semantics.choices_of(resolution, obj.name)
        per_key = resolution.get("keys", {}).get(obj.name, {})
        column_rules = resolution.get("columns", {}).get(obj.name, {})
        picks = resolution.get("cells", {}).get(obj.name, {})
        state = obj.merged_state or (obj.target.state if obj.target else {})
        columns = state.get("columns", [])
        not_null = frozenset(c["name"] for c in columns if c.get("nullable") is False)
        if picks:
            cell_picks_check(picks, table=obj.name, columns=columns)
        if column_rules:  # checked where the merge was asked for too; here against the table the merge writes
            names = {c["id"]: c["name"] for c in columns}
            semantics.column_rules_check(column_rules, table=obj.name, columns=columns,
                                         keys=[names.get(i) for i in state.get("primary_key", [])])  # fmt: skip
        choices = semantics.key_choices(
            result["conflicts"], table=obj.name, per_key=per_key, rules=column_rules,
            types={c["name"]: c["type"] for c in columns}, not_null=not_null, picks=picks, **chosen,
        )  # fmt: skip
        unresolved = semantics.keys_unresolved(
            listed=len(result["conflicts"]), settled=len(choices), total=result["counts"]["conflicts"],
            rules=bool(column_rules), **chosen,
        )  # fmt: skip
        obj.keys = {
            **result["counts"], "unresolved": unresolved, "choices": choices,
            "listed": result["conflicts"][:KEYS_IN_REPORT],
        }  # fmt: skip
        # the columns the cells were settled in: a page of the preview is settled again with them
        obj.keys["types"], obj.keys["not_null"] = {c["name"]: c["type"] for c in columns}, sorted(not_null)
        if column_rules or picks:
            obj.keys["settled_cells"] = semantics.settled_cells(choices)
        if picks:
            obj.keys["stale_picks"] = semantics.picks_stale(result["conflicts"], picks)
    obj.pairs = []
    _decide_pairs(obj)
    if not any(pair.cell == "4.4" for pair in obj.pairs):
        # No pair of data operations shows the comparison (one side's changes of the rows are all replays of the
        # other's, or picks of them): the table's own verdict is the comparison's.
        decided = rules.key_verdict(obj.keys)
        if decided.verdict != OK:
            obj.issues.append(decided)


def cell_picks_check(picks: dict[str, dict[str, dict]], *, table: str, columns: list[dict]) -> None:
    """A table's cell picks against its columns (each {name, type, nullable}): each column exists, each typed value
    fits it (`semantics.cell_pick_value`), and a side picked has a value for a NOT NULL column (known once the pick
    was made on a cell: its `inputs`). Raises 400 `invalid_cell_pick` naming the cell."""
    types = {c["name"]: c["type"] for c in columns}
    not_null = {c["name"] for c in columns if c.get("nullable") is False}
    for key_id, cells in picks.items():
        for column, pick in cells.items():
            details = {"table": table, "key_id": key_id, "column": column}
            if column not in types:
                raise ApplicationError("invalid_cell_pick", f"{table!r} has no column {column!r} to pick a cell of.",
                                       details={**details, "columns": sorted(types)})  # fmt: skip
            kind, given = semantics.cell_pick_parse(pick)
            if kind == "pick" and pick.get("inputs") and pick["inputs"][given] is None and column in not_null:
                raise ApplicationError(
                    "invalid_cell_pick",
                    f"The {given} has no value for cell {column!r} of key "
                    f"{key_id} of {table!r}, and the column is NOT NULL.",
                    details=details,
                )
            if kind == "value":
                try:
                    semantics.cell_pick_value(given, types[column], not_null=column in not_null)
                except ValueError as wrong:
                    raise ApplicationError("invalid_cell_pick", f"The value picked for cell {column!r} of key "
                                           f"{key_id} of {table!r} does not fit the column: {wrong}.",
                                           details={**details, "type": types[column]}) from None  # fmt: skip


def pairs_resolve(obj: ObjectDiff, resolution: dict, stats: Mapping[str, dict]) -> None:
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
    if obj.resolution == SOURCE_WINS and obj.kind == TABLE and not obj.key_mode:
        _source_wins(obj, stats)


def _source_wins(obj: ObjectDiff, stats: Mapping[str, dict]) -> None:
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
        _merge_state(obj, stats)


def namespace(version: Version) -> tuple:
    kind = TABLE if version.kind == VIEW else version.kind
    return (kind, version.parent_id, version.name.lower())


def _display_name(version: Version, versions: dict) -> str:
    if version.parent_id is None:
        return version.name
    for side in ("source", "target", "base"):
        parent = versions[side].get(version.parent_id)
        if parent is not None:
            return f"{parent.name}.{version.name}"
    return version.name


def _object_diff(inputs: PlanInputs, object_id: uuid.UUID, schema: Mapping[str, dict]) -> ObjectDiff | None:
    versions, taken = inputs.versions, inputs.taken
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
    if obj.kind not in MERGED_KINDS or change == "added_in_target":
        return obj
    if change == "added_in_source":
        _check_new(obj, versions, taken)
        return obj
    if change == "changed_in_both":
        obj.key_mode = _key_mode(obj)
        if not obj.key_mode:
            _decide_pairs(obj, inputs.live_files.get(object_id, {}).get("target", {}))
    if src.dropped and obj.kind == DATABASE and dest is not None and not dest.dropped:
        _check_emptied(obj, versions, inputs.target_children.get(object_id, []))
    if not src.dropped:
        _check_name(obj, taken)
        if not obj.conflicts and not (dest is not None and dest.dropped):
            _merge_state(obj, inputs.segment_stats)
    return obj


def _check_segments_present(objects: list[ObjectDiff], live_files: Mapping[uuid.UUID, Mapping[str, Mapping]]) -> None:
    """A source operation that changed rows of a segment by position (a delete, an update, a compaction) replays
    only where that segment is, as the source saw it: on the target, or written by the source itself. A segment the
    target's own operations removed or changed is for the rule tables (A4/A5, F*, R*). One the target never had,
    or has with deletes the source never saw, because a merge on one side kept a table the other side had changed
    (`target_wins`, a discard), is a conflict here: the replay would miss the rows, keep them twice or bring back
    rows the target deleted. An operation none of whose files the source still has (a later overwrite replaced
    them) has nothing left to replay. `live_files`: the source's and the target's files of each table whose source
    operations rewrote rows by position."""
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
    restored = set().union(*(op.restored for op in obj.source_operations))
    lineage, kept, mixed = set(source_files) - restored, set(), []
    for op in obj.target_operations:
        if op.op in rules.REWRITES and op.removed & lineage:
            # Of a delete that rewrote several segments, only the rewrites of those the source has (by the segments
            # each came from, `rules.segment_origins`; unkeyed model seed 193: `b3` deleted a row of a segment the
            # source has and one of a segment its overwrite replaced, in one delete, and the second rewrite's rows
            # stayed).
            written = {new for new, came in rules.segment_origins([op]).items() if came & lineage}
            if op.op == "delete":
                kept |= written
                lineage |= written
            else:
                mixed.append(op)
    return kept, mixed


def _check_overwrite_lineage(objects: list[ObjectDiff], live_files: Mapping[uuid.UUID, Mapping[str, Mapping]]) -> None:
    """A source overwrite against a target's update or compaction of rows the source still has (see
    `rewrites_of_source_rows`), or one after which the source took back segments the target holds in no version,
    against a target that holds rows older than the base the overwrite would take out (`overwrite_taken_back`):
    which of the target's rows to keep cannot be told by file, so it is a conflict."""
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


def inserted_segments(operations: Sequence[Op]) -> set[str]:
    """The segments these operations (a side's since the base) inserted: an insert's (a load's append, or one a
    merge or a pick replayed), and those the undo of a commit that rewrote no rows (an overwrite's) puts back, which
    hold rows of their own as an insert's do (`rules.segment_origins`)."""
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
    restored = rules.restored_by_target(obj.target_operations)
    rewritten = set().union(*(origins.get(fid, frozenset()) for fid in restored))
    return (inserted_segments(obj.source_operations) - restored) & rewritten


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
    restored = set().union(*(op.restored for op in obj.source_operations))
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


def _check_new(obj: ObjectDiff, versions: dict, taken: dict) -> None:
    """4.1: a new object is taken over with its id, unless the target has another of its kind and name."""
    parent = obj.source.parent_id
    database = versions["target"].get(parent) if parent is not None else None
    taken_by_other = semantics.taken_by_another(taken, namespace(obj.source), obj.object_id)
    obj.issues += semantics.new_object_conflicts(
        kind=obj.kind, name=obj.name, taken_by_other=taken_by_other,
        parent_in_base=parent is not None and versions["base"].get(parent) is not None,
        parent_on_target=database is not None and not database.dropped,
    )  # fmt: skip
    obj.merged_state = obj.source.state


def _check_emptied(obj: ObjectDiff, versions: Mapping, children: list[tuple[uuid.UUID, str]]) -> None:
    """A database the source dropped must not hold objects the target still has (`children`: the target's live
    objects in it) and the source did not drop."""
    dropped_by_source = {i for i, v in versions["source"].items() if v.dropped}
    kept = [name for object_id, name in children if object_id not in dropped_by_source]
    conflict = semantics.emptied_database_conflict(kept)
    if conflict is not None:
        obj.issues.append(conflict)


def _check_name(obj: ObjectDiff, taken: dict) -> None:
    taken_by_other = semantics.taken_by_another(taken, namespace(obj.source), obj.object_id)
    conflict = semantics.rename_conflict(
        base_name=obj.base.name, source_name=obj.source.name, taken_by_other=taken_by_other
    )
    if conflict is not None:
        obj.issues.append(conflict)


def _key_mode(obj: ObjectDiff) -> bool:
    """A primary-key table whose rows both sides changed since the base (their files differ from the base's): it
    is merged three-way by key. If only one side changed them, the merge takes that side's rows as they are."""
    return obj.keyed and all(obj.data_changed.values())


def _decide_pairs(obj: ObjectDiff, target_files: Mapping[str, str | None] | None = None) -> None:
    """Every pair's verdict. `target_files`: the target's live files (as `PlanInputs.live_files` holds them), where
    the source rewrote rows by position or overwrote."""
    table = rules.RULE_TABLES[obj.kind]
    facts = Facts(key_mode=obj.key_mode, keyed=obj.keyed, keys=obj.keys, reverting=obj.reverting)
    facts.dest_live = frozenset(fid for fid, segment in (target_files or {}).items() if segment is None)
    if obj.kind == TABLE and obj.target is not None:
        facts.dest_columns = {column["id"]: column for column in obj.target.state["columns"]}
        facts.src_wrote_data = any(
            op.op in WRITES_DATA and op.details.get("segments_added") for op in obj.source_operations
        )
        facts.src_changed_rows = any(op.op in ROW_CHANGES for op in obj.source_operations)
        facts.src_origins = rules.segment_origins(obj.source_operations)
        facts.src_restored = frozenset().union(*(op.restored for op in obj.source_operations))
        facts.schema_settled = obj.schema
    for i, src_op in enumerate(obj.source_operations):
        for j, dest_op in enumerate(obj.target_operations):
            cell, decided = rules.verdict(table, src_op, dest_op, facts)
            obj.pairs.append(Pair(i, j, cell, decided))


def _merge_state(obj: ObjectDiff, stats: Mapping[str, dict]) -> None:
    base, src, dest = obj.base.state, obj.source.state, obj.target.state
    if obj.kind == DATABASE:
        obj.merged_state = states.database_state_merge(base, src, dest)
        return
    merged = states.table_state_merge(base, src, dest)
    if src == base and dest == base:  # the definition as it was: nothing of it for the checks below to find
        obj.merged_state = merged
        return
    if obj.schema:
        merged = _schema_applied(obj, merged)
    duplicates = states.duplicate_column_names(merged["columns"])
    if duplicates:
        obj.issues.append(
            Verdict(CONFLICT, "A6", f"After the merge two columns would be named {duplicates[0]!r}; rename one.")
        )
    if obj.change == "changed_in_both":
        written = {side: segments_written(ops) for side, ops in (("source", obj.source_operations),
                                                                  ("target", obj.target_operations))}  # fmt: skip

        def nulls(side: str) -> set[int]:
            written_stats = [stats.get(segment) for segment in written[side]]
            return {c["id"] for c in merged["columns"] for s in written_stats if _may_be_null(s, c["id"])}

        wrote = {side: bool(ids) for side, ids in written.items()}
        for problem, column in states.table_problems(base, src, dest, merged, wrote=wrote, nulls=nulls):
            settles = column and (column["name"], "fill", column["type"])
            obj.issues.append(Verdict(CONFLICT, "4.0", problem, settles=settles))
    obj.merged_state = merged


def _schema_settled(obj: ObjectDiff, given: dict[str, dict]) -> dict[int, dict]:
    """A table's schema settlements (`{column: {"type": t} | {"fill": v}}`, by the names the target has, else the
    source) by column id. 400 `unknown_column` for a column of neither side."""
    ids = {c["name"]: c["id"] for side in (obj.source, obj.target) for c in side.state["columns"]}
    unknown = sorted(set(given) - set(ids))
    if unknown:
        raise ApplicationError("unknown_column", f"{obj.name!r} has no column {unknown[0]!r} to settle.",
                               details={"table": obj.name, "column": unknown[0], "columns": sorted(ids)})  # fmt: skip
    return {ids[name]: settlement for name, settlement in given.items()}


def _schema_applied(obj: ObjectDiff, merged: dict) -> dict:
    """The merged table with its schema settlements: a column's type set to one both sides' types widen to
    (400 `schema_type_lossy` naming a side whose values it cannot all hold), a column's default to the fill (400
    `invalid_fill` for a value that does not fit the column)."""
    types = {side: {c["id"]: c["type"] for c in getattr(obj, side).state["columns"]} for side in ("source", "target")}
    columns = []
    for column in merged["columns"]:
        settlement = obj.schema.get(column["id"])
        if settlement is not None and "type" in settlement:
            wanted = settlement["type"]
            for side, held in types.items():
                old = held.get(column["id"])
                if old is not None and old != wanted and not is_widening(parse_type(old), parse_type(wanted)):
                    raise ApplicationError(
                        "schema_type_lossy",
                        f"Column {column['name']!r} of {obj.name!r} cannot become {wanted}: the {side}'s {old} "
                        f"values do not all fit it (a type both sides' types widen to: int to long or double, "
                        f"float to double, a decimal to one of more precision and the same scale, an integer to a "
                        f"decimal with enough digits).",
                        details={"table": obj.name, "column": column["name"], "side": side, "type": old,
                                 "wanted": wanted},
                    )  # fmt: skip
            column = {**column, "type": wanted}
        if settlement is not None and "fill" in settlement:
            try:
                fill = semantics.cell_pick_value(settlement["fill"], column["type"], not_null=True)
            except ValueError as wrong:
                raise ApplicationError("invalid_fill", f"The fill of column {column['name']!r} of {obj.name!r} "
                                       f"does not fit it: {wrong}.", details={"table": obj.name,
                                       "column": column["name"], "type": column["type"]}) from None  # fmt: skip
            column = {**column, "default": fill}
        columns.append(column)
    return {**merged, "columns": columns}


def _may_be_null(stats: dict | None, column_id: int) -> bool:
    return bool((stats or {}).get(str(column_id), {}).get("nulls", 1))


def segments_written(operations: list[Op]) -> list[str]:
    return [segment for op in operations if op.op in WRITES_DATA for segment in op.details.get("segments_added", [])]
