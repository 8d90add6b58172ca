"""What a revert changes, as the plan decides it (`merge_app.plan.undo`), on plain values: no database, no Spark.
Each table the commit changed rows of gets one undo, by what the commit did to its files; the undo is the operation
a later merge replays it as; a commit that changed a definition is not reverted."""

import uuid

import pytest

from lakeui.errors import ApplicationError
from merge_app.plan.undo import undo_operations

pytestmark = []  # no database

A, B = uuid.uuid4(), uuid.uuid4()


def undo(rows, changes):
    return {object_id: (op.op, op.position, op.details) for object_id, op in undo_operations("c" * 40, rows, changes)}


def test_each_table_gets_one_undo_of_what_the_commit_did_to_its_files():
    rows = [  # the last first, as the commit's operations are read
        (2, A, "update", {"segments_touched": ["s1"], "segments_from": {"s9": "s1"}, "rows_updated": 2}),
        (1, A, "insert", {"rows_inserted": 3}),
        (0, B, "delete", {"segments_touched": ["s4"], "rows_deleted": 1}),
        (3, A, "resolve", {"held": []}),  # what a merge recorded of its choices: not undone
    ]
    changes = {A: {"segments_added": ["s8", "s9"], "deltas_added": ["d1"]}, B: {"deltas_added": ["d2"]}}
    undone = undo(rows, changes)
    kind, position, details = undone[A]
    assert (kind, position) == ("update", 1)  # takes segments out and brings rows back: a rewrite
    assert (details["segments_removed"], details["deltas_removed"], details["segments_added"]) == (
        ["s8", "s9"],
        ["d1"],
        [],
    )
    assert details["segments_touched"] == ["s1"] and details["segments_from"] == {"s9": "s1"}
    assert (details["rows_deleted"], details["rows_inserted"], details["rows_updated"]) == (3, 0, 2)
    assert details["reverts"] == ["c" * 40, 1, "insert"]
    assert undone[B][0] == "update" and undone[B][2]["deltas_removed"] == ["d2"]  # rows deleted by position back


def test_the_undo_is_the_operation_it_does():
    kinds = {
        "insert": ({"segments_added": ["s1"]}, "delete"),  # an append's undo takes its segment out
        "overwrite": ({"segments_added": ["s2"], "segments_removed": ["s1"]}, "update"),
        "compaction": ({"segments_added": ["s2"], "segments_removed": ["s1"]}, "compaction"),
        "delete": ({"segments_added": ["s2"], "segments_removed": ["s1"]}, "update"),  # copy-on-write
    }
    for kind, (files, expected) in kinds.items():
        assert undo([(0, A, kind, {})], {A: files})[A][0] == expected, kind
    assert undo([(0, A, "delete", {})], {A: {"segments_removed": ["s1"]}})[A][0] == "insert"  # puts files back


def test_a_commit_that_changed_a_definition_is_not_reverted():
    with pytest.raises(ApplicationError) as refused:
        undo([(1, A, "insert", {}), (0, A, "alter_table", {})], {})
    assert refused.value.code == "revert_unsupported" and refused.value.details == {"operations": ["alter_table"]}
