"""Primary-key tables merged by key and cell (docs/merge-semantics.md#primary-key-tables), with resolutions, on real Spark data."""

import pytest

from catalog_app.services.databases import database_create
from catalog_app.services.refs import branch_create
from catalog_app.services.tables import column_update, table_create, table_update
from lakeui.errors import ConflictError
from merge_app.models import KeyComparison
from merge_app.selectors.diff import diff_as_dict, merge_diff
from tests.support.catalogs import head, make_catalog, make_table, on
from tests.support.data import read
from tests.support.merges import change, insert, merge

pytestmark = pytest.mark.django_db(transaction=True)


def rows(*ids, amount=None, region="eu"):
    return [{"id": i, "amount": i * 10 if amount is None else amount, "region": region} for i in ids]


def keyed(**table_kwargs):
    """main: a primary-key table (id) with rows 1-4 and 5-8 in two segments; dev branched from it."""
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"], **table_kwargs)
    insert(catalog, rows(1, 2, 3, 4))
    insert(catalog, rows(5, 6, 7, 8))
    branch_create(catalog=catalog, name="dev", source="main")
    return catalog


def update(catalog, branch, where, **values):
    change(catalog, "table_update", {"set": {k: repr(v) for k, v in values.items()}, "where": where}, branch=branch)


def table(spark, catalog, ref="main", name="orders"):
    return {r["id"]: (r[1], r[2]) for r in read(spark, catalog, ref, table=name).collect()}  # id, amount, region


def expected(changes):
    base = {i: (i * 10, "eu") for i in range(1, 9)}
    return base | changes


def key_conflicts(catalog):
    before = head(catalog)
    with pytest.raises(ConflictError) as refused:
        merge(catalog)
    assert head(catalog) == before
    [obj] = refused.value.details["conflicts"]
    pairs = [c for c in obj["conflicts"] if c.get("cell") == "4.4"]
    assert pairs and {p["reason"] for p in pairs} == {pairs[0]["reason"]}  # one verdict for the table's data pairs
    return pairs[0]


def test_keys_changed_on_one_side_each_merge(spark):
    catalog = keyed()
    update(catalog, "dev", "id = 1", amount=-1)
    update(catalog, "main", "id = 6", amount=-6)
    result = merge(catalog)
    assert table(spark, catalog) == expected({1: (-1, "eu"), 6: (-6, "eu")})
    [obj] = result.report["objects"]
    assert obj["keys"]["source"]["update"] == 1 and obj["keys"]["both"] == 0
    assert {p["cell"] for p in obj["pairs"]} == {"4.4"}


def test_the_same_change_on_both_sides_merges(spark):
    catalog = keyed()
    for branch in ("dev", "main"):
        update(catalog, branch, "id = 1", amount=-1)
    merge(catalog)
    assert table(spark, catalog) == expected({1: (-1, "eu")})


def test_different_columns_of_one_row_merge_cell_by_cell(spark):
    catalog = keyed()
    update(catalog, "dev", "id = 1", amount=-1)
    update(catalog, "main", "id = 1", region="zz")
    result = merge(catalog)
    assert table(spark, catalog) == expected({1: (-1, "zz")})
    assert result.report["objects"][0]["keys"]["merged_cell_by_cell"] == 1


def test_the_same_column_conflicts_and_each_resolution_gives_its_rows(spark):
    catalog = keyed()
    update(catalog, "dev", "id = 1", amount=-1)
    update(catalog, "main", "id = 1", amount=-2)
    update(catalog, "dev", "id = 2", amount=-20)
    update(catalog, "main", "id = 2", amount=-30)
    pair = key_conflicts(catalog)
    assert "2 conflicting" in pair["reason"]
    [listed] = [o for o in diff_as_dict(merge_diff(catalog=catalog, source="dev", target="main"))["objects"]]
    conflict = next(c for c in listed["keys"]["listed"] if c["key"] == {"id": 1})
    assert (conflict["cells"], conflict["base"]["amount"], conflict["source"]["amount"],
            conflict["target"]["amount"]) == (["amount"], 10, -1, -2)  # fmt: skip

    before = head(catalog)
    branch_create(catalog=catalog, name="try", source="main")
    merge(catalog, "dev", "try", resolution={"default": "target_wins"})
    assert table(spark, catalog, "try") == expected({1: (-2, "eu"), 2: (-30, "eu")})
    result = merge(catalog, resolution={"default": "target_wins", "keys": {"sales.orders": {"[1]": "source_wins"}}})
    assert table(spark, catalog) == expected({1: (-1, "eu"), 2: (-30, "eu")})
    assert result.commit.parent_id == before
    choices = {(r["scope"], r["choice"]) for r in result.log["resolutions"]}
    assert choices == {("key", "source_wins"), ("default", "target_wins")}


@pytest.mark.parametrize("fallback", [{"default": "source_wins"}, {"tables": {"sales.orders": "target_wins"}}])
def test_a_keys_own_fail_stands_against_the_table_or_default_choice(spark, fallback):
    catalog = keyed()
    for key, (dev, main) in {1: (-1, -2), 2: (-20, -30)}.items():
        update(catalog, "dev", f"id = {key}", amount=dev)
        update(catalog, "main", f"id = {key}", amount=main)
    before = head(catalog)
    with pytest.raises(ConflictError) as refused:
        merge(catalog, resolution={**fallback, "keys": {"sales.orders": {"[1]": "fail"}}})
    assert "1 unresolved" in refused.value.details["conflicts"][0]["conflicts"][0]["reason"]
    assert head(catalog) == before
    merge(catalog, resolution=fallback)


def test_a_delete_against_an_update_conflicts(spark):
    catalog = keyed()
    change(catalog, "table_delete", {"where": "id = 1"}, branch="dev")
    update(catalog, "main", "id = 1", amount=-1)
    assert "1 conflicting" in key_conflicts(catalog)["reason"]


def test_the_same_new_key_on_both_sides_conflicts_unless_the_rows_are_equal(spark):
    catalog = keyed()
    insert(catalog, rows(100, amount=1), branch="dev")
    insert(catalog, rows(100, amount=2), branch="main")
    key_conflicts(catalog)
    insert(catalog, rows(200, amount=5), branch="dev")
    insert(catalog, rows(200, amount=5), branch="main")
    merge(catalog, resolution={"default": "source_wins"})
    assert table(spark, catalog) == expected({100: (1, "eu"), 200: (5, "eu")})


def test_row_granularity_makes_any_key_changed_on_both_sides_conflict(spark):
    catalog = keyed(properties={"merge.granularity": "row"})
    update(catalog, "dev", "id = 1", amount=-1)
    update(catalog, "main", "id = 1", region="zz")
    key_conflicts(catalog)


def test_a_target_overwrite_discards_source_changes_to_old_keys(spark):
    catalog = keyed()
    update(catalog, "dev", "id = 1", amount=-1)
    insert(catalog, rows(500), branch="dev")
    change(catalog, "table_load", {"strategy": "full_refresh", "rows": rows(1, 2, amount=7)})
    result = merge(catalog)
    assert table(spark, catalog) == {1: (7, "eu"), 2: (7, "eu"), 500: (5000, "eu")}
    assert result.report["objects"][0]["keys"]["discarded_by_overwrite"] == 1


@pytest.mark.parametrize(("strategy", "renamed"), [("snapshot", False), ("full_refresh", False), ("snapshot", True)])
def test_a_target_partition_overwrite_discards_source_changes_in_that_partition_only(spark, strategy, renamed):
    """With `renamed`, the target renames the partition column after its overwrite: the overwritten partition is
    still found (by column id, not by the name the overwrite recorded)."""
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"], partition_by=["region"])
    insert(catalog, rows(1, 2, 3, 4) + rows(5, 6, 7, 8, region="us"))
    branch_create(catalog=catalog, name="dev", source="main")
    update(catalog, "dev", "id IN (1, 6)", amount=-1)
    fields = {"partition_column": "region"} if strategy == "snapshot" else {"partitions": [{"region": "eu"}]}
    change(catalog, "table_load", {"strategy": strategy, "rows": rows(1, 2, amount=7), **fields})
    if renamed:
        column_update(target=on(catalog), database="sales", table="orders", column="region", changes={"name": "zone"})
    result = merge(catalog)
    us = {i: (i * 10, "us") for i in (5, 7, 8)}
    assert table(spark, catalog) == {1: (7, "eu"), 2: (7, "eu"), 6: (-1, "us"), **us}
    assert result.report["objects"][0]["keys"]["discarded_by_overwrite"] == 1


def test_composite_keys(spark):
    catalog = make_catalog()
    database_create(target=on(catalog), name="sales")
    columns = [{"name": "region", "type": "string", "nullable": False}, {"name": "id", "type": "long",
               "nullable": False}, {"name": "amount", "type": "int"}, {"name": "note", "type": "string"}]  # fmt: skip
    table_create(target=on(catalog), database="sales", name="orders", columns=columns, primary_key=["region", "id"])
    insert(catalog, [{"region": r, "id": 1, "amount": 1, "note": "-"} for r in ("eu", "us")])
    branch_create(catalog=catalog, name="dev", source="main")
    change(catalog, "table_update", {"set": {"amount": "9"}, "where": "region = 'eu'"}, branch="dev")
    change(catalog, "table_update", {"set": {"note": "'x'"}, "where": "region = 'eu'"})
    change(catalog, "table_update", {"set": {"amount": "5"}, "where": "region = 'us'"})
    merge(catalog)
    merged = {(r["region"], r["id"]): (r["amount"], r["note"]) for r in read(spark, catalog).collect()}
    assert merged == {("eu", 1): (9, "x"), ("us", 1): (5, "-")}


def test_key_comparison_of_a_large_table_reads_only_the_segments_either_side_changed(spark):
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"])
    for start in range(0, 100_000, 10_000):  # 10 segments of 10,000 rows
        insert(catalog, [{"id": i, "amount": 0, "region": "eu"} for i in range(start, start + 10_000)])
    branch_create(catalog=catalog, name="dev", source="main")
    update(catalog, "dev", "id < 1000", amount=1)  # 1% of the rows, all in the first segment
    update(catalog, "main", "id >= 50000 AND id < 51000", amount=2)
    update(catalog, "main", "id < 10", region="zz")  # the same rows as dev, another column
    result = merge(catalog)
    counts = result.report["objects"][0]["keys"]
    # Each side: the one segment it changed and the one it wrote (two on main, which changed two segments).
    assert counts["segments_read"] == 2 + 4
    assert (counts["source"]["update"], counts["target"]["update"], counts["both"]) == (1000, 1010, 10)
    stored = KeyComparison.objects.get(table_id=result.report["objects"][0]["object_id"])
    report_only = ("unresolved", "choices", "listed", "types", "not_null")  # the plan's, not the comparison's
    assert stored.counts == {k: v for k, v in counts.items() if k not in report_only}
    merged = {r["id"]: (r["amount"], r["region"]) for r in read(spark, catalog).filter("amount != 0").collect()}
    assert len(merged) == 2000 and merged[5] == (1, "zz") and merged[50_500] == (2, "eu")


def test_a_primary_key_table_changed_on_one_side_only_is_merged_zero_copy(spark):
    catalog = keyed()
    update(catalog, "dev", "id = 1", amount=-1)
    table_update(target=on(catalog), database="sales", name="orders", set_properties={"x": "1"})
    result = merge(catalog)
    assert all(not f.get("written_by_merge") for f in result.log["files"])
    assert table(spark, catalog) == expected({1: (-1, "eu")})


def test_a_key_merge_into_a_partitioned_table_writes_partitioned_segments(spark):
    """The merged rows follow the table's partition spec: a later partition overwrite is not refused with
    `unsplit_segments` because of a segment the merge wrote."""
    catalog = keyed(partition_by=["region"])
    update(catalog, "dev", "id = 1", amount=-1)
    update(catalog, "main", "id = 6", amount=-6)
    result = merge(catalog)
    written = [f for f in result.log["files"] if f.get("written_by_merge") and f["kind"] == "segment"]
    assert written
    incoming = [{"id": 100, "amount": 1, "region": "us"}]
    change(catalog, "table_load", {"strategy": "snapshot", "partition_column": "region", "rows": incoming})
    assert table(spark, catalog) == expected({1: (-1, "eu"), 6: (-6, "eu"), 100: (1, "us")})


def test_key_comparisons_of_heads_that_moved_on_expire_those_a_merge_or_an_open_request_used_stay(spark):
    from datetime import timedelta

    from lakeui.jobs.services import job_execute
    from merge_app.models import KeyConflict
    from merge_app.services import keys
    from merge_app.services.merge_plans import merge_plan
    from merge_app.services.merge_requests import merge_request_open
    from tests.conftest import wait_for_job
    from tests.support.catalogs import default_owner

    catalog = keyed()
    update(catalog, "dev", "id = 1", amount=-1)
    update(catalog, "main", "id = 1", amount=-2)  # key 1 conflicts
    merge_plan(catalog=catalog, source="dev", target="main", in_worker=True)  # a diff's comparison: heads move on
    update(catalog, "main", "id = 2", amount=-3)
    merged = merge(catalog, resolution={"default": "source_wins"})  # the merge's comparison, which the blame reads
    update(catalog, "dev", "id = 3", amount=-4)
    update(catalog, "main", "id = 3", amount=-5)
    opened = merge_request_open(catalog=catalog, source="dev", target="main", title="3", author=default_owner())
    job_execute(job_id=str(opened.plan_job_id), worker="test-process")
    wait_for_job(opened.plan_job_id)  # the open request's comparison, at the heads it plans on
    assert KeyComparison.objects.count() == 3 and KeyConflict.objects.count() == 3

    keys._expired_at[0] = float("-inf")
    assert keys.key_comparisons_expire() == 0  # none is a day old
    assert keys.key_comparisons_expire(kept_for=timedelta(0)) == 0  # once an hour in a worker
    keys._expired_at[0] = float("-inf")
    assert keys.key_comparisons_expire(kept_for=timedelta(0)) == 1  # the diff's, its one conflict with it
    kept = set(KeyComparison.objects.values_list("source_head", "target_head"))
    assert kept == {(merged.source_head, merged.target_head), (head(catalog, "dev"), head(catalog))}
    assert KeyConflict.objects.count() == 2
