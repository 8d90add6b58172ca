"""resolutions.source_wins_scope, the pure part of a table's `source_wins`: which files the target takes from the source
and which of its own operations that supersedes. No database, no Spark."""

from merge_app.plan.resolutions import source_wins_scope
from merge_app.plan.rules import Op


def op(kind, *, touched=(), removed=(), added=(), deltas_removed=()):
    details = {"segments_touched": list(touched), "segments_removed": list(removed), "segments_added": list(added)}
    return Op("c", 0, kind, {**details, "deltas_removed": list(deltas_removed)})


def test_the_segments_in_conflict_with_what_each_side_made_of_them():
    src = [op("update", touched=["s0"], removed=["s0"], added=["s0-src"])]
    dest = [
        op("update", touched=["s0"], removed=["s0"], added=["s0-dest"]),
        op("insert", added=["new"]),
        op("delete", touched=["s1"], added=["d1"]),
    ]
    scope = source_wins_scope(src, dest, [(0, 0)])
    assert scope.files == {"s0", "s0-src", "s0-dest"}
    assert (scope.superseded, scope.mixed) == ((0,), ())  # the insert and the delete of s1 stay the target's


def test_a_rewrite_grows_the_scope_to_every_segment_it_read():
    src = [op("update", touched=["s0"], added=["d0", "u0"])]  # merge-on-read: a delete file and the new rows
    dest = [
        op("update", touched=["s0", "s1"], removed=["s0", "s1"], added=["r01"]),  # rewrote s0 and s1 together
        op("delete", touched=["r01"], added=["d-r01"]),  # a later change of what it wrote
        op("delete", touched=["s2"], added=["d2"]),
    ]
    scope = source_wins_scope(src, dest, [(0, 0)])
    assert scope.files == {"s0", "s1", "d0", "u0", "r01", "d-r01"}
    assert scope.superseded == (0, 1)


def test_a_target_compaction_of_its_own_inserts_into_the_conflict_is_mixed():
    src = [op("delete", touched=["s0"], added=["d0"])]
    dest = [
        op("insert", added=["n"]),
        op("update", touched=["s0"], removed=["s0"], added=["s0-dest"]),
        op("compaction", removed=["s0-dest", "n"], added=["c"]),
    ]
    scope = source_wins_scope(src, dest, [(0, 1)])
    assert scope.superseded == (0, 1, 2)
    assert scope.mixed == (0,)


def test_ddl_conflicts_touch_no_files():
    scope = source_wins_scope([Op("c", 0, "alter_partition", {})], [Op("c", 1, "alter_partition", {})], [(0, 0)])
    assert (scope.files, scope.superseded) == (frozenset(), ())
