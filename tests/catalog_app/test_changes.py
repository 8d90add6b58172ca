"""Row changes between two refs (docs/changes.md), through the API, on real data: each kind of change comes out as
what it does to rows, and names the commit (and merge, and merge request) that made it."""

import io

import pyarrow as pa
import pytest

from catalog_app.services.refs import branch_create
from lakeui.jobs.services import job_execute
from merge_app.services.merge_requests import merge_request_merge, merge_request_open
from merge_app.services.picks import commits_pick
from merge_app.services.restores import branch_restore
from tests.conftest import wait_for_job
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.merges import change, insert, merge

pytestmark = pytest.mark.django_db(transaction=True)


def rows(*ids, region="eu"):
    return [{"id": i, "amount": i * 10, "region": region} for i in ids]


def upsert(catalog, new, **kwargs):
    return change(catalog, "table_load", {"strategy": "upsert", "key_columns": ["id"], "rows": new}, **kwargs)


def feed(client, catalog, source, target, **params):
    response = client.get(f"/api/v1/catalogs/{catalog.name}/changes", {"from": source, "to": target, **params})
    assert response.status_code == 200, response.json()
    return response.json()


def by_key(answer):
    return {r["key"]["id"]: r for r in answer["results"]}


def test_a_keyed_table_s_inserts_updates_and_deletes_by_key_and_by_predicate(user_client):
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"])
    insert(catalog, rows(1, 2, 3, 4, 5))
    start = head(catalog)
    upsert(catalog, [{"id": 1, "amount": 11, "region": "eu"}, {"id": 6, "amount": 60, "region": "us"},
                     {"id": 7, "amount": 70, "region": "us"}])  # fmt: skip
    upserted = head(catalog)
    change(catalog, "table_delete", {"where": "id = 2"})
    by_id = head(catalog)
    change(catalog, "table_delete", {"where": "amount >= 50 AND amount < 70"})  # 5 and 6: 6 never reaches `to`
    by_predicate = head(catalog)
    answer = feed(user_client, catalog, start, "main")
    assert answer["source"] == start and answer["target"] == by_predicate
    assert [(t["table"], t["primary_key"], t["counts"]) for t in answer["tables"]] == [
        ("sales.orders", ["id"], {"insert": 1, "update": 1, "delete": 2})
    ]
    found = by_key(answer)
    assert sorted(found) == [1, 2, 5, 7] and answer["count"] == 4
    assert found[1]["change"] == "update" and found[1]["changed"] == ["amount"]
    assert found[1]["before"] == {"id": 1, "amount": 10, "region": "eu"}
    assert found[1]["after"] == {"id": 1, "amount": 11, "region": "eu"}
    assert (found[7]["change"], found[7]["before"], found[7]["after"]["amount"]) == ("insert", None, 70)
    assert (found[2]["change"], found[2]["after"], found[2]["before"]["amount"]) == ("delete", None, 20)
    assert found[5]["change"] == "delete"
    commits = {k: found[k]["commit"] for k in found}
    assert commits == {1: upserted, 7: upserted, 2: by_id, 5: by_predicate}
    assert all(r["merge"] is None and r["merge_request"] is None for r in answer["results"])
    # The other way round: every change undone.
    back = by_key(feed(user_client, catalog, "main", start))
    assert {k: r["change"] for k, r in back.items()} == {1: "update", 2: "insert", 5: "insert", 7: "delete"}
    assert back[1]["before"]["amount"] == 11 and back[1]["after"]["amount"] == 10
    # Paged as the API pages: count, next, previous, results.
    first = feed(user_client, catalog, start, "main", page_size=3)
    second = user_client.get(first["next"]).json()
    assert (first["count"], len(first["results"]), len(second["results"]), second["next"]) == (4, 3, 1, None)
    assert first["results"] + second["results"] == answer["results"]


def test_a_compaction_changes_no_row_and_an_overwrite_only_the_rows_it_changed(user_client):
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"])
    insert(catalog, rows(1, 2))
    insert(catalog, rows(3))
    change(catalog, "table_delete", {"where": "id = 2"})
    before = head(catalog)
    change(catalog, "table_compact", {})
    compacted = head(catalog)
    assert compacted != before
    assert feed(user_client, catalog, before, compacted) == {
        "count": 0, "next": None, "previous": None, "source": before, "target": compacted, "tables": [],
        "results": [],
    }  # fmt: skip
    change(catalog, "table_load", {"strategy": "full_refresh", "rows": [*rows(1), {"id": 3, "amount": 0,
                                                                                   "region": "eu"}, *rows(4)]})  # fmt: skip
    overwritten = head(catalog)
    found = by_key(feed(user_client, catalog, compacted, "main"))
    assert {k: (r["change"], r["changed"], r["commit"]) for k, r in found.items()} == {
        3: ("update", ["amount"], overwritten),
        4: ("insert", [], overwritten),
    }  # row 1 rewritten unchanged: no record


def test_a_restore_and_a_revert_come_out_as_what_they_do_to_rows(user_client):
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"])
    insert(catalog, rows(1, 2, 3))
    start = head(catalog)
    upsert(catalog, [{"id": 1, "amount": 11, "region": "eu"}, *rows(4)])
    upserted = head(catalog)
    change(catalog, "table_delete", {"where": "id = 2"})
    restore = branch_restore(catalog=catalog, branch="main", point=start, database="sales", table="orders")
    found = by_key(feed(user_client, catalog, restore.commit.parent_id, "main"))
    assert {k: (r["change"], r["commit"]) for k, r in found.items()} == {
        1: ("update", restore.commit_id),
        2: ("insert", restore.commit_id),
        4: ("delete", restore.commit_id),
    }
    assert feed(user_client, catalog, start, "main")["count"] == 0  # restored: nothing differs from the start
    commits_pick(catalog=catalog, kind="revert", branch="main", commits=[upserted])
    found = by_key(feed(user_client, catalog, restore.commit_id, "main"))
    assert {k: (r["change"], r["commit"]) for k, r in found.items()} == {}  # the restore already undid it
    upsert(catalog, [{"id": 5, "amount": 5, "region": "x"}])
    added = head(catalog)
    (reverted,) = commits_pick(catalog=catalog, kind="revert", branch="main", commits=[added])
    found = by_key(feed(user_client, catalog, added, "main"))
    assert {k: (r["change"], r["commit"]) for k, r in found.items()} == {5: ("delete", reverted.commit_id)}


def test_a_keyless_table_counts_rows_as_a_multiset(user_client):
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1))
    start = head(catalog)
    insert(catalog, rows(7))
    first = head(catalog)
    insert(catalog, rows(7))
    second = head(catalog)
    (revert,) = commits_pick(catalog=catalog, kind="revert", branch="main", commits=[first])  # one copy of 7 goes
    change(catalog, "table_delete", {"where": "id = 1"})
    deleted = head(catalog)
    answer = feed(user_client, catalog, start, "main")
    assert answer["tables"][0]["primary_key"] == [] and answer["tables"][0]["counts"] == {
        "insert": 1, "update": 0, "delete": 1
    }  # fmt: skip
    records = {r["change"]: r for r in answer["results"]}
    assert records["insert"]["after"] == rows(7)[0] and records["insert"]["key"] is None
    assert records["insert"]["commit"] == second  # the copy that stayed
    assert records["delete"]["before"] == rows(1)[0] and records["delete"]["commit"] == deleted
    # Appended twice, both copies deleted by one predicate: two deletes of one row.
    change(catalog, "table_delete", {"where": "id = 7"})
    twice = feed(user_client, catalog, revert.commit_id, "main")
    assert [(r["change"], r["before"]["id"]) for r in twice["results"]] == [("delete", 1), ("delete", 7)]


def test_a_merge_names_the_commit_the_merge_and_its_merge_request(user_client, user):
    catalog = make_catalog(user=user)
    make_table(catalog, primary_key=["id"])
    make_table(catalog, table="other")
    insert(catalog, rows(1, 2, 3))
    start = head(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    upsert(catalog, [{"id": 2, "amount": 22, "region": "eu"}], branch="dev")
    on_dev = head(catalog, "dev")
    change(catalog, "table_delete", {"where": "id = 3"}, branch="dev")
    deleted_on_dev = head(catalog, "dev")
    insert(catalog, rows(9), branch="main", table="other")  # main moves too: a true merge, not a fast-forward
    merged = merge(catalog)
    found = by_key(feed(user_client, catalog, start, "main", table="sales.orders"))
    assert {k: (r["change"], r["commit"], r["merge"]) for k, r in found.items()} == {
        2: ("update", on_dev, merged.commit_id), 3: ("delete", deleted_on_dev, merged.commit_id),
    }  # fmt: skip
    # Through a merge request: the records name it.
    branch_create(catalog=catalog, name="fix", source="main")
    upsert(catalog, rows(4), branch="fix")
    on_fix = head(catalog, "fix")
    upsert(catalog, rows(10), branch="main")
    before = head(catalog)
    request = merge_request_open(catalog=catalog, source="fix", target="main", title="add 4", author=user)
    job_execute(job_id=str(request.plan_job_id), worker="test-process")  # its plan, then its merge
    wait_for_job(request.plan_job_id)  # a worker may have taken it first
    request.refresh_from_db()
    job = merge_request_merge(merge_request=request, user=user)
    job_execute(job_id=str(job.id), worker="test-process")
    assert wait_for_job(job.id).status == "succeeded"
    found = by_key(feed(user_client, catalog, before, "main"))
    merge_commit = head(catalog)
    assert found[4]["commit"] == on_fix and found[4]["merge"] == merge_commit
    assert found[4]["merge_request"] == request.number


def test_from_any_ref_and_one_table_and_arrow(user_client):
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"])
    make_table(catalog, table="other")
    insert(catalog, rows(1, 2))
    branch_create(catalog=catalog, name="a", source="main")
    branch_create(catalog=catalog, name="b", source="main")
    upsert(catalog, [{"id": 1, "amount": 5, "region": "a"}], branch="a")
    insert(catalog, rows(8), branch="b")
    inserted = head(catalog, "b")
    insert(catalog, rows(3), branch="b", table="other")
    # Neither is the other's ancestor: b's state against a's.
    found = by_key(feed(user_client, catalog, "a", "b", table="sales.orders"))
    assert {k: (r["change"], r["commit"]) for k, r in found.items()} == {
        1: ("update", None),
        8: ("insert", inserted),
    }  # a's update is not b's doing: b's history made no change there
    assert found[1]["before"]["amount"] == 5 and found[1]["after"]["amount"] == 10
    both = feed(user_client, catalog, "a", "b")
    assert [t["table"] for t in both["tables"]] == ["sales.orders", "sales.other"] and both["count"] == 3
    # The Arrow stream of one table.
    response = user_client.get(
        f"/api/v1/catalogs/{catalog.name}/changes", {"from": "a", "to": "b", "table": "sales.orders"},
        HTTP_ACCEPT="application/vnd.apache.arrow.stream",
    )  # fmt: skip
    assert response.status_code == 200 and response["Content-Type"] == "application/vnd.apache.arrow.stream"
    table = pa.ipc.open_stream(io.BytesIO(b"".join(response.streaming_content))).read_all()
    assert table.column_names == ["_change", "b:id", "b:amount", "b:region", "a:id", "a:amount", "a:region",
                                  "_changed", "_commit", "_merge", "_merge_request"]  # fmt: skip
    assert table.to_pylist() == [
        {"_change": "update", "b:id": 1, "b:amount": 5, "b:region": "a", "a:id": 1, "a:amount": 10, "a:region": "eu",
         "_changed": ["amount", "region"], "_commit": None, "_merge": None, "_merge_request": None},
        {"_change": "insert", "b:id": None, "b:amount": None, "b:region": None, "a:id": 8, "a:amount": 80,
         "a:region": "eu", "_changed": [], "_commit": inserted, "_merge": None, "_merge_request": None},
    ]  # fmt: skip
    # Bad input: a clear 4xx in JSON.
    url = f"/api/v1/catalogs/{catalog.name}/changes"
    for params, status, code in [
        ({"from": "a"}, 400, "invalid_input"),
        ({"from": "a", "to": "nope"}, 404, "ref_not_found"),
        ({"from": "a", "to": "b", "table": "sales.nope"}, 404, "table_not_found"),
        ({"from": "a", "to": "b", "format": "arrow"}, 400, "table_required"),
    ]:
        response = user_client.get(url, params)
        assert (response.status_code, response.json()["code"]) == (status, code), response.content


def test_a_dropped_table_s_rows_are_deleted_by_the_drop(user_client):
    from catalog_app.services.tables import table_drop
    from tests.support.catalogs import on

    catalog = make_catalog()
    make_table(catalog, primary_key=["id"])
    insert(catalog, rows(1, 2))
    start = head(catalog)
    table_drop(target=on(catalog), database="sales", name="orders")
    dropped = head(catalog)
    answer = feed(user_client, catalog, start, "main")
    assert [(t["table"], t["change"], t["counts"]) for t in answer["tables"]] == [
        ("sales.orders", "dropped", {"insert": 0, "update": 0, "delete": 2})
    ]
    assert [(r["change"], r["key"], r["commit"]) for r in answer["results"]] == [
        ("delete", {"id": 1}, dropped), ("delete", {"id": 2}, dropped)
    ]  # fmt: skip
    back = feed(user_client, catalog, "main", start)  # the other way: the table's rows come (back) in
    assert [(t["change"], r["change"]) for t in back["tables"] for r in back["results"]] == [("added", "insert")] * 2


def test_files_the_web_process_cannot_read_are_a_clear_503(user_client, settings):
    from catalog_app.engine.warehouse import Warehouse, path_remove
    from tests.support.data import files_at

    catalog = make_catalog()
    make_table(catalog, primary_key=["id"])
    start = head(catalog)
    insert(catalog, rows(1))
    path_remove(Warehouse(settings.LAKEUI_WAREHOUSE).uri(files_at(catalog).segments[0].path))  # lost, say
    response = user_client.get(f"/api/v1/catalogs/{catalog.name}/changes", {"from": start, "to": "main"})
    assert (response.status_code, response.json()["code"]) == (503, "changes_unreadable")
    assert response.json()["details"]["table"] == "sales.orders"
