"""The merge audit log as the database holds it (docs/merge-semantics.md#the-audit-log): read back, it names what the
merge took over, what it discarded and what it kept of the target, as the merge returned it."""

import json

import pytest

from catalog_app.services.refs import branch_create
from merge_app.models import Merge
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
