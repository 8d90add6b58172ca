"""The notes of docs/merge-semantics.md#tables-without-a-primary-key (A1-A6 and the starred cells), #new-objects and #schema-versions, each in the scenario that decides it."""

import pytest
from django.utils import timezone

from catalog_app.models import FileEntry
from catalog_app.selectors.objects import schema_history
from catalog_app.selectors.refs import ref_resolve
from catalog_app.services.databases import database_drop
from catalog_app.services.refs import branch_create
from catalog_app.services.tables import column_add, column_update, table_create, table_update
from lakeui.errors import ConflictError
from tests.support.catalogs import COLUMNS, head, make_catalog, make_table, on
from tests.support.check import assert_consistent
from tests.support.data import files_at, read
from tests.support.merges import change, insert, merge, table_at

pytestmark = pytest.mark.django_db(transaction=True)


def rows(*ids, region="eu"):
    return [{"id": i, "amount": i * 10, "region": region} for i in ids]


def two_segments(**table_kwargs):
    """main: a table with rows 1-4 in segment A and 5-8 in segment B; dev branched from it."""
    catalog = make_catalog()
    make_table(catalog, **table_kwargs)
    insert(catalog, rows(1, 2, 3, 4))
    insert(catalog, rows(5, 6, 7, 8, region="us"))
    branch_create(catalog=catalog, name="dev", source="main")
    return catalog


def delete(catalog, where, branch):
    change(catalog, "table_delete", {"where": where}, branch=branch)


def update(catalog, amount, where, branch):
    change(catalog, "table_update", {"set": {"amount": str(amount)}, "where": where}, branch=branch)


def overwrite(catalog, ids, branch):
    change(catalog, "table_load", {"strategy": "full_refresh", "rows": rows(*ids)}, branch=branch)


def amounts(spark, catalog, ref="main"):
    return {row["id"]: row["amount"] for row in read(spark, catalog, ref).collect()}


def refused(catalog) -> list[dict]:
    before = head(catalog)
    with pytest.raises(ConflictError) as error:
        merge(catalog)
    assert head(catalog) == before
    return [c for obj in error.value.details["conflicts"] for c in obj["conflicts"]]


@pytest.mark.parametrize(
    ("src_change", "dest_change", "note"),
    [
        (lambda c: update(c, -1, "id = 1", "dev"), lambda c: delete(c, "id = 2", "main"), "A1"),
        (lambda c: update(c, -1, "id = 1", "dev"), lambda c: update(c, -3, "id = 3", "main"), "A3"),
    ],
    ids=["A1", "A3"],
)
def test_changes_of_one_segment_on_both_sides_conflict(spark, src_change, dest_change, note):
    catalog = two_segments()
    src_change(catalog)
    dest_change(catalog)
    [conflict] = refused(catalog)
    assert (conflict["note"], conflict["verdict"]) == (note, "conflict")
    assert "segment" in conflict["reason"]


def test_a2_deletes_of_one_segment_on_both_sides_both_apply(spark):
    catalog = two_segments()
    delete(catalog, "id = 1", "dev")
    delete(catalog, "id = 2", "main")
    result = merge(catalog)
    assert [p["note"] for o in result.report["objects"] for p in o["pairs"]] == ["A2"]
    assert sorted(amounts(spark, catalog)) == [3, 4, 5, 6, 7, 8]
    [segment_a] = [s for s in files_at(catalog).segments if s.stats["1"]["min"] == 1]
    assert len(files_at(catalog).deltas[segment_a.id]) == 2  # both delta files, one from each side


def test_a4_updates_of_rows_the_source_added_survive_a_target_overwrite(spark):
    catalog = two_segments()
    insert(catalog, rows(500), branch="dev")
    update(catalog, -500, "id = 500", "dev")  # a row src added: merged
    update(catalog, -2, "id = 2", "dev")  # an older row: the overwrite replaced it, discarded
    overwrite(catalog, [400, 401], "main")
    result = merge(catalog)
    assert amounts(spark, catalog) == {400: 4000, 401: 4010, 500: -500}
    [discarded] = result.log["discarded_operations"]
    assert (discarded["op"], discarded["note"]) == ("update", "A4")
    verdicts = {p["verdict"] for o in result.report["objects"] for p in o["pairs"] if p["column"] == "overwrite"}
    assert verdicts == {"ok", "discarded"}


def test_a5_a_delete_is_kept_for_rows_the_source_added_and_discarded_for_replaced_ones(spark):
    catalog = two_segments()
    insert(catalog, rows(500, 501), branch="dev")
    delete(catalog, "id IN (1, 500)", "dev")  # one merge-on-read delete over an old and a new segment
    overwrite(catalog, [400], "main")
    result = merge(catalog)
    assert amounts(spark, catalog) == {400: 4000, 501: 5010}
    [discarded] = result.log["discarded_operations"]
    assert (discarded["op"], discarded["note"], len(discarded["files"])) == ("delete", "A5", 1)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a4_one_update_of_rows_the_source_added_and_of_older_rows_is_split(spark, mode):
    """docs/merge-semantics.md#notes A4: an update's new rows are written per segment they come from, so one update over a row the
    source added and an older row merges for the first and is discarded (logged) for the second."""
    catalog = two_segments(properties={"write.mode": mode})
    insert(catalog, rows(500, 501), branch="dev")
    update(catalog, -1, "id IN (2, 500)", "dev")  # one update over segment A (replaced on main) and dev's own
    overwrite(catalog, [400], "main")
    result = merge(catalog)
    assert amounts(spark, catalog) == {400: 4000, 500: -1, 501: 5010}
    [discarded] = result.log["discarded_operations"]
    assert (discarded["op"], discarded["note"]) == ("update", "A4")
    assert len(discarded["files"]) == (1 if mode == "copy-on-write" else 2)  # + its delete file on segment A
    assert_consistent(catalog.name)


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a4_a_second_update_of_a_replaced_rows_new_version_is_discarded_too(spark, mode):
    """The keyless model's seed 13 (docs/merge-semantics.md#notes A4): dev updates row 2 of segment A, then the
    row's new version; main overwrites the table. Both updates change a row the overwrite replaced: both are
    discarded. Copy-on-write, the second update's segment holds the first's copy of A's other rows (1, 3, 4), and
    taking it brought them back onto main."""
    catalog = two_segments(properties={"write.mode": mode})
    update(catalog, -1, "id = 2", "dev")
    update(catalog, -2, "id = 2", "dev")  # the row's new version, in a segment dev wrote from A's rows
    overwrite(catalog, [400], "main")
    result = merge(catalog)
    assert amounts(spark, catalog) == {400: 4000}
    assert [(d["op"], d["note"]) for d in result.log["discarded_operations"]] == [("update", "A4")] * 2
    assert_consistent(catalog.name)


def test_a5_a_copy_on_write_delete_over_own_and_older_rows_is_split(spark):
    catalog = two_segments(properties={"write.mode": "copy-on-write"})
    insert(catalog, rows(500, 501), branch="dev")
    delete(catalog, "id IN (1, 500)", "dev")  # rewrites segment A (replaced on main) and dev's own
    overwrite(catalog, [400], "main")
    result = merge(catalog)
    assert amounts(spark, catalog) == {400: 4000, 501: 5010}
    [discarded] = result.log["discarded_operations"]
    assert (discarded["op"], discarded["note"], len(discarded["files"])) == ("delete", "A5", 1)
    assert_consistent(catalog.name)


def test_a6_1_a_target_type_wider_than_the_source_s_conflicts(spark):
    catalog = two_segments()
    column_update(
        target=on(catalog, "dev"), database="sales", table="orders", column="amount", changes={"type": "long"}
    )
    column_update(target=on(catalog), database="sales", table="orders", column="amount", changes={"type": "double"})
    [conflict] = refused(catalog)
    assert (conflict["note"], conflict["verdict"]) == ("A6", "conflict")
    assert conflict["reason"].startswith("6.1")


def test_a6_the_same_widening_on_both_sides_merges(spark):
    catalog = two_segments()
    for branch in ("dev", "main"):
        column_update(target=on(catalog, branch), database="sales", table="orders", column="amount",
                      changes={"type": "long"})  # fmt: skip
    column_update(target=on(catalog, "dev"), database="sales", table="orders", column="amount",
                  changes={"name": "total"})  # fmt: skip
    merge(catalog)
    [amount] = [c for c in table_at(catalog).state["columns"] if c["id"] == 2]
    assert (amount["name"], amount["type"]) == ("total", "long")
    assert {row["total"] for row in read(spark, catalog).collect()} == {i * 10 for i in range(1, 9)}


def test_a6_2_a_not_null_column_the_target_added_conflicts_with_source_rows(spark):
    catalog = make_catalog()
    make_table(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    column_add(target=on(catalog), database="sales", table="orders", spec={"name": "must", "type": "string",
                                                                          "nullable": False})  # fmt: skip
    column_add(target=on(catalog, "dev"), database="sales", table="orders", spec={"name": "note", "type": "string"})
    insert(catalog, [{"id": 1, "amount": 1, "region": "eu", "note": "x"}], branch="dev")
    [conflict] = refused(catalog)
    assert (conflict["note"], conflict["reason"][:3]) == ("A6", "6.2")


def test_p_star_both_unsetting_a_key_conflicts_and_else_the_source_wins(spark):
    catalog = two_segments(properties={"keep": "1", "owner": "base"})
    table_update(target=on(catalog, "dev"), database="sales", name="orders", set_properties={"owner": "src"})
    table_update(target=on(catalog), database="sales", name="orders", set_properties={"owner": "dest", "x": "1"})
    merge(catalog)
    assert table_at(catalog).state["properties"] == {"keep": "1", "owner": "src", "x": "1"}
    for branch in ("dev", "main"):
        table_update(target=on(catalog, branch), database="sales", name="orders", unset_properties=["keep"])
    [conflict] = refused(catalog)
    assert (conflict["cell"], conflict["verdict"]) == ("P*", "conflict")


def test_s_star_different_partition_specs_conflict(spark):
    catalog = two_segments()
    table_update(target=on(catalog, "dev"), database="sales", name="orders", partition_by=["region"])
    table_update(target=on(catalog), database="sales", name="orders", partition_by=["amount"])
    [conflict] = refused(catalog)
    assert (conflict["cell"], conflict["verdict"]) == ("S*", "conflict")


def test_f_star_a_target_compaction_of_other_segments_merges(spark):
    catalog = two_segments(properties={"compaction.target-bytes": "1"})  # compacts only segments with deletes
    delete(catalog, "id = 6", "main")
    change(catalog, "table_compact", {})  # rewrites segment B only
    delete(catalog, "id = 1", "dev")
    result = merge(catalog)
    notes = {(p["row"], p["column"]): p["note"] for o in result.report["objects"] for p in o["pairs"]}
    assert notes[("delete", "compaction")] == "F*"
    assert sorted(amounts(spark, catalog)) == [2, 3, 4, 5, 7, 8]


def test_c_star_a_source_compaction_is_taken_over_where_the_target_changed_nothing(spark):
    catalog = two_segments()
    change(catalog, "table_compact", {}, branch="dev")
    insert(catalog, rows(9), branch="main")
    [compacted] = files_at(catalog, "dev").segments
    merge(catalog)
    assert compacted in files_at(catalog).segments
    assert sorted(amounts(spark, catalog)) == list(range(1, 10))


def test_c_star_a_source_compaction_the_target_changed_under_is_dropped_alone(spark):
    """The target deleted from a segment the source compacted, and the source changed no row: the compaction is
    dropped (logged), and no row is lost or doubled."""
    catalog = two_segments()
    change(catalog, "table_compact", {}, branch="dev")
    delete(catalog, "id = 6", "main")
    result = merge(catalog)
    assert [d["op"] for d in result.log["discarded_operations"]] == ["compaction"]
    assert sorted(amounts(spark, catalog)) == [1, 2, 3, 4, 5, 7, 8]


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
@pytest.mark.parametrize("when", ["before", "after"])
def test_c_star_source_row_changes_around_a_compaction_the_target_changed_under_conflict(spark, mode, when):
    """Dropping that compaction would drop the source's delete with it (made before: it lives in the compaction's
    output only; made after: it addresses that output). The merge is refused and nothing changes."""
    catalog = two_segments(properties={"write.mode": mode})
    if when == "before":
        delete(catalog, "id = 1", "dev")
    change(catalog, "table_compact", {}, branch="dev")
    if when == "after":
        delete(catalog, "id = 1", "dev")
    delete(catalog, "id = 6", "main")
    conflicts = refused(catalog)
    assert ("compaction", "delete", "C*") in [(c["row"], c["column"], c["note"]) for c in conflicts]
    assert sorted(amounts(spark, catalog)) == [1, 2, 3, 4, 5, 7, 8]
    assert sorted(amounts(spark, catalog, "dev")) == [2, 3, 4, 5, 6, 7, 8]


def test_r_star_a_copy_on_write_rewrite_of_a_segment_the_target_deleted_from_conflicts(spark):
    catalog = two_segments()
    table_update(target=on(catalog, "dev"), database="sales", name="orders",
                 set_properties={"write.mode": "copy-on-write"})  # fmt: skip
    delete(catalog, "id = 1", "dev")  # rewrites segment A
    delete(catalog, "id = 2", "main")  # a delta file on segment A
    conflicts = refused(catalog)
    assert [(c["row"], c["column"], c["note"]) for c in conflicts] == [("delete", "delete", "R*")]


def test_new_tables_keep_their_id_and_a_name_taken_on_the_target_conflicts(spark):
    catalog = two_segments()
    created = table_create(target=on(catalog, "dev"), database="sales", name="returns", columns=COLUMNS)
    insert(catalog, rows(1), branch="dev", table="returns")
    merge(catalog)
    assert table_at(catalog, table="returns").object_id == created.object_id
    assert read(spark, catalog, table="returns").count() == 1
    table_create(target=on(catalog, "dev"), database="sales", name="refunds", columns=COLUMNS)
    table_create(target=on(catalog), database="sales", name="refunds", columns=COLUMNS)
    [conflict] = refused(catalog)
    assert conflict["note"] == "4.1"


def test_a_rename_to_a_name_the_target_took_conflicts(spark):
    catalog = two_segments()
    table_update(target=on(catalog, "dev"), database="sales", name="orders", new_name="archive")
    table_create(target=on(catalog), database="sales", name="archive", columns=COLUMNS)
    [conflict] = refused(catalog)
    assert conflict["note"] == "name"


def test_seed_001_schema_versions_without_data_are_discarded_and_data_schemas_kept_invisible(spark):
    catalog = two_segments()
    table_id = table_at(catalog).object_id
    old_columns = table_at(catalog).state["columns"]
    column_add(target=on(catalog, "dev"), database="sales", table="orders", spec={"name": "c1", "type": "string"})
    column_add(target=on(catalog, "dev"), database="sales", table="orders", spec={"name": "c2", "type": "string"})
    insert(catalog, [{"id": 9, "amount": 90, "region": "eu", "c1": "a", "c2": "b"}], branch="dev")
    dev_versions = list(schema_history(ref_resolve(catalog=catalog, ref="dev").chain, table_id=table_id))
    intermediate, with_data = dev_versions[-2], dev_versions[-1]
    before_merge = timezone.now()

    result = merge(catalog)

    history = list(schema_history(ref_resolve(catalog=catalog, ref="main").chain, table_id=table_id))
    invisible = [v for v in history if not v.visible]
    assert [v.copied_from_id for v in invisible] == [with_data.id]
    assert intermediate.id not in {v.copied_from_id for v in history}
    logged = result.log["schema_versions"]
    assert [v["source_version"] for v in logged["invisible"]] == [with_data.id]
    assert [v["source_version"] for v in logged["discarded"]] == [intermediate.id]
    merged = history[-1] if history[-1].visible else history[-2]
    assert [c["name"] for c in merged.columns] == ["id", "amount", "region", "c1", "c2"]
    entry = FileEntry.objects.get(commit=result.commit, file__row_count=1)
    assert (entry.schema_version_id, entry.schema_visible) == (invisible[0].id, False)
    assert {row["c2"] for row in read(spark, catalog).collect()} == {None, "b"}
    # Time travel to before the merge shows main's old schema, never src's intermediate one.
    then = ref_resolve(catalog=catalog, ref="main", at=before_merge).chain
    [old] = [v for v in schema_history(then, table_id=table_id)]
    assert old.columns == old_columns and old.visible


def test_a_source_drop_of_a_database_the_target_added_a_table_to_conflicts(spark):
    catalog = two_segments()
    database_drop(target=on(catalog, "dev"), name="sales", cascade=True)
    table_create(target=on(catalog), database="sales", name="fresh", columns=COLUMNS)
    [conflict] = refused(catalog)
    assert conflict["note"] == "4.2" and "fresh" in conflict["reason"]


@pytest.mark.parametrize("renamed", [False, True])
def test_a_source_partition_overwrite_replaces_the_target_s_rows_of_that_partition_only(spark, renamed):
    """The target added rows to both regions; the source overwrote region eu (and, with `renamed`, then renamed
    the partition column: the overwrite still names the partition by its old name)."""
    catalog = two_segments(partition_by=["region"])
    insert(catalog, rows(9) + rows(10, region="us"), branch="main")
    change(
        catalog, "table_load", {"strategy": "snapshot", "partition_column": "region", "rows": rows(100)}, branch="dev"
    )
    if renamed:
        column_update(target=on(catalog, "dev"), database="sales", table="orders", column="region",
                      changes={"name": "zone"})  # fmt: skip
    merge(catalog)
    assert amounts(spark, catalog) == {100: 1000, **{i: i * 10 for i in (5, 6, 7, 8, 10)}}


def test_a_source_partition_overwrite_reaches_into_target_segments_that_mix_partitions(spark):
    """The source partitioned the table and overwrote region eu; the target appended rows of both regions to the
    unpartitioned table, in one segment. The merge deletes that segment's eu rows (a delete file) and keeps its
    us rows: the segment cannot be dropped whole."""
    catalog = two_segments()
    insert(catalog, rows(9) + rows(10, region="us"), branch="main")
    table_update(target=on(catalog, "dev"), database="sales", name="orders", partition_by=["region"])
    change(catalog, "table_compact", {}, branch="dev")
    change(
        catalog, "table_load", {"strategy": "snapshot", "partition_column": "region", "rows": rows(100)}, branch="dev"
    )
    result = merge(catalog)
    assert amounts(spark, catalog) == {100: 1000, **{i: i * 10 for i in (5, 6, 7, 8, 10)}}
    [mixed] = [s for s in files_at(catalog).segments if s.stats["1"]["min"] == 9]
    [delta] = files_at(catalog).deltas[mixed.id]
    assert delta.row_count == 1
    assert {"id": str(delta.id), "segment": str(mixed.id), "rows": 1} in [
        {k: f.get(k) for k in ("id", "segment", "rows")} for f in result.log["files"]
    ]
