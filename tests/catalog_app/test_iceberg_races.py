"""Engines racing on one keyed table through the Iceberg REST catalog: an upsert made on metadata that another
engine's commit has since moved is a commit conflict (409 `CommitFailedException`: reload and retry), never the
caller's mistake (400), even when the engine's own retry (which keeps its data and only moves the parent) would
double a key; a key doubled by what the engine started from stays a 400. Every key ends up once."""

# ruff: noqa: F811 (pytest fixtures imported from test_iceberg_rest and named as arguments)

import threading
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest
import requests
from django.conf import settings
from pyiceberg.exceptions import BadRequestError, CommitFailedException, ValidationException

from tests.catalog_app.test_iceberg_rest import api_rows, client, iceberg, token  # noqa: F401
from tests.catalog_app.test_iceberg_writes import KEYLESS, keyed_orders, rows


def upsert_rows(table, ids, amount: int) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "amount": amount, "region": "eu"} for i in ids], schema=table.schema().as_arrow()
    )


def ids_held(client) -> list[int]:
    return sorted(r[0] for r in api_rows(client, "main", "shop.orders")[1])


def test_a_stale_upsert_doubling_a_key_is_a_conflict_and_succeeds_reloaded(live_server, client, token):
    main, _ = keyed_orders(live_server, client, token)
    stale = main.load_table("shop.orders")  # ids 0-4
    main.load_table("shop.orders").upsert(upsert_rows(stale, [10, 11], 1))  # another engine inserts 10 and 11

    # the stale upsert finds no 10 or 11, so it appends them: its first attempt fails its requirement (409) and
    # pyiceberg's retries (same files, the new head as parent) would hold 10 and 11 twice: 409 each time too
    with pytest.raises(CommitFailedException, match="retry"):
        stale.upsert(upsert_rows(stale, [3, 10, 11, 12], 2))
    assert ids_held(client) == [0, 1, 2, 3, 4, 10, 11]

    # the same upsert made on fresh metadata updates 3, 10 and 11 and inserts 12
    result = main.load_table("shop.orders").upsert(upsert_rows(stale, [3, 10, 11, 12], 2))
    assert (result.rows_updated, result.rows_inserted) == (3, 1)
    held = api_rows(client, "main", "shop.orders")[1]
    assert sorted(r[0] for r in held) == [0, 1, 2, 3, 4, 10, 11, 12]
    assert {r[0]: r[1] for r in held}[10] == 2

    # a key the engine's own snapshot held already is still the caller's mistake: 400, not retried
    with pytest.raises(BadRequestError, match="twice"):
        main.load_table("shop.orders").append(rows([12]))
    with pytest.raises(BadRequestError, match="twice"):
        main.load_table("shop.orders").append(rows([30, 30]))


def test_two_engines_upserting_overlapping_keys_see_only_conflicts_and_hold_every_key_once(live_server, client, token):
    main, _ = keyed_orders(live_server, client, token)
    main.load_table("shop.orders").transaction().set_properties(
        {"commit.retry.num-retries": "2", "commit.retry.min-wait-ms": "10", "commit.retry.max-wait-ms": "50"}
    ).commit_transaction()
    refused: list[Exception] = []
    conflicts = {"CommitFailedException": 0, "ValidationException": 0}
    lock = threading.Lock()

    def engine(writer: int) -> None:
        catalog = iceberg(live_server, token, "main")
        for round_ in range(6):
            ids = range(100 + round_ * 3, 106 + round_ * 3)  # each round overlaps the other engine's
            for _ in range(20):  # the caller's own retry, on fresh metadata
                table = catalog.load_table("shop.orders")
                try:
                    table.upsert(upsert_rows(table, ids, writer))
                    break
                except (CommitFailedException, ValidationException) as conflict:
                    with lock:
                        conflicts[type(conflict).__name__] += 1
                except Exception as exc:  # a 400 (or anything else) is a failure of the catalog
                    with lock:
                        refused.append(exc)
                    return
            else:
                with lock:
                    refused.append(RuntimeError(f"writer {writer} round {round_} never committed"))

    threads = [threading.Thread(target=engine, args=(w,)) for w in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)

    assert not refused, refused
    assert sum(conflicts.values()) > 0  # the engines did race (each round overlaps the other's keys)
    held = ids_held(client)
    assert held == sorted(set(held)) == [0, 1, 2, 3, 4, *range(100, 121)]


# --- a commit prepared without the lock: published if its tables did not move, else prepared again ------------


def own_files(folder: Path) -> list[Path]:
    """The files of LakeUI's own commit folders (delta files, segments of new rows) under a table's folder."""
    return sorted(p for p in folder.glob("*/iceberg-*/**/*") if p.is_file())


@pytest.fixture
def meanwhile(monkeypatch):
    """`meanwhile.writes`: writes (another engine's, in a thread of their own) each run once after an Iceberg commit
    was prepared and before it takes the catalog lock. `meanwhile.prepared`: how many times commits other than those
    writes were prepared (set to 0 before the commit a test measures); `meanwhile.written`: the files of LakeUI's own commit folders (`iceberg-*`)
    under `meanwhile.folder` when the lock was about to be taken."""
    from catalog_app.iceberg import commits as iceberg_commits
    from catalog_app.services import commits

    state = SimpleNamespace(writes=[], prepared=0, written=[], folder=Path(settings.LAKEUI_WAREHOUSE), busy=False)
    prepare = commits.commit_prepare  # WriteTarget.prepare's

    def counted(**kwargs):
        if not state.busy:  # not a write's own commit
            state.prepared += 1
        return prepare(**kwargs)

    def locked(draft):
        if state.writes and not state.busy:  # the write's own commit takes the lock as any other
            state.written.append(own_files(state.folder))
            state.busy = True
            thread = threading.Thread(target=state.writes.pop(0))
            thread.start()
            thread.join(timeout=120)
            state.busy = False
        return commits.draft_lock(draft)

    monkeypatch.setattr(commits, "commit_prepare", counted)
    monkeypatch.setattr(iceberg_commits, "draft_lock", locked)
    return state


def test_a_commit_is_published_as_prepared_when_only_another_table_moved(live_server, client, token, meanwhile):
    main, _ = keyed_orders(live_server, client, token)
    main.create_table("shop.events", KEYLESS)
    other = iceberg(live_server, token, "main")
    meanwhile.prepared = 0
    meanwhile.writes.append(lambda: other.load_table("shop.events").append(rows([7]).cast(KEYLESS.as_arrow())))
    main.load_table("shop.orders").append(rows([10, 11]))

    assert meanwhile.prepared == 1
    newest, before = client.commits("lake", "main")[:2]
    assert newest["message"] == "Iceberg commit to shop.orders" and newest["parent"] == before["id"]
    assert before["message"] == "Iceberg commit to shop.events"
    assert ids_held(client) == [0, 1, 2, 3, 4, 10, 11]
    assert [r[0] for r in api_rows(client, "main", "shop.events")[1]] == [7]


def test_a_commit_whose_table_moved_is_prepared_again_and_published_if_its_requirements_hold(
    live_server, client, token, meanwhile
):
    main, _ = keyed_orders(live_server, client, token)
    loaded = main.load_table("shop.orders")
    other = iceberg(live_server, token, "main")
    meanwhile.prepared = 0
    meanwhile.writes.append(lambda: other.load_table("shop.orders").append(rows([20])))
    body = {
        "requirements": [{"type": "assert-table-uuid", "uuid": str(loaded.metadata.table_uuid)}],
        "updates": [{"action": "set-properties", "updates": {"owner": "data"}}],
    }
    url = f"{live_server.url}/iceberg/lake/main/v1/namespaces/shop/tables/orders"
    answer = requests.post(url, json=body, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    assert meanwhile.prepared == 2
    assert main.load_table("shop.orders").properties["owner"] == "data"
    assert ids_held(client) == [0, 1, 2, 3, 4, 20]

    # a table that moves before each of its 3 preparings takes the lock: a 409, nothing of it committed
    meanwhile.prepared = 0
    meanwhile.writes += [lambda i=i: other.load_table("shop.orders").append(rows([30 + i])) for i in range(3)]
    body["updates"] = [{"action": "set-properties", "updates": {"owner": "ops"}}]
    answer = requests.post(url, json=body, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 409 and answer.json()["error"]["type"] == "CommitFailedException", answer.text
    assert "3 times" in answer.json()["error"]["message"]
    assert meanwhile.prepared == 3
    assert main.load_table("shop.orders").properties["owner"] == "data"
    assert ids_held(client) == [0, 1, 2, 3, 4, 20, 30, 31, 32]


def test_a_commit_whose_table_moved_against_its_requirements_is_a_409_leaving_no_file(
    live_server, client, token, meanwhile
):
    from tests.catalog_app.test_iceberg_writes import table_change

    main, _ = keyed_orders(live_server, client, token)
    orders = main.load_table("shop.orders")
    meanwhile.folder = Path(orders.metadata.location.removeprefix("file://"))
    delete = orders.transaction()
    delete.delete("id = 1")  # copy-on-write: LakeUI writes a delta file of the position it deletes
    other = iceberg(live_server, token, "main")
    meanwhile.prepared = 0
    meanwhile.writes.append(lambda: other.load_table("shop.orders").append(rows([20])))
    answer = requests.post(
        f"{live_server.url}/iceberg/lake/main/v1/transactions/commit",
        json={"table-changes": [table_change(orders, delete)]}, headers={"Authorization": f"Bearer {token}"},
    )  # fmt: skip
    assert answer.status_code == 409 and answer.json()["error"]["type"] == "CommitFailedException", answer.text
    assert "snapshot" in answer.json()["error"]["message"]  # prepared again: its assert-ref-snapshot-id fails
    assert meanwhile.prepared == 2
    [first] = meanwhile.written
    assert len(first) == 1 and "/deltas/iceberg-" in str(first[0])  # the first preparing wrote its delta file
    assert not first[0].exists()  # and it was removed with the attempt
    assert own_files(meanwhile.folder) == []
    assert ids_held(client) == [0, 1, 2, 3, 4, 20]
