"""Merges on histories of many branches (docs/merge-semantics.md#which-changes-a-merge-replays): each side's changes are the commits it reaches and the
other side does not, every original operation once, on real Spark data. Each test checks the rows (as a multiset:
a row held twice shows) on every branch after every merge."""

import importlib

import pytest
from django.apps import apps as django_apps

from catalog_app.models import Operation
from catalog_app.selectors.refs import ref_resolve
from catalog_app.services.refs import branch_create, branch_delete, tag_create
from catalog_app.services.tables import table_update
from lakeui.errors import ConflictError
from merge_app.selectors.diff import merge_diff
from merge_app.selectors.graph import CommitGraph
from merge_app.services.picks import commits_pick
from tests.merge_app.test_merge_model import Scripted
from tests.support.catalogs import head, make_catalog, make_table, on
from tests.support.data import read
from tests.support.merges import change, insert, merge

pytestmark = pytest.mark.django_db(transaction=True)


def rows(*ids, amount=None):
    return [{"id": i, "amount": i * 10 if amount is None else amount, "region": "eu"} for i in ids]


def refresh(catalog, branch, *ids):
    change(catalog, "table_load", {"strategy": "full_refresh", "rows": rows(*ids)}, branch=branch)


def update(catalog, branch, where, amount):
    change(catalog, "table_update", {"set": {"amount": str(amount)}, "where": where}, branch=branch)


def upsert(catalog, branch, *ids, amount):
    params = {"strategy": "upsert", "key_columns": ["id"], "rows": rows(*ids, amount=amount)}
    change(catalog, "table_load", params, branch=branch)


def table(spark, catalog, ref):
    """The rows at a ref as a sorted list of (id, amount): a doubled row shows twice."""
    return sorted((r["id"], r["amount"]) for r in read(spark, catalog, ref).collect())


def expect(*ids, **amounts):
    """Rows with the default amount (id * 10), but for `amounts` given as `_<id>=amount`."""
    changed = {int(name[1:]): amount for name, amount in amounts.items()}
    return sorted((i, changed.get(i, i * 10)) for i in ids)


def start(*, primary_key=None, branches=("dev",)):
    """main: a table with rows 1-4; `branches` made from it."""
    catalog = make_catalog()
    make_table(catalog, **({"primary_key": primary_key} if primary_key else {}))
    insert(catalog, rows(1, 2, 3, 4))
    for name in branches:
        branch_create(catalog=catalog, name=name, source="main")
    return catalog


def hotfix_pattern(catalog, later_on_hotfix, later_on_dev):
    """The hotfix's full refresh reaches main and, with a later commit, dev; main then appends."""
    refresh(catalog, "hotfix", 10, 11, 12)
    merge(catalog, source="hotfix", target="main")
    later_on_hotfix()
    merge(catalog, source="hotfix", target="dev")
    insert(catalog, rows(5), branch="main")
    later_on_dev()


def test_a_hotfix_merged_into_two_branches_whose_histories_meet_again(spark):
    """Merging dev into main must not replay the hotfix's full refresh a second time (it deleted main's rows)."""
    catalog = start(branches=("dev", "hotfix"))
    hotfix_pattern(
        catalog, lambda: insert(catalog, rows(13), branch="hotfix"), lambda: insert(catalog, rows(14), branch="dev")
    )
    assert table(spark, catalog, "main") == expect(5, 10, 11, 12)
    merge(catalog, source="dev", target="main")
    assert table(spark, catalog, "main") == expect(5, 10, 11, 12, 13, 14)
    assert table(spark, catalog, "dev") == expect(10, 11, 12, 13, 14)


def test_a_hotfix_merged_into_two_branches_with_a_primary_key(spark):
    """The key merge kept neither the hotfix's later update nor dev's own."""
    catalog = start(primary_key=["id"], branches=("dev", "hotfix"))
    hotfix_pattern(
        catalog, lambda: update(catalog, "hotfix", "id = 12", -12), lambda: update(catalog, "dev", "id = 11", -11)
    )
    assert table(spark, catalog, "dev") == expect(10, 11, 12, _11=-11, _12=-12)
    merge(catalog, source="dev", target="main")
    assert table(spark, catalog, "main") == expect(5, 10, 11, 12, _11=-11, _12=-12)
    assert table(spark, catalog, "dev") == expect(10, 11, 12, _11=-11, _12=-12)


def test_the_changes_of_a_side_are_the_commits_it_reaches_and_the_other_does_not(spark):
    catalog = start(branches=("dev", "hotfix"))
    refresh(catalog, "hotfix", 10)
    merge(catalog, source="hotfix", target="main")
    insert(catalog, rows(11), branch="hotfix")
    merge(catalog, source="hotfix", target="dev")
    insert(catalog, rows(5), branch="main")
    diff = merge_diff(catalog=catalog, source="dev", target="main")
    [obj] = diff.objects
    assert [op.op for op in obj.source_operations] == ["insert"]  # hotfix's later insert, not its full refresh
    assert [op.op for op in obj.target_operations] == ["insert"]
    hotfix_insert = ref_resolve(catalog=catalog, ref="hotfix").commit.id
    assert obj.source_operations[0].commit == hotfix_insert  # named by the commit that made it, not the merge's
    assert diff.base.id == ref_resolve(catalog=catalog, ref="hotfix").commit.parent_id


def test_feature_to_dev_to_main_with_every_branch_moving(spark):
    """A primary key: the table's rows are compared by key, so dev's update merges beside main's inserts (a
    table without one refuses a source update against target inserts, docs/merge-semantics.md#tables-without-a-primary-key)."""
    catalog = start(primary_key=["id"], branches=("dev",))
    branch_create(catalog=catalog, name="feature", source="dev")
    insert(catalog, rows(20), branch="feature")
    insert(catalog, rows(30), branch="dev")
    insert(catalog, rows(5), branch="main")
    merge(catalog, source="feature", target="dev")
    assert table(spark, catalog, "dev") == expect(1, 2, 3, 4, 20, 30)
    insert(catalog, rows(21), branch="feature")
    update(catalog, "dev", "id = 30", -30)
    insert(catalog, rows(6), branch="main")
    merge(catalog, source="dev", target="main")
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, 5, 6, 20, 30, _30=-30)
    merge(catalog, source="feature", target="dev")
    assert table(spark, catalog, "dev") == expect(1, 2, 3, 4, 20, 21, 30, _30=-30)
    merge(catalog, source="dev", target="main")
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, 5, 6, 20, 21, 30, _30=-30)
    merge(catalog, source="feature", target="main")  # everything of feature's is on main already
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, 5, 6, 20, 21, 30, _30=-30)


@pytest.mark.parametrize("primary_key", [None, ["id"]], ids=["no_key", "primary_key"])
def test_repeated_merges_in_both_directions(spark, primary_key):
    catalog = start(primary_key=primary_key)
    for round_ in range(3):
        new_on_main, new_on_dev = 100 + round_, 200 + round_
        insert(catalog, rows(new_on_main), branch="main")
        insert(catalog, rows(new_on_dev), branch="dev")
        update(catalog, "dev", f"id = {1 + round_}", -(1 + round_))
        merge(catalog, source="main", target="dev")
        merge(catalog, source="dev", target="main")
        expected = expect(
            1, 2, 3, 4, *range(100, 101 + round_), *range(200, 201 + round_),
            **{f"_{i}": -i for i in range(1, 2 + round_)},
        )  # fmt: skip
        assert table(spark, catalog, "main") == expected
        assert table(spark, catalog, "dev") == expected
    assert merge(catalog, source="dev", target="main").status == "up_to_date"


def test_a_full_refresh_merged_back_and_forth_replaces_only_once(spark):
    """dev's full refresh reaches main; dev merges main back (taking main's later rows); main appends more; the
    next merge of dev into main carries no overwrite."""
    catalog = start()
    refresh(catalog, "dev", 10, 11)
    merge(catalog, source="dev", target="main")
    insert(catalog, rows(5), branch="main")
    merge(catalog, source="main", target="dev")
    assert table(spark, catalog, "dev") == expect(5, 10, 11)
    insert(catalog, rows(6), branch="main")
    insert(catalog, rows(12), branch="dev")
    merge(catalog, source="dev", target="main")
    assert table(spark, catalog, "main") == expect(5, 6, 10, 11, 12)


def test_a_discard_stays_part_of_its_side(spark):
    """A4 on dev (main's full refresh discards dev's update of an old row) is dev's state: merging dev into
    another branch later does not re-apply the discarded update."""
    catalog = start(branches=("dev", "other"))
    refresh(catalog, "main", 1, 2, 3, 4)
    update(catalog, "other", "id = 2", -2)
    merge(catalog, source="other", target="main")  # A4: the update of an older row is discarded
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4)
    merge(catalog, source="main", target="dev")
    assert table(spark, catalog, "dev") == expect(1, 2, 3, 4)
    insert(catalog, rows(7), branch="other")
    merge(catalog, source="other", target="dev")
    assert table(spark, catalog, "dev") == expect(1, 2, 3, 4, 7)


def test_target_wins_stays_part_of_its_side(spark):
    catalog = start(branches=("dev", "other"))
    update(catalog, "other", "id = 1", -1)
    update(catalog, "main", "id = 1", -100)
    merge(catalog, source="other", target="main", resolution={"default": "target_wins"})
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, _1=-100)
    update(catalog, "other", "id = 4", -4)
    merge(catalog, source="main", target="dev")
    merge(catalog, source="other", target="dev", resolution={"default": "target_wins"})
    assert table(spark, catalog, "dev") == expect(1, 2, 3, 4, _1=-100)


@pytest.mark.parametrize("primary_key", [None, ["id"]])
def test_criss_cross_histories_merge_from_a_virtual_base_named_in_the_audit_log(spark, primary_key):
    catalog = start(primary_key=primary_key)
    insert(catalog, rows(5), branch="main")
    insert(catalog, rows(6), branch="dev")
    main_before, dev_before = head(catalog, "main"), head(catalog, "dev")
    tag_create(catalog=catalog, name="main-then", ref="main")
    merge(catalog, source="dev", target="main")
    merge(catalog, source="main-then", target="dev")  # each side merged the other's then-head
    insert(catalog, rows(7), branch="dev")
    update(catalog, "main", "id = 1", -1)
    result = merge(catalog, source="dev", target="main")
    assert result.status == "merged"
    assert set(result.report["bases"]) == {main_before, dev_before} and result.report["virtual_base"]
    assert result.base not in (main_before, dev_before)  # the bases merged into one commit no branch points to
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, 5, 6, 7, _1=-1)
    assert merge(catalog, source="main", target="dev").status == "merged"
    assert table(spark, catalog, "dev") == table(spark, catalog, "main")


def bases_in_conflict():
    """A criss-cross history whose two merge bases conflict on key 1 (main set it to -1, dev to -2, and each kept
    its own when the other's head was merged in)."""
    catalog = start(primary_key=["id"])
    upsert(catalog, "main", 1, amount=-1)
    upsert(catalog, "dev", 1, amount=-2)
    tag_create(catalog=catalog, name="main-then", ref="main")
    merge(catalog, source="dev", target="main", resolution={"default": "target_wins"})
    merge(catalog, source="main-then", target="dev", resolution={"default": "target_wins"})
    return catalog


def test_a_key_the_bases_conflict_on_is_a_conflict_of_the_merge_settled_like_any_other(spark):
    catalog = bases_in_conflict()
    upsert(catalog, "main", 2, amount=-20)
    before = head(catalog, "main"), head(catalog, "dev")
    with pytest.raises(ConflictError) as refused:
        merge(catalog, source="dev", target="main")
    assert refused.value.code == "merge_conflict"
    assert (head(catalog, "main"), head(catalog, "dev")) == before
    [table_diff] = [obj for obj in merge_diff(catalog=catalog, source="dev", target="main").objects if obj.keys]
    assert [c["key"] for c in table_diff.keys["listed"]] == [{"id": 1}]  # key 1 only: each side's row of it
    result = merge(catalog, source="dev", target="main", resolution={"default": "source_wins"})
    assert result.status == "merged" and len(result.report["bases"]) == 2
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, _1=-2, _2=-20)
    assert merge(catalog, source="main", target="dev").status == "merged"
    assert table(spark, catalog, "dev") == table(spark, catalog, "main")


def test_a_key_the_bases_conflict_on_merges_once_both_sides_hold_one_row_of_it(spark):
    catalog = bases_in_conflict()
    upsert(catalog, "main", 1, amount=-3)
    upsert(catalog, "dev", 1, 5, amount=-3)
    result = merge(catalog, source="dev", target="main")
    assert result.status == "merged"
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, 5, _1=-3, _5=-3)


def test_merges_from_a_tag_and_a_commit_id(spark):
    catalog = start()
    insert(catalog, rows(5), branch="dev")
    tag_create(catalog=catalog, name="v1", ref="dev")
    first = head(catalog, "dev")
    insert(catalog, rows(6), branch="dev")
    merge(catalog, source="v1", target="main")
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, 5)
    insert(catalog, rows(7), branch="main")
    merge(catalog, source=head(catalog, "dev"), target="main")
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, 5, 6, 7)
    assert merge(catalog, source=first, target="main").status == "up_to_date"


def test_a_branch_deleted_after_merging(spark):
    catalog = start(branches=("dev", "feature"))
    refresh(catalog, "feature", 8, 9)
    merge(catalog, source="feature", target="main")
    merge(catalog, source="feature", target="dev")
    branch_delete(catalog=catalog, name="feature")
    insert(catalog, rows(5), branch="main")
    insert(catalog, rows(6), branch="dev")
    merge(catalog, source="dev", target="main")
    assert table(spark, catalog, "main") == expect(5, 6, 8, 9)


def test_the_walk_reads_the_commits_since_the_fork_not_the_history(spark):
    catalog = start()
    for i in range(30):
        insert(catalog, rows(100 + i), branch="main")
    branch_create(catalog=catalog, name="late", source="main")
    insert(catalog, rows(5), branch="late")
    insert(catalog, rows(6), branch="main")
    graph = CommitGraph(catalog.id)
    sides = graph.sides(head(catalog, "late"), head(catalog, "main"))
    assert len(sides.source) == len(sides.target) == 1
    assert graph.walked == 4  # the two heads, their base and the base's parent (reached stale: the walk ends)
    assert graph.queries <= 4  # each of the two lines read once


def compact(catalog, branch):
    change(catalog, "table_compact", {}, branch=branch)


def test_table_source_wins_takes_the_sources_rows_in_conflict_and_keeps_the_targets_other_changes(spark):
    """Both sides update rows of the one segment (A3): `source_wins` on the table takes the source's version of that
    segment (the target's update of it is superseded, and logged so) and keeps the target's own inserts. Merging
    back brings the target's inserts only: the superseded update is no change of the target's any more."""
    catalog = start(branches=("dev", "other"))
    update(catalog, "dev", "id = 1", -1)
    update(catalog, "main", "id = 2", -2)
    insert(catalog, rows(5, 6), branch="main")
    with pytest.raises(ConflictError):
        merge(catalog)
    merged = merge(catalog, resolution={"tables": {"sales.orders": "source_wins"}})
    assert merged.status == "merged"
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, 5, 6, _1=-1)
    assert [(op["op"], op["object"]) for op in merged.log["superseded_operations"]] == [("update", "sales.orders")]
    merge(catalog, source="main", target="dev")
    assert table(spark, catalog, "dev") == expect(1, 2, 3, 4, 5, 6, _1=-1)
    merge(catalog, source="main", target="other")  # forked before all of it: gets main's rows exactly
    assert table(spark, catalog, "other") == expect(1, 2, 3, 4, 5, 6, _1=-1)


def test_table_source_wins_is_refused_where_the_target_compacted_its_own_rows_into_the_conflict(spark):
    catalog = start()
    update(catalog, "dev", "id = 1", -1)
    insert(catalog, rows(5), branch="main")
    update(catalog, "main", "id = 2", -2)
    compact(catalog, "main")  # rows 5 and the updated segment in one file
    before = head(catalog, "main")
    with pytest.raises(ConflictError) as refused:
        merge(catalog, resolution={"tables": {"sales.orders": "source_wins"}})
    assert "source_wins cannot settle this table" in str(refused.value.details)
    assert head(catalog, "main") == before
    assert merge(catalog, resolution={"tables": {"sales.orders": "target_wins"}}).status == "merged"
    assert table(spark, catalog, "main") == expect(1, 2, 3, 4, 5, _2=-2)


def overwritten_then_synced(*, mode):
    """`src` fully refreshes the table, then takes `dst`'s insert of rows 5-7 by a merge: the base of the two is
    `dst`'s head, and `src`'s overwrite is its own change since it, older than the rows it took."""
    catalog = make_catalog()
    make_table(catalog, properties={"write.mode": mode})
    for name in ("src", "dst"):
        branch_create(catalog=catalog, name=name, source="main")
    insert(catalog, rows(5, 6, 7), branch="dst")
    refresh(catalog, "src", 9)
    merge(catalog, source="dst", target="src")
    return catalog


def test_a_source_overwrite_keeps_the_rows_the_source_still_has_that_the_target_rewrote_to_delete_one(spark):
    """Found by the model (seed 52): the target deleted row 5 by copy-on-write since the base (a new segment with 6
    and 7); the source's older overwrite replaces the target's rows, but not rows 6 and 7, which the source still
    has. They were lost."""
    catalog = overwritten_then_synced(mode="copy-on-write")
    change(catalog, "table_delete", {"where": "id = 5"}, branch="dst")
    merge(catalog, source="src", target="dst")
    assert table(spark, catalog, "dst") == expect(6, 7, 9)
    assert table(spark, catalog, "src") == expect(5, 6, 7, 9)


def test_a_source_overwrite_against_a_target_rewrite_update_of_rows_it_still_has_is_a_conflict(spark):
    """Which rows of the target's copy-on-write update the source still has cannot be told by file: R*."""
    catalog = overwritten_then_synced(mode="copy-on-write")
    update(catalog, "dst", "id = 5", -5)
    before = head(catalog, "dst")
    with pytest.raises(ConflictError) as refused:
        merge(catalog, source="src", target="dst")
    assert "R*" in str(refused.value.details)
    assert head(catalog, "dst") == before
    assert table(spark, catalog, "dst") == expect(5, 6, 7, _5=-5)


def test_a_source_rewrite_of_a_segment_the_target_deleted_rows_of_unseen_is_a_conflict(spark):
    """Found by the model (seed 51): `a` kept its own table (target_wins) when it took `b`'s delete of row 1, then
    compacted; the compaction rewrote the segment without `b`'s delete, and merging `a` into `b` (which changed
    the table again since) brought row 1 back. It is now refused (R*): the source's rewrite would undo deletes it
    never had. (Had `b` changed nothing since, it would hold the table as the merge base has it and take `a`'s
    version, row 1 included: `a`'s merge declined the delete, and merges converge: docs/merge-semantics.md#merges-converge.)"""
    catalog = start(branches=("a", "b"))
    change(catalog, "table_delete", {"where": "id = 1"}, branch="b")
    insert(catalog, rows(8), branch="a")
    merge(catalog, source="b", target="a", resolution={"default": "target_wins"})  # delete x insert: a conflict
    assert table(spark, catalog, "a") == expect(1, 2, 3, 4, 8)
    change(catalog, "table_compact", {}, branch="a")
    insert(catalog, rows(9), branch="b")
    before = head(catalog, "b")
    with pytest.raises(ConflictError) as refused:
        merge(catalog, source="a", target="b")
    assert "R*" in str(refused.value.details)
    assert head(catalog, "b") == before
    assert table(spark, catalog, "b") == expect(2, 3, 4, 9)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_pick_of_a_compaction_the_targets_overwrite_discards_changes_no_row(spark, mode):
    """Found by the model (seed 94): `dev` compacted main's segment with one of its own; `main` then overwrote the
    table. A pick of the compaction onto `main` meets the overwrite, which replaced a segment it compacted: C* drops
    it, and nothing of it is replayed. It was refused all the same (R*, "the target does not have them": `dev`'s own
    segment), as the check for segments the target lacks looked at operations the rules had discarded."""
    catalog = make_catalog()
    make_table(catalog, properties={"write.mode": mode})
    insert(catalog, rows(1, 2))
    branch_create(catalog=catalog, name="dev", source="main")
    insert(catalog, rows(3), branch="dev")
    compact(catalog, "dev")
    compaction = head(catalog, "dev")
    refresh(catalog, "main", 9)
    (picked,) = commits_pick(catalog=catalog, kind="cherry_pick", branch="main", commits=[compaction])
    assert [(op["op"], op["note"]) for op in picked.log["discarded_operations"]] == [("compaction", "C*")]
    assert table(spark, catalog, "main") == expect(9)
    assert table(spark, catalog, "dev") == expect(1, 2, 3)
    merge(catalog, source="main", target="dev")  # the overwrite replaces dev's rows too
    assert table(spark, catalog, "dev") == expect(9)


def test_updates_of_a_row_an_overwrite_in_the_base_replaced_on_both_sides_merge_by_segment(spark):
    """Found by the model (seed 84, copy-on-write), run beside it: `b1` and `b2` each updated row 1 since their merge
    base, `b1` in the segment the load wrote, `b2` in the one its delete of row 2 rewrote; the base holds `main`'s
    overwrite, which replaced row 1 on both lines after the updates. A3 merges the two (different segments) and no
    version of row 1 is left to lose, double or bring back; the model refused the merge as A3 on a common row. `b2`
    holds the table as the base has it, but did not overwrite it itself: its updates replay (the seed-176 rule asks
    only a target that overwrote the table)."""
    run = Scripted(spark, mode="copy-on-write")  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2)
    run.branch("b1", "main")
    run.branch("b2", "main")
    run.delete("b2", 2)  # row 1 now lives in a segment of b2's own
    run.load("main", "full_refresh", 10)
    assert run.merge("b2", "main")  # A5: the delete of an older row is discarded
    run.update("b1", 1)
    run.update("b2", 1)
    assert run.merge("main", "b1")
    assert run.merge("main", "b2")
    (diff,) = merge_diff(catalog=run.catalog, source="b1", target="b2").objects
    assert [(pair.cell, pair.decided.verdict) for pair in diff.pairs] == [("A3", "ok")]
    assert run.merge("b1", "b2")
    assert run.rows_of("b2") == [(10, 10, 100)]
    assert run.merge("b2", "b1")
    assert run.rows_of("b1") == [(10, 10, 100)]


def test_updates_of_a_row_a_later_source_overwrite_replaced_merge_by_segment(spark):
    """Found by the model (seed 103, copy-on-write), run beside it: `b1` kept its own table when it merged `b2`, which
    had deleted row 2 (row 1 moved to a segment of `b2`'s own); the merge base of the two is `b2`'s delete. Both then
    updated row 1, each in its own segment, and `b1` overwrote the table. A3 merges the two updates (different
    segments), and the overwrite replaces `b2`'s version of the row: nothing of it is lost or doubled. The model
    refused the merge as A3 on a common row, which the base and `b2` still held."""
    run = Scripted(spark, mode="copy-on-write")
    run.load("main", "append_only", 1, 2)
    run.branch("b1", "main")
    run.branch("b2", "main")
    run.delete("b2", 2)  # row 1 now lives in a segment of b2's own
    run.load("b1", "append_only", 3)
    assert not run.merge("b2", "b1")  # delete x insert
    assert run.merge("b2", "b1", target_wins=True)
    run.update("b1", 1)
    run.load("b1", "full_refresh", 5)
    run.update("b2", 1)
    (diff,) = merge_diff(catalog=run.catalog, source="b1", target="b2").objects
    assert [(pair.cell, pair.decided.verdict) for pair in diff.pairs] == [("ok", "ok"), ("A3", "ok"), ("ok", "ok")], (
        diff.pairs
    )
    assert run.merge("b1", "b2")
    assert run.rows_of("b2") == [(5, 5, 50)]
    assert run.merge("b2", "b1")
    assert run.rows_of("b1") == [(5, 5, 50)]


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_revert_of_an_insert_against_a_target_that_compacted_its_segment_is_a_conflict(spark, mode):
    """Found by the model (seed 102): `dev` reverted main's insert of row 3 (the undo takes its segment out); `main`
    compacted that segment with the other since. F* let the undo through (it names no segment as touched: only
    those whose rows an undo brings back), and the replay took out a segment `main` no longer had: row 3 stayed on
    `main` after the merge."""
    catalog = make_catalog()
    make_table(catalog, properties={"write.mode": mode})
    insert(catalog, rows(1, 2))
    insert(catalog, rows(3))
    added = head(catalog, "main")
    branch_create(catalog=catalog, name="dev", source="main")
    commits_pick(catalog=catalog, kind="revert", branch="dev", commits=[added])
    compact(catalog, "main")
    before = head(catalog, "main")
    with pytest.raises(ConflictError) as refused:
        merge(catalog, source="dev", target="main")
    assert "F*" in str(refused.value.details)
    assert head(catalog, "main") == before
    assert table(spark, catalog, "main") == expect(1, 2, 3)
    merge(catalog, source="main", target="dev")  # the other way, C* drops main's compaction: dev keeps its revert
    assert table(spark, catalog, "dev") == expect(1, 2)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_reverted_compaction_does_not_bring_a_change_the_target_declined(spark, mode):
    """Found by the model (seed 121): `main` updated row 1, which `dev` had deleted; `dev` merged `main` with
    `target_wins` and kept its table, without the update. `main` compacted and reverted the compaction, appended row
    3 and merged `dev` with `target_wins` in turn (keeping its table; before row 3, `main` held the table as the base
    has it, files and all, and would take `dev`'s, since seed 176). The revert's undo brings back the segments the
    compaction took out, among them the one the update wrote, which `dev` never had. The check for segments the target
    lacks counted them as `main`'s own, as a source operation wrote them (after the compaction had addressed them),
    and the merge into `dev` brought the update with it: row 1 was back on `dev`. Now the compaction addresses
    segments `dev` does not have: R*, and `dev` is unchanged."""
    catalog = make_catalog()
    make_table(catalog, properties={"write.mode": mode})
    insert(catalog, rows(1))
    insert(catalog, rows(2))
    branch_create(catalog=catalog, name="dev", source="main")
    update(catalog, "main", "id = 1", 11)
    change(catalog, "table_delete", {"where": "id = 1"}, branch="dev")

    def keeps_its_table(target, source):
        with pytest.raises(ConflictError):
            merge(catalog, source=source, target=target)
        merge(catalog, source=source, target=target, resolution={"default": "target_wins"})

    keeps_its_table("dev", "main")
    compact(catalog, "main")
    commits_pick(catalog=catalog, kind="revert", branch="main", commits=[head(catalog, "main")])
    insert(catalog, rows(3), branch="main")
    keeps_its_table("main", "dev")
    insert(catalog, rows(4), branch="dev")
    assert table(spark, catalog, "main") == expect(1, 2, 3, _1=11)
    before = head(catalog, "dev")
    with pytest.raises(ConflictError) as refused:
        merge(catalog, source="main", target="dev")
    assert "R*" in str(refused.value.details)
    assert head(catalog, "dev") == before
    assert table(spark, catalog, "dev") == expect(2, 4)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_restore_against_a_target_that_compacted_the_rows_it_restored_merges_as_an_overwrite(spark, mode):
    """Found by a randomized history: `b1` took main's append of row 3 (by way of `b4`) and restored the table to its
    commit before that; `b2` holds main's append too, compacted with the other rows by `b4`. The restore is recorded
    as an overwrite whose result is the table at its point, segments as old as the base among them: they are the
    restore's own result, not rows the source kept from before an older overwrite, so merging `b1` into `b2` is
    clean and `b2` gets the restored rows. It was refused (R*: the target rewrote rows the source "still has")."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2)
    run.branch("b1", "main")
    run.branch("b2", "main")
    run.load("main", "append_only", 3)
    assert run.merge("main", "b2")
    run.branch("b4", "b2")
    run.branch("before_b4", "b1")  # the point b1 restores to
    assert run.merge("b4", "b1")
    run.compact("b4")
    assert run.merge("b4", "main")
    assert run.merge("main", "b2")
    run.restore("b1", "before_b4")
    assert table(spark, run.catalog, "b1") == expect(1, 2)
    assert run.merge("b1", "b2")  # checked against the model: b2's rows are b1's restored rows
    assert table(spark, run.catalog, "b2") == expect(1, 2)
    assert run.merge("b2", "b1")
    assert table(spark, run.catalog, "b1") == expect(1, 2)


def test_a_restore_replaces_the_deletes_the_target_put_on_the_segments_it_kept(spark):
    """Found by the model (seed 46, merge-on-read): `main` restored the table to a point whose segment of rows 1 and
    2 it still had (the restore keeps it by reference), and `b1` updated row 1 since the base, which put a delete
    file on that segment and wrote the new version elsewhere. Merging `main` into `b1` replays the restore as an
    overwrite: the new version went with the rest of `b1`'s rows, but `b1`'s delete file stayed on the restored
    segment and row 1 was lost. The restore's result is its own, delete files included."""
    run = Scripted(spark, mode="merge-on-read")  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2)
    run.branch("point", "main")
    run.branch("b1", "main")
    run.load("main", "append_only", 3)
    run.restore("main", "point")  # keeps the segment of rows 1 and 2, takes out row 3's
    run.update("b1", 1)
    assert run.merge("main", "b1")  # checked against the model: b1's rows are main's restored rows
    assert table(spark, run.catalog, "b1") == expect(1, 2)
    assert run.merge("b1", "main")
    assert table(spark, run.catalog, "main") == expect(1, 2)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_target_restore_keeps_the_rows_of_the_segments_it_kept_against_a_source_delete(spark, mode):
    """Found by the model (keyless seed 1): `b2` restored the table to a point whose segments it still had (the
    restore keeps them by reference; not the base, which holds row 4 too: a table restored to the base's files takes
    the source's version, since seed 176) and `b1` deleted row 3 since the base. A restore's result is its own, as any
    overwrite's: the source's deletes of its rows are discarded (A5, docs/merge-semantics.md#restore). The delete was
    replayed, as against rows the restore had not replaced, and row 3 was lost: merge-on-read by its delete file on
    the kept segment, copy-on-write (and a revert's undo of an insert) by taking the kept segment out."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2)
    run.load("main", "append_only", 3)
    run.branch("point", "main")
    run.load("main", "append_only", 4)
    for name in ("b1", "b2"):
        run.branch(name, "main")
    run.delete("b1", 3)
    run.update("b2", 1)
    run.restore("b2", "point")  # keeps the segments of rows 1 and 2 and of row 3, takes out row 4's and the update's
    assert run.merge("b1", "b2")  # checked against the model
    assert table(spark, run.catalog, "b2") == expect(1, 2, 3)


def test_a_source_restore_then_an_update_of_its_rows_merges_against_a_target_overwrite(spark):
    """Found by the model (keyless seed 3): `main` deleted rows 1 and 2 before `b1` branched, restored the table to
    a point that held them (their segment kept by reference, its delete file taken away), then updated row 2; `b1`
    overwrote the table. The source's restore replaces the target's rows, and the rows of its result are its own, not
    older rows the target's overwrite replaced: the update merges (A4 discards updates of older rows only). It was
    discarded, and `b1` got row 2 as it was before the update."""
    run = Scripted(spark, mode="merge-on-read")  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2)
    run.branch("point", "main")
    run.delete("main", 1, 2)
    run.branch("b1", "main")  # the merge base holds neither row
    run.restore("main", "point")  # keeps the segment of rows 1 and 2, takes its delete file away
    run.update("main", 2)
    run.load("b1", "full_refresh", 13, 14)
    assert run.merge("main", "b1")  # checked against the model
    assert table(spark, run.catalog, "b1") == table(spark, run.catalog, "main")


def test_a_restore_to_before_a_merged_compaction_merges_as_an_overwrite(spark):
    """Issue 53's history (a randomized one, cut down): `b2` took main's append; `b4`, branched from `b2`, was merged
    into `b1`, compacted the table and was merged into main, and main into `b2`; `b1` then restored the table to its
    commit before the merge of `b4`. Merging `b1` into `b2` was refused as R* (the source's overwrite "still has the
    rows of segment(s)" of an older overwrite): a restore's segments are its own result, so the merge replays it as
    an overwrite (docs/merge-semantics.md#restore) and `b2` gets `b1`'s restored rows. `b1` changed the table first,
    so the merge of `b4` into it is a merge, not a fast-forward. (Cut down this far, it merged on older code too: the
    refused history also changed a keyed table, which this harness does not draw.)"""
    run = Scripted(spark, mode="merge-on-read")  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2)
    run.branch("b1", "main")
    run.branch("b2", "main")
    run.load("main", "append_only", 3)
    assert run.merge("main", "b2")
    run.load("b1", "append_only", 4)
    run.branch("point", "b1")  # b1's commit before the merge of b4
    run.branch("b4", "b2")
    assert run.merge("b4", "b1")
    run.compact("b4")
    assert run.merge("b4", "main")
    assert run.merge("main", "b2")
    run.restore("b1", "point")
    assert run.merge("b1", "b2")  # checked against the model
    assert table(spark, run.catalog, "b2") == table(spark, run.catalog, "b1")


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_revert_of_a_change_of_a_source_restores_rows_merges_by_file(spark, mode):
    """Found by the model (unkeyed seed 63 with restores weighted 8, copy-on-write): `main` restored the table to a
    point whose segment of rows 1-3 it held, deleted row 3 and reverted the delete; `b1` had overwritten the table.
    Merging `main` into `b1` replays the restore, so `b1` holds the segment by that restore; the revert's undo put it
    back as on a target that holds it in no version, with a delete file that left live only the rows the delete
    removed, reckoned against the merge base (none): every row of the segment was lost."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2, 3)
    run.branch("point", "main")
    run.branch("b1", "main")
    run.load("b1", "full_refresh", 9)
    run.load("main", "append_only", 4)
    run.restore("main", "point")  # keeps the segment of rows 1-3, takes out row 4's
    run.delete("main", 3)
    run.revert("main")
    assert table(spark, run.catalog, "main") == expect(1, 2, 3)
    assert run.merge("main", "b1")  # checked against the model
    assert table(spark, run.catalog, "b1") == expect(1, 2, 3)
    assert run.merge("b1", "main")
    assert table(spark, run.catalog, "main") == expect(1, 2, 3)


def test_a_restore_to_after_an_update_the_merge_discards_keeps_the_updates_files(spark):
    """`main` updated row 1 (copy-on-write: a segment with row 2 and one with the new row 1) and restored the table
    to that point after an append; `b1` had overwritten the table. A4 discards the update against `b1`'s overwrite
    (row 1 is older), but its files are also the restore's result, the restore's own: they were not taken over, and
    `b1` was left with no row."""
    run = Scripted(spark, mode="copy-on-write")  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2)
    run.branch("b1", "main")
    run.load("b1", "full_refresh", 9)
    run.update("main", 1)
    run.branch("point", "main")
    run.load("main", "append_only", 3)
    run.restore("main", "point")
    assert run.merge("main", "b1")  # checked against the model
    assert table(spark, run.catalog, "b1") == table(spark, run.catalog, "main") == expect(1, 2, _1=11)


def test_an_update_of_a_base_row_of_a_source_restore_merges_against_a_target_restore(spark):
    """Found by the model (unkeyed seed 52 with restores weighted 8, copy-on-write), the model's error: `main`
    overwrote the table and restored it to a point that holds base row 1, then updated row 1; `b1` overwrote and
    restored the table to a point without it. The source's restore replaces the target's rows and its result is its
    own, rows the base holds among them (docs/merge-semantics.md#restore): the update merges, as in seed 3. The model
    counted row 1 as an older row (the base holds it), discarded the update (A4) and lost row 1."""
    run = Scripted(spark, mode="copy-on-write")  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2)
    run.branch("point", "main")
    run.branch("b1", "main")
    run.load("main", "full_refresh", 5)
    run.restore("main", "point")
    run.update("main", 1)
    run.load("b1", "full_refresh", 8)
    run.branch("p8", "b1")
    run.load("b1", "full_refresh", 7)
    run.restore("b1", "p8")
    assert run.merge("main", "b1")  # checked against the model
    assert table(spark, run.catalog, "b1") == table(spark, run.catalog, "main") == expect(1, 2, _1=11)


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_a_source_overwrite_keeps_the_target_restores_rows_whose_source_delete_is_discarded(spark, mode):
    """Found by the model (unkeyed seed 83 with restores weighted 8, copy-on-write): `b2` overwrote the table, then
    took rows 1-4 back by merging `b1`'s restore, and deleted row 2; `b1` restored the table to a point that kept the
    segment of rows 1 and 2. Merging `b2` into `b1`, A5 discards the delete against the restore (its rows are its
    own, docs/merge-semantics.md#restore), and `b2`'s overwrite, older than those rows, replaces the target's rows
    but those the source still has; a discarded delete is as if not made, so rows 1 and 2 stay as `b1` has them.
    Copy-on-write, the delete had rewritten the segment, so the overwrite took it out (the source "lacked" it) and
    row 1 was lost; the model dropped row 2 (merge-on-read kept it)."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2)
    run.branch("point", "main")
    run.load("main", "append_only", 3, 4)
    run.branch("b1", "main")
    run.branch("b2", "main")
    run.load("b2", "full_refresh", 9)
    run.load("b1", "append_only", 5)
    run.restore("b1", "main")
    assert run.merge("b1", "b2")  # b1's restore replaces b2's rows: b2 holds rows 1-4 again
    run.delete("b2", 2)
    run.restore("b1", "point")  # keeps the segment of rows 1 and 2, takes out that of rows 3 and 4
    assert run.merge("b2", "b1")  # checked against the model
    assert table(spark, run.catalog, "b1") == expect(1, 2)


def refusal(run: Scripted, source: str, target: str) -> str:
    """Merging `source` into `target` is refused, as the model allows, and leaves the target as it was: the
    refusal's details (its conflicts with their rules and reasons), as text."""
    before = head(run.catalog, target)
    assert not run.merge(source, target)  # checked against the model: a refusal it allows
    with pytest.raises(ConflictError) as refused:
        merge(run.catalog, source=source, target=target)
    assert head(run.catalog, target) == before
    return str(refused.value.details)


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_a_pick_of_an_insert_whose_rows_the_target_restored_and_changed_adds_none_again(spark, mode):
    """Found by the model (unkeyed seed 91 with restores weighted 8, merge-on-read): `b3` restored the table to a point
    after `main`'s insert of rows 24-26 (the restore holds its segment by reference), then updated row 26; a pick of
    the insert onto `b3` finds its rows there already. Merge-on-read the segment is still live on `b3` and nothing is
    taken; the model brought the old version of row 26 back. Copy-on-write the update had rewritten the segment, and
    the pick appended it again: rows 24 and 25 twice, and row 26 in both versions."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.branch("b3", "main")
    run.load("main", "append_only", 24, 25, 26)
    run.branch("picked", "main")
    run.load("b3", "append_only", 5)
    run.restore("b3", "main")  # the segments of row 1 and of rows 24-26, by reference
    run.update("b3", 26)
    run.pick("picked", "b3")  # checked against the model: b3's rows as they were
    assert table(spark, run.catalog, "b3") == expect(1, 24, 25, 26, _26=261)


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_a_pick_of_an_insert_whose_rows_the_targets_restore_holds_rewritten_is_refused(spark, mode):
    """Found by the model (unkeyed seed 235 with restores weighted 8, copy-on-write): beside seed 91's history, the
    insert's rows were changed before the restore's point, not after. Copy-on-write `main`'s update of row 26
    rewrote the insert's segment (rows 24, 25 and the new 26 in other segments), and `b3`'s restore holds those
    rewrites: the pick appended the segment again, rows 24 and 25 twice and row 26 in both versions. Which of the
    segment's rows the restore holds cannot be told by file: R*, and `b3` is left as it was. Merge-on-read the restore
    holds the segment itself (with the update's delete file), and the pick takes none of it again."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.branch("b3", "main")
    run.load("main", "append_only", 24, 25, 26)
    run.branch("picked", "main")
    run.update("main", 26)
    run.load("b3", "append_only", 5)
    run.restore("b3", "main")  # rows 1, 24, 25 and the new 26, as main holds them
    before = head(run.catalog, "b3")
    run.pick("picked", "b3")  # checked against the model: a refusal it allows, or its rows
    assert table(spark, run.catalog, "b3") == expect(1, 24, 25, 26, _26=261)
    if mode == "copy-on-write":
        assert head(run.catalog, "b3") == before
        with pytest.raises(ConflictError) as refused:
            commits_pick(catalog=run.catalog, kind="cherry_pick", branch="b3", commits=[head(run.catalog, "picked")])
        assert "the target's restore holds rows of them rewritten" in str(refused.value.details)


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_a_source_delete_in_an_insert_the_target_restored_and_changed_is_refused_not_dropped(spark, mode):
    """The case beside seed 91's: the source inserted rows 24-26 and then deleted row 24 (a delete file on the
    insert's segment, or a rewrite of it); the target restored the table to a point after the insert and updated row
    26. The insert's segment is not taken again (the target's restore holds it), so the delete has no segment of the
    source's own to land on: the rules settle it (here a conflict, delete x insert), and it is never dropped unseen
    with the merge going through."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.branch("b3", "main")
    run.load("main", "append_only", 24, 25, 26)
    run.load("b3", "append_only", 5)
    run.restore("b3", "main")  # the segments of row 1 and of rows 24-26, by reference
    run.update("b3", 26)
    run.delete("main", 24)
    assert "The source's delete cannot be replayed after the target's insert." in refusal(run, "main", "b3")


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_a_target_that_reverted_a_compaction_since_the_base_replays_the_sources_operations(spark, mode):
    """Found by the model (unkeyed seed 84 with restores weighted 8, copy-on-write), the model's error: `b1` kept its
    own table against `b2`'s compactions and insert (`target_wins`), having deleted row 1; it then updates row 2, and
    `b2` reverts its last compaction. The revert's undo is a compaction (docs/merge-semantics.md#revert-and-cherry-pick),
    so `b2` changed the table since the base and merging `b1` into it replays `b1`'s operations rather than taking
    its table; the delete addresses a segment `b2` holds only compacted: R*. The model counted the revert as no
    change, took `b1`'s rows and did not allow the refusal."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.load("main", "append_only", 2)
    run.branch("b1", "main")
    run.branch("b2", "main")
    run.compact("b2")
    run.load("b2", "append_only", 3)
    run.compact("b2")
    run.delete("b1", 1)
    assert not run.merge("b2", "b1")  # C*: b2 compacted the segment b1 deleted from, and inserted
    assert run.merge("b2", "b1", target_wins=True)
    run.update("b1", 2)
    run.revert("b2")
    assert "R*" in refusal(run, "b1", "b2")
    assert table(spark, run.catalog, "b2") == expect(1, 2, 3)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_source_overwrite_older_than_rows_it_took_back_uncompacted_is_refused_not_a_lost_row(spark, mode):
    """Found by the model (unkeyed seed 95 with restores weighted 8, merge-on-read): `b1` compacted the segments of
    rows 1 and 2; `main` overwrote the table and updated row 9, and took the uncompacted segments back by taking
    `b2`'s table, which had declined the overwrite (`target_wins`); `main` dropped `b1`'s compaction (C*), so the
    base of merging `main` into `b1` holds the rows compacted, `main` uncompacted. `b1` then updated row 2 and
    compacted again. The overwrite replaces `b1`'s rows but those `main` still has, and `main` holds rows 1 and 2 in
    segments `b1` holds in no version: by file, the overwrite took out `b1`'s segment and row 1 was lost. Which of
    `b1`'s rows are `main`'s cannot be told by file: a conflict (R*), which the model allows."""
    run = taken_back_uncompacted(spark, mode)
    run.update("b1", 2)
    run.compact("b1")
    assert "R*" in refusal(run, "main", "b1")


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_a_revert_of_an_update_merges_into_a_target_that_holds_the_updates_rewrite(spark, mode):
    """Found by the model (unkeyed seed 98 with restores weighted 8, copy-on-write), the product's error: `main`
    updated row 1 (copy-on-write: its segment rewritten into a new one) and `b1` took `main`'s table; `main` then
    reverted the update, whose undo takes the rewrite out and puts the load's segment back whole. Merging `main` into
    `b1` replays the undo (`b1`'s first-parent chain leads back to its fork, not to the base): `b1` holds the rewrite,
    so taking it out and the segment back in is exact by file. The undo names the segment as one whose rows it brings
    back, and the check for segments the target lacks refused it as R*; the model merges (row 1 as loaded).
    Merge-on-read the update kept the segment with a delete file, which `b1` holds: it merged before too."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.branch("b1", "main")
    run.update("main", 1)
    assert run.merge("main", "b1")  # b1 changed nothing since the base: it takes main's table
    run.revert("main")
    assert run.merge("main", "b1")
    assert table(spark, run.catalog, "b1") == expect(1)


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_a_source_restore_after_its_update_of_a_row_the_target_deleted_merges_as_an_overwrite(spark, mode):
    """Found by the model (unkeyed seed 99 with restores weighted 8, copy-on-write), the model's error: `main`
    compacted the segments of rows 1 and 2, which `b1` declined (C* drops the compaction for `b1`'s delete of row 2),
    so the merge base holds the rows compacted and `b1` uncompacted. `main` then updated row 1 and restored the table
    to the base; `b1` deleted row 1. Merging `main` into `b1`, A1 finds the update and the delete in different
    segments, and the restore, `main`'s last overwrite, replaces every row of `b1`'s: the merge holds exactly its
    result, row 1 as the base had it among them (docs/merge-semantics.md#restore). The model refused it as A1 on a
    common row `main` still held, though `main` holds it only as its restore's own result."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.load("main", "append_only", 2)
    run.branch("b1", "main")
    run.compact("main")
    run.branch("point", "main")
    run.delete("b1", 2)
    assert run.merge("main", "b1")  # C*: the compaction is dropped, b1 keeps its segments
    run.update("main", 1)
    run.restore("main", "point")  # the compacted segment of rows 1 and 2, by reference
    run.delete("b1", 1)
    (diff,) = merge_diff(catalog=run.catalog, source="main", target="b1").objects
    assert ("A1", "ok") in [(pair.cell, pair.decided.verdict) for pair in diff.pairs], diff.pairs
    assert run.merge("main", "b1")  # checked against the model
    assert table(spark, run.catalog, "b1") == expect(1, 2)


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_a_source_overwrite_then_rows_a_merge_brought_back_that_the_target_rewrote_before_the_base(spark, mode):
    """Found by the model (unkeyed seed 205, copy-on-write), the product's error: `b2` inserted rows 2 and 3 (one
    segment, D), `main` took them and updated row 3, copy-on-write rewriting D into D' (row 2 and the new row 3);
    `b2` declined that update (`target_wins`). `b1` overwrote the table and then merged `b2`, which replayed the
    insert: `b1` holds D after its overwrite. Merging `b1` into `main`, the insert is no change since the base (the
    base holds it), so nothing adds D, and the replayed overwrite took out `main`'s D', a rewrite older than the
    base: row 2, which all three hold, was lost. Which of `main`'s rows `b1` still has cannot be told by file: R*,
    which the model allows. Merge-on-read `main` holds D itself, with a delete file: the merge keeps row 2."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.branch("b1", "main")
    run.branch("b2", "main")
    run.load("b2", "append_only", 2, 3)
    assert run.merge("b2", "main")
    run.update("main", 3)
    run.load("b2", "append_only", 4)
    assert not run.merge("main", "b2")  # update x insert
    assert run.merge("main", "b2", target_wins=True)
    run.load("b1", "full_refresh", 9)
    assert run.merge("b2", "b1")  # b1 holds rows 2 and 3 (D) after its overwrite
    run.load("main", "append_only", 6)
    row_2_kept_or_refused(spark, run, mode)


def row_2_kept_or_refused(spark, run: Scripted, mode: str) -> None:
    """Merging `b1` into `main`, where `b1` holds row 2 after its overwrite in a segment `main` holds rewritten
    (updated row 3 beside it): refused copy-on-write (which rows to keep cannot be told by file), `main` as it was;
    merge-on-read both hold the segment itself, and row 2 stays."""
    if mode == "copy-on-write":
        assert "the source took back segment(s)" in refusal(run, "b1", "main")
        assert table(spark, run.catalog, "main") == sorted([*expect(1, 2, 6), (3, 31)])
    else:
        assert run.merge("b1", "main")  # checked against the model
        assert (2, 20) in table(spark, run.catalog, "main")


def taken_back_uncompacted(spark, mode: str, *, together: bool = False) -> Scripted:
    """Seed 95's history up to the merge base of `main` and `b1`: `b1` compacted the segments of rows 1 and 2;
    `main` overwrote the table and updated row 9, took the uncompacted segments back by taking `b2`'s table (which
    had declined the overwrite, `target_wins`) and dropped `b1`'s compaction (C*). `together`: rows 1 and 2 in one
    segment (row 5 in another), from which `b2` deleted row 2 before `main` took its table (a delete file on the
    taken-back segment, merge-on-read)."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", *((1, 2) if together else (1,)))
    run.load("main", "append_only", 5 if together else 2)
    run.branch("b1", "main")
    run.branch("b2", "main")
    run.compact("b1")
    run.load("main", "full_refresh", 9)
    run.update("main", 9)
    run.load("b2", "append_only", 3)
    if together:
        run.delete("b2", 2)
    assert not run.merge("main", "b2")  # update x insert
    assert run.merge("main", "b2", target_wins=True)
    assert run.merge("b2", "main")  # main changed nothing since the base: it takes b2's table
    assert table(spark, run.catalog, "main") == (expect(1, 3, 5) if together else expect(1, 2, 3))
    if not run.merge("b1", "main"):  # C*: b1's compaction is dropped
        assert run.merge("b1", "main", target_wins=True)
    return run


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
@pytest.mark.parametrize("together", [False, True])
def test_a_target_that_changed_nothing_since_a_source_overwrite_older_than_rows_it_took_back_takes_its_table(
    spark, mode, together
):
    """Seed 95's history where `b1` changed nothing since the base (only the base's line holds rows 1 and 2
    compacted): the merge takes `main`'s table, which holds them in the taken-back segments (with their delete
    file), as docs/merge-semantics.md#merges-converge says; the overwrite is not replayed by file."""
    run = taken_back_uncompacted(spark, mode, together=together)
    assert run.merge("main", "b1")  # checked against the model
    assert table(spark, run.catalog, "b1") == (expect(1, 3, 5) if together else expect(1, 2, 3))


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
@pytest.mark.parametrize("since", ["delete", "update", "insert"])
def test_a_source_overwrite_older_than_rows_it_took_back_against_any_target_change_is_refused_not_a_lost_row(
    spark, mode, since
):
    """Seed 95's history where `b1`, since the base, only deleted row 2, or updated row 1, or inserted row 4 (not
    an update and a compaction, as in seed 95). The overwrite replaces `b1`'s rows but those `main` still has, and
    `main` holds rows 1 and 2 in segments `b1` holds in no version: by file the overwrite took out `b1`'s compacted
    segment (or its rewrite), and a row `main` still has was lost (row 1 after the delete, both modes; row 2 after
    an update by delete file, merge-on-read). An update copy-on-write, whose rewrite took out the compacted segment,
    was refused already (seed 95's check), and so was the insert, only by `main`'s update of row 9 (update x
    insert). Which of `b1`'s rows are `main`'s cannot be told by file: R*, which the model allows."""
    run = taken_back_uncompacted(spark, mode)
    if since == "delete":
        run.delete("b1", 2)
    elif since == "update":
        run.update("b1", 1)
    else:
        run.load("b1", "append_only", 4)
    assert "the source took back segment(s)" in refusal(run, "main", "b1")


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_source_overwrite_older_than_rows_it_took_back_against_a_target_property_change_is_refused(spark, mode):
    """Seed 95's history where `b1` only set a property of the table since the base: the table counts as changed on
    `b1` (docs/merge-semantics.md#which-changes-a-merge-replays), so the merge replays `main`'s operations rather
    than taking its table, and by file the overwrite took out `b1`'s compacted segment: rows 1 and 2 were lost (`b1`
    held row 3 only). R*. (The model knows no properties: this last merge is checked here, not against it.)"""
    run = taken_back_uncompacted(spark, mode)
    table_update(target=on(run.catalog, "b1"), database="sales", name="orders", set_properties={"owner": "b1"})
    before = head(run.catalog, "b1")
    with pytest.raises(ConflictError) as refused:
        merge(run.catalog, source="main", target="b1")
    assert "the source took back segment(s)" in str(refused.value.details)
    assert head(run.catalog, "b1") == before
    assert table(spark, run.catalog, "b1") == expect(1, 2)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_target_that_took_the_bases_table_back_after_its_overwrite_takes_the_sources_delete(spark, mode):
    """Found by the model (unkeyed seed 176 with restores weighted 8, merge-on-read), the product's error: `b3`
    restored the table to a point without row 24 (an overwrite that takes its segment out), then took `main`'s restore
    of rows 1 and 24 in a merge, and so holds the table as the next merge base has it, segments and delete files
    alike; `main` then deleted row 24. Merging `main` into `b3`, `b3`'s first-parent chain leads back to its own
    restore, not to the base, and A5 discarded the delete against that restore, which had replaced row 24's segment
    before `b3` took it back: row 24 stayed. A target that holds the table as the base has it changed nothing, and
    takes the source's version (docs/merge-semantics.md#which-changes-a-merge-replays): row 24 goes."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.branch("point", "main")
    run.load("main", "append_only", 24)
    run.branch("b3", "main")
    run.branch("restored", "main")
    run.restore("b3", "point")  # takes out the segment of row 24
    run.load("main", "append_only", 5)
    run.restore("main", "restored")  # the segments of rows 1 and 24, by reference
    assert run.merge("main", "b3")  # main's restore replaces b3's rows: b3 holds rows 1 and 24 again
    run.delete("main", 24)
    assert run.merge("main", "b3")  # checked against the model
    assert table(spark, run.catalog, "b3") == expect(1)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_source_delete_of_a_row_the_target_took_back_after_its_overwrite_merges(spark, mode):
    """Seed 176's history where `b3` also deleted row 2 after taking the base's table back: its table is not the
    base's, so the merge replays `main`'s delete of row 24, against `b3`'s restore. The restore had taken out row 24's
    segment, but the merge that followed brought it back: its rows are `b3`'s after its overwrite, and A5 discards
    only changes of rows the overwrite replaced (docs/merge-semantics.md, A5). It discarded the delete, and row 24
    stayed."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.branch("point", "main")
    run.load("main", "append_only", 24)
    run.load("main", "append_only", 2)
    run.branch("b3", "main")
    run.branch("restored", "main")
    run.restore("b3", "point")  # takes out the segments of rows 24 and 2
    run.load("main", "append_only", 5)
    run.restore("main", "restored")  # the segments of rows 1, 24 and 2, by reference
    assert run.merge("main", "b3")  # main's restore replaces b3's rows: b3 holds rows 1, 24 and 2 again
    run.delete("b3", 2)
    run.delete("main", 24)
    assert run.merge("main", "b3")  # checked against the model
    assert table(spark, run.catalog, "b3") == expect(1)


def test_a_source_overwrite_of_segments_it_took_back_with_other_deletes_brings_no_row_back(spark):
    """Found by the model (keyless seed 2 with resets, merge-on-read): `main` overwrote the table, then took `b2`'s
    version of it (`b2` had kept its own against that overwrite), which holds the first segment again with `b2`'s
    delete files, not the base's; those came before the base, so no operation since it adds them. Merging `main`
    into `b1` replayed the overwrite: the base's delete files went with the segment it replaced, but the segment
    stayed (both sides hold it), and rows 1 and 2, deleted and updated long before, came back. Of a segment the
    source holds again, the merge keeps the rows both sides still have: both sides' delete files."""
    run = Scripted(spark, mode="merge-on-read")  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2, 3)
    run.branch("b2", "main")
    run.delete("b2", 1)
    run.update("b2", 2)
    run.update("main", 2)
    assert not run.merge("b2", "main")  # both updated row 2
    assert run.merge("b2", "main", target_wins=True)  # main keeps its table: b2's delete and update declined
    run.delete("main", 1)
    run.branch("b1", "main")  # the base: the segment of rows 1-3 with main's delete files
    run.load("main", "full_refresh", 10)
    run.load("b2", "append_only", 20)
    assert not run.merge("main", "b2")  # main's update and delete since, against b2's insert (4.3)
    assert run.merge("main", "b2", target_wins=True)
    assert run.merge("b2", "main")  # main changed nothing since: it takes b2's table, the segment with b2's deletes
    assert table(spark, run.catalog, "main") == expect(2, 3, 20, _2=21)
    run.delete("b1", 3)
    # The merge used to replay the overwrite and leave row 20 alone: row 2, which `b1` holds in `main`'s update of it
    # and `main` in `b2`'s (both rewrote it from the first segment), was lost. Which of them to keep cannot be told by
    # file: R* (unkeyed model seed 264's rule), and `b1` keeps its table.
    assert "the source took back segment(s)" in refusal(run, "main", "b1")
    assert table(spark, run.catalog, "b1") == expect(2, _2=21)


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_the_rows_a_revert_of_an_overwrite_puts_back_merge_against_a_target_overwrite_of_the_base(spark, mode):
    """Found by the model (keyless seed 248, copy-on-write): `b3` overwrote the table, `b1` took that (the base), then
    overwrote it and restored it to `main`'s first load; `b3` reverted its overwrite (rows 1 and 4-6 back, 7-9 out)
    and updated row 4. Against `b1`'s overwrite the undo was discarded whole (A4: it takes out rows the overwrite
    replaced), the segments it put back with it, and so was the update of row 4, written from one of them: rows 4-6
    were lost. The rows the undo puts back are not rows `b1`'s overwrite replaced: they merge, and row 1, which
    `b1`'s restore holds, is there once."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.branch("b1", "main")
    run.branch("b3", "main")
    run.load("b3", "append_only", 4, 5, 6)
    run.load("b3", "full_refresh", 7, 8, 9)
    assert run.merge("b3", "b1")  # b1 changed nothing: it takes b3's table, the base
    run.load("b1", "full_refresh", 10)
    run.restore("b1", "main")  # row 1's segment, by reference
    run.revert("b3")  # rows 1 and 4-6 back, 7-9 out
    run.update("b3", 4)
    assert run.merge("b3", "b1")  # checked against the model
    assert table(spark, run.catalog, "b1") == expect(1, 4, 5, 6, _4=41)


def test_a_revert_recorded_before_undos_carried_their_mark_merges_once_the_migration_marks_it(spark):
    """The history above, with the undo as a revert recorded before undos carried `rewrote` left it: without the mark
    a merge reads the put-back segments as rewrites of what the undo takes out (the loss of seed 248). The migration
    `catalog_app/migrations/0017_undo_rewrote.py` marks each such undo, and the copies merges made of it, from the
    commit it reverted: the undo of the overwrite rewrote nothing, that of an update did. Then the merge keeps the
    rows."""
    undo_marks = importlib.import_module("catalog_app.migrations.0017_undo_rewrote").undo_marks
    run = Scripted(spark, mode="copy-on-write")  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.branch("b1", "main")
    run.branch("b3", "main")
    run.load("b3", "append_only", 4, 5, 6)
    run.load("b3", "full_refresh", 7, 8, 9)
    assert run.merge("b3", "b1")
    run.load("b1", "full_refresh", 10)
    run.restore("b1", "main")
    run.revert("b3")  # the overwrite's undo
    run.update("main", 1)
    run.revert("main")  # an update's undo
    undos = Operation.objects.filter(details__has_key="reverts")
    for op in undos:  # as recorded before the mark
        op.details = {key: value for key, value in op.details.items() if key != "rewrote"}
        op.save(update_fields=["details"])
    undo_marks(django_apps, None)
    marks = {op.details["reverts"][2]: op.details.get("rewrote") for op in undos.all()}
    assert marks == {"overwrite": False, "update": True}
    run.update("b3", 4)
    assert run.merge("b3", "b1")  # checked against the model
    assert table(spark, run.catalog, "b1") == expect(1, 4, 5, 6, _4=41)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_two_updates_of_a_row_that_reached_the_target_after_its_overwrite_merge(spark, mode):
    """Keyless model seed 22 (restores weighted 8, picks 10; merge-on-read) cut down, where the model was wrong: `b1`
    deletes row 3, overwrites the table and reverts the overwrite, so it holds rows 1 and 2 in the base's segment
    again. `b2` updates row 1 twice; both updates merge (A4: the target holds the segment they came from after its
    overwrite). The model replayed the first and discarded the second, whose row the first made, and lost the row."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2)
    run.load("main", "append_only", 3)
    run.branch("b1", "main")
    run.branch("b2", "main")
    run.delete("b1", 3)  # b1's table is not the base's: the merge replays b2's updates
    run.load("b1", "full_refresh", 9)
    run.revert("b1")  # rows 1 and 2 back, in the base's segment
    run.update("b2", 1)  # step 8: row 1 is now (8000001, 1, 11)
    run.update("b2", 8000001)
    assert run.merge("b2", "b1")  # checked against the model
    assert table(spark, run.catalog, "b1") == expect(1, 2, _1=12)


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_a_revert_of_an_overwrite_whose_rows_the_targets_restore_holds_rewritten_takes_none_twice(spark, mode):
    """Beside seed 248: `b1` took `b3`'s overwrite (the base) and then restored the table to `main`'s head, where
    `main` had updated row 1 of the first load. `b3` reverts its overwrite: the undo puts the first load's segment
    back. `b1`'s restore holds its rows (merge-on-read: the segment itself, with a delete file; copy-on-write: the
    segment the update rewrote it into). Put back again, rows 1 and 2 would be there twice: copy-on-write, which of
    them the restore holds cannot be told by file (R*, as a source insert's: seed 235); merge-on-read, the segment
    is the restore's already, and `b1` keeps its rows."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2)
    run.branch("b1", "main")
    run.branch("b3", "main")
    run.update("main", 1)  # step 4: row 1 is now (4000001, 1, 11)
    run.load("b3", "full_refresh", 7)
    assert run.merge("b3", "b1")  # b1 changed nothing: it takes b3's table, the base
    run.restore("b1", "main")
    run.revert("b3")  # rows 1 and 2 back, in the first load's segment; row 7 out
    if mode == "copy-on-write":
        assert "R*" in refusal(run, "b3", "b1")
    else:
        assert run.merge("b3", "b1")  # checked against the model
    assert table(spark, run.catalog, "b1") == expect(1, 2, _1=11)


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_a_source_overwrite_then_rows_of_a_segment_the_target_holds_a_sibling_rewrite_of(spark, mode):
    """Found by the model (unkeyed seed 264 with restores and picks weighted, copy-on-write), the product's error:
    `b2` inserted rows 2 and 3 (segment D), `main` took them and updated row 3, copy-on-write rewriting D into D'.
    `b3`, from `b2`, deleted row 3, rewriting D into Dd. `b1` overwrote the table and merged `b3`: it holds Dd after
    its overwrite. `main` merged `b3` keeping its own table (`target_wins`), so the base holds Dd's operations. Merging
    `b1` into `main`, nothing since the base adds Dd, and the replayed overwrite took out D' (both are rewrites of D):
    row 2, which all three hold, was lost. Which of D''s rows the source still has cannot be told by file: R*.
    Merge-on-read, both sides hold D itself, with delete files: the merge keeps row 2."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.branch("b1", "main")
    run.branch("b2", "main")
    run.load("b2", "append_only", 2, 3)
    run.branch("b3", "b2")
    assert run.merge("b2", "main")
    run.update("main", 3)  # step 7: row 3 is now (7000003, 3, 31)
    run.delete("b3", 3)
    run.load("b1", "full_refresh", 9)
    assert run.merge("b3", "b1")  # b1 holds row 2 (Dd) after its overwrite
    if not run.merge("b3", "main"):  # both changed row 3 (copy-on-write: in two rewrites of D)
        assert run.merge("b3", "main", target_wins=True)
    run.load("main", "append_only", 6)
    row_2_kept_or_refused(spark, run, mode)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
@pytest.mark.parametrize("updates", [1, 2])
def test_a_source_change_a_pick_of_an_overwrite_the_base_holds_took_out_is_refused_not_half_replayed(
    spark, mode, updates
):
    """Keyless model seed 292 (155 steps, restores 6, picks 10; merge-on-read) cut down, the product's: `main` took
    none of `b3`'s overwrite (`target_wins`), and `b1` branched from it, so the merge base holds the overwrite's commit.
    `main` updates row 2 and then cherry-picks the overwrite: a pick of an operation the base holds is no change since
    the base, and the update's files are gone from `main`. Merging `main` into `b1`, which deleted row 1, the update
    was replayed by what its files left on `main`, nothing: merge-on-read, `b1` kept row 2's old version, which `main`
    no longer has; copy-on-write, the update took out the segment of rows 2 and 3, and `b1` lost row 3 with it. What
    is left of a change a later change took out that the merge does not replay cannot be told by file: R*.
    With two updates of row 2 (unkeyed model seed 341, 192 steps, restores 8, picks 15; copy-on-write): the second
    took out the first's rewrite, and what it addressed was a segment `main` wrote itself, which `b1` lacks; the
    replay still took the segment of rows 2 and 3 out of `b1` and brought nothing in (in the seed `b3` lost rows 1, 2
    and 3). The segments a change addressed count as those the source's earlier rewrites wrote them from
    (`plan.lineage._taken_out_unreplayed`)."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.branch("b3", "main")
    run.load("b3", "full_refresh", 10)
    run.branch("b2", "b3")  # the overwrite's commit, to pick later
    run.update("b3", 10)  # an update of b3's own row: against main's insert below, a conflict
    run.load("main", "append_only", 2, 3)
    assert not run.merge("b3", "main")
    assert run.merge("b3", "main", target_wins=True)  # main keeps its table: rows 1, 2 and 3
    run.branch("b1", "main")
    rid = 2
    for _ in range(updates):
        step = len(run.log)
        run.update("main", rid)
        rid = step * 10**6 + 2  # the new version of row 2
    run.pick("b2", "main")  # the overwrite again: main holds row 10 only
    run.delete("b1", 1)
    assert "R*" in refusal(run, "main", "b1")
    assert table(spark, run.catalog, "b1") == expect(2, 3)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
@pytest.mark.parametrize("apart", ["compaction", "delete", "update"])
def test_a_pick_of_a_change_of_rows_the_target_holds_in_other_segments_is_refused(spark, mode, apart):
    """Keyless model seed 294 (17 steps, restores 8, picks 12; merge-on-read) cut down, where the model was wrong: `b1`
    rewrites the load's segment (a compaction; a delete or an update, copy-on-write) and updates row 1; a pick of
    that update onto `main`, which never took the rewrite, addresses a segment `main` lacks: refused, R*, as a change
    by position is (docs/merge-semantics.md#tables-without-a-primary-key). The model demanded the merge, since `main`
    holds row 1 as the pick's base does. Merge-on-read, a delete or an update keeps the segment and the pick merges."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2, 3)
    run.branch("b1", "main")
    if apart == "compaction":
        run.load("b1", "append_only", 4)
        run.compact("b1")
    else:
        getattr(run, apart)("b1", 2)
    run.update("b1", 1)
    before = head(run.catalog, "main")
    run.pick("b1", "main")  # checked against the model
    if apart == "compaction" or mode == "copy-on-write":
        assert run.outcomes == {"refused_maybe": 1} and head(run.catalog, "main") == before
    else:
        assert run.outcomes == {"merged": 1}
        assert table(spark, run.catalog, "main") == expect(1, 2, 3, _1=11)


@pytest.mark.parametrize("compacted", [False, True])
def test_a_merge_that_replayed_an_older_restore_after_the_sides_overwrite_loses_none_of_its_rows(spark, compacted):
    """Unkeyed model seed 338 (1,979 steps, restores 8, picks 15; merge-on-read) cut down. `main` restores the table;
    `x` overwrites it (rows 7, 8) and appends row 9; `b1` and `main` take `x`'s changes, `main`'s after its restore,
    so `main` holds rows 7-9. Merging `main` into `b1` replays the restore, which keeps the rows the source still
    has: `b1` still holds rows 7-9, but its chain now records the restore after the overwrite (`Op.applied`). `b2`
    overwrites the table (row 20) and `b1` is merged into it: the source's overwrite replaces the target's rows.
    The plan counted rows 7-9 as replaced by the restore (`plan.lineage.replaced_later`) and left `b2` empty. Now,
    where the restore as recorded did not take out the files of the operations it counts as replacing, that is R*
    (`kept_past_overwrite`; taking `b1`'s rows would be right here, but by file this cannot be told from seed 303's
    history, where such files came back by an operation the merge does not replay). Where `main` compacted rows
    7-9 before `b1` merged it, the compaction's file, written after the restore, comes in: `b2` holds rows 7-9 (the
    seed's case, where the model was the one wrong: it orders the operations the same way, and said empty). Both
    modes merge these the same way (no rewrite by position)."""
    run = Scripted(spark, mode="merge-on-read")  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1, 2)
    for name in ("b1", "b2", "x", "point"):
        run.branch(name, "main")
    run.load("main", "append_only", 3)
    run.restore("main", "point")  # rows 1, 2 again
    run.load("x", "full_refresh", 7, 8)
    run.load("x", "append_only", 9)
    assert run.merge("x", "b1") and run.merge("x", "main")
    if compacted:
        run.compact("main")
    assert run.merge("main", "b1")
    assert table(spark, run.catalog, "b1") == expect(7, 8, 9)
    run.load("b2", "full_refresh", 20)
    if compacted:  # the model is wrong here (above): LakeUI's rows alone
        merge(run.catalog, source="b1", target="b2")
        assert table(spark, run.catalog, "b2") == expect(7, 8, 9)
    else:
        assert "R*" in refusal(run, "b1", "b2")
        assert table(spark, run.catalog, "b2") == expect(20)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_restore_a_later_overwrite_replaced_is_not_brought_back_by_a_pick_the_base_holds(spark, mode):
    """Keyless model seed 303 (152 steps, restores 8, picks 20; merge-on-read) cut down, the product's: `b2` declined
    `main`'s restore to row 1's commit (`target_wins`) and `b1` branched from it, so the merge base holds the restore.
    `b2` then restores the table to the same point itself, overwrites it, and cherry-picks `main`'s restore: no change
    since the base, though it brings row 1's segment back onto `b2`. Merging `b2` into `b1`, which deleted row 1, the
    first restore's result was counted as `b2`'s own change (a replayed restore takes its whole result), though the
    overwrite after it replaced it: row 1 came back. Rows brought back by operations the base holds are not added
    (docs/merge-semantics.md#tables-without-a-primary-key): `b1` keeps none."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.branch("point", "main")
    run.load("main", "append_only", 2)
    run.branch("b2", "main")
    run.restore("main", "point")  # main: row 1 again
    run.branch("restored", "main")  # main's restore, to pick later
    run.update("main", 1)  # an update of the restore's row: against b2's insert below, a conflict
    run.load("b2", "append_only", 4)
    assert not run.merge("main", "b2")
    assert run.merge("main", "b2", target_wins=True)  # b2 keeps rows 1, 2 and 4
    run.branch("b1", "b2")
    run.load("b2", "append_only", 3)
    run.restore("b2", "point")  # b2's own restore: row 1
    run.load("b2", "full_refresh", 5, 6)
    run.pick("restored", "b2")  # main's restore again: b2 holds row 1, by an operation the base holds
    assert table(spark, run.catalog, "b2") == expect(1)
    run.delete("b1", 1)
    assert run.merge("b2", "b1")  # checked against the model
    assert table(spark, run.catalog, "b1") == []


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
@pytest.mark.parametrize("change", ["compact", "update", "delete"])
def test_a_pick_that_puts_back_a_segment_the_target_changed_since_holds_its_rows_once(spark, mode, change):
    """Unkeyed model seed 322 (step 38, cut down): `b1` appended rows 4 and 5 (segment S), picked onto `b2` and merged
    into `main`; `b2` restored the table to before the pick (S out) and reverted the restore (S back). `main` then
    compacted S with row 1's segment, updated row 4 or deleted it: S is live on `main` with a delete file
    (merge-on-read), or rewritten into segments `main` holds. Picking the revert onto `main` puts S back, and its rows
    are `main`'s already (`lineage.rewritten_by_target`): the compacted rows were there twice, and copy-on-write a
    second row 5 came back beside the update or the delete."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.branch("b1", "main")
    run.branch("b2", "main")
    run.branch("before", "b2")  # the point b2 restores to
    run.load("b1", "append_only", 4, 5)
    run.pick("b1", "b2")
    assert run.merge("b1", "main")
    run.restore("b2", "before")
    run.revert("b2")
    run.branch("reverted", "b2")
    getattr(run, change)("main", *([] if change == "compact" else [4]))
    run.pick("reverted", "main")  # checked against the model
    after = {"compact": expect(1, 4, 5), "update": expect(1, 4, 5, _4=41), "delete": expect(1, 5)}
    assert table(spark, run.catalog, "main") == after[change]


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_pick_of_an_overwrite_onto_a_target_that_restored_to_it_and_updated_its_rows_loses_none(spark, mode):
    """Unkeyed model seed 324 (138 steps, cut down): `b1` restored the table to `b3`'s overwrite (its segment S kept
    by reference) and updated both of S's rows; then `b3`'s overwrite is picked onto `b1`. Merge-on-read, `b1` holds S
    with a delete file of the two rows: the replayed overwrite took the new versions out and kept the delete file, and
    both rows were lost. The overwrite's result is its own, delete files included: `b1` gets S's rows. Copy-on-write,
    the update rewrote S and the pick is refused (R*), as the model allows."""
    run = Scripted(spark, mode=mode)  # rows (rid, id, amount): a load's (rid, rid, rid * 10)
    run.load("main", "append_only", 1)
    run.branch("b1", "main")
    run.branch("b3", "main")
    run.load("b3", "full_refresh", 37, 38)
    run.branch("overwritten", "b3")
    run.restore("b1", "overwritten")
    run.update("b1", 37, 38)
    run.pick("overwritten", "b1")  # checked against the model
    updated = expect(37, 38, _37=371, _38=381)
    assert table(spark, run.catalog, "b1") == (expect(37, 38) if mode == "merge-on-read" else updated)
