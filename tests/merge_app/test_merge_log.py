"""The merge audit log as the database holds it (docs/merge-semantics.md#the-audit-log): read back, it names what the
merge took over, what it discarded and what it kept of the target, as the merge returned it."""

import json

import pytest
from django.db import connection

from catalog_app.services.refs import branch_create
from merge_app.models import ZSTD_MAGIC, Merge
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import files_at
from tests.support.merges import change, insert, merge

pytestmark = pytest.mark.django_db(transaction=True)


def rows(*ids):
    return [{"id": i, "amount": i * 10, "region": "eu"} for i in ids]


def test_the_stored_log_holds_what_was_taken_over_discarded_and_kept(spark):
    catalog = make_catalog()
    make_table(catalog)
    make_table(catalog, table="kept")
    insert(catalog, rows(1, 2, 3, 4))
    insert(catalog, rows(1), table="kept")
    branch_create(catalog=catalog, name="dev", source="main")
    insert(catalog, rows(500, 501), branch="dev")
    change(catalog, "table_delete", {"where": "id IN (1, 500)"}, branch="dev")  # A5: discarded for row 1
    change(catalog, "table_delete", {"where": "id = 1"}, branch="dev", table="kept")  # against main's insert:
    change(catalog, "table_load", {"strategy": "full_refresh", "rows": rows(400)})  # main overwrites orders
    insert(catalog, rows(3), table="kept")  # a conflict, settled by target_wins
    dev_segments = {str(s.id) for s in files_at(catalog, "dev").segments}

    result = merge(catalog, resolution={"tables": {"sales.kept": "target_wins"}})

    stored = Merge.objects.get(id=result.id)
    assert (stored.status, stored.commit_id) == (Merge.Status.MERGED, head(catalog))
    assert [stored.log, stored.report] == json.loads(json.dumps([result.log, result.report]))  # as it was made
    how = {obj["name"]: obj["how"] for obj in stored.log["objects"]}
    assert how == {"sales.orders": "replayed", "sales.kept": "kept_target"}
    [discarded] = stored.log["discarded_operations"]
    assert (discarded["object"], discarded["op"], discarded["note"]) == ("sales.orders", "delete", "A5")
    taken = {f["id"] for f in stored.log["files"] if f["kind"] == "segment"}
    assert taken and taken <= dev_segments  # dev's own segment of rows 500 and 501, by reference
    reported = {obj["name"]: (obj["verdict"], obj["resolution"]) for obj in stored.report["objects"]}
    assert reported["sales.orders"] == ("discarded", None) and reported["sales.kept"][1] == "target_wins"
    assert stored.log["resolutions"] == [
        {"object": "sales.kept", "scope": "table", "choice": "target_wins", "chosen_by": None}
    ]


@pytest.mark.django_db
def test_a_log_is_stored_compressed_and_one_stored_as_plain_json_text_reads_the_same():
    fields = {"catalog": make_catalog(), "source": "dev", "target": "main", "source_head": "a", "target_head": "b",
              "base": "c", "status": Merge.Status.PLANNED}  # fmt: skip
    log = {"files": [{"id": f"segment-{n}", "rows": 2**70 + n} for n in range(500)]}  # a big integer read exactly
    merge = Merge.objects.create(**fields, log=log)
    key = Merge._meta.pk.get_db_prep_value(merge.id, connection)
    with connection.cursor() as cursor:
        cursor.execute("SELECT log FROM merge_app_merge WHERE id = %s", [key])
        stored = bytes(cursor.fetchone()[0])
        assert stored[:4] == ZSTD_MAGIC and len(stored) < len(json.dumps(log)) / 4
        plain = json.dumps({"written": "before 0012"})  # as rows written before the logs were compressed hold it
        cursor.execute("UPDATE merge_app_merge SET log = %s WHERE id = %s", [plain.encode(), key])
    assert Merge.objects.get(id=merge.id).log == {"written": "before 0012"}
    assert Merge.objects.get(id=merge.id).report == {}
