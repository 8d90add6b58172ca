"""The change feed (docs/changes.md): what a consumer of row changes between two refs waits for.

    python benchmarks/changes.py [--rows 1000000] [--repeat 3]

Main holds `--rows` rows of a primary-key table (one Parquet upload); branch `dev` updated every one of them, so
the two refs differ by `--rows` changed keyed rows. Through the API (Django's test client, JSON and Arrow as a
consumer gets them):

1. The first page of `GET /catalogs/{cat}/changes?from=main&to=dev`: the first read of the pair of commits (the
   differing files read and compared in this process, the whole diff kept after the page is answered), measured
   `--repeat` times with the kept diff removed before each (median and range), then a repeat (a slice of the kept
   diff) and the last page.
2. The whole change stream as Arrow IPC (`Accept: application/vnd.apache.arrow.stream`, `table=shop.orders`), rows
   a second, against reading the same rows (dev's table, `--rows` rows) as Arrow in this process with the engine's
   own pyarrow reader (`read_rows_arrow`: what the client's `read_arrow` does straight from the warehouse; `rows`
   itself answers JSON pages only, so there is no Arrow `rows` to compare with).

The design's target is measured at 1,000,000 rows: the first page under 200 ms, the Arrow stream at least half as
fast as reading the rows.

    python benchmarks/changes.py --tables 10000 [--repeat 5]

A catalog of `--tables` tables (bulk written as benchmarks/merge.py writes them, each with a 100-row segment), then
one commit appending to one of them: the first page of the changes between that commit and its parent (first read
of the pair, what the process keeps of it removed before each of `--repeat` reads). Target: under 100 ms. Then one
first read comparing every table's state (as between two refs more than `TOUCHED_COMMITS` commits apart).

Data jobs run in this process (`job_execute`, Spark local): no worker needed. Uses
DATABASE_URL when set, else an embedded PostgreSQL server in a throwaway folder. Prints one line per figure.
"""

import argparse
import shutil
import statistics
import uuid

import pyarrow as pa
from setup import django_setup, keyed_orders, run_job, timed

django_setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.test import Client  # noqa: E402

from catalog_app.engine.reads import read_rows_arrow  # noqa: E402
from catalog_app.engine.warehouse import Warehouse  # noqa: E402
from catalog_app.models import ObjectKind  # noqa: E402
from catalog_app.selectors import changes  # noqa: E402
from catalog_app.selectors.objects import object_find  # noqa: E402
from catalog_app.selectors.refs import ref_resolve  # noqa: E402
from catalog_app.selectors.table_files import table_columns, table_files  # noqa: E402
from catalog_app.services.commits import WriteTarget  # noqa: E402
from catalog_app.services.data_submit import table_data_submit  # noqa: E402
from catalog_app.services.databases import database_create  # noqa: E402
from catalog_app.services.refs import branch_create, catalog_create  # noqa: E402

ARROW = "application/vnd.apache.arrow.stream"


def changed_table(user, rows: int):
    """shop.orders with `rows` rows on main, every row's amount changed on dev: its catalog."""
    catalog = keyed_orders(user, rows, "changes").catalog
    branch_create(catalog=catalog, name="dev", source="main", created_by=user)
    dev = WriteTarget(catalog=catalog, branch="dev", author=user)
    update = {"set": {"amount": "amount + 1"}, "where": "id >= 0"}
    run_job(table_data_submit(target=dev, database="shop", table="orders", kind="table_update", params=update))
    return catalog


def read_as_arrow(catalog) -> pa.Table:
    chain = ref_resolve(catalog=catalog, ref="dev").chain
    database = object_find(chain, kind=ObjectKind.DATABASE, name="shop")
    table = object_find(chain, kind=ObjectKind.TABLE, name="orders", parent_id=database.object_id)
    files = table_files(chain, table_id=table.object_id)
    return read_rows_arrow(Warehouse(settings.LAKEUI_WAREHOUSE), table_columns(table), files.reads())


def fresh() -> None:
    """Forget what was kept of every pair (the kept diffs, what this process keeps): the next read is a first."""
    shutil.rmtree(settings.VAR_DIR / "row-changes", ignore_errors=True)
    changes._described.clear()
    changes._provenances.clear()


def many_tables_mode(user, tables: int, repeat: int) -> None:
    from merge import append, bulk_appends, bulk_tables

    catalog = catalog_create(name=f"changes_{uuid.uuid4().hex[:6]}", created_by=user)
    database_create(target=WriteTarget(catalog=catalog, branch="main"), name="db")
    made = bulk_tables(catalog, tables)
    bulk_appends(catalog, "main", made)
    before = ref_resolve(catalog=catalog, ref="main").commit.id
    append(catalog, "main", made[tables // 2])
    after = ref_resolve(catalog=catalog, ref="main").commit.id
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)

    def page():
        response = client.get(f"/api/v1/catalogs/{catalog.name}/changes", {"from": before, "to": after})
        assert response.status_code == 200, response.content[:500]
        return response.json()

    def firsts(repeat: int) -> list[float]:
        times = []
        for _ in range(repeat):
            fresh()
            first, answer = timed(page)
            page()  # waits for the kept diff, if its writing is still under way
            assert answer["count"] == 100 and [t["table"] for t in answer["tables"]] == [f"db.t{tables // 2}"]
            times.append(first)
        return times

    touched = firsts(repeat)
    changes.TOUCHED_COMMITS = -1  # as two refs far apart: every table's state compared
    every = firsts(1)
    print(
        f"first page between two commits one apart in a catalog of {tables} tables: median of {repeat} first reads "
        f"{statistics.median(touched):.0f} ms ({min(touched):.0f}-{max(touched):.0f}); comparing every table's "
        f"state instead {every[0]:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tables", type=int, default=0, help="the catalog-of-many-tables mode instead")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    user, _ = get_user_model().objects.get_or_create(username="bench_changes")
    if args.tables:
        many_tables_mode(user, args.tables, args.repeat)
        return
    setup, catalog = timed(lambda: changed_table(user, args.rows))
    print(f"{args.rows} rows loaded on main and all updated on dev in {setup / 1000:.0f} s (setup)")
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    url = f"/api/v1/catalogs/{catalog.name}/changes"
    query = {"from": "main", "to": "dev"}

    def page(number: int = 1):
        response = client.get(url, {**query, "page": number, "page_size": 50})
        assert response.status_code == 200, response.content[:500]
        return response.json()

    firsts = []
    for _ in range(args.repeat):
        fresh()
        first, answer = timed(page)
        assert answer["count"] == args.rows and len(answer["results"]) == 50, answer["count"]
        firsts.append(first)
        kept, _ = timed(page)  # waits for the kept diff, if its writing is still under way
    again = [timed(page)[0] for _ in range(args.repeat)]
    last = [timed(lambda: page(-(-args.rows // 50)))[0] for _ in range(args.repeat)]
    print(
        f"first page of {args.rows} changed keyed rows: first read {firsts[0]:.0f} ms (median of {args.repeat} first "
        f"reads {statistics.median(firsts):.0f} ms, {min(firsts):.0f}-{max(firsts):.0f}), kept after {kept:.0f} ms "
        f"more; repeat {statistics.median(again):.1f} ms, last page {statistics.median(last):.1f} ms (medians)"
    )

    def stream() -> pa.Table:
        response = client.get(url, {**query, "table": "shop.orders"}, HTTP_ACCEPT=ARROW)
        assert response.status_code == 200 and response["Content-Type"] == ARROW
        return pa.ipc.open_stream(b"".join(response.streaming_content)).read_all()

    streamed = [timed(stream) for _ in range(args.repeat)]
    assert all(t.num_rows == args.rows for _, t in streamed)
    read = [timed(lambda: read_as_arrow(catalog)) for _ in range(args.repeat)]
    assert all(t.num_rows == args.rows for _, t in read)
    stream_ms, read_ms = statistics.median(t for t, _ in streamed), statistics.median(t for t, _ in read)
    print(
        f"Arrow stream of {args.rows} changes: {stream_ms:.0f} ms ({args.rows / stream_ms * 1000:,.0f} rows/s); "
        f"reading the {args.rows} rows as Arrow: {read_ms:.0f} ms ({args.rows / read_ms * 1000:,.0f} rows/s); "
        f"the stream at {read_ms / stream_ms:.2f}x the read's speed (medians of {args.repeat})"
    )


if __name__ == "__main__":
    main()
