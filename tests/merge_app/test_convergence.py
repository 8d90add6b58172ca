"""Merges converge (DESIGN 4.7, docs/merge-semantics.md#merges-converge): merging A into B and then B into A with
nothing in between leaves both with the same rows. On real Spark data."""

import pytest

from catalog_app.services.refs import branch_create
from lakeui.errors import ConflictError
from tests.support.catalogs import make_catalog, make_table
from tests.support.data import files_at, read
from tests.support.merges import change, insert, merge

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
