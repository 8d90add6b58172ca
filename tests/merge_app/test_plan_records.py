"""What a merge commit records of each object it writes, and the audit log's account of what it discarded and
superseded, as the plan decides them (`merge_app.plan.records`), on plain values: no database, no Spark. Later merges
read these records to count each operation once (docs/merge-semantics.md#which-changes-a-merge-replays); the writer
adds only the ids of the files it wrote."""

from merge_app.plan import commit_records, object_writes
from merge_app.plan.objects import Pair
from merge_app.plan.records import (
    CHERRY_PICK,
    KEY_MERGE_POSITION,
    MERGE,
    REVERT,
    declined,
    key_merge_record,
    object_records,
    origin,
)
from merge_app.plan.rules import DISCARDED, OK, SOURCE_WINS, TARGET_WINS, Op, SourceWins, Verdict
from merge_app.plan.writes import object_write
from tests.merge_app.test_plan_writes import table

pytestmark = []  # no database


def op(kind: str, commit: str, position: int, **details) -> Op:
    return Op(commit, position, kind, details)


def discard(source: int, *files: str) -> Pair:
    return Pair(source, 0, "A4", Verdict(DISCARDED, "A4", "replaced by the target's overwrite", files))


def recorded(obj, kind=MERGE):
    return object_records(obj, object_write(obj), kind)


def test_each_replayed_operation_records_where_it_came_from():
    """A merge's replay names the commit and position it replays; a cherry-pick's, the operation it was picked
    from (itself, or where that one was picked from); a revert's undo is its own operation."""
    picked_before = op("insert", "c2", 1, segments_added=["s2"], picked_from=["c0", 4])
    obj = table(ops=[op("insert", "c1", 0, segments_added=["s1"]), picked_before])
    assert [(r.op, r.details) for r in recorded(obj).operations] == [
        ("insert", {"segments_added": ["s1"], "merged_from": "c1", "origin_position": 0}),
        ("insert", {"segments_added": ["s2"], "picked_from": ["c0", 4], "merged_from": "c2", "origin_position": 1}),
    ]
    picks = recorded(obj, CHERRY_PICK).operations
    assert [r.details["picked_from"] for r in picks] == [["c1", 0], ["c0", 4]]
    undo = recorded(table(ops=[op("delete", "c1", 0, segments_touched=["s1"])]), REVERT).operations
    assert [(r.op, r.details, r.replay) for r in undo] == [("delete", {"segments_touched": ["s1"]}, True)]
    assert origin(op("insert", "c9", 3), MERGE) == {"merged_from": "c9", "origin_position": 3}


def test_a_created_table_records_its_creation_first_with_its_state_and_origin():
    create = op("create", "c1", 0)
    obj = table("added_in_source", ops=[create, op("insert", "c1", 1, segments_added=["s1"])])
    first, second = recorded(obj).operations
    assert first.op == "create" and not first.replay
    assert first.details == {"name": "db.t", **obj.source.state, "merged_from": "c1", "origin_position": 0}
    assert (second.op, second.replay) == ("insert", True)
    assert recorded(obj).replayed == ["insert"]  # the creation is not among the replayed operations


def test_the_files_an_operation_put_delete_files_on_are_not_recorded_again():
    """`deltas_on` (which segment each delete file is on) is read from the files, not from the operation."""
    obj = table(ops=[op("delete", "c1", 0, deltas_added=["d1"], deltas_on={"d1": "s1"}, segments_touched=["s1"])])
    (record,) = recorded(obj).operations
    assert "deltas_on" not in record.details and record.details["deltas_added"] == ["d1"]


def test_an_operation_discarded_whole_is_logged_and_not_recorded_one_discarded_in_part_is_both():
    whole = op("update", "c1", 0, segments_added=["s9"], segments_touched=["s1"])
    part = op("delete", "c1", 1, deltas_added=["d1", "d2"], segments_touched=["s1", "s2"])
    compaction = op("compaction", "c1", 2, segments_added=["s7"], segments_removed=["s2"])
    obj = table("changed_in_both", ops=[whole, part, compaction],
                pairs=[discard(0, "s9"), discard(1, "d1"), discard(2, "s7")])  # fmt: skip
    records = recorded(obj)
    assert [r.op for r in records.operations] == ["delete"]
    assert records.replayed == ["delete"]
    assert [(d["op"], d["files"], d["note"]) for d in records.discarded] == [
        ("update", ["s9"], "A4"),
        ("delete", ["d1"], "A4"),
        ("compaction", ["s7"], "A4"),
    ]
    assert declined(obj).details == {"declined": "discarded"}


def test_a_table_merged_by_state_records_its_data_change_itself_and_only_its_ddl_is_replayed():
    ops = [op("insert", "c1", 0, segments_added=["s1"]), op("alter_column", "c1", 1, add="b")]
    by_key = table("changed_in_both", ops=ops, keyed=True, key_mode=True, data_changed={"source": True, "target": True})
    kept = table("changed_in_both", ops=ops, keyed=True, data_changed={"source": False, "target": True})
    for obj in (by_key, kept):
        assert [r.op for r in recorded(obj).operations] == ["alter_column"]
    files = {"segments_added": ["k1"], "deltas_added": ["k2"]}
    by_key.keys = {"compared": 3, "listed": [[1]], "choices": []}  # the lists are the report's, not the record's
    update = key_merge_record(by_key, {"rows_replaced": 2, "rows_added": 1}, files, "head")
    insert = key_merge_record(by_key, {"rows_replaced": 0, "rows_added": 1}, files, "head")
    assert (update.op, insert.op, update.object_id) == ("update", "insert", by_key.object_id)
    assert update.details == {**files, "by_key": {"compared": 3}, "rows_replaced": 2, "rows_added": 1,
                              "merged_from": "head", "origin_position": KEY_MERGE_POSITION}  # fmt: skip


def test_source_wins_records_the_target_operations_it_superseded():
    target_ops = [op("insert", "t1", 0, segments_added=["a"]), op("update", "t2", 3, segments_touched=["a"])]
    obj = table("changed_in_both", ops=[op("update", "c1", 0, segments_touched=["a"])], target_operations=target_ops,
                resolution=SOURCE_WINS, source_wins=SourceWins(frozenset({"a"}), (1,), ()))  # fmt: skip
    records = recorded(obj)
    assert [(r.op, r.details) for r in records.operations][-1] == (
        "resolve",
        {"choice": SOURCE_WINS, "superseded": [["t2", 3]]},
    )
    assert [(s["op"], s["commit"]) for s in records.superseded] == [("update", "t2")]
    assert declined(obj) is None


def test_a_taken_version_records_the_operations_it_carries_that_the_merge_does_not_replay():
    obj = table(ops=[op("insert", "c1", 0, segments_added=["s1"])], target_unchanged=True, held=[("c0", 2)])
    assert object_write(obj).how == "rows_taken"
    assert [(r.op, r.details) for r in recorded(obj).operations][-1] == ("resolve", {"held": [["c0", 2]]})
    replayed = table(ops=[op("insert", "c1", 0, segments_added=["s1"])], held=[("c0", 2)])
    assert all(r.op != "resolve" for r in recorded(replayed).operations)  # held is a taken version's only


def test_a_declined_table_records_whose_choice_its_state_is_now():
    kept = table("changed_in_both", ops=[op("insert", "c1", 0)], resolution=TARGET_WINS)
    assert declined(kept).details == {"declined": "target_wins"}
    merged = table("changed_in_both", ops=[op("insert", "c1", 0)], pairs=[Pair(0, 0, "A1", Verdict(OK, "A1", ""))])
    assert declined(merged) is None
    only_target = table("changed_in_target", resolution=TARGET_WINS)
    assert declined(only_target) is None  # the merge writes nothing of it


def test_the_commit_records_each_written_objects_operations_then_each_declined_tables_choice():
    replayed = table("changed_in_both", ops=[op("insert", "c1", 0), op("update", "c1", 1)], pairs=[discard(1)])
    kept = table("changed_in_both", ops=[op("insert", "c2", 0)], resolution=TARGET_WINS)
    objects = [kept, replayed]
    writes = object_writes(objects)
    written, declined_ = commit_records(objects, writes, MERGE)
    assert list(written) == [replayed.object_id]  # nothing is written of a table kept as the target has it
    assert [(r.object_id, r.op) for r in written[replayed.object_id].operations] == [(replayed.object_id, "insert")]
    assert [(r.object_id, r.details) for r in declined_] == [
        (kept.object_id, {"declined": "target_wins"}),
        (replayed.object_id, {"declined": "discarded"}),
    ]
