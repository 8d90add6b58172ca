"""Provenance (docs/provenance.md) on real data: the blame of a table at a ref names, per key and cell, the commit
that wrote the value and the merges and picks that brought it (with the merge request, its approver and checks);
a compaction changes nothing, a restore names itself; one key's history lists its versions; bad input is 4xx."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from lakeui_client.cli import _blamed
from rest_framework.test import APIClient

from catalog_app.selectors.blame import _Kept
from catalog_app.services.refs import branch_create
from lakeui.jobs.services import job_execute
from merge_app.services.merge_requests import (
    merge_request_merge,
    merge_request_open,
    merge_request_review,
    merge_request_status_post,
    merge_request_update,
)
from merge_app.services.merges import branch_merge
from merge_app.services.picks import commits_pick
from merge_app.services.restores import branch_restore
from tests.conftest import wait_for_job
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.merges import change, insert

pytestmark = pytest.mark.django_db(transaction=True)

TABLE = "/api/v1/catalogs/lake/refs/{ref}/databases/sales/tables/{table}"


def upsert(catalog, new, **kwargs):
    return change(catalog, "table_load", {"strategy": "upsert", "key_columns": ["id"], "rows": new}, **kwargs)


def blame(client, ref="main", table="orders", **params):
    response = client.get(TABLE.format(ref=ref, table=table) + "/blame", params)
    assert response.status_code == 200, response.json()
    return response.json()


def cells(answer, key):
    """{column: (commit, chain)} of one key of a blame page."""
    (found,) = [r for r in answer["results"] if r["key"] == {"id": key}]
    return {n: (c["commit"], c["chain"]) for n, c in found["cells"].items()}


def test_blame_through_a_merge_request_a_pick_a_compaction_and_a_restore(user_client, user):
    bob, _ = get_user_model().objects.get_or_create(username="bob")
    catalog = make_catalog(user=user)
    make_table(catalog, primary_key=["id"])
    make_table(catalog, table="events")  # no key: blamed per row
    insert(catalog, [{"id": i, "amount": i * 10, "region": "eu"} for i in (1, 2, 3)])
    first = head(catalog)
    insert(catalog, [{"id": 1, "amount": 1, "region": "eu"}], table="events")
    on_main_events = head(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    upsert(catalog, [{"id": 9, "amount": 90, "region": "eu"}], branch="dev")
    written = head(catalog, "dev")
    upsert(catalog, [{"id": 9, "amount": 90, "region": "us"}], branch="dev")
    moved = head(catalog, "dev")
    insert(catalog, [{"id": 2, "amount": 2, "region": "us"}], branch="dev", table="events")
    on_dev_events = head(catalog, "dev")
    insert(catalog, [{"id": 4, "amount": 40, "region": "eu"}])  # main moves: a true merge
    fourth = head(catalog)
    # Merge request !1, approved by bob, its check rows_ok passed.
    request = merge_request_open(catalog=catalog, source="dev", target="main", title="order 9", author=user)
    job_execute(job_id=str(request.plan_job_id), worker="test-process")
    wait_for_job(request.plan_job_id)  # a worker may have taken it first
    merge_request_review(merge_request=request, reviewer=bob, decision="approve")
    merge_request_status_post(merge_request=request, user=bob, name="rows_ok", state="success", head=on_dev_events)
    request.refresh_from_db()
    job = merge_request_merge(merge_request=request, user=user)
    job_execute(job_id=str(job.id), worker="test-process")
    assert wait_for_job(job.id).status == "succeeded"
    merged = head(catalog)
    # One cell changed on hotfix, picked onto main.
    branch_create(catalog=catalog, name="hotfix", source="main")
    upsert(catalog, [{"id": 9, "amount": 95, "region": "us"}], branch="hotfix")
    fixed = head(catalog, "hotfix")
    (pick,) = commits_pick(catalog=catalog, kind="cherry_pick", branch="main", commits=[fixed])

    answer = blame(user_client)
    assert answer["count"] == 5 and [r["key"]["id"] for r in answer["results"]] == [1, 2, 3, 4, 9]
    assert answer["commit"] == pick.commit_id and answer["table"]["primary_key"] == ["id"]
    assert cells(answer, 9) == {
        "id": (written, [merged]), "amount": (fixed, [pick.commit_id]), "region": (moved, [merged]),
    }  # fmt: skip
    assert cells(answer, 1) == dict.fromkeys(("id", "amount", "region"), (first, []))
    assert cells(answer, 4)["amount"] == (fourth, [])
    commits = answer["commits"]
    assert commits[merged]["kind"] == "merge" and commits[merged]["merge_request"] == request.number
    assert commits[merged]["approved_by"] == ["bob"]
    assert [(c["name"], c["state"]) for c in commits[merged]["checks"]] == [("rows_ok", "success")]
    assert commits[pick.commit_id]["kind"] == "cherry_pick" and commits[pick.commit_id]["picked_from"] == fixed
    assert (commits[fixed]["branch"], commits[written]["branch"], commits[pick.commit_id]["branch"]) == (
        "hotfix", "dev", "main",
    )  # fmt: skip
    assert commits[merged]["author"] == "alice" and commits[written]["created_at"]  # the helper writes as no one
    # Paged, and one key.
    page = blame(user_client, page=2, page_size=2)
    assert [r["key"]["id"] for r in page["results"]] == [3, 4] and page["next"] and page["previous"]
    assert blame(user_client, key="[9]")["results"] == [r for r in answer["results"] if r["key"] == {"id": 9}]
    # A table without a key: per row, the commit whose segment holds it (through the merge).
    rows = {r["row"]["id"]: (r["commit"], r["chain"]) for r in blame(user_client, table="events")["results"]}
    assert rows == {1: (on_main_events, []), 2: (on_dev_events, [merged])}

    # A compaction changes no provenance (of either table: a row without a key is matched by its values).
    change(catalog, "table_compact", {})
    assert head(catalog) != pick.commit_id
    again = blame(user_client)
    assert again["results"] == answer["results"] and again["commits"] == answer["commits"]
    compacted = head(catalog)
    change(catalog, "table_compact", {}, table="events")
    assert head(catalog) != compacted
    assert {r["row"]["id"]: (r["commit"], r["chain"]) for r in blame(user_client, table="events")["results"]} == rows
    # A restore names itself for what it put back (amount 90), and changes nothing else.
    restore = branch_restore(catalog=catalog, branch="main", point=merged, database="sales", table="orders")
    after = blame(user_client)
    assert cells(after, 9) == {"id": (written, [merged]), "amount": (restore.commit_id, []),
                               "region": (moved, [merged])}  # fmt: skip
    assert after["commits"][restore.commit_id]["kind"] == "restore"
    # At an older ref, the older answer.
    assert cells(blame(user_client, ref=merged), 9)["amount"] == (written, [merged])

    # Deleted and written again with the same values: the new insert wrote every cell.
    change(catalog, "table_delete", {"where": "id = 9"})
    deleted = head(catalog)
    upsert(catalog, [{"id": 9, "amount": 90, "region": "us"}])
    again = head(catalog)
    assert cells(blame(user_client, key="[9]"), 9) == dict.fromkeys(("id", "amount", "region"), (again, []))

    # One key's history: every version at the ref, newest first, with what made it.
    response = user_client.get(TABLE.format(ref="main", table="orders") + "/history", {"key": "[9]"})
    assert response.status_code == 200, response.json()
    history = response.json()
    assert [(v["change"], v["commit"], v["chain"], v["changed"]) for v in history["versions"]] == [
        ("insert", again, [], ["id", "amount", "region"]),
        ("delete", deleted, [], []),
        ("update", restore.commit_id, [], ["amount"]),
        ("update", fixed, [pick.commit_id], ["amount"]),
        ("update", moved, [merged], ["region"]),
        ("insert", written, [merged], ["id", "amount", "region"]),
    ]
    assert [(v["row"] or {}).get("amount") for v in history["versions"]] == [90, None, 90, 95, 90, 90]
    assert history["commits"][merged]["merge_request"] == request.number
    # The table's own history is as it was without a key.
    assert "versions" in user_client.get(TABLE.format(ref="main", table="orders") + "/history").json()

    # Bad input: 404 and 400, as JSON with a code.
    for url, params, status, code in [
        (TABLE.format(ref="nope", table="orders") + "/blame", {}, 404, "ref_not_found"),
        (TABLE.format(ref="main", table="nope") + "/blame", {}, 404, "table_not_found"),
        (TABLE.format(ref="main", table="orders") + "/blame", {"key": "[77]"}, 404, "key_not_found"),
        (TABLE.format(ref="main", table="orders") + "/blame", {"key": "[9"}, 400, "invalid_key"),
        (TABLE.format(ref="main", table="orders") + "/blame", {"key": "[9, 1]"}, 400, "invalid_key"),
        (TABLE.format(ref="main", table="orders") + "/blame", {"key": '["x"]'}, 400, "invalid_key"),
        (TABLE.format(ref="main", table="orders") + "/blame", {"page_size": "0"}, 400, "invalid_input"),
        (TABLE.format(ref="main", table="events") + "/blame", {"key": "[1]"}, 400, "no_primary_key"),
        (TABLE.format(ref="main", table="orders") + "/history", {"key": "[77]"}, 404, "key_not_found"),
    ]:
        response = user_client.get(url, params)
        assert (response.status_code, response.json()["code"]) == (status, code), (url, params, response.json())
    # Readers only: a user without a role in the catalog reads nothing.
    stranger = APIClient()
    stranger.force_authenticate(get_user_model().objects.create(username="mallory"))
    assert stranger.get(TABLE.format(ref="main", table="orders") + "/blame").status_code in (403, 404)


def test_an_empty_table_has_an_empty_blame_and_a_key_it_never_held_no_history(user_client, user):
    catalog = make_catalog(user=user)
    make_table(catalog, primary_key=["id"])
    make_table(catalog, table="events")
    for table in ("orders", "events"):
        answer = blame(user_client, table=table)
        assert (answer["count"], answer["results"], answer["next"], answer["commits"]) == (0, [], None, {})
    response = user_client.get(TABLE.format(ref="main", table="orders") + "/history", {"key": "9"})
    assert (response.status_code, response.json()["code"]) == (404, "key_not_found")


def test_a_cell_a_resolution_settled_names_the_resolution_and_who_chose_it(user_client, user):
    """Merge request !1 conflicts on keys 1-3; bob chooses its resolutions: key 1 source_wins (its own), the table's
    column rule sum_of_changes for amount, else the table's target_wins (key 3's region). alice merges. The blame of
    each settled cell names the merge's rule, its scope and bob; a cell the merge took as one side changed it names
    no resolution."""
    bob, _ = get_user_model().objects.get_or_create(username="bob")
    catalog = make_catalog(user=user)
    make_table(catalog, primary_key=["id"])
    insert(catalog, [{"id": i, "amount": i * 10, "region": "eu"} for i in (1, 2, 3, 4)])
    first = head(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    upsert(catalog, [{"id": 1, "amount": 11, "region": "eu"}, {"id": 2, "amount": 21, "region": "us"},
                     {"id": 3, "amount": 30, "region": "dev"}], branch="dev")  # fmt: skip
    on_dev = head(catalog, "dev")
    upsert(catalog, [{"id": 1, "amount": 12, "region": "eu"}, {"id": 2, "amount": 22, "region": "eu"},
                     {"id": 3, "amount": 30, "region": "main"}])  # fmt: skip
    on_main = head(catalog)
    request = merge_request_open(catalog=catalog, source="dev", target="main", title="conflicts", author=user)
    job_execute(job_id=str(request.plan_job_id), worker="test-process")
    wait_for_job(request.plan_job_id)  # a worker may have taken it first
    resolutions = {
        "keys": {"sales.orders": {"[1]": "source_wins"}},
        "tables": {"sales.orders": {"choice": "target_wins", "columns": {"amount": "sum_of_changes"}}},
    }
    request = merge_request_update(merge_request=request, user=bob, resolutions=resolutions)  # fmt: skip
    request.refresh_from_db()
    job_execute(job_id=str(request.plan_job_id), worker="test-process")
    wait_for_job(request.plan_job_id)  # a worker may have taken it first
    request.refresh_from_db()
    job = merge_request_merge(merge_request=request, user=user)
    job_execute(job_id=str(job.id), worker="test-process")
    assert wait_for_job(job.id).status == "succeeded"
    merged = head(catalog)

    answer = blame(user_client)
    by_key = {r["key"]["id"]: r for r in answer["results"]}
    assert {k: r["row"]["amount"] for k, r in by_key.items()} == {1: 11, 2: 23, 3: 30, 4: 40}
    assert {k: r["row"]["region"] for k, r in by_key.items()} == {1: "eu", 2: "us", 3: "main", 4: "eu"}

    def settled(key, column):
        cell = by_key[key]["cells"][column]
        found = cell["settled_by"]
        return (cell["commit"], cell["chain"], cell["resolution"],
                found and (found["merge"], found["choice"], found["scope"], found["column"], found["chosen_by"]))  # fmt: skip

    # Key 1, its own source_wins: the amount is dev's, brought by the merge, which its resolution settled.
    assert settled(1, "amount") == (on_dev, [merged], False, (merged, "source_wins", "key", None, "bob"))
    assert settled(1, "region") == (first, [], False, None)  # not in conflict: no side changed it
    # Key 2: sum_of_changes made a value neither side held (22 + 21 - 20): the merge wrote it, by bob's rule; the
    # region only dev changed merged as it was.
    assert settled(2, "amount") == (merged, [], True, (merged, "sum_of_changes", "column", "amount", "bob"))
    assert settled(2, "region") == (on_dev, [merged], False, None)
    # Key 3: region in conflict, no rule: the table's target_wins kept main's value; the merge changed no file of
    # it, yet names itself as what settled it. The amount both sides left alone names no resolution.
    assert settled(3, "region") == (on_main, [], False, (merged, "target_wins", "table", "region", "bob"))
    assert settled(3, "amount") == (first, [], False, None)
    assert settled(4, "amount") == (first, [], False, None)
    assert answer["commits"][merged]["kind"] == "merge" and answer["commits"][merged]["author"] == "alice"
    chosen_at = by_key[1]["cells"]["amount"]["settled_by"]["chosen_at"]
    assert chosen_at and chosen_at <= answer["commits"][merged]["created_at"]
    # One key alone, the same; the CLI's table names the rule and its chooser.
    assert blame(user_client, key="[3]")["results"] == [by_key[3]]
    brought = _blamed(by_key[2]["cells"]["amount"], answer["commits"])[3]
    assert f"settled by sum_of_changes (column amount) in {merged[:12]}, chosen by bob" in brought, brought
    # A key's history names the resolution of the version a merge made or took by it, and (`kept_by`) the
    # resolution that kept a version against the source's: key 3's merge made no version, main's stayed.
    histories = {}
    for key, expected in {
        1: [("update", on_dev, [merged], "source_wins", []), ("update", on_main, [], None, []),
            ("insert", first, [], None, [])],
        2: [("update", merged, [], "sum_of_changes", []), ("update", on_dev, [merged], None, []),
            ("update", on_main, [], None, []), ("insert", first, [], None, [])],
        3: [("update", on_main, [], None, [(merged, "target_wins", "table", "bob")]), ("insert", first, [], None, [])],
    }.items():  # fmt: skip
        response = user_client.get(TABLE.format(ref="main", table="orders") + "/history", {"key": f"[{key}]"})
        assert response.status_code == 200, response.json()
        histories[key] = response.json()
        found = [(v["change"], v["commit"], v["chain"], v["settled_by"] and v["settled_by"]["choice"],
                  [(k["merge"], k["choice"], k["scope"], k["chosen_by"]) for k in v["kept_by"]])
                 for v in histories[key]["versions"]]  # fmt: skip
        assert found == expected, (key, found)
    assert histories[2]["versions"][0]["settled_by"]["chosen_by"] == "bob"
    assert histories[3]["commits"][merged]["kind"] == "merge"  # the merge that kept it is described
    # At the commit before the merge, nothing kept main's version yet.
    response = user_client.get(TABLE.format(ref=on_main, table="orders") + "/history", {"key": "[3]"})
    assert [v["kept_by"] for v in response.json()["versions"]] == [[], []]
    # The CLI's history table and the key's history page name it too.
    brought = _blamed(histories[3]["versions"][0], histories[3]["commits"])[3]
    assert f"kept by target_wins (table region) in {merged[:12]}, chosen by bob" in brought, brought
    browser = Client()
    browser.force_login(user)
    page = browser.get("/catalogs/lake/browse/sales/orders/key-history", {"ref": "main", "key": "[3]"})
    assert page.status_code == 200
    newest = page.content.decode().split('data-change="')[1]
    assert "kept against the source by <strong>target_wins</strong> (table region)" in newest, newest
    assert f'<a href="/catalogs/lake/commits/{merged}"><code>{merged[:12]}</code></a> (merge request' in newest
    assert "chosen by bob" in newest and "settled by" not in newest


def test_a_key_merged_twice_from_one_branch_lists_each_version_once(user_client, user):
    """dev updates key 1 and is merged into main, then updates it again and is merged again: the second merge's
    versions are dev's since what main held already (its first version came with the first merge). Then dev
    deletes the key and is merged a third time: the delete is dev's, brought by the merge."""
    catalog = make_catalog(user=user)
    make_table(catalog, primary_key=["id"])
    insert(catalog, [{"id": 1, "amount": 10, "region": "eu"}])
    first = head(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    merges, updates = [], []
    for step in (1, 2):
        upsert(catalog, [{"id": 1, "amount": 10 + step, "region": "eu"}], branch="dev")
        updates.append(head(catalog, "dev"))
        insert(catalog, [{"id": 10 + step, "amount": 0, "region": "eu"}])  # main moves: a true merge
        assert branch_merge(catalog=catalog, source="dev", target="main").status == "merged"
        merges.append(head(catalog))
    response = user_client.get(TABLE.format(ref="main", table="orders") + "/history", {"key": "[1]"})
    assert response.status_code == 200, response.json()
    found = [(v["change"], v["row"]["amount"], v["commit"], v["chain"]) for v in response.json()["versions"]]
    assert found == [("update", 12, updates[1], [merges[1]]), ("update", 11, updates[0], [merges[0]]),
                     ("insert", 10, first, [])]  # fmt: skip
    assert cells(blame(user_client, key="[1]"), 1)["amount"] == (updates[1], [merges[1]])
    change(catalog, "table_delete", {"where": "id = 1"}, branch="dev")
    deleted = head(catalog, "dev")
    insert(catalog, [{"id": 13, "amount": 0, "region": "eu"}])
    assert branch_merge(catalog=catalog, source="dev", target="main").status == "merged"
    response = user_client.get(TABLE.format(ref="main", table="orders") + "/history", {"key": "[1]"})
    newest = response.json()["versions"][0]
    assert (newest["change"], newest["commit"], newest["chain"], newest["resolution"]) == (
        "delete", deleted, [head(catalog)], False)  # fmt: skip
    assert len(response.json()["versions"]) == 4


def test_a_merge_source_that_deleted_the_targets_row_and_inserted_it_again_lists_the_delete(user_client, user):
    """dev deletes key 9, which main holds, and inserts it again; merged into main, the key's history lists both of
    dev's versions under the merge (a delete is looked for before a merge source's oldest insert), then main's first.
    Found by the blame model (seeds 11, 13 and 14 at 80 steps): the delete was left out. When main then merges dev
    again after dev merged main in, main's versions that came back through dev are not listed twice."""
    catalog = make_catalog(user=user)
    make_table(catalog, primary_key=["id"])
    insert(catalog, [{"id": 9, "amount": 1, "region": "eu"}])
    first = head(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    change(catalog, "table_delete", {"where": "id = 9"}, branch="dev")
    deleted = head(catalog, "dev")
    insert(catalog, [{"id": 9, "amount": 2, "region": "us"}], branch="dev")
    inserted = head(catalog, "dev")
    insert(catalog, [{"id": 10, "amount": 0, "region": "eu"}])  # main moves: a true merge
    assert branch_merge(catalog=catalog, source="dev", target="main").status == "merged"
    merged = head(catalog)

    def versions() -> list[tuple]:
        response = user_client.get(TABLE.format(ref="main", table="orders") + "/history", {"key": "[9]"})
        assert response.status_code == 200, response.json()
        return [(v["change"], v["commit"], v["chain"]) for v in response.json()["versions"]]

    assert versions() == [("insert", inserted, [merged]), ("delete", deleted, [merged]), ("insert", first, [])]
    assert branch_merge(catalog=catalog, source="main", target="dev").status == "merged"  # dev takes main in
    upsert(catalog, [{"id": 9, "amount": 3, "region": "us"}], branch="dev")
    updated = head(catalog, "dev")
    insert(catalog, [{"id": 11, "amount": 0, "region": "eu"}])
    assert branch_merge(catalog=catalog, source="dev", target="main").status == "merged"
    assert versions() == [("update", updated, [head(catalog)]), ("insert", inserted, [merged]),
                          ("delete", deleted, [merged]), ("insert", first, [])]  # fmt: skip


def test_shortcuts_skip_only_commits_that_cannot_hold_the_key(user_client, user):
    """The walk skips a commit by its segments' key bounds, then by their key columns, and reads a commit's changes
    for the asked keys only (a two-column key is matched on its first column first): each shortcut on data where
    taking it wrongly would change the answer. A key outside a segment's range, a key inside the range of a commit
    that wrote other keys only, keys sharing their first column, a string key."""
    catalog = make_catalog(user=user)
    columns = [{"name": "region", "type": "string", "nullable": False}, {"name": "id", "type": "long", "nullable": False},
               {"name": "amount", "type": "long"}]  # fmt: skip
    make_table(catalog, table="lines", columns=columns, primary_key=["region", "id"])
    codes = [{"name": "code", "type": "string", "nullable": False}, {"name": "label", "type": "string"}]
    make_table(catalog, table="codes", columns=codes, primary_key=["code"])
    lines = {"table": "lines"}
    key_columns = {"strategy": "upsert", "key_columns": ["region", "id"]}
    insert(catalog, [{"region": r, "id": i, "amount": 1} for r, i in (("eu", 1), ("eu", 2), ("us", 1))], **lines)
    loaded = head(catalog)
    change(catalog, "table_load", {**key_columns, "rows": [{"region": "eu", "id": 2, "amount": 2}]}, **lines)
    eu2 = head(catalog)
    # us/1 and us/5: a segment whose range (us, 1..5) holds us/1 but not eu/1 nor eu/2; eu/1's id is in it.
    change(catalog, "table_load", {**key_columns, "rows": [{"region": "us", "id": 1, "amount": 3},
                                                           {"region": "us", "id": 5, "amount": 3}]}, **lines)  # fmt: skip
    us = head(catalog)
    change(catalog, "table_delete", {"where": "region = 'eu' AND id = 1"}, **lines)
    deleted = head(catalog)
    change(catalog, "table_load", {**key_columns, "rows": [{"region": "eu", "id": 1, "amount": 1}]}, **lines)
    again = head(catalog)
    answer = blame(user_client, table="lines")
    found = {(r["key"]["region"], r["key"]["id"]): {n: c["commit"] for n, c in r["cells"].items()}
             for r in answer["results"]}  # fmt: skip
    assert found == {
        ("eu", 1): dict.fromkeys(("region", "id", "amount"), again),
        ("eu", 2): {"region": loaded, "id": loaded, "amount": eu2},
        ("us", 1): {"region": loaded, "id": loaded, "amount": us},
        ("us", 5): dict.fromkeys(("region", "id", "amount"), us),
    }
    one = blame(user_client, table="lines", key='["us", 1]')["results"]
    assert [r["key"] for r in one] == [{"region": "us", "id": 1}] and one[0]["cells"]["amount"]["commit"] == us
    response = user_client.get(TABLE.format(ref="main", table="lines") + "/history", {"key": '["eu", 1]'})
    assert [(v["change"], v["commit"]) for v in response.json()["versions"]] == [
        ("insert", again), ("delete", deleted), ("insert", loaded),
    ]  # fmt: skip
    response = user_client.get(TABLE.format(ref="main", table="lines") + "/history", {"key": '["eu", 2]'})
    assert [(v["change"], v["commit"]) for v in response.json()["versions"]] == [("update", eu2), ("insert", loaded)]
    # At the ref before the delete, the older answer (a state's keys are kept per commit, not per branch).
    older = blame(user_client, ref=us, table="lines")["results"]
    assert [(r["key"]["region"], r["key"]["id"], r["cells"]["amount"]["commit"]) for r in older] == [
        ("eu", 1, loaded), ("eu", 2, eu2), ("us", 1, us), ("us", 5, us),
    ]  # fmt: skip

    # A string key: m is outside the range of the second upsert (b..c), inside the third's (a..z) that wrote a and z.
    on_codes = {"table": "codes"}
    insert(catalog, [{"code": c, "label": c} for c in ("a", "m", "z")], **on_codes)
    first = head(catalog)
    upsert_codes = {"strategy": "upsert", "key_columns": ["code"]}
    change(catalog, "table_load", {**upsert_codes, "rows": [{"code": c, "label": "new"} for c in "bc"]}, **on_codes)
    second = head(catalog)
    change(catalog, "table_load", {**upsert_codes, "rows": [{"code": c, "label": "x"} for c in "az"]}, **on_codes)
    third = head(catalog)
    codes_blame = blame(user_client, table="codes")["results"]
    assert [(r["key"]["code"], r["cells"]["code"]["commit"], r["cells"]["label"]["commit"]) for r in codes_blame] == [
        ("a", first, third), ("b", second, second), ("c", second, second), ("m", first, first), ("z", first, third),
    ]  # fmt: skip
    response = user_client.get(TABLE.format(ref="main", table="codes") + "/history", {"key": '"m"'})
    assert [(v["change"], v["commit"]) for v in response.json()["versions"]] == [("insert", first)]
    response = user_client.get(TABLE.format(ref="main", table="codes") + "/blame", {"key": "[5]"})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_key")


def test_what_a_process_keeps_is_bounded_least_recently_used_out_first():
    kept = _Kept(10)
    assert kept.put("a", "A", 4) == "A" and kept.put("b", "B", 4) == "B"
    assert kept.get("a") == "A"  # now the most recently used
    kept.put("c", "C", 4)  # 12 > 10: b, the least recently used, goes
    assert (kept.get("b"), kept.get("a"), kept.get("c"), kept.weight) == (None, "A", "C", 8)
    assert kept.put("big", "BIG", 6) == "BIG" and kept.get("big") is None  # heavier than half: answered, not kept
    kept.put("a", "other", 4)  # a name kept once keeps its first value (files and commits never change)
    assert kept.get("a") == "A" and kept.weight == 8
