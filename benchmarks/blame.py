"""Provenance (docs/provenance.md): what an auditor waits for to see who wrote a table's values.

    python benchmarks/blame.py [--rows 1000000] [--commits 1000] [--spread 1.0] [--repeat 3]

Main holds `--rows` rows of a primary-key table (one Parquet upload), then `--commits` commits each upserting 10
rows (their amount changed) of keys drawn at random from the lowest `--spread` share of the key range (1.0: the
whole range, so each upsert's new segment spans it and no commit is ruled out by its key statistics). Measured
in this process, as the web process answers (`table_blame`, `key_history`; the API's answers at a commit are kept
by the conditional-read cache, which would time a cache):

1. the first page (50 keys) of the table's blame at main: the rows read and sorted by key, then the history
   walked until every cell of the page is settled (keys 0..49: most were never updated, so the walk goes all the
   way back to the load);
2. the blame of one key the last commit updated, and of one key no commit updated;
3. the history of one key.

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

from catalog_app.models import Catalog  # noqa: E402
from catalog_app.selectors.blame import key_history, table_blame  # noqa: E402
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

    def blame(**params):
        resolved = ref_resolve(catalog=catalog, ref="main")
        return table_blame(resolved=resolved, database="shop", table="orders", **params)

    def median(action) -> tuple[float, float, float, object]:
        runs = [timed(action) for _ in range(args.repeat)]
        times = [t for t, _ in runs]
        return statistics.median(times), min(times), max(times), runs[-1][1]

    first, low, high, page = median(blame)
    assert page.count == args.rows and len(page.results) == 50
    assert all(c["commit"] is not None for r in page.results for c in r["cells"].values())
    print(f"first page of the blame (50 keys) of {args.rows} rows {args.commits} commits deep: "
          f"{first:.0f} ms (median of {args.repeat}, {low:.0f}-{high:.0f})")  # fmt: skip
    changed, low, high, _ = median(lambda: blame(key=f"[{last_keys[0]}]"))
    untouched, low2, high2, _ = median(lambda: blame(key="[7]"))
    print(f"one key's blame: updated by the last commit {changed:.0f} ms ({low:.0f}-{high:.0f}); "
          f"never updated {untouched:.0f} ms ({low2:.0f}-{high2:.0f})")  # fmt: skip

    def versions():
        resolved = ref_resolve(catalog=catalog, ref="main")
        return key_history(resolved=resolved, database="shop", table="orders", key=f"[{last_keys[0]}]")

    took, low, high, answer = median(versions)
    print(f"one key's history ({len(answer['versions'])} versions): {took:.0f} ms ({low:.0f}-{high:.0f})")


if __name__ == "__main__":
    main()
