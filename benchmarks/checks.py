"""Merge checks (docs/merge-semantics.md#merge-checks): what judging a merge's result costs.

    python benchmarks/checks.py [--rows 1000000] [--repeat 3]

`main` holds `--rows` rows in `shop.orders` (one Parquet upload); branch `dev` appends 1,000 more. Three SQL checks
guard `main` (no negative amount, no duplicated id, no order without a region). Each figure is a dry-run merge of
`dev` into `main` through `branch_merge`, as a worker runs it: the merge's result committed where no branch points
and the three checks run on it with Spark (local). Printed: the first run (each check's time), then after an
unrelated head move (another table of `main` changes: no check's tables changed, so none runs again) and after a
move that changes `shop.orders` (all three run again); medians of `--repeat`.

Data jobs run in this process as real jobs (`job_execute`), as `make run`'s demo does: no worker needed. Uses
DATABASE_URL when set, else an embedded PostgreSQL server in a throwaway folder.
"""

import argparse
import io
import shutil
import statistics
import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
from setup import django_setup, run_job

django_setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: E402

from catalog_app.job_specs import FileUpload, LoadSpec  # noqa: E402
from catalog_app.services.commits import WriteTarget  # noqa: E402
from catalog_app.services.data_submit import table_data_submit, table_load_submit  # noqa: E402
from catalog_app.services.databases import database_create  # noqa: E402
from catalog_app.services.refs import branch_create, catalog_create  # noqa: E402
from catalog_app.services.tables import table_create  # noqa: E402
from checks_app.job_kinds import check_statement  # noqa: E402
from checks_app.models import Check  # noqa: E402
from merge_app.services.merges import branch_merge  # noqa: E402

COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "amount", "type": "long"},
    {"name": "region", "type": "string"},
]
CHECKS = {
    "no negative amount": "SELECT id, amount FROM shop.orders WHERE amount < 0",
    "no duplicated id": "SELECT id, count(*) AS n FROM shop.orders GROUP BY id HAVING count(*) > 1",
    "every order has a region": "SELECT id FROM shop.orders WHERE region IS NULL",
}


def parquet(first: int, rows: int) -> FileUpload:
    ids = pa.array(range(first, first + rows), pa.int64())
    frame = pa.table({"id": ids, "amount": ids, "region": pa.array(["eu"] * rows)})
    sink = io.BytesIO()
    pq.write_table(frame, sink)
    return FileUpload(file=SimpleUploadedFile("rows.parquet", sink.getvalue()), format="parquet")


class Progress:
    job_id = "bench"

    def report(self, percent: int, message: str = "") -> None:
        pass


def dry_run(catalog, user) -> tuple[float, list[dict]]:
    started = time.perf_counter()
    merge = branch_merge(catalog=catalog, source="dev", target="main", dry_run=True, user=user)
    elapsed = (time.perf_counter() - started) * 1000
    runs = merge.log["checks"]
    assert all(run["state"] == "success" for run in runs), runs
    return elapsed, runs


def figures(label: str, samples: list[tuple[float, list[dict]]]) -> None:
    total = statistics.median(elapsed for elapsed, _ in samples)
    ran = sum(1 for run in samples[-1][1] if run["reused_from"] is None)
    each = {run["name"]: run["duration_ms"] for run in samples[0][1]}
    detail = ", ".join(f"{name} {ms} ms" for name, ms in each.items())
    print(f"{label}: dry-run merge with its checks {total:.0f} ms (median of {len(samples)}); "
          f"checks run {ran} of {len(samples[-1][1])}; {detail}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    user, _ = get_user_model().objects.get_or_create(username="bench")
    catalog = catalog_create(name=f"bench_checks_{uuid.uuid4().hex[:6]}", created_by=user)
    main_branch = WriteTarget(catalog=catalog, branch="main", author=user)
    database_create(target=main_branch, name="shop")
    table_create(target=main_branch, database="shop", name="orders", columns=COLUMNS)
    load = LoadSpec(strategy="append_only", source=parquet(0, args.rows))
    run_job(table_load_submit(target=main_branch, database="shop", table="orders", spec=load))
    branch_create(catalog=catalog, name="dev", source="main", created_by=user)
    dev = WriteTarget(catalog=catalog, branch="dev", author=user)
    load = LoadSpec(strategy="append_only", source=parquet(args.rows, 1000))
    run_job(table_load_submit(target=dev, database="shop", table="orders", spec=load))
    for name, statement in CHECKS.items():  # the statement parsed as the API's creation parses it, in-process
        params = {"catalog_id": str(catalog.id), "statement": statement, "branches": "main"}
        tables = check_statement(params, Progress())["tables"]
        Check.objects.create(catalog=catalog, name=name, branches="main", sql=statement, tables=tables)
    print(f"merge result: {args.rows + 1000:,} rows in shop.orders; {len(CHECKS)} checks guard main")

    first = [dry_run(catalog, user)]
    figures("first run", first)
    unrelated = []
    for index in range(args.repeat):
        table_create(target=main_branch, database="shop", name=f"other_{index}", columns=COLUMNS)
        unrelated.append(dry_run(catalog, user))
    figures("after an unrelated head move", unrelated)
    related = []
    for index in range(args.repeat):
        rows = {"strategy": "append_only", "rows": [{"id": -1 - index, "amount": 1, "region": "us"}]}
        run_job(table_data_submit(target=main_branch, database="shop", table="orders", kind="table_load",
                                  params=rows))  # fmt: skip
        related.append(dry_run(catalog, user))
    figures("after a move that changes shop.orders", related)
    shutil.rmtree(f"{settings.LAKEUI_WAREHOUSE}/{catalog.id}", ignore_errors=True)


if __name__ == "__main__":
    main()
