"""Which operations count as a side's changes since the base, as the plan decides it (`merge_app.plan.operations`),
on plain values: no database, no Spark."""

import uuid

from merge_app.plan.operations import held_by_object, not_held, side_changes
from merge_app.plan.rules import Op

pytestmark = []  # no database

T, K = uuid.uuid4(), uuid.uuid4()


def test_each_operation_counts_once_under_its_origin_and_only_since_the_base():
    rows = [  # commit, position, object, kind, details: the side's first-parent chain in commit order
        ("c1", 0, T, "insert", {"rows_inserted": 1}),
        ("m1", 0, T, "delete", {"merged_from": "old", "origin_position": 3}),  # the base's history: held, no change
        ("m1", 1, T, "update", {"merged_from": "s1", "origin_position": 0, "rows_updated": 2}),  # replayed
        ("m2", 0, T, "update", {"merged_from": "s1", "origin_position": 0}),  # the same origin again: counted once
        ("m2", 1, K, "insert", {"merged_from": "s2", "origin_position": 0}),
        ("m2", 2, K, "resolve", {"superseded": [["s2", 0]], "held": [["x9", 4]]}),
    ]
    picked, touched, held = side_changes(rows, since={"c1", "s1", "s2", "m1", "m2"})
    assert picked == [(T, Op("c1", 0, "insert", {"rows_inserted": 1})), (T, Op("s1", 0, "update", {"rows_updated": 2}))]
    assert touched == {T, K}
    assert held == {("c1", 0, T), ("old", 3, T), ("s1", 0, T), ("s2", 0, K), ("x9", 4, K)}
    assert rows[2][4] == {
        "merged_from": "s1",
        "origin_position": 0,
        "rows_updated": 2,
    }  # the rows read are left as read


def test_what_the_other_side_holds_is_no_change_of_either():
    ops = {T: [Op("c1", 0, "insert", {}), Op("c2", 0, "delete", {})], K: [Op("c3", 0, "insert", {})]}
    assert not_held(ops, {("c1", 0, T), ("c3", 0, K)}) == {T: [Op("c2", 0, "delete", {})]}
    assert held_by_object({("c1", 0, T), ("c2", 1, T), ("c3", 0, K)}, {T}) == {T: frozenset({("c1", 0), ("c2", 1)})}
