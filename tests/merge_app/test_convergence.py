"""Merges converge (docs/merge-semantics.md#merges-converge): merging A into B and then B into A with
nothing in between leaves both with the same rows. On real Spark data."""

import pytest

from catalog_app.services.refs import branch_create
from lakeui.errors import ConflictError
from merge_app.services.picks import commits_pick
from tests.merge_app import test_merge_model as model
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import files_at, read
from tests.support.merges import change, converges, insert, merge

pytestmark = pytest.mark.django_db(transaction=True)


def rows(*ids):
    return [{"id": i, "amount": i * 10, "region": "eu"} for i in ids]


def files(catalog, ref):
    return sorted(files_at(catalog, ref).by_id())


def ids(spark, catalog, ref):
    return sorted(r["id"] for r in read(spark, catalog, ref).collect())


def test_a_branch_merged_back_after_target_wins_holds_the_same_rows(spark):
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1, 2, 3))
    branch_create(catalog=catalog, name="b1", source="main")
    change(catalog, "table_delete", {"where": "id = 1"}, branch="b1")
    insert(catalog, rows(4))
    with pytest.raises(ConflictError):  # 4.3: a delete against the target's insert
        merge(catalog, source="b1", target="main")
    merge(catalog, source="b1", target="main", resolution={"default": "target_wins"})
    assert ids(spark, catalog, "main") == [1, 2, 3, 4]
    merge(catalog, source="main", target="b1")
    assert ids(spark, catalog, "b1") == ids(spark, catalog, "main")


def compacted_on_two_branches_and_merged():
    """Two segments on main; b1 and b2 compact them each; main merges b2 (its compaction), then b1 (whose
    compaction it drops, C*)."""
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1))
    insert(catalog, rows(2))
    for branch in ("b1", "b2"):
        branch_create(catalog=catalog, name=branch, source="main")
        change(catalog, "table_compact", {}, branch=branch)
    merge(catalog, source="b2", target="main")
    merge(catalog, source="b1", target="main")
    return catalog


def test_a_compaction_of_segments_the_target_compacted_itself_is_dropped_when_merging_back(spark):
    """Unkeyed model seed 59, cut down: two branches compact the same segments; main takes b2's compaction, then
    merges b1 and drops b1's (C*). Merging main back into b1 after b1 changed the table again replays b2's
    compaction on segments b1 holds in no version (it compacted them itself): it changes no row, so it is dropped
    (C*), not refused (R*). (Without b1's change, b1 holds the table as the merge base has it and takes main's.)"""
    catalog = compacted_on_two_branches_and_merged()
    insert(catalog, rows(3), branch="b1")
    back = merge(catalog, source="main", target="b1")
    assert back.status == "merged"
    (dropped,) = back.log["discarded_operations"]
    assert (dropped["op"], dropped["note"]) == ("compaction", "C*")
    assert ids(spark, catalog, "b1") == [1, 2, 3]
    merge(catalog, source="b1", target="main")
    assert ids(spark, catalog, "main") == ids(spark, catalog, "b1") == [1, 2, 3]


def test_merging_back_into_a_branch_that_changed_nothing_since_takes_the_other_version(spark):
    """After b1 merged into main (main dropping b1's compaction for b2's), b1 holds the table as the base of merging
    main back has it: the merge takes main's version, files and all (the three-way merge of an unchanged side)."""
    catalog = compacted_on_two_branches_and_merged()
    back = merge(catalog, source="main", target="b1")
    (logged,) = back.log["objects"]
    assert logged["how"] == "rows_taken"
    assert files(catalog, "b1") == files(catalog, "main")
    assert ids(spark, catalog, "b1") == [1, 2]


def table(spark, catalog, ref):
    """The (id, amount) rows a branch holds, as a sorted list: a row held twice shows twice."""
    return sorted((r["id"], r["amount"]) for r in read(spark, catalog, ref).collect())


def test_a_commit_declined_then_taken_with_the_other_version_is_not_picked_again(spark):
    """Unkeyed model seed 54, cut down: b2 declines b1's insert C (`target_wins`), overwrites, and later takes b1's
    version of the table whole (rows_taken: b2 changed nothing since the base), C's rows with it, compacted into
    another file. That merge holds C's insert with the rows (a `resolve` operation's held list), so picking C onto
    b2 changes nothing; before, the pick appended C's segment again and b2 held those rows twice."""
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1))
    for branch in ("b1", "b2"):
        branch_create(catalog=catalog, name=branch, source="main")
    insert(catalog, rows(2, 3), branch="b1")
    declined = head(catalog, "b1")
    change(catalog, "table_compact", {}, branch="b1")  # rows 2 and 3 now live in another file than C's
    for branch, amount in (("b1", "amount + 1"), ("b2", "amount + 2")):
        change(catalog, "table_update", {"set": {"amount": amount}, "where": "id = 1"}, branch=branch)
    with pytest.raises(ConflictError):  # an update against an update of the same row
        merge(catalog, source="b1", target="b2")
    merge(catalog, source="b1", target="b2", resolution={"default": "target_wins"})
    assert table(spark, catalog, "b2") == [(1, 12)]
    change(catalog, "table_load", {"strategy": "full_refresh", "rows": rows(5)}, branch="b2")
    insert(catalog, rows(4), branch="b1")
    with pytest.raises(ConflictError):  # b2's overwrite against b1's insert
        merge(catalog, source="b2", target="b1")
    merge(catalog, source="b2", target="b1", resolution={"default": "target_wins"})
    assert table(spark, catalog, "b1") == [(1, 11), (2, 20), (3, 30), (4, 40)]
    taken = merge(catalog, source="b1", target="b2")
    (logged,) = taken.log["objects"]
    assert logged["how"] == "rows_taken"
    assert table(spark, catalog, "b2") == table(spark, catalog, "b1")
    (picked,) = commits_pick(catalog=catalog, kind="cherry_pick", branch="b2", commits=[declined])
    assert table(spark, catalog, "b2") == table(spark, catalog, "b1") == [(1, 11), (2, 20), (3, 30), (4, 40)]
    assert picked.status == "up_to_date"


def test_a_criss_cross_merge_that_replayed_nothing_converges_when_merged_back(spark, monkeypatch):
    """Unkeyed model seed 306 (65 steps, restores 6, picks 12; copy-on-write), replayed: `b3` kept its rows against
    `b1`'s empty table (`target_wins`); step 65 merges `b3` into `b1` from a virtual base and replays nothing, so
    `b1` stays empty and its merge commit records nothing. Merging `b1` back into `b3`, whose head is the base, took
    nothing before (the table's version on `b1` was its first parent's, which `b3` had declined): now it takes every
    table `b1` holds otherwise than the base (docs/merge-semantics.md#merges-converge)."""
    monkeypatch.setattr(model, "RESTORES", 6)
    monkeypatch.setattr(model, "PICKS", 12)
    monkeypatch.setattr(model, "CONVERGE", 0)  # checked once, below
    run = model.Run(306, spark)
    for number in range(1, 66):
        run.step(number)
    assert run.log[-1].startswith("65: merge b3 into b1")
    assert converges(run.catalog, source="b3", target="b1", rows=run.rows_of) is None
