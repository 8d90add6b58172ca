"""Primary-key tables merged as states, by key, on histories of several branches (docs/merge-semantics.md,
"Primary-key tables"): every key once, each as the three-way rule by key says, whatever earlier key merges,
resolutions or round trips produced the segments. The three histories of issue 24, each of which doubled a key or
refused a clean merge when merges replayed positional operations."""

import pytest

from catalog_app.services.refs import branch_create
from lakeui.errors import ConflictError
from merge_app.services.restores import branch_restore
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import read
from tests.support.merges import change, merge

pytestmark = pytest.mark.django_db(transaction=True)


def keyed():
    catalog = make_catalog()
    make_table(catalog, table="k", primary_key=["id"])
    return catalog


def upsert(catalog, branch, *ids, amount=1):
    rows = [{"id": i, "amount": amount, "region": branch} for i in ids]
    change(catalog, "table_load", {"strategy": "upsert", "rows": rows, "key_columns": ["id"]}, branch=branch, table="k")


def rows(spark, catalog, ref):
    return sorted((r["id"], r["amount"], r["region"]) for r in read(spark, catalog, ref, table="k").collect())


def keys_once(found):
    ids = [row[0] for row in found]
    assert len(ids) == len(set(ids)), f"a key is doubled: {found}"
    return found


def test_a_round_trip_through_a_key_merge_doubles_no_key(spark):
    catalog = keyed()
    branch_create(catalog=catalog, name="b1", source="main")
    branch_create(catalog=catalog, name="b2", source="b1")
    branch_create(catalog=catalog, name="b6", source="b2")
    upsert(catalog, "b1", 8)
    merge(catalog, source="b1", target="main")
    upsert(catalog, "b6", 11)
    branch_create(catalog=catalog, name="b17", source="b6")
    merge(catalog, source="main", target="b17")  # both sides changed k: merged by key
    merge(catalog, source="b17", target="b1")
    assert keys_once(rows(spark, catalog, "b1")) == [(8, 1, "b1"), (11, 1, "b6")]
    assert rows(spark, catalog, "b17") == rows(spark, catalog, "b1")


@pytest.mark.parametrize("choice", ["source_wins", "target_wins"])
def test_a_resolved_key_stays_settled_on_the_way_back(spark, choice):
    catalog = keyed()
    branch_create(catalog=catalog, name="b1", source="main")
    upsert(catalog, "b1", 9, amount=1)
    upsert(catalog, "main", 1, 9, amount=2)
    merge(catalog, source="b1", target="main", resolution={"default": choice})
    nine = (9, 1, "b1") if choice == "source_wins" else (9, 2, "main")
    assert keys_once(rows(spark, catalog, "main")) == [(1, 2, "main"), nine]
    merge(catalog, source="main", target="b1")
    assert keys_once(rows(spark, catalog, "b1")) == [(1, 2, "main"), nine]


def test_a_resolved_update_of_an_existing_key_stays_settled(spark):
    catalog = keyed()
    upsert(catalog, "main", 9, amount=0)
    branch_create(catalog=catalog, name="b1", source="main")
    upsert(catalog, "b1", 9, amount=1)
    upsert(catalog, "main", 9, amount=2)
    merge(catalog, source="b1", target="main", resolution={"default": "source_wins"})
    merge(catalog, source="main", target="b1")
    assert keys_once(rows(spark, catalog, "b1")) == [(9, 1, "b1")]


def test_a_branch_synced_from_main_merges_back(spark):
    catalog = keyed()
    branch_create(catalog=catalog, name="b1", source="main")
    upsert(catalog, "b1", 8, 7, 9, amount=1)
    upsert(catalog, "main", 2, 11, 3, 0, amount=2)
    merge(catalog, source="main", target="b1")
    upsert(catalog, "b1", 2, 0, 10, 9, 7, amount=3)
    result = merge(catalog, source="b1", target="main")
    assert result.status == "merged"
    expected = [(0, 3, "b1"), (2, 3, "b1"), (3, 2, "main"), (7, 3, "b1"), (8, 1, "b1"), (9, 3, "b1"),
                (10, 3, "b1"), (11, 2, "main")]  # fmt: skip
    assert keys_once(rows(spark, catalog, "main")) == expected
    assert rows(spark, catalog, "b1") == expected


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_restored_key_conflicts_with_the_other_sides_change(spark, mode):
    """Found by the keyed model (seed 31): a restore of the table to an earlier commit brings back a key's older
    value; the source's own change of that key since the base is then a conflict, as any two changes are."""
    catalog = make_catalog()
    make_table(catalog, table="k", primary_key=["id"], properties={"write.mode": mode})
    upsert(catalog, "main", 10, amount=2)
    point = head(catalog)
    change(catalog, "table_update", {"set": {"amount": "amount + 1"}, "where": "id = 10"}, table="k")
    branch_create(catalog=catalog, name="b1", source="main")
    branch_restore(catalog=catalog, branch="main", point=point, database="sales", table="k")
    assert rows(spark, catalog, "main") == [(10, 2, "main")]
    upsert(catalog, "b1", 10, amount=1)
    with pytest.raises(ConflictError) as refused:
        merge(catalog, source="b1", target="main")
    assert refused.value.code == "merge_conflict"
    assert rows(spark, catalog, "main") == [(10, 2, "main")]


def test_a_key_a_restore_brought_back_is_merged_where_it_lives_again(spark):
    """Found by the keyed model (seed 41): a restore gives a segment of the base back fewer deletes, so a key's
    older row is live again in a segment the target did not write. A merge that changes the key must replace that
    row, not write the key beside it (it was refused as a doubled key)."""
    catalog = make_catalog()
    make_table(catalog, table="k", primary_key=["id"], properties={"write.mode": "merge-on-read"})
    upsert(catalog, "main", 1, 2, amount=1)
    point = head(catalog)
    change(catalog, "table_update", {"set": {"amount": "amount + 1"}, "where": "id = 1"}, table="k")
    branch_create(catalog=catalog, name="b1", source="main")
    branch_restore(catalog=catalog, branch="main", point=point, database="sales", table="k")
    change(catalog, "table_update", {"set": {"region": "'b1'"}, "where": "id = 1"}, branch="b1", table="k")
    assert rows(spark, catalog, "main") == [(1, 1, "main"), (2, 1, "main")]
    assert rows(spark, catalog, "b1") == [(1, 2, "b1"), (2, 1, "main")]
    merge(catalog, source="b1", target="main")  # key 1: main's amount (the restore's), b1's region
    assert keys_once(rows(spark, catalog, "main")) == [(1, 1, "b1"), (2, 1, "main")]
    assert rows(spark, catalog, "b1") == [(1, 2, "b1"), (2, 1, "main")]
