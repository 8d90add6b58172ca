"""The merge queue (docs/merge-queue.md): merging 10 approved requests through the queue against by hand, same run.

    python benchmarks/merge_queue.py [--requests 10] [--rows 100000]

Two catalogs are built alike: `main` holds `--rows` rows in `shop.orders` (one Parquet upload) and is protected
(one approval) and guarded by two SQL checks (no negative amount, no duplicated id); `--requests` branches each
append 100 rows of their own, and each has an approved merge request into `main`. Timed:

- by hand: the requests merged one after another as a team merges without a queue: after each merge `main` has
  moved, so the next request's plan is stale; it is planned again (the plan job: a dry-run merge, its result
  judged by both checks), then merged (the merge job plans, writes and checks its result again and publishes it);
- queued: every request queued ("merge when ready") on a branch that requires the queue, then the queue's job
  runs: each entry planned once on the result of those ahead of it, judged by both checks, and published by
  compare-and-swap (the next entry was prepared on exactly that commit, so nothing is planned or checked twice).

Jobs run in this process (`job_execute`), as benchmarks/checks.py runs them: no worker needed. Uses DATABASE_URL
when set, else an embedded PostgreSQL server in a throwaway folder.
"""

import argparse
import io
import shutil
import sys
import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
from checks import COLUMNS, Progress, run_job
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile

from catalog_app.job_specs import FileUpload, LoadSpec
from catalog_app.services.access import catalog_role_grant, protected_branch_create
from catalog_app.services.commits import WriteTarget
from catalog_app.services.data_submit import table_data_submit, table_load_submit
from catalog_app.services.databases import database_create
from catalog_app.services.refs import branch_create, catalog_create
from catalog_app.services.tables import table_create
from checks_app.job_kinds import check_statement
from checks_app.models import Check
from merge_app.models import MergeQueueRunner, MergeRequest, QueueEntry
from merge_app.services.merge_requests import (
    merge_request_merge,
    merge_request_open,
    merge_request_refresh,
    merge_request_review,
)
from merge_app.services.queue import queue_enqueue

CHECKS = {
    "no negative amount": "SELECT id, amount FROM shop.orders WHERE amount < 0",
    "no duplicated id": "SELECT id, count(*) AS n FROM shop.orders GROUP BY id HAVING count(*) > 1",
}
ROWS_PER_REQUEST = 100


def parquet(rows: int) -> FileUpload:
    ids = pa.array(range(rows), pa.int64())
    frame = pa.table({"id": ids, "amount": ids, "region": pa.array(["eu"] * rows)})
    sink = io.BytesIO()
    pq.write_table(frame, sink)
    return FileUpload(file=SimpleUploadedFile("rows.parquet", sink.getvalue()), format="parquet")


def lake(label: str, *, rows: int, requests: int, queue: bool, users: dict) -> tuple:
    """A catalog as the module's docstring says; its open, approved, planned requests."""
    owner = users["alice"]
    catalog = catalog_create(name=f"bench_queue_{label}_{uuid.uuid4().hex[:6]}", created_by=owner)
    main = WriteTarget(catalog=catalog, branch="main", author=owner)
    database_create(target=main, name="shop")
    table_create(target=main, database="shop", name="orders", columns=COLUMNS)
    run_job(table_load_submit(target=main, database="shop", table="orders",
                              spec=LoadSpec(strategy="append_only", source=parquet(rows))))  # fmt: skip
    for name, statement in CHECKS.items():  # parsed as the API's creation parses it, in-process
        params = {"catalog_id": str(catalog.id), "statement": statement, "branches": "main"}
        tables = check_statement(params, Progress())["tables"]
        Check.objects.create(catalog=catalog, name=name, branches="main", sql=statement, tables=tables)
    for name, role in (("bob", "editor"), ("carol", "approver")):
        catalog_role_grant(catalog=catalog, username=users[name].username, role=role, granted_by=owner)
    numbers = []
    for index in range(requests):
        branch = f"load-{index}"
        branch_create(catalog=catalog, name=branch, source="main", created_by=owner)
        first = rows + index * ROWS_PER_REQUEST
        load = [{"id": first + i, "amount": 1, "region": "us"} for i in range(ROWS_PER_REQUEST)]
        target = WriteTarget(catalog=catalog, branch=branch, author=owner)
        params = {"strategy": "append_only", "rows": load}
        run_job(table_data_submit(target=target, database="shop", table="orders", kind="table_load", params=params))
    protected_branch_create(catalog=catalog, pattern="main", required_approvals=1, require_queue=queue,
                            created_by=owner)  # fmt: skip
    for index in range(requests):
        request = merge_request_open(catalog=catalog, source=f"load-{index}", target="main", title=f"load {index}",
                                     author=users["bob"])  # fmt: skip
        if not queue:  # by hand, a request is merged once its plan (with its checks) is ready; the queue needs none
            run_job(request.plan_job)
        merge_request_review(merge_request=request, reviewer=users["carol"], decision="approve")
        numbers.append(request.number)
    return catalog, numbers


def by_hand(catalog, numbers: list[int], users: dict) -> float:
    started = time.perf_counter()
    for number in numbers:
        request = MergeRequest.objects.select_related("catalog", "author", "plan_job").get(catalog=catalog,
                                                                                          number=number)  # fmt: skip
        request = merge_request_refresh(merge_request=request, user=users["bob"])  # main moved: planned again
        if request.plan_job is not None and not request.plan_job.is_finished:
            run_job(request.plan_job)
        run_job(merge_request_merge(merge_request=request, user=users["bob"]))
    return time.perf_counter() - started


def queued(catalog, numbers: list[int], users: dict) -> float:
    started = time.perf_counter()
    for number in numbers:
        request = MergeRequest.objects.select_related("catalog", "author", "plan_job").get(catalog=catalog,
                                                                                          number=number)  # fmt: skip
        queue_enqueue(merge_request=request, user=users["bob"])
    run_job(MergeQueueRunner.objects.get(catalog=catalog, target="main").job)
    elapsed = time.perf_counter() - started
    merged = QueueEntry.objects.filter(catalog=catalog, state=QueueEntry.State.MERGED).count()
    if merged != len(numbers):
        left = QueueEntry.objects.exclude(state=QueueEntry.State.MERGED).filter(catalog=catalog)
        sys.exit(f"only {merged} of {len(numbers)} merged: {[(e.reason, e.message) for e in left]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    users = {name: get_user_model().objects.get_or_create(username=f"bench_{name}")[0]
             for name in ("alice", "bob", "carol")}  # fmt: skip
    hand_catalog, hand_numbers = lake("hand", rows=args.rows, requests=args.requests, queue=False, users=users)
    queue_catalog, queue_numbers = lake("queue", rows=args.rows, requests=args.requests, queue=True, users=users)
    print(f"{args.requests} approved requests of {ROWS_PER_REQUEST} rows each into main ({args.rows:,} rows in "
          f"shop.orders), {len(CHECKS)} SQL checks guard main")  # fmt: skip
    hand = by_hand(hand_catalog, hand_numbers, users)
    print(f"by hand, one after another (re-planned and re-checked after each merge): {hand:.1f} s")
    queue = queued(queue_catalog, queue_numbers, users)
    print(f"through the merge queue (depth {settings.LAKEUI_MERGE_QUEUE_DEPTH}): {queue:.1f} s "
          f"({hand / queue:.1f}x faster)")  # fmt: skip
    for catalog in (hand_catalog, queue_catalog):
        shutil.rmtree(f"{settings.LAKEUI_WAREHOUSE}/{catalog.id}", ignore_errors=True)


if __name__ == "__main__":
    main()
