"""Every cell of the rule tables through the merge plan's entry point (`merge_app.plan.decide`), on plain values:
no database, no Spark. One object changed on both sides since the base, one operation each; the plan must name the
table's cell for the pair and decide it as the cell says. The notes' conditions are decided both ways where they
can go either way. `test_conflict_rules.py` runs the same cells end to end, on real data.
"""

import uuid

import pytest

from merge_app import plan
from merge_app.plan import decide, object_writes
from merge_app.plan.lineage import rewrites_of_source_rows
from merge_app.plan.objects import PlanInputs, Version
from merge_app.plan.records import CHERRY_PICK, MERGE
from merge_app.plan.rules import CONFLICT, DISCARDED, OK, RULE_TABLES, Op

CATALOG, DATABASE_ID, TABLE_ID = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
COLUMNS = [
    {"id": 1, "name": "id", "type": "long", "default": None, "nullable": False},
    {"id": 2, "name": "v", "type": "int", "default": None, "nullable": True},
]
TABLE_STATE = {
    "columns": COLUMNS, "comment": "", "properties": {"k": "1"}, "primary_key": [], "partition_by": [],
    "last_column_id": 2, "schema_version_id": 1,
}  # fmt: skip
DATABASE_STATE = {"properties": {"k": "1"}, "comment": ""}

# Details of one operation of each kind, on segments named by letter. The source touches segment s1, the target s2,
# so that the notes that ask whether both sides touched a common segment say no: those go the other way below.
SOURCE_DETAILS = {
    "insert": {"segments_added": ["n1"]},
    "delete": {"segments_touched": ["s1"], "deltas_added": ["d1"], "deltas_on": {"d1": "s1"}},
    "update": {"segments_touched": ["s1"], "deltas_added": ["d1"], "deltas_on": {"d1": "s1"}, "segments_added": ["n1"]},
    "overwrite": {"segments_removed": ["s1", "s2", "s3"], "segments_added": ["n1"]},
    "compaction": {"segments_removed": ["s3"], "segments_added": ["c1"]},
    "alter_properties": {"set": {"a": "1"}},
    "set_properties": {"set": {"a": "1"}},
    "unset_properties": {"unset": ["a"]},
    "alter_column": {"action": "rename", "column_id": 2, "new": "w"},
    "alter_partition": {"new": []},
    "alter_name": {"new": "t2"},
    "modify_name": {"new": "d2"},
}
TARGET_DETAILS = {
    **SOURCE_DETAILS,
    "insert": {"segments_added": ["m1"]},
    "delete": {"segments_touched": ["s2"], "deltas_added": ["e1"], "deltas_on": {"e1": "s2"}},
    "update": {"segments_touched": ["s2"], "deltas_added": ["e1"], "deltas_on": {"e1": "s2"}, "segments_added": ["m1"]},
    "overwrite": {"segments_removed": ["s2"], "segments_added": ["m1"]},
    "compaction": {"segments_removed": ["s4"], "segments_added": ["c2"]},
    "unset_properties": {"unset": ["b"]},
    "alter_properties": {"set": {"b": "1"}},
    "alter_name": {"new": "t3"},
    "modify_name": {"new": "d3"},
}
LIVE = {"s1": None, "s2": None, "s3": None, "s4": None}  # the segments both sides hold


def plan_one(
    kind: str, src: Op | list[Op], dest: Op, state: dict | None = None, live: dict | None = None,
    restored: dict | None = None,
):  # fmt: skip
    """The plan of one object of `kind` that the source changed by `src` (one operation, or several in order) and
    the target by `dest` (the three sides hold `state`; `live`: each side's live files, else `LIVE` on both, less
    those `dest` removed on the target; `restored`: the older segments of each file of the target's restore)."""
    src = src if isinstance(src, list) else [src]
    object_id = TABLE_ID if kind == "table" else DATABASE_ID
    state = state or (TABLE_STATE if kind == "table" else DATABASE_STATE)
    parent = DATABASE_ID if kind == "table" else None
    name = "t" if kind == "table" else "db"

    def version(seq: int, dropped: bool = False) -> Version:
        return Version(seq, CATALOG, object_id, kind, parent, name, seq, dropped, state)

    target_live = {fid: segment for fid, segment in LIVE.items() if fid not in dest.removed}  # as its operation left
    versions = {
        "base": {object_id: version(1)},
        "source": {object_id: version(2, dropped=src[-1].op == "drop")},
        "target": {object_id: version(3, dropped=dest.op == "drop")},
    }
    inputs = PlanInputs(
        versions=versions, source_operations={object_id: src}, target_operations={object_id: [dest]},
        object_ids=frozenset({object_id}), keyed_changes={}, taken={("table" if kind == "table" else kind,
        parent, name): object_id}, live_files={object_id: live or {"source": dict(LIVE), "target": target_live}},
        target_children={object_id: []}, segment_stats={}, restored_origins={object_id: restored or {}},
    )  # fmt: skip
    (obj,) = decide(inputs, resolution={}, compared={})
    return obj


def op(side: str, kind: str, **details) -> Op:
    known = SOURCE_DETAILS if side == "source" else TARGET_DETAILS
    return Op("c-src" if side == "source" else "c-dest", 0, kind, {**known.get(kind, {}), **details})


CELLS = [(name, row, column, cell) for name, table in RULE_TABLES.items()
         for (row, column), cell in table.cells.items()]  # fmt: skip


@pytest.mark.parametrize(("kind", "row", "column", "cell"), CELLS, ids=[f"{k}:{r}x{c}" for k, r, c, _ in CELLS])
def test_every_cell_is_the_pairs_cell_and_decides_as_it_says(kind, row, column, cell):
    obj = plan_one(kind, op("source", row), op("target", column))
    (pair,) = obj.pairs
    assert pair.cell == cell
    if cell == OK:
        assert pair.decided.verdict == OK, pair.decided
    elif cell == CONFLICT:
        assert pair.decided.verdict == CONFLICT and obj.verdict == CONFLICT
    else:  # a note: its condition decides; with these details (no common segment, different keys) it merges
        assert pair.decided.note == cell and pair.decided.verdict in (OK, DISCARDED), pair.decided


# The notes whose condition goes the other way on other details: (table, row, column, source details, target
# details, the verdict).
OTHER_WAY = [
    ("table", "update", "delete", {}, {"segments_touched": ["s1"]}, CONFLICT),  # A1: a common segment
    ("table", "update", "update", {}, {"segments_touched": ["s1"]}, CONFLICT),  # A3
    ("table", "delete", "delete", {}, {"segments_touched": ["s1"]}, OK),  # A2: both delete files apply
    ("table", "update", "overwrite", {"segments_from": {"n1": "s1"}}, {"segments_removed": ["s1"]}, DISCARDED),  # A4
    ("table", "delete", "overwrite", {}, {"segments_removed": ["s1"]}, DISCARDED),  # A5
    ("table", "delete", "compaction", {}, {"segments_removed": ["s1"]}, CONFLICT),  # F*
    ("table", "compaction", "delete", {}, {"segments_touched": ["s3"]}, DISCARDED),  # C*: the compaction dropped
    ("table", "alter_properties", "alter_properties", {"unset": ["a"]}, {"unset": ["a"]}, CONFLICT),  # P*
    ("table", "alter_partition", "alter_partition", {"new": [{"column_id": 1}]}, {"new": []}, CONFLICT),  # S*
    ("table", "alter_column", "alter_column", {"action": "widen", "new": "int"},
     {"action": "widen", "column_id": 2, "new": "long"}, None),  # A6: decided on the target's columns below
    ("database", "unset_properties", "unset_properties", {}, {"unset": ["a"]}, CONFLICT),  # U*
]  # fmt: skip


@pytest.mark.parametrize(("kind", "row", "column", "src", "dest", "verdict"), OTHER_WAY,
                         ids=[f"{k}:{r}x{c}" for k, r, c, *_ in OTHER_WAY])  # fmt: skip
def test_a_notes_condition_goes_the_other_way_on_other_details(kind, row, column, src, dest, verdict):
    state = None
    if verdict is None:  # A6: the target's column 2 is a long; the source narrows it back to an int
        state, verdict = {**TABLE_STATE, "columns": [COLUMNS[0], {**COLUMNS[1], "type": "long"}]}, CONFLICT
    obj = plan_one(kind, op("source", row, **src), op("target", column, **dest), state)
    (pair,) = obj.pairs
    assert pair.decided.verdict == verdict, pair.decided
    assert pair.decided.note == RULE_TABLES[kind].cell(row, column)


def test_a_table_the_target_holds_as_the_base_has_it_takes_the_sources_version_and_what_it_holds():
    """Unkeyed model seed 54: the merge takes the source's version, and holds the operations that version carries
    beyond the source's own since the base (one the base's history declined), so that a later pick of one of them
    finds it held (`test_convergence.py` has the history on real data)."""
    versions = {side: {TABLE_ID: Version(seq, CATALOG, TABLE_ID, "table", DATABASE_ID, "t", seq, False, TABLE_STATE)}
                for seq, side in enumerate(("base", "source", "target"), start=1)}  # fmt: skip
    inputs = PlanInputs(
        versions=versions, source_operations={TABLE_ID: [op("source", "insert")]}, target_operations={},
        object_ids=frozenset({TABLE_ID}), keyed_changes={}, taken={}, live_files={}, target_children={},
        segment_stats={}, target_unchanged=frozenset({TABLE_ID}),
        source_held={TABLE_ID: frozenset({("c-src", 0), ("c-declined", 3)})},
    )  # fmt: skip
    (obj,) = decide(inputs, resolution={}, compared={})
    assert obj.change == "changed_in_source" and obj.target_unchanged
    assert object_writes([obj])[TABLE_ID].how == "rows_taken"
    assert obj.held == [("c-declined", 3)]  # the source's own insert is recorded as replayed, not as held


def test_the_plan_of_a_merge_holds_each_objects_writes_and_records_of_its_kind():
    """`plan.merge`, the one entry: the decided objects, how each is written and what the commit records of them,
    the records as the kind of replay names their origin."""
    versions = {side: {TABLE_ID: Version(seq, CATALOG, TABLE_ID, "table", DATABASE_ID, "t", seq, False, TABLE_STATE)}
                for seq, side in enumerate(("base", "source", "target"), start=1)}  # fmt: skip
    inputs = PlanInputs(
        versions=versions, source_operations={TABLE_ID: [op("source", "insert")]}, target_operations={},
        object_ids=frozenset({TABLE_ID}), keyed_changes={}, taken={}, live_files={}, target_children={},
        segment_stats={},
    )  # fmt: skip
    merged, picked = (plan.merge(inputs, resolution={}, compared={}, kind=kind) for kind in (MERGE, CHERRY_PICK))
    assert [obj.object_id for obj in merged.objects] == [TABLE_ID] and merged.declined == []
    assert merged.writes == object_writes(merged.objects) and merged.writes[TABLE_ID].how == "replayed"
    [replayed] = merged.records[TABLE_ID].operations
    assert (replayed.op, replayed.details["merged_from"], replayed.details["origin_position"]) == ("insert", "c-src", 0)
    [pick] = picked.records[TABLE_ID].operations
    assert pick.details["picked_from"] == ["c-src", 0]


def test_a_table_the_target_changed_and_holds_as_the_base_has_it_again_takes_the_sources_version():
    """Unkeyed model seed 176: the target overwrote the table (a restore that took out segment s1) and took the base's
    files back by a merge, so the diff finds its definition and live files the base's (`plan.operations.held_as_at_base`). Its
    operations since the base changed nothing: the source's delete in s1 is not set against its overwrite (A5
    discarded it, and the row stayed); the merge takes the source's version."""
    restore = op("target", "overwrite", segments_removed=["s1"], segments_kept=["s2"], restore=True)
    obj = plan_one("table", op("source", "delete"), restore)
    assert [pair.decided.verdict for pair in obj.pairs] == [DISCARDED]  # replayed against the restore: A5
    versions = {side: {TABLE_ID: Version(seq, CATALOG, TABLE_ID, "table", DATABASE_ID, "t", seq, False, TABLE_STATE)}
                for seq, side in enumerate(("base", "source", "target"), start=1)}  # fmt: skip
    inputs = PlanInputs(
        versions=versions, source_operations={TABLE_ID: [op("source", "delete")]},
        target_operations={TABLE_ID: [restore]}, object_ids=frozenset({TABLE_ID}), keyed_changes={}, taken={},
        live_files={}, target_children={}, segment_stats={}, target_unchanged=frozenset({TABLE_ID}),
    )  # fmt: skip
    (obj,) = decide(inputs, resolution={}, compared={})
    assert obj.change == "changed_in_source" and obj.target_unchanged and not obj.pairs and not obj.discarded
    assert object_writes([obj])[TABLE_ID].how == "rows_taken"


def test_a_source_delete_in_a_segment_the_target_holds_again_after_its_overwrite_merges():
    """Unkeyed model seed 176's class: the target's overwrite (a restore) took out s1, and a later merge brought s1
    back to it. A5 discards the source's changes of rows the overwrite replaced; s1's rows are the target's again,
    after its overwrite: the delete merges (discarded, the row stayed)."""
    restore = op("target", "overwrite", segments_removed=["s1"], segments_kept=["s2"], restore=True)
    obj = plan_one("table", op("source", "delete"), restore, live={"source": dict(LIVE), "target": dict(LIVE)})
    assert [(pair.decided.note, pair.decided.verdict) for pair in obj.pairs] == [("A5", OK)]


def rewrite(position: int, kind: str, touched: list[str], added: dict[str, str | None]) -> Op:
    """A source operation that rewrote `touched` copy-on-write: `added` maps each new segment to the segment its
    rows come from (None: not recorded, as for a compaction)."""
    details = {"segments_touched": touched, "segments_removed": touched, "segments_added": list(added)}
    if all(origin is not None for origin in added.values()):
        details["segments_from"] = added
    return Op("c-src", position, kind, details)


def test_a_source_rewrite_of_rows_the_target_overwrote_is_discarded_through_the_sources_own_rewrites():
    """Unkeyed model seed 13: the source updated a row of s1 copy-on-write (n1 holds s1's rows), then updated the
    new row (n2 holds n1's); the target overwrote the table, replacing s1. Both updates change rows the overwrite
    replaced (A4): both are discarded, and neither n1 nor n2 is taken, which would bring back s1's other rows."""
    first = rewrite(0, "update", ["s1"], {"n1": "s1"})
    second = rewrite(1, "update", ["n1"], {"n2": "n1"})
    obj = plan_one("table", [first, second], op("target", "overwrite", segments_removed=["s1", "s2"]))
    assert [(p.decided.note, p.decided.verdict) for p in obj.pairs] == [("A4", DISCARDED), ("A4", DISCARDED)]
    assert {f for p in obj.pairs for f in p.decided.discarded} == {"n1", "n2"}


def test_the_segments_a_revert_of_an_overwrite_puts_back_merge_against_a_target_overwrite_of_what_it_wrote():
    """Unkeyed model seed 248: the source reverted an overwrite the base holds (its undo takes out s1, the overwrite's
    rows, and puts back p1 and p2, the rows before it) and updated a row of p2; the target overwrote s1. The undo's
    taking out of s1 is discarded (A4), but p1 and p2 hold rows of their own, not s1's: they come back, and the update
    of p2 merges. The undo of an update puts back older versions of the rows the overwrite replaced (those of s1):
    discarded with them, and so is the update of p2."""
    undo = {"segments_removed": ["s1"], "segments_added": ["p1", "p2"], "segments_from": {}, "reverts": ["c0", 0]}
    update = rewrite(1, "update", ["p2"], {"n2": "p2"})
    dest = op("target", "overwrite", segments_removed=["s1"])
    obj = plan_one("table", [Op("c-src", 0, "update", {**undo, "rewrote": False}), update], dest)
    assert [(p.decided.note, p.decided.verdict, p.decided.discarded) for p in obj.pairs] == [
        ("A4", DISCARDED, ()), ("A4", OK, ()),
    ]  # fmt: skip
    undo_of_update = {**undo, "segments_from": {"s1": "p1"}, "rewrote": True}
    obj = plan_one("table", [Op("c-src", 0, "update", undo_of_update), update], dest)
    assert [(p.decided.verdict, p.decided.discarded) for p in obj.pairs] == [
        (DISCARDED, ("p1", "p2")), (DISCARDED, ("n2",)),
    ]  # fmt: skip


def test_a_source_segment_holding_rows_the_target_overwrote_and_rows_of_its_own_is_a_conflict():
    """The source compacted s1 with a segment of its own (i1: its insert), and then deleted a row of the
    compaction's output: those rows cannot be split into the replaced ones and the source's own (A5)."""
    insert = Op("c-src", 0, "insert", {"segments_added": ["i1"]})
    compaction = rewrite(1, "compaction", ["s1", "i1"], {"c1": None})
    delete = rewrite(2, "delete", ["c1"], {"n1": "c1"})
    obj = plan_one("table", [insert, compaction, delete], op("target", "overwrite", segments_removed=["s1", "s2"]))
    (verdict,) = [p.decided for p in obj.pairs if p.source == 2]
    assert (verdict.note, verdict.verdict) == ("A5", CONFLICT) and "cannot be split" in verdict.reason


def test_a_source_overwrite_keeps_the_target_rewrite_of_rows_the_source_has_only_from_their_segment():
    """Unkeyed model seed 193: the target deleted, copy-on-write and in one delete, a row of s1 and one of s2 (k1
    holds s1's other rows, k2 s2's); the source overwrote the table and then took s1 back with another side's
    version. The overwrite replaces the target's rows but those the source still has: k1's, not k2's."""
    overwrite = Op("c-src", 0, "overwrite", {"segments_removed": ["s1", "s2"], "segments_added": ["o1"]})
    delete = Op("c-dest", 0, "delete", {"segments_removed": ["s1", "s2"], "segments_touched": ["s1", "s2"],
                                        "segments_added": ["k1", "k2"], "segments_from": {"k1": "s1", "k2": "s2"}})  # fmt: skip
    obj = plan_one("table", overwrite, delete, live={"source": {"s1": None}, "target": {"k1": None, "k2": None}})
    assert rewrites_of_source_rows(obj, {"s1"}) == ({"k1"}, [])


def test_a_compaction_the_targets_overwrite_discards_is_not_looked_for_on_the_target():
    """Unkeyed model seed 94, a cherry-pick (`test_histories.py` has it on real data): the source compacted s1 with
    n1, a segment of its own the target never had; the target's overwrite has replaced s1 since. C* drops the
    compaction (the target changed a segment it compacted), so nothing of it is replayed and the target lacking n1
    is no conflict. The check for segments the target lacks (R*) looked at it all the same and refused."""
    compaction = Op("c-src", 0, "compaction", {"segments_removed": ["s1", "n1"], "segments_added": ["c1"]})
    overwrite = op("target", "overwrite", segments_removed=["s1"])
    obj = plan_one("table", compaction, overwrite, live={"source": {"c1": None}, "target": {"m1": None}})
    assert [(p.decided.note, p.decided.verdict) for p in obj.pairs] == [("C*", DISCARDED)]
    assert obj.conflicts == [] and obj.verdict == DISCARDED
    # had the target changed none of the segments, the compaction would be dropped as one of segments it lacks
    obj = plan_one("table", compaction, op("target", "insert"), live={"source": {"c1": None}, "target": {"s1": None}})
    assert obj.conflicts == [] and [(p.source, p.decided.note) for p in obj.discarded] == [(0, "C*")]


def test_a_reverts_undo_against_a_target_rewrite_of_the_segments_it_deletes_from_is_a_conflict():
    """Unkeyed model seed 102 (`test_histories.py` has it on real data): a revert's undo names as touched only the
    segments whose rows it brings back, not those it takes out (an undo of an append: s1) or puts delete files on
    (an undo of a merge that had taken a delete file out: d1 on s2). The target compacted both since: F* found no
    common segment, and the replay deleted nothing, the rows stayed. A copy-on-write rewrite of s2 is R* likewise."""
    reverts = {"reverts": ["c0", 0, "insert"], "segments_touched": []}
    takes_out = Op("c-src", 0, "delete", {**reverts, "segments_removed": ["s1"]})
    deletes_again = Op("c-src", 0, "update", {**reverts, "deltas_added": ["d1"], "deltas_on": {"d1": "s2"}})
    compaction = op("target", "compaction", segments_removed=["s1", "s2"])
    for undo in (takes_out, deletes_again):
        obj = plan_one("table", undo, compaction)
        assert [(p.decided.note, p.decided.verdict) for p in obj.pairs] == [("F*", CONFLICT)], obj.pairs
    rewrite = op("target", "delete", segments_touched=["s2"], segments_removed=["s2"], segments_added=["m1"])
    obj = plan_one("table", deletes_again, rewrite)
    assert [(p.decided.note, p.decided.verdict) for p in obj.pairs] == [("R*", CONFLICT)], obj.pairs
    # the target compacted other segments: the undo replays
    obj = plan_one("table", takes_out, op("target", "compaction"))
    assert [(p.decided.note, p.decided.verdict) for p in obj.pairs] == [("F*", OK)]


def test_a_reverted_compaction_of_segments_the_target_never_had_is_a_conflict():
    """Unkeyed model seed 121 (`test_histories.py` has it on real data): the source compacted p1 and p2 into c1 and
    reverted that (the undo takes c1 out and brings p1 and p2 back), then appended n1. The target never had p1 or p2
    (p2 holds a row the source updated and the target declined, a merge with `target_wins`). The check for segments
    the target lacks counted p1 and p2 as the source's own, since a source operation wrote them, though it wrote them
    only after the compaction addressed them: the merge replayed the undo and brought p2's row to the target. Only
    what an earlier source operation wrote is the source's own."""
    compaction = Op("c-src", 0, "compaction", {"segments_removed": ["p1", "p2"], "segments_added": ["c1"]})
    reverts = {"reverts": ["c-src", 0, "compaction"], "segments_touched": []}
    undo = Op("c-rev", 0, "compaction", {**reverts, "segments_removed": ["c1"], "segments_added": ["p1", "p2"]})
    append = Op("c-app", 0, "insert", {"segments_added": ["n1"]})
    source = {"p1": None, "p2": None, "n1": None}
    obj = plan_one("table", [compaction, undo, append], op("target", "update"),
                   live={"source": source, "target": {"s1": None, "s2": None, "m1": None}})  # fmt: skip
    assert [(c.verdict, c.note) for c in obj.conflicts] == [(CONFLICT, "R*")], obj.conflicts
    assert "segment(s) p1, p2 by position" in obj.conflicts[0].reason
    # the target holds p1 and p2 (the history declined nothing): the compaction and its undo replay
    obj = plan_one("table", [compaction, undo, append], op("target", "update"),
                   live={"source": source, "target": {"p1": None, "p2": None, "m1": None}})  # fmt: skip
    assert obj.conflicts == [] and obj.verdict == OK
    # the source wrote p1 and p2 itself before it compacted them: its own segments, no conflict either
    wrote = Op("c-ins", 0, "insert", {"segments_added": ["p1", "p2"]})
    obj = plan_one("table", [wrote, compaction, undo, append], op("target", "update"),
                   live={"source": source, "target": {"s1": None, "s2": None, "m1": None}})  # fmt: skip
    assert obj.conflicts == [] and obj.verdict == OK


def test_a_source_change_whose_files_a_change_the_merge_does_not_replay_took_out_is_a_conflict():
    """Unkeyed model seed 292 (`test_histories.py` has it on real data): the source updated a row of s1 (d1 on s1,
    the new row in n1), then cherry-picked an overwrite the merge base holds, which is no change since the base (o1
    is the source's only file now). Replayed by what its files left on the source, nothing, the update left the
    target's s1 as it was (merge-on-read: the row's old version stayed) or took s1 out with rows no rewrite brings
    back (copy-on-write: a row was lost). Where a later source operation the merge replays took the files out, it
    is that operation's to settle."""
    update = op("source", "update")
    live = {"source": {"o1": None}, "target": {**LIVE, "e1": "s2"}}
    obj = plan_one("table", update, op("target", "delete"), live=live)
    assert [(c.verdict, c.note) for c in obj.conflicts] == [(CONFLICT, "R*")], obj.conflicts
    assert "segment(s) s1 by position, and later took that change's files out" in obj.conflicts[0].reason
    rewrite = op("source", "update", segments_removed=["s1"], segments_added=["n1"])  # copy-on-write
    obj = plan_one("table", rewrite, op("target", "delete"), live=live)
    assert [(c.verdict, c.note) for c in obj.conflicts] == [(CONFLICT, "R*")], obj.conflicts
    # the source's later overwrite is replayed: it took the update's files out, and no such conflict is raised
    overwrite = Op("c-src", 1, "overwrite", {"segments_removed": ["s1", "s2", "s3", "s4", "n1"],
                                            "deltas_removed": ["d1"], "segments_added": ["o1"]})  # fmt: skip
    obj = plan_one("table", [update, overwrite], op("target", "delete"), live=live)
    assert not any("later took" in c.reason for c in obj.conflicts), obj.conflicts
    # the target holds no segment the update addressed: nothing of it is left to replay, and nothing is lost
    obj = plan_one("table", update, op("target", "delete"), live={"source": {"o1": None}, "target": {"s2": None}})
    assert not any("later took" in c.reason for c in obj.conflicts), obj.conflicts


def test_rows_a_merge_brought_to_the_source_after_its_overwrite_the_target_holds_rewritten_are_a_conflict():
    """Unkeyed model seed 205 (`test_histories.py` has it on real data): the source overwrote (n1) and a merge then
    brought it segment D by an operation the base holds, which no source operation wrote; the target holds D
    rewritten before the base, as D2 (an update's copy-on-write rewrite: `origins`, which the diff reads from the
    rewrites' operations). The overwrite would take D2 out with rows the source still has: R*. A target segment made
    from another, or no `origins`, is no such rewrite, and the overwrite replays."""
    overwrite = op("source", "overwrite")
    source = {"n1": None, "D": None}
    obj = plan_one("table", overwrite, op("target", "insert"),
                   live={"source": source, "target": {"D2": None, "m1": None}, "origins": {"D2": frozenset({"D"})}})  # fmt: skip
    assert [(c.verdict, c.note) for c in obj.conflicts] == [(CONFLICT, "R*")], obj.conflicts
    assert "the source took back segment(s) D after it" in obj.conflicts[0].reason
    for origins in ({"D2": frozenset({"s2"})}, {}):
        obj = plan_one("table", overwrite, op("target", "insert"),
                       live={"source": source, "target": {"D2": None, "m1": None}, "origins": origins})  # fmt: skip
        assert obj.conflicts == [] and obj.verdict == OK, obj.conflicts


def test_rows_a_merge_brought_to_the_source_after_its_overwrite_that_the_target_holds_in_a_sibling_are_a_conflict():
    """Unkeyed model seed 264: as above, but D and the target's D2 are both rewrites of one older segment S (two
    copy-on-write changes of S on two lines): D2 may hold D's rows in another version, and the overwrite would take
    them out with it (the merge left the target empty, and the model kept row 5): R*. Unrelated, the overwrite
    replays."""
    overwrite = op("source", "overwrite")
    source = {"n1": None, "D": None}
    target = {"D2": None, "m1": None}
    for older, refused in ((frozenset({"S"}), True), (frozenset({"s9"}), False)):
        origins = {"D2": frozenset({"S"}), "D": older}
        obj = plan_one("table", overwrite, op("target", "insert"),
                       live={"source": source, "target": target, "origins": origins})  # fmt: skip
        assert [(c.verdict, c.note) for c in obj.conflicts] == ([(CONFLICT, "R*")] if refused else []), obj.conflicts


def test_a_source_restore_whose_result_segments_the_base_holds_replaced_is_a_conflict():
    """Unkeyed model seed 323: the source restored the table (result r1) and then held the base's segment b1 again
    instead of r1, by an operation the merge base holds (no record); b1 holds some of r1's rows beside others. The
    merge took neither (r1 is gone, b1 is no change), and the restore's rows were lost: R*. With r1 still live, the
    restore replays."""
    restore = op("source", "overwrite", restore=True, whole_table=True, segments_added=["r1"], segments_removed=["s1"])
    target = op("target", "overwrite", restore=True, segments_added=["t1"], segments_removed=["s1"])
    for source, refused in (({"b1": None, "n1": None}, True), ({"b1": None, "r1": None}, False)):
        obj = plan_one("table", [restore, op("source", "insert", segments_added=["n1"])], target,
                       live={"source": source, "target": {"t1": None}})  # fmt: skip
        assert [(c.verdict, c.note) for c in obj.conflicts] == ([(CONFLICT, "R*")] if refused else []), obj.conflicts
        assert not refused or "its result is gone from the source" in obj.conflicts[0].reason


def test_a_source_insert_whose_rows_the_targets_restore_holds_rewritten_is_a_conflict():
    """Unkeyed model seed 235: a pick of an insert (segment n1) onto a target whose restore holds some of its rows in
    r1, a copy-on-write rewrite of n1 (`origins`, which the diff reads from the rewrites' operations). Taken again, n1
    would hold those rows twice; not taken, the rows the rewrite had dropped would be lost: R*. Held by reference (the
    restore kept n1 itself), or without such a rewrite, the insert merges (the file plan takes n1 not again)."""
    insert = op("source", "insert", segments_added=["n1"])
    restore = op("target", "overwrite", restore=True, segments_added=["r1"], segments_removed=["s2"])
    obj = plan_one("table", insert, restore, restored={"r1": frozenset({"n1"})})
    assert [(c.verdict, c.note) for c in obj.conflicts] == [(CONFLICT, "R*")], obj.conflicts
    assert "inserted segment(s) n1, and the target's restore holds rows of them rewritten" in obj.conflicts[0].reason
    kept = op("target", "overwrite", restore=True, segments_added=["r1"], segments_kept=["n1"])
    load = op("target", "overwrite", segments_added=["r1"])  # a load's overwrite: its result is new rows
    for dest, restored in ((kept, {"r1": frozenset({"n1"})}), (restore, {"r1": frozenset({"s1"})}), (load, {})):
        obj = plan_one("table", insert, dest, restored=restored)
        assert obj.conflicts == [] and obj.verdict == OK, obj.conflicts


def test_the_segments_a_revert_of_an_overwrite_puts_back_whose_rows_the_targets_restore_holds_rewritten_conflict():
    """The segments the undo of an overwrite puts back hold rows of their own, as an insert's do: where the target's
    restore holds them rewritten (r1 from p1), they are R* as an insert's would be (taken again, rows twice)."""
    undo = Op("c-src", 0, "update", {"segments_removed": ["s1"], "segments_added": ["p1"], "rewrote": False})
    restore = op("target", "overwrite", restore=True, segments_added=["r1"], segments_removed=["s1"])
    obj = plan_one("table", undo, restore, restored={"r1": frozenset({"p1"})})
    assert [(c.verdict, c.note) for c in obj.conflicts] == [(CONFLICT, "R*")], obj.conflicts
