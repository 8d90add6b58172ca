"""Interactive SQL on small data (issue 40): an SQL console SELECT and an SQL check run, end to end through the API.

    python benchmarks/interactive_sql.py [--small-rows 2000] [--large-rows 10000000] [--repeat 10]

Starts the product as `make run` does (benchmarks/interactive.py: gunicorn, a jobs worker, an interactive worker)
and prints medians on warm workers of:

- a console `SELECT region, count(*), sum(amount) ... GROUP BY region` on a `--small-rows` table: answered in the
  web process (catalog_app/engine/quick_sql.py, DuckDB over the rows read with pyarrow), and the same query through
  Spark in the same run (written `count(1)`, which quick_sql leaves to Spark: the path every query took before);
- an SQL check run (POST to the finished job, polled every 20 ms) on the small table, judged without Spark in the
  request (checks_app/services/checks.py: its job is finished when the POST answers), and the same check through
  Spark on the jobs worker (`amount + 0`, outside the subset);
- both on a `--large-rows` table, which is past LAKEUI_QUICK_SQL_ROWS and read by Spark on the workers.

Target (docs/performance.md#interactive-sql-on-small-data): a console SELECT and a check on a table of a few
thousand rows under 0.5 s. The machine's load average is printed with the figures.
"""

import argparse
import os
import statistics
import time
import uuid

import numpy as np
from interactive import COLUMNS, running_product, timed
from setup import django_setup

django_setup()

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from lakeui_client import Client  # noqa: E402

QUICK = "SELECT region, count(*), sum(amount) FROM shop.{table} GROUP BY region ORDER BY region"
SPARK = "SELECT region, count(1), sum(amount) FROM shop.{table} GROUP BY region ORDER BY region"
CHECK_QUICK = "SELECT id FROM shop.{table} WHERE amount < 0"
CHECK_SPARK = "SELECT id FROM shop.{table} WHERE amount + 0 < 0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small-rows", type=int, default=2_000)
    parser.add_argument("--large-rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    with running_product("bench_sql", timeout=600) as (client, logs):
        run(client, args, logs)


def table_file(path, rows: int) -> str:
    ids = np.arange(rows, dtype=np.int64)
    regions = np.array(["eu", "us", "apac"], dtype=object)[ids % 3]
    pq.write_table(pa.table({"id": ids, "amount": (ids % 1000).astype(np.int32), "region": regions}), path)
    return str(path)


def run(client: Client, args, logs) -> None:
    catalog = f"bench_{uuid.uuid4().hex[:6]}"
    client.catalog_create(catalog)
    client.database_create(catalog, "main", "shop")
    started = time.perf_counter()
    for table, rows in (("small", args.small_rows), ("large", args.large_rows)):
        client.table_create(catalog, "main", f"shop.{table}", COLUMNS)
        job = client.load(catalog, "main", f"shop.{table}", strategy="append_only",
                          file=table_file(logs / f"{table}.parquet", rows), wait=False)  # fmt: skip
        client.wait(job["id"], timeout=3600)
    print(f"tables loaded: {args.small_rows:,} and {args.large_rows:,} rows in {time.perf_counter() - started:.0f} s")

    def console(statement: str, table: str):
        return lambda: timed(lambda: client.sql(catalog, statement.format(table=table)))

    bounds = iter(range(1, 10**6))

    def check(statement: str, table: str):
        created = client.check_create(catalog, f"c{uuid.uuid4().hex[:6]}", "main", statement.format(table=table))

        def run_check() -> float:
            # A new bound each time: a new version of the check, so the run judges the table again (a run of the
            # same version on the same files is reused, not judged: checks_app/services/checks.py).
            client.check_update(catalog, created["id"], max_rows=next(bounds))
            started = time.perf_counter()
            job = client.request("POST", f"catalogs/{catalog}/checks/{created['id']}/runs", json={"ref": "main"})
            finished = client.wait(job["id"], interval=0.02)
            elapsed = time.perf_counter() - started
            run = client.check_run_get(catalog, finished["result"]["id"])
            assert run["state"] == "success" and not run.get("reused_from"), run
            return elapsed

        return run_check

    cases = [
        ("console SELECT", "small", console(QUICK, "small"), console(SPARK, "small")),
        ("SQL check run", "small", check(CHECK_QUICK, "small"), check(CHECK_SPARK, "small")),
        ("console SELECT", "large", console(QUICK, "large"), None),
        ("SQL check run", "large", check(CHECK_QUICK, "large"), None),
    ]
    same = [client.sql(catalog, statement.format(table="small"))["rows"] for statement in (QUICK, SPARK)]
    assert same[0] == same[1], same  # the same answer both ways
    results = []
    for name, table, quick, spark in cases:
        for action in (quick, spark):
            if action is not None:
                action(), action()  # warm: Spark started on both workers, the check's statement parsed
        timings = {"quick": [], "spark": []}
        for _ in range(args.repeat):  # interleaved: the machine's noise falls on both alike
            timings["quick"].append(quick())
            if spark is not None:
                timings["spark"].append(spark())
        results.append((name, table, timings))
    rows = {"small": args.small_rows, "large": args.large_rows}
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"\nmedians of {args.repeat}, warm workers, in one run (ms); load average {load}:")
    print(f"{'':16} {'table':>13} {'as served':>10} {'Spark path':>11} {'ratio':>6}")
    for name, table, timings in results:
        served = statistics.median(timings["quick"]) * 1000
        if timings["spark"]:
            spark = statistics.median(timings["spark"]) * 1000
            print(f"{name:16} {rows[table]:>13,} {served:>10.0f} {spark:>11.0f} {served / spark:>6.2f}")
        else:
            print(f"{name:16} {rows[table]:>13,} {served:>10.0f} {'(same)':>11} {'':>6}")
    small = [statistics.median(timings["quick"]) for _, table, timings in results if table == "small"]
    verdict = "met" if max(small) < 0.5 else "NOT met"
    print(f"target: both under 500 ms on {args.small_rows:,} rows, warm: {verdict}")


if __name__ == "__main__":
    main()
