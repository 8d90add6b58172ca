"""Provenance (docs/provenance.md): what an auditor waits for to see who wrote a table's values.

    python benchmarks/blame.py [--rows 1000000] [--commits 1000] [--spread 1.0] [--repeat 3]

Main holds `--rows` rows of a primary-key table (one Parquet upload), then `--commits` commits each upserting 10
rows (their amount changed) of keys drawn at random from 50 up to the `--spread` share of the key range (1.0: the
whole range, so each upsert's new segment spans most of it: a key in it is ruled out by the commit's key columns,
not its statistics; the first page's keys 0..49 lie below every upsert's range). Measured in this process, as the
web process answers (`table_blame`, `key_history`; the API's answers at a commit are kept by the conditional-read
cache, which would time a cache); each figure first with nothing kept in the process (cold: `kept_clear`; the
files are in the OS's cache, having just been written or read), then warm, the median of `--repeat` calls:

1. the first page (50 keys) of the table's blame at main, and page 10,000: the live keys read and ordered, the page's
   rows read, then the history walked until every cell of the page is settled (keys 0..49 were never updated, so
   the walk goes all the way back to the load);
2. the blame of one key the last commit updated, and of one key no commit updated;
3. the history of one key the last commit updated, and of one only the first upsert updated.

The issue's target: at 1,000,000 rows and 1,000 commits, the first page under 500 ms and one key's history under
100 ms. Data jobs run in this process (`job_execute`, Spark local): no worker needed. Uses DATABASE_URL when set,
else an embedded PostgreSQL server in a throwaway folder. Prints one line per figure.
"""

import argparse
import random
import statistics

from setup import django_setup, keyed_orders, run_job, timed

django_setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402

from catalog_app.models import Catalog  # noqa: E402
from catalog_app.selectors.blame import kept_clear, key_history, table_blame  # noqa: E402
from catalog_app.selectors.refs import ref_resolve  # noqa: E402
from catalog_app.services.data_submit import table_data_submit  # noqa: E402


def history(user, rows: int, commits: int, spread: float):
    """shop.orders with `rows` rows, then `commits` upserts of 10 random keys each: its catalog and the keys the last
    upsert set."""
    main = keyed_orders(user, rows, "blame")
    drawn = drawn_keys(rows, commits, spread)
    for number, keys in enumerate(drawn):
        params = {"strategy": "upsert", "key_columns": ["id"],
                  "rows": [{"id": k, "amount": -number, "region": "us"} for k in keys]}  # fmt: skip
        run_job(table_data_submit(target=main, database="shop", table="orders", kind="table_load", params=params))
    return main.catalog, drawn[-1] if drawn else []


def drawn_keys(rows: int, commits: int, spread: float) -> list[list[int]]:
    """The keys each upsert sets (the same for the same options: a run with --catalog knows them)."""
    drawn = random.Random(56)  # the first page's keys (0..49) stay as loaded
    return [drawn.sample(range(50, max(51, int(rows * spread))), 10) for _ in range(commits)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--spread", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--catalog", help="measure this catalog, made by an earlier run with the same options")
    args = parser.parse_args()
    user, _ = get_user_model().objects.get_or_create(username="bench_blame")
    if args.catalog:
        catalog = Catalog.objects.get(name=args.catalog)
        last_keys = drawn_keys(args.rows, args.commits, args.spread)[-1]
    else:
        setup, (catalog, last_keys) = timed(lambda: history(user, args.rows, args.commits, args.spread))
        print(f"{args.rows} rows loaded and {args.commits} upserts of 10 keys (spread {args.spread}) in "
              f"{setup / 1000:.0f} s (setup), catalog {catalog.name}")  # fmt: skip

    with connection.cursor() as cursor:  # the planner's statistics, as autovacuum keeps them on a live database
        cursor.execute("ANALYZE")
    drawn = drawn_keys(args.rows, args.commits, args.spread)
    first_upserted = next(k for k in drawn[0] if all(k not in keys for keys in drawn[1:]))

    def blame(**params):
        resolved = ref_resolve(catalog=catalog, ref="main")
        return table_blame(resolved=resolved, database="shop", table="orders", **params)

    def versions(key: int):
        resolved = ref_resolve(catalog=catalog, ref="main")
        return key_history(resolved=resolved, database="shop", table="orders", key=f"[{key}]")

    figures = [
        ("first page of the blame (50 keys)", blame),
        ("page 10,000 of the blame", lambda: blame(page=10_000)),
        ("one key's blame, updated by the last commit", lambda: blame(key=f"[{last_keys[0]}]")),
        ("one key's blame, never updated", lambda: blame(key="[7]")),
        ("one key's history, updated by the last commit", lambda: versions(last_keys[0])),
        ("one key's history, updated by the first upsert only", lambda: versions(first_upserted)),
    ]
    blame()  # the process as a web process is: connected, its libraries loaded, having answered a question before
    print(f"{args.rows} rows, {args.commits} commits deep; each figure: the first call with nothing kept in the "
          f"process (cold), then the median of {args.repeat} more (warm), in ms")  # fmt: skip
    for name, action in figures:
        kept_clear()
        cold, answer = timed(action)
        runs = [timed(action)[0] for _ in range(args.repeat)]
        shown = ""
        if isinstance(answer, dict):
            shown = f" ({len(answer['versions'])} versions)"
        else:
            assert all(c["commit"] is not None for r in answer.results for c in r["cells"].values())
            assert answer.count in (1, args.rows), answer.count
        print(f"{name}{shown}: cold {cold:.0f}, warm {statistics.median(runs):.0f} ({min(runs):.0f}-{max(runs):.0f})")


if __name__ == "__main__":
    main()
