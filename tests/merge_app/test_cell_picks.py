"""Cell picks (docs/merge-semantics.md#cell-picks): a reviewer settles conflicting cells of a primary-key table one by
one on a merge request, through the API, with the real worker and real Spark data. The preview shows what the merge
writes; a pick dismisses approvals; a head that moves makes the picks of the cells it changed stale (they block the
merge until picked again) and keeps the others; the audit log names each pick, who made it and its inputs."""

import time

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from catalog_app.services.access import catalog_role_grant, protected_branch_create
from catalog_app.services.refs import branch_create
from lakeui.jobs.models import Job
from merge_app.models import Merge
from tests.conftest import wait_for_job
from tests.merge_app.test_column_rules import BASE, NAMES, SOURCE, TABLE, TARGET, both_changed_catalog, row, typed
from tests.merge_app.test_column_rules import rows_at as rows_on
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import run_in_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


@pytest.fixture
def reviewer(user):
    """carol, an approver of the catalogs alice makes, and a client for each of them."""
    carol = get_user_model().objects.create_user("carol")
    clients = {}
    for person in (user, carol):
        clients[person.username] = APIClient()
        clients[person.username].force_authenticate(person)
    return carol, clients


def current(client, base: str, timeout: float = 180) -> dict:
    """The request's resolution once its plan is made for the heads and the resolution (reading the request brings
    it up to date)."""
    deadline = time.monotonic() + timeout
    while True:
        client.get(base)
        body = client.get(f"{base}/resolution").json()
        if body["current"] and not body["planning"]:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.1)


def cells_of(preview: dict) -> dict[int, dict[str, tuple]]:
    """Per key, per conflicting cell: (result, rule) as the preview shows it."""
    return {
        key["key"]["id"]: {column: (cell["result"], cell["rule"]) for column, cell in key["cells"].items()}
        for key in preview["keys"]
    }


def put(client, base: str, resolution: dict):
    return client.put(f"{base}/resolution", resolution, format="json")


def test_a_reviewer_picks_cells_the_preview_shows_them_and_the_merge_writes_them(spark, user, reviewer):
    _, clients = reviewer
    alice = clients["alice"]
    catalog = both_changed_catalog(spark)  # dev (source) and main (target) both changed keys 1-4
    catalog_role_grant(catalog=catalog, username="carol", role="approver", granted_by=user)
    protected_branch_create(catalog=catalog, pattern="main", required_approvals=1, created_by=user)
    opened = alice.post(f"/api/v1/catalogs/{catalog.name}/merge-requests",
                        {"source": "dev", "target": "main", "title": "orders"}, format="json")  # fmt: skip
    assert opened.status_code == 201, opened.json()
    base = f"/api/v1/catalogs/{catalog.name}/merge-requests/{opened.json()['number']}"
    found = current(alice, base)
    assert [t["name"] for t in found["tables"]] == [TABLE]
    preview = found["preview"]
    assert (preview["count"], preview["unresolved"]) == (4, 4)
    assert {key["key_id"] for key in preview["keys"]} == {"[1]", "[2]", "[3]", "[4]"}
    assert cells_of(preview)[1]["amount"] == (None, "stands")
    one = next(key for key in preview["keys"] if key["key_id"] == "[1]")
    assert one["cells"]["amount"] | {"result": None} == {"base": 100, "source": 105, "target": 107, "result": None,
                                                        "rule": "stands", "scope": None, "by": None,
                                                        "stale_pick": None}  # fmt: skip
    before = head(catalog)
    refuses_bad_picks(alice, base)
    assert head(catalog) == before
    # carol approves before anything is picked.
    assert carol_reviews(clients, base) == 201

    # alice settles the table: price by the greater value, the rest the target's; and picks four cells by hand.
    chosen = {
        "tables": {TABLE: {"choice": "target_wins", "columns": {"price": "greatest"}}},
        "cells": {TABLE: {
            "[1]": {"status": {"pick": "source"}, "amount": {"value": 150}},
            "[2]": {"note": {"value": "typed by alice"}, "updated_at": {"pick": "base"}},
        }},
    }  # fmt: skip
    response = put(alice, base, chosen)
    assert response.status_code == 200, response.json()
    picked = response.json()["resolution"]["cells"][TABLE]["[1]"]["amount"]
    assert picked == {"value": 150, "inputs": {"base": 100, "source": 105, "target": 107}, "by": "alice",
                      "at": picked["at"]}  # fmt: skip
    detail = alice.get(base).json()
    assert [r["dismissed_reason"] for r in detail["reviews"]] == ["resolutions_changed"]  # a pick dismisses it

    found = current(alice, base)
    shown = cells_of(found["preview"])
    assert shown[1] == {"status": ("shipped", "pick"), "amount": (150, "pick"), "price": ("12.50", "greatest"),
                        "updated_at": ("2024-03-01T00:00:00", "target_wins"), "note": ("t1", "target_wins"),
                        "hits": (8, "target_wins")}  # fmt: skip
    assert shown[2]["note"] == ("typed by alice", "pick")
    assert shown[2]["updated_at"] == ("2024-01-02T00:00:00", "pick")
    assert found["preview"]["unresolved"] == 0
    by = {k["key_id"]: k["cells"] for k in found["preview"]["keys"]}
    assert (by["[1]"]["status"]["by"], by["[1]"]["status"]["scope"]) == ("alice", "cell")

    # The source moves: dev changes key 1's amount again (its status cell is unchanged).
    moved = {**SOURCE[1], "amount": 106}
    run_in_process(spark, catalog, {"strategy": "upsert", "key_columns": ["id"], "rows": [moved]}, branch="dev")
    found = current(alice, base)
    [stale] = found["preview"]["stale_picks"]
    assert (stale["key_id"], stale["column"], stale["reason"]) == ("[1]", "amount", "changed")
    assert (stale["inputs"]["source"], stale["now"]["source"]) == (105, 106)
    shown = cells_of(found["preview"])
    assert shown[1]["amount"] == (None, "stands")  # stale: never applied, whatever the table's choice
    assert shown[1]["status"] == (None, "stands")  # its key stands whole until the stale cell is picked again
    assert shown[2]["note"] == ("typed by alice", "pick")  # unchanged cells keep their picks
    codes = [b["code"] for b in alice.get(base).json()["status"]["blockers"]]
    assert "cell_picks_stale" in codes and "unresolved_conflicts" in codes
    refused = alice.post(f"{base}/merge")
    assert "cell_picks_stale" in [b["code"] for b in refused.json()["details"]["blockers"]], refused.json()

    # Picked again, approved again, merged: main holds exactly the cells the preview showed.
    response = put(alice, base, {"cells": {TABLE: {"[1]": {"amount": {"pick": "target"}}}}})
    assert response.status_code == 200, response.json()
    found = current(alice, base)
    assert found["preview"]["stale_picks"] == [] and found["preview"]["unresolved"] == 0
    shown = cells_of(found["preview"])
    assert carol_reviews(clients, base) == 201
    merged = alice.post(f"{base}/merge")
    assert merged.status_code == 202, merged.json()
    job = wait_for_job(merged.json()["id"])
    assert job.status == Job.Status.SUCCEEDED, job.error_message
    rows = rows_on(spark, catalog, "main")
    assert rows == {
        1: typed(row(1, "shipped", 107, "12.50", "03-01", "t1", 8, region="tx")),
        2: typed(row(2, "held", 207, "20.50", "01-02", "typed by alice", 18, region="sx")),
        3: typed(row(3, "held", 293, "30.10", "02-03", "t3", 28)),
        4: typed(TARGET[4]),
    }
    for key, cells in shown.items():  # the preview's results are the cells written
        for column, (result, _) in cells.items():
            if column != "*":
                written = rows[key][NAMES.index(column)]
                assert result == (written.isoformat() if hasattr(written, "isoformat") else
                                  str(written) if column == "price" else written), (key, column)  # fmt: skip
    # The audit log: every pick with its inputs, its result and who made it.
    log = Merge.objects.get(commit_id=head(catalog)).log
    picks = {(e["key"]["id"], e["column"]): e for e in log["resolutions"] if e["scope"] == "cell"}
    assert set(picks) == {(1, "status"), (1, "amount"), (2, "note"), (2, "updated_at")}
    assert {k: picks[(1, "amount")][k] for k in ("base", "source", "target", "result", "chosen_by", "choice")} == {
        "base": 100, "source": 106, "target": 107, "result": 107, "chosen_by": "alice", "choice": "pick"}  # fmt: skip
    assert picks[(2, "updated_at")]["result"] == BASE[2]["updated_at"].replace(" ", "T")
    # The blame of a picked cell names the pick and who made it.
    blame = alice.get(f"/api/v1/catalogs/{catalog.name}/refs/main/databases/sales/tables/orders/blame").json()
    settled = {r["key"]["id"]: r["cells"] for r in blame["results"]}
    assert {k: settled[1]["status"]["settled_by"][k] for k in ("choice", "scope", "chosen_by")} == {
        "choice": "pick", "scope": "cell", "chosen_by": "alice"}  # fmt: skip
    assert settled[1]["hits"]["settled_by"]["choice"] == "target_wins"


def carol_reviews(clients, base: str) -> int:
    return clients["carol"].post(f"{base}/reviews", {"decision": "approve"}, format="json").status_code


def refuses_bad_picks(alice, base: str) -> None:
    """Bad picks are refused with what is wrong, and nothing is kept."""
    bad = {
        # a value of the wrong type, a number out of an int's range, a 100 KB string, a decimal beyond its precision
        (400, "invalid_cell_pick"): [
            {"[1]": {"amount": {"value": "a lot"}}},
            {"[1]": {"hits": {"value": 2**40}}},
            {"[1]": {"note": {"value": "x" * 100_000}}},
            {"[1]": {"price": {"value": "123456789.00"}}},
            {"[1]": {"amount": {"pick": "nobody"}}},
            {"[1]": {"amount": {"value": 1, "pick": "source"}}},
            {"[1]": {"amount; DROP TABLE x": {"value": 1}}},
            {"[1]": {"updated_at": {"value": "yesterday"}}},
        ],
        # a cell no side changed differently (key 1's region: only the target changed it), a key without conflict,
        # a key whose conflict is not of cells (key 4: a delete against an update)
        (409, "cell_not_in_conflict"): [
            {"[1]": {"region": {"pick": "source"}}},
            {"[9]": {"amount": {"value": 1}}},
            {"[4]": {"amount": {"pick": "source"}}},
        ],
    }
    for (status, code), cells in bad.items():
        for given in cells:
            response = put(alice, base, {"cells": {TABLE: given}})
            assert (response.status_code, response.json()["code"]) == (status, code), (given, response.json())
            assert response.json()["message"]
    assert put(alice, base, {"cells": "nope"}).json()["code"] == "invalid_cell_pick"
    assert alice.get(f"{base}/resolution").json()["resolution"].get("cells") is None  # nothing was kept
    # A pick taken back with null.
    assert put(alice, base, {"cells": {TABLE: {"[1]": {"amount": {"value": 1}}}}}).status_code == 200
    assert put(alice, base, {"cells": {TABLE: {"[1]": {"amount": None}}}}).status_code == 200
    assert alice.get(f"{base}/resolution").json()["resolution"].get("cells") is None


def test_the_preview_and_a_pick_reach_every_conflicting_key_past_the_ten_thousandth(spark, user, reviewer):
    # Each of 10,010 keys conflicts on its amount: dev adds 1, main 2. Every conflicting key is kept (one row each),
    # so the preview pages to the last, a pick names a key past the first 10,000 and the diff lists them all.
    _, clients = reviewer
    alice = clients["alice"]
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"])
    rows = [{"id": i, "amount": i, "region": "eu"} for i in range(10_010)]
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": rows})
    branch_create(catalog=catalog, name="dev", source="main")
    for branch, step in (("dev", 1), ("main", 2)):
        run_in_process(spark, catalog, {"set": {"amount": f"amount + {step}"}, "where": "id >= 0"},
                       kind="table_update", branch=branch)  # fmt: skip
    opened = alice.post(f"/api/v1/catalogs/{catalog.name}/merge-requests",
                        {"source": "dev", "target": "main", "title": "every key"}, format="json")  # fmt: skip
    base = f"/api/v1/catalogs/{catalog.name}/merge-requests/{opened.json()['number']}"
    current(alice, base)
    tail = alice.get(f"{base}/resolution", {"table": TABLE, "offset": 10_000, "limit": 50}).json()["preview"]
    assert (tail["count"], tail["unresolved"]) == (10_010, 10_010)
    assert [key["key"]["id"] for key in tail["keys"]] == list(range(10_000, 10_010))

    response = put(alice, base, {"cells": {TABLE: {"[10005]": {"amount": {"pick": "base"}}}}})
    assert response.status_code == 200, response.json()
    current(alice, base)
    tail = alice.get(f"{base}/resolution", {"table": TABLE, "offset": 10_004, "limit": 2}).json()["preview"]
    assert cells_of(tail) == {10_004: {"amount": (None, "stands")}, 10_005: {"amount": (10_005, "pick")}}
    assert tail["unresolved"] == 10_009

    keys = alice.get(f"/api/v1/catalogs/{catalog.name}/diff/keys",
                     {"from": "dev", "to": "main", "table": TABLE, "page": 101, "page_size": 100}).json()  # fmt: skip
    assert keys["count"] == 10_010 and [k["key"]["id"] for k in keys["results"]] == list(range(10_000, 10_010))
