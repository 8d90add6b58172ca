"""Engines racing on one keyed table through the Iceberg REST catalog: an upsert made on metadata that another
engine's commit has since moved is a commit conflict (409 `CommitFailedException`: reload and retry), never the
caller's mistake (400), even when the engine's own retry (which keeps its data and only moves the parent) would
double a key; a key doubled by what the engine started from stays a 400. Every key ends up once."""

# ruff: noqa: F811 (pytest fixtures imported from test_iceberg_rest and named as arguments)

import threading

import pyarrow as pa
import pytest
from pyiceberg.exceptions import BadRequestError, CommitFailedException, ValidationException

from tests.catalog_app.test_iceberg_rest import api_rows, client, iceberg, token  # noqa: F401
from tests.catalog_app.test_iceberg_writes import keyed_orders, rows


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
