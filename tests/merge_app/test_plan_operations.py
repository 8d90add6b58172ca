"""Which operations count as a side's changes since the base, as the plan decides it (`merge_app.plan.operations`),
on plain values: no database, no Spark."""

import uuid
from dataclasses import dataclass, field

from merge_app.plan.lineage import restored_by_target
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


def test_a_pick_of_an_operation_the_base_holds_is_no_change_and_a_taken_version_carries_what_the_base_lacks():
    source = {T: [Op("p1", 0, "insert", {"picked_from": ["o1", 2]}), Op("s1", 0, "delete", {})]}
    target = {K: [Op("p2", 1, "update", {"picked_from": ["o2", 0]})]}
    assert picked_originals([source, target]) == {"o1", "o2"}  # which of them the base holds is the graph's
    assert picked_in_base([source, target], {"o2"}) == {("o2", 0, K)}
    assert not_held(target, picked_in_base([source, target], {"o2"})) == {}
    assert picked_in_base([source, target], set()) == set()
    assert carried({("a", 0, T), ("b", 1, T)}, {("b", 1, T), ("c", 0, T)}) == {("a", 0, T)}


def test_the_targets_last_overwrite_is_the_last_it_applied_not_the_last_listed():
    """A side's operations are listed by the commits that made them (the selector sorts them so); a merge may
    replay an overwrite older than the side's restore after it. The restore's result is then not the target's
    (unkeyed model seed 228: a pick of an insert whose segment `s2` the restore held added nothing, and its row was
    lost, though the older overwrite had replaced the restore's files)."""
    restore = ("r1", 0, T, "overwrite", {"restore": True, "segments_added": ["s2"], "segments_kept": ["s1"]})
    replay = ("m1", 0, T, "overwrite", {"merged_from": "o1", "origin_position": 0, "segments_added": ["s9"]})
    made = {"o1": 1, "r1": 2, "m1": 3}  # the commits' order: main's overwrite o1 before the restore

    def last_restored(rows):
        picked, _, _ = side_changes(rows, since=set(made))
        listed = sorted((op for _, op in picked), key=lambda op: (made[op.commit], op.position))
        assert [op.commit for op in listed] == ["o1", "r1"]
        return restored_by_target(listed)

    assert last_restored([restore, replay]) == set()
    assert last_restored([replay, restore]) == {"s1", "s2"}


@dataclass(frozen=True)
class V:
    """A table's version as the selector reads it (`objects.Version`'s fields the comparison looks at)."""

    name: str = "t"
    parent_id: str = "db"
    state: dict = field(default_factory=lambda: {"columns": ["a"]})
    kind: str = "table"
    dropped: bool = False


def test_a_table_the_target_overwrote_is_compared_with_the_base_only_if_the_source_changed_it():
    """Only a target overwrite can have taken the base's files back; the files of other tables are not read."""
    target = {T: [Op("c1", 0, "overwrite", {})], K: [Op("c2", 0, "insert", {})]}
    assert compared_with_base({T, K}, target, {T, K}) == {T}
    assert compared_with_base({K}, target, {T, K}) == set()


def test_a_table_held_as_at_base_has_the_bases_definition_and_files():
    """Unkeyed model seed 176: the target overwrote the table, then took the base's files back by a merge. A table
    without files on either side compares as held; another definition, other files, a key or a drop do not."""
    ids = [uuid.uuid4() for _ in range(6)]
    same, other_files, renamed, keyed, dropped, empty = ids
    base = {i: V() for i in ids} | {keyed: V(state={"primary_key": ["a"]})}
    target = {i: V() for i in ids} | {renamed: V(name="t2"), keyed: V(state={"primary_key": ["a"]}),
                                      dropped: V(dropped=True)}  # fmt: skip
    files = {
        "base": {i: frozenset({"s1", "d1"}) for i in ids if i != empty},
        "target": {i: frozenset({"s1", "d1"}) for i in ids if i != empty} | {other_files: frozenset({"s1"})},
    }
    assert held_as_at_base(set(ids), {"base": base, "target": target}, files) == {same, empty}


def test_a_table_the_source_holds_otherwise_than_the_base_is_its_change_where_the_target_is_the_base():
    """Unkeyed model seed 306: merging back into a branch whose head is the base, the source's first-parent chain held
    the table as a version the base had declined, with no record since. Other files or another definition count;
    a key (compared by state elsewhere), a drop on either side, or a table one side lacks do not."""
    ids = [uuid.uuid4() for _ in range(7)]
    same, other_files, renamed, keyed, dropped, missing, empty = ids
    base = {i: V() for i in ids if i != missing} | {keyed: V(state={"primary_key": ["a"]})}
    source = {i: V() for i in ids} | {renamed: V(name="t2"), keyed: V(state={"primary_key": ["a"]}),
                                      dropped: V(dropped=True)}  # fmt: skip
    files = {
        "base": {i: frozenset({"s1", "d1"}) for i in ids if i != empty},
        "source": {i: frozenset({"s2"}) for i in (other_files, keyed, dropped, missing)},
    }
    files["source"] |= {i: files["base"][i] for i in (same, renamed)}
    assert held_otherwise(set(ids), {"base": base, "source": source}, files) == {other_files, renamed}


def test_the_merge_takes_the_sources_version_of_a_table_the_target_holds_as_the_base_has_it():
    """By the target's chain (it leads back to the base: a table it touched not) or by state (`held`)."""
    assert target_unchanged(from_base=True, source_changed={T, K}, target_touched={K}, held=set()) == {T}
    assert target_unchanged(from_base=False, source_changed={T, K}, target_touched={K}, held=set()) == set()
    assert target_unchanged(from_base=False, source_changed={T}, target_touched={T, K}, held={T, K}) == {T}
