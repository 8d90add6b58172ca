"""RESTORE TABLE and RESTORE BRANCH (docs/merge-semantics.md#restore) on real Spark data: one zero-copy commit, visible schemas."""

import pytest
from django.utils import timezone

from catalog_app.models import Commit, DataFile
from catalog_app.selectors.objects import schema_history
from catalog_app.selectors.refs import ref_resolve
from catalog_app.services.refs import branch_create
from catalog_app.services.tables import column_add, table_drop, table_update
from lakeui.errors import ConflictError
from merge_app.models import Restore
from merge_app.services.restores import branch_restore, restore_point
from tests.support.catalogs import COLUMNS, head, make_catalog, make_table, on
from tests.support.data import files_at, read
from tests.support.merges import change, insert, merge, table_at
from tests.support.sql import sql_followed

pytestmark = pytest.mark.django_db(transaction=True)


def rows(*ids):
    return [{"id": i, "amount": i, "region": "eu"} for i in ids]


def ids(spark, catalog, ref="main", table="orders"):
    return sorted(row["id"] for row in read(spark, catalog, ref, table=table).collect())


def restore(catalog, branch="main", *, table="orders", **point):
    commit = restore_point(catalog=catalog, branch=branch, **point)
    database = "sales" if table else None
    return branch_restore(catalog=catalog, branch=branch, point=commit.id, database=database, table=table)


def test_a_table_restored_to_a_timestamp_and_to_a_commit(spark):
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1, 2))
    first, moment = head(catalog), timezone.now()
    files_then = {f.id for f in files_at(catalog).segments}
    change(catalog, "table_delete", {"where": "id = 1"})
    insert(catalog, rows(3))
    data_files = DataFile.objects.count()

    restored = restore(catalog, timestamp=moment.isoformat())
    assert ids(spark, catalog) == [1, 2]
    assert {f.id for f in files_at(catalog).segments} == files_then and not files_at(catalog).deltas
    assert DataFile.objects.count() == data_files  # zero-copy
    commit = Commit.objects.get(id=head(catalog))
    assert restored.commit == commit and commit.operations.get().op == "overwrite"
    assert restored.log["objects"][0]["how"] == "restored"

    insert(catalog, rows(4))
    restore(catalog, commit=first[:12])
    assert ids(spark, catalog) == [1, 2]


def test_a_branch_restored_brings_back_every_object(spark):
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1))
    point = head(catalog)
    make_table(catalog, table="later")
    table_drop(target=on(catalog), database="sales", name="orders")
    restore(catalog, table=None, commit=point)
    assert table_at(catalog, table="later") is None
    assert ids(spark, catalog) == [1]
    moment = timezone.now()
    insert(catalog, rows(2))
    make_table(catalog, table="again")
    restore(catalog, table=None, timestamp=moment.isoformat())
    assert table_at(catalog, table="again") is None
    assert ids(spark, catalog) == [1]


def test_a_dropped_table_is_recreated_with_its_id_and_a_table_restored_before_it_existed_is_dropped(spark):
    catalog = make_catalog()
    make_table(catalog, table="first")
    before_orders = head(catalog)
    original = make_table(catalog)
    insert(catalog, rows(1, 2))
    point = head(catalog)
    table_drop(target=on(catalog), database="sales", name="orders")
    restore(catalog, commit=point)
    assert table_at(catalog).object_id == original.object_id
    assert ids(spark, catalog) == [1, 2]
    restore(catalog, commit=before_orders)
    assert table_at(catalog) is None


def test_a_restore_across_a_merge_shows_only_visible_schemas(spark):
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1))
    table_id = table_at(catalog).object_id
    before_merge = head(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    column_add(target=on(catalog, "dev"), database="sales", table="orders", spec={"name": "c1", "type": "string"})
    column_add(target=on(catalog, "dev"), database="sales", table="orders", spec={"name": "c2", "type": "string"})
    insert(catalog, [{"id": 2, "amount": 2, "region": "eu", "c1": "x", "c2": "y"}], branch="dev")
    merge(catalog)
    after_merge = head(catalog)

    restore(catalog, commit=before_merge)
    assert [c["name"] for c in table_at(catalog).state["columns"]] == [c["name"] for c in COLUMNS]
    assert ids(spark, catalog) == [1]
    restore(catalog, commit=after_merge)
    assert [c["name"] for c in table_at(catalog).state["columns"]] == ["id", "amount", "region", "c1", "c2"]
    assert {r["c2"] for r in read(spark, catalog).collect()} == {None, "y"}
    current = table_at(catalog).state["schema_version_id"]
    visible = [v for v in schema_history(ref_resolve(catalog=catalog, ref="main").chain, table_id=table_id)
               if v.visible]  # fmt: skip
    assert visible[-1].id == current


def test_a_restore_merges_into_another_branch(spark):
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1, 2))
    point = head(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    branch_create(catalog=catalog, name="release", source="main")
    insert(catalog, rows(3), branch="dev")
    restore(catalog, "dev", commit=point)
    assert ids(spark, catalog, "dev") == [1, 2]
    insert(catalog, rows(7), branch="release")
    result = merge(catalog, "dev", "release")
    ops = [p for o in result.report["objects"] for p in o["pairs"]]
    assert {(p["row"], p["column"], p["verdict"]) for p in ops} == {
        ("insert", "insert", "ok"), ("overwrite", "insert", "ok"),
    }  # fmt: skip
    assert ids(spark, catalog, "release") == [1, 2]  # the restore is an overwrite: replayed as such


def test_restore_api_and_sql(spark, user_client, celery_worker):
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1))
    point = head(catalog)
    insert(catalog, rows(2))
    url = f"/api/v1/catalogs/{catalog.name}"
    status, restored = sql_followed(user_client, catalog, f"RESTORE TABLE sales.orders TO COMMIT '{point}'")
    assert status == 200, restored
    assert (restored["kind"], restored["commit"]) == ("restore", head(catalog))
    assert ids(spark, catalog) == [1]
    audit = user_client.get(f"{url}/restores/{restored['restore']}").json()
    assert (audit["point"], audit["table"], audit["commit"]) == (point, "orders", head(catalog))
    bad = user_client.post(f"{url}/restores", {"branch": "main", "timestamp": "x", "commit": point}, format="json")
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_input")
    missing = user_client.post(f"{url}/restores", {"branch": "main", "database": "sales", "table": "nope",
                                                   "commit": point}, format="json")  # fmt: skip
    assert missing.status_code == 404
    assert Restore.objects.count() == 1
    syntax = user_client.post(f"{url}/sql", {"statement": "RESTORE BRANCH main TO YESTERDAY"}, format="json")
    assert (syntax.status_code, syntax.json()["details"]["position"]) == (400, 23)


def test_a_renamed_table_is_not_restored_onto_a_name_another_table_holds(spark):
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1))
    point = head(catalog)
    table_update(target=on(catalog), database="sales", name="orders", new_name="old_orders")
    make_table(catalog)  # a new `orders`
    before = head(catalog)
    with pytest.raises(ConflictError) as refused:
        restore(catalog, commit=point, table="old_orders")
    assert refused.value.code == "name_taken" and "'orders'" in refused.value.message
    assert head(catalog) == before
    table_drop(target=on(catalog), database="sales", name="orders")
    restore(catalog, commit=point, table="old_orders")
    assert ids(spark, catalog) == [1]


@pytest.mark.parametrize("resolution", [None, "target_wins"])
def test_a_table_a_restore_dropped_and_a_later_restore_brought_back_merges_into_the_branch_that_dropped_it(
    spark, resolution
):
    """Found by the change feed's randomized histories: the merge's plan had no state for a table the base and the
    target had dropped (by a restore) and the source brought back (by a restore), and the merge failed with a
    TypeError. The source created it again since the base: it is taken over."""
    catalog = make_catalog()
    make_table(catalog, table="kept")  # so that restoring the branch to before `orders` keeps the database
    before = head(catalog)
    make_table(catalog)
    insert(catalog, rows(1, 2))
    existed = head(catalog)
    branch_create(catalog=catalog, name="b1", source="main")
    branch_restore(catalog=catalog, branch="main", point=before)  # main drops orders
    merge(catalog, source="main", target="b1")  # and so does b1
    assert table_at(catalog, "b1") is None
    branch_restore(catalog=catalog, branch="b1", point=existed)  # b1 brings it back

    merged = merge(
        catalog, source="b1", target="main", **({"resolution": {"default": resolution}} if resolution else {})
    )
    assert merged.status == "merged"
    assert ids(spark, catalog) == [1, 2]
