"""MERGE BRANCH end to end through the service on real Spark data: zero-copy, one commit, second parent."""

import pytest
from pyspark.testing import assertDataFrameEqual

from catalog_app.models import Commit, FileEntry
from catalog_app.services import commits
from catalog_app.services.refs import branch_create
from lakeui.errors import ConflictError
from merge_app.models import Merge
from merge_app.services.merge_plans import merge_plan
from merge_app.services.merge_writer import MergeWriter
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import files_at, read
from tests.support.merges import change, insert, merge

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = "id long, amount int, region string"


def rows(*ids):
    return [{"id": i, "amount": i * 10, "region": "eu"} for i in ids]


def frame(spark, ids, amount=lambda i: i * 10):
    return spark.createDataFrame([(i, amount(i), "eu") for i in ids], SCHEMA)


def appended_on_both():
    """main holds rows 1, 2; dev, made from it, appends 3, 4 and main appends 5."""
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1, 2))
    branch_create(catalog=catalog, name="dev", source="main")
    insert(catalog, rows(3, 4), branch="dev")
    insert(catalog, rows(5), branch="main")
    return catalog


def test_merging_appended_data_adds_one_commit_and_copies_no_file(spark):
    catalog = appended_on_both()
    before, dev_head = head(catalog), head(catalog, "dev")
    dev_files = {f.id for f in files_at(catalog, "dev").segments}
    commits_before = Commit.objects.filter(catalog=catalog).count()

    result = merge(catalog)

    assert result.status == Merge.Status.MERGED
    commit = Commit.objects.get(id=head(catalog))
    assert (commit.parent_id, commit.merge_parent_id) == (before, dev_head)
    assert Commit.objects.filter(catalog=catalog).count() == commits_before + 1  # one commit added
    assertDataFrameEqual(read(spark, catalog), frame(spark, [1, 2, 3, 4, 5]))
    main_files = {f.id for f in files_at(catalog).segments}
    assert dev_files <= main_files  # the same files, by reference
    assert result.log["files"] and all(f["kind"] == "segment" for f in result.log["files"])


def test_a_merge_of_appends_reads_only_the_files_they_added(spark):
    """The writer of a table the source only appended to knows of its files only those the appends added: not the
    segments the table had at the base, nor the target's (the table's size does not count, only the change)."""
    catalog = appended_on_both()
    base_files = {f.id for f in files_at(catalog, "dev").segments} & {f.id for f in files_at(catalog).segments}
    plan = merge_plan(catalog=catalog, source="dev", target="main", in_worker=True)
    [table] = plan.diff.objects
    writer = MergeWriter(plan.diff)
    writer.write_files()

    appended = {segment for op in table.source_operations for segment in op.details["segments_added"]}
    assert base_files and {str(f.id) for f in writer.files["source"][table.object_id].segments} == appended
    assert table.object_id not in writer.files["target"] and table.object_id not in writer.files["base"]
    assert merge(catalog).status == Merge.Status.MERGED
    assertDataFrameEqual(read(spark, catalog), frame(spark, [1, 2, 3, 4, 5]))


def test_a_merge_whose_rows_go_in_with_copy_gives_the_same_table(spark, monkeypatch):
    monkeypatch.setattr(commits, "COPY_ROWS", 1)  # every row of every commit through COPY, as a large merge's go
    catalog = appended_on_both()
    dev_files = {f.id for f in files_at(catalog, "dev").segments}

    assert merge(catalog).status == Merge.Status.MERGED
    assertDataFrameEqual(read(spark, catalog), frame(spark, [1, 2, 3, 4, 5]))
    assert dev_files <= {f.id for f in files_at(catalog).segments}
    assert FileEntry.objects.filter(commit_id=head(catalog), removed=False).count() == 1  # the source's segment


def test_a_conflict_changes_nothing_and_is_logged(spark):
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1, 2))
    branch_create(catalog=catalog, name="dev", source="main")
    change(catalog, "table_delete", {"where": "id = 1"}, branch="dev")
    insert(catalog, rows(9))
    before = head(catalog)
    with pytest.raises(ConflictError) as refused:
        merge(catalog)
    assert refused.value.code == "merge_conflict"
    assert head(catalog) == before
    logged = Merge.objects.get(id=refused.value.details["merge"])
    assert logged.status == Merge.Status.CONFLICT and logged.commit is None
    [conflict] = refused.value.details["conflicts"][0]["conflicts"]
    assert (conflict["row"], conflict["column"], conflict["verdict"]) == ("delete", "insert", "conflict")


def test_a_second_merge_uses_the_first_as_its_ancestor(spark):
    catalog = make_catalog()
    make_table(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    insert(catalog, rows(1), branch="dev")
    merge(catalog)
    first_source = head(catalog, "dev")
    insert(catalog, rows(2), branch="dev")
    second = merge(catalog)
    assert second.base == first_source  # the first merge's source head, not the fork point
    assert second.base == Commit.objects.get(id=second.commit.merge_parent_id).parent_id
    assertDataFrameEqual(read(spark, catalog), frame(spark, [1, 2]))
    assert merge(catalog).status == Merge.Status.UP_TO_DATE
