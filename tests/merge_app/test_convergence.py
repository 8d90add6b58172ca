"""Merges converge (DESIGN 4.7, docs/merge-semantics.md#merges-converge): merging A into B and then B into A with
nothing in between leaves both with the same rows. On real Spark data."""

import pytest

from catalog_app.services.refs import branch_create
from lakeui.errors import ConflictError
from tests.support.catalogs import make_catalog, make_table
from tests.support.data import read
from tests.support.merges import change, insert, merge

pytestmark = pytest.mark.django_db(transaction=True)


def rows(*ids):
    return [{"id": i, "amount": i * 10, "region": "eu"} for i in ids]


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


def test_a_branch_merged_back_after_a_dropped_compaction_holds_the_same_rows(spark):
    """C*: main deleted a row of a segment dev compacted, so dev's compaction is dropped and main keeps its own
    segments; the merge records the compaction's undo, and merging main back into dev takes dev's compacted segment
    out for main's segments and delete file."""
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1, 2))
    insert(catalog, rows(3, 4))
    branch_create(catalog=catalog, name="dev", source="main")
    change(catalog, "table_compact", {}, branch="dev")
    change(catalog, "table_delete", {"where": "id = 1"})
    done = merge(catalog, source="dev", target="main")
    assert [entry["note"] for entry in done.log["discarded_operations"]] == ["C*"]
    assert [entry.get("declined_undone", {}).get("op") for entry in done.log["objects"]] == ["compaction"]
    assert ids(spark, catalog, "main") == [2, 3, 4]
    merge(catalog, source="main", target="dev")
    assert ids(spark, catalog, "dev") == ids(spark, catalog, "main") == [2, 3, 4]


@pytest.mark.xfail(
    strict=True,
    reason="Unkeyed model seeds 57 and 58 (150 steps): an overwrite replayed on a branch replaces the rows that "
    "branch inserted since the base (4.3), while on the branch that made it the same inserts, merged in later, stay "
    "(a target's overwrite keeps the source's later inserts). Once each branch holds the other's operations, both "
    "merges are up to date (criss-cross: every operation is in a base) and the rows differ for good. The merge "
    "that replayed the overwrite records no operation of its own for the rows it replaced; recording that removal "
    "(as the undo of declined operations is recorded) would carry it, but is not done yet.",
)
def test_an_overwrite_replayed_over_inserts_the_other_branch_kept_converges(spark):
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1, 2))
    for name in ("b1", "b2"):
        branch_create(catalog=catalog, name=name, source="main")
    change(catalog, "table_load", {"strategy": "full_refresh", "rows": rows(10, 11)}, branch="b1")
    merge(catalog, source="b1", target="main")
    insert(catalog, rows(5), branch="b2")
    merge(catalog, source="b2", target="b1")  # b1's overwrite keeps b2's later insert
    merge(catalog, source="main", target="b2")  # main's overwrite (b1's) replaces b2's insert
    assert (ids(spark, catalog, "b1"), ids(spark, catalog, "b2")) == ([5, 10, 11], [10, 11])
    merge(catalog, source="b2", target="b1")
    merge(catalog, source="b1", target="b2")
    assert ids(spark, catalog, "b1") == ids(spark, catalog, "b2")
