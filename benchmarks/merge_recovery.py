"""A worker killed mid-merge of a large keyed table: how long until the merge ends (issue 40; target 2 minutes).

    python benchmarks/merge_recovery.py [--rows 1000000] [--new-name] [--kill-while-writing]

On DATABASE_URL and REDIS_URL (a queue of its own), with the product's recovery settings (LAKEUI_JOB_STALE_AFTER,
LAKEUI_JOB_RECOVER_EVERY as configured). A table with the primary key `id` gets `--rows` rows; a branch `dev`
updates every 10th row's amount, `main` every 7th row's region, so the merge of dev into main is a row-level merge
by key whose rows Spark writes. The merge runs on a worker started with LAKEUI_JOB_CRASH_AT=before_commit: it
SIGKILLs its own process group (Spark JVM included) after the merge prepared its result (the merged files written,
the result committed where no branch points, the job's checkpoint saved), before it publishes it. The worker is
started again at once under its node name, as a supervisor restarts it (`make run`, Docker's restart policy: it
takes its earlier run's jobs back as it becomes ready; `--new-name` starts one of another name, which waits for the
job's heartbeat to go stale). With `--kill-while-writing` the worker is SIGKILLed from outside while Spark writes
the merged rows instead, before the merge prepared anything: the second run merges again from the start. The
benchmark prints the time from the kill to the merge's second start and to its
end, whether the second run published the prepared result (resumed) or merged again, and whether main holds
exactly the merged rows.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from setup import django_setup

os.environ.setdefault("LAKEUI_QUEUE", f"merge-recovery-{uuid.uuid4().hex[:8]}")
django_setup()

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from crash_recovery import COLUMNS, READY_TIMEOUT, ROOT, Worker  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.files import File  # noqa: E402
from django.db import transaction  # noqa: E402

from catalog_app.engine.reads import read_rows_arrow  # noqa: E402
from catalog_app.engine.warehouse import Warehouse  # noqa: E402
from catalog_app.models import ObjectKind  # noqa: E402
from catalog_app.selectors.objects import object_get  # noqa: E402
from catalog_app.selectors.refs import ref_resolve  # noqa: E402
from catalog_app.selectors.table_files import table_columns, table_files  # noqa: E402
from catalog_app.services.commits import WriteTarget  # noqa: E402
from catalog_app.services.data_submit import table_data_submit, upload_store  # noqa: E402
from catalog_app.services.databases import database_create  # noqa: E402
from catalog_app.services.refs import branch_create, catalog_create  # noqa: E402
from catalog_app.services.tables import table_create  # noqa: E402
from lakeui.jobs.models import Job  # noqa: E402
from merge_app.models import Merge  # noqa: E402
from merge_app.services.merges import merge_submit  # noqa: E402


class NamedWorker(Worker):
    """crash_recovery's worker under a node name of our choosing (a restart keeps its name)."""

    def __init__(self, log_dir: Path, index: int, name: str) -> None:
        self.log_path = log_dir / f"worker-{index}.log"
        command = [sys.executable, "-m", "celery", "-A", "lakeui", "worker", "--loglevel", "INFO", "--concurrency",
                   "1", "--hostname", name, "--without-gossip", "--without-mingle"]  # fmt: skip
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + READY_TIMEOUT
        while " ready." not in self.log_path.read_text(errors="replace"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                sys.exit(f"The worker did not start:\n{self.log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)


def kill_while_writing(worker: Worker, folder: Path, timeout: float = 3600) -> None:
    """SIGKILL the worker's process group once a Spark write's `_temporary` folder appears under `folder`."""
    deadline = time.monotonic() + timeout
    while not any("_temporary" in dirs for _, dirs, _ in os.walk(folder)):
        if worker.process.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"No Spark write was seen:\n{worker.log_path.read_text(errors='replace')[-3000:]}")
        time.sleep(0.01)
    worker.kill()


def wait(job: Job, statuses, timeout: float = 3600) -> Job:
    deadline = time.monotonic() + timeout
    while (job := Job.objects.get(id=job.id)).status not in statuses and time.monotonic() < deadline:
        time.sleep(0.05)
    return job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--new-name", action="store_true", help="restart the worker under another node name")
    parser.add_argument("--kill-while-writing", action="store_true", help="kill the worker while Spark writes")
    args = parser.parse_args()
    n = args.rows
    logs = Path(tempfile.mkdtemp(prefix="lakeui-merge-recovery-"))
    catalog = catalog_create(name=f"mr_{uuid.uuid4().hex[:8]}")
    main_branch = WriteTarget(catalog=catalog, branch="main")
    database_create(target=main_branch, name="sales")
    table = table_create(target=main_branch, database="sales", name="orders", columns=COLUMNS, primary_key=["id"])
    ids = np.arange(n, dtype=np.int64)
    source = logs / "rows.parquet"
    pq.write_table(pa.table({"id": ids, "amount": (ids % 100).astype(np.int32),
                             "region": np.array(["eu", "us"], dtype=object)[ids % 2]}), source)  # fmt: skip

    def change(target: WriteTarget, kind: str, params: dict) -> None:
        with transaction.atomic():
            job = table_data_submit(target=target, database="sales", table="orders", kind=kind, params=params)
        finished = wait(job, Job.FINISHED)
        assert finished.status == Job.Status.SUCCEEDED, (finished.error_code, finished.error_message)

    started = time.monotonic()
    setup_worker = Worker(logs, 0)
    try:
        with source.open("rb") as handle, transaction.atomic():
            upload = upload_store(catalog=catalog, table=table, upload=File(handle), file_format="parquet")
        change(main_branch, "table_load", {"strategy": "append_only", "upload": upload})
        branch_create(catalog=catalog, name="dev", source="main")
        change(WriteTarget(catalog=catalog, branch="dev"), "table_update",
               {"set": {"amount": "amount + 1000"}, "where": "id % 10 = 0"})  # fmt: skip
        change(main_branch, "table_update", {"set": {"region": "'m'"}, "where": "id % 7 = 0"})
    finally:
        setup_worker.stop()
    print(f"{n:,} keyed rows on main, dev changed {n // 10:,} and main {n // 7:,}: set up in "
          f"{time.monotonic() - started:.0f} s; LAKEUI_JOB_STALE_AFTER={settings.LAKEUI_JOB_STALE_AFTER} s, "
          f"LAKEUI_JOB_RECOVER_EVERY={settings.LAKEUI_JOB_RECOVER_EVERY} s, load average "
          f"{', '.join(f'{value:.1f}' for value in os.getloadavg())}")  # fmt: skip

    before = ref_resolve(catalog=catalog, ref="main").commit.id
    if not args.kill_while_writing:
        os.environ["LAKEUI_JOB_CRASH_AT"] = "before_commit"
    name = f"merge-recovery-{uuid.uuid4().hex[:6]}@%h"
    dying = NamedWorker(logs, 1, name)  # inherits the crash point from this process's environment
    os.environ.pop("LAKEUI_JOB_CRASH_AT", None)
    with transaction.atomic():
        job = merge_submit(catalog=catalog, source="dev", target="main")
    submitted = time.monotonic()
    if args.kill_while_writing:
        kill_while_writing(dying, Path(settings.LAKEUI_WAREHOUSE) / str(catalog.id))
    else:
        dying.process.wait(timeout=3600)
    killed_at = time.monotonic()
    point = "while Spark wrote the merged rows" if args.kill_while_writing else "after it prepared its result"
    print(f"the merge ran {killed_at - submitted:.1f} s on the first worker until it was killed {point}")
    recovering = Worker(logs, 2) if args.new_name else NamedWorker(logs, 2, name)
    try:
        restarted = wait(job, (*Job.FINISHED,), 0)
        while restarted.attempts < 2 and not restarted.is_finished:
            restarted = wait(job, (*Job.FINISHED,), 0.05)
        second_start = time.monotonic() - killed_at
        job = wait(job, Job.FINISHED)
        ended = time.monotonic() - killed_at
    finally:
        recovering.stop()
    head = ref_resolve(catalog=catalog, ref="main")
    chain = head.chain
    database = object_get(chain, kind=ObjectKind.DATABASE, name="sales")
    version = object_get(chain, kind=ObjectKind.TABLE, name="orders", parent_id=database.object_id)
    rows = read_rows_arrow(Warehouse(settings.LAKEUI_WAREHOUSE), table_columns(version),
                          table_files(chain, table_id=version.object_id).reads()).sort_by("id")  # fmt: skip
    got = {name: rows.column(name).to_numpy(zero_copy_only=False) for name in ("id", "amount", "region")}
    amount = (ids % 100) + np.where(ids % 10 == 0, 1000, 0)
    region = np.where(ids % 7 == 0, "m", np.where(ids % 2 == 0, "eu", "us"))
    if job.status == Job.Status.SUCCEEDED:
        same = [np.array_equal(got["id"], ids), np.array_equal(got["amount"], amount),
                np.array_equal(got["region"].astype(str), region)]  # fmt: skip
        exact = head.commit.parent_id == before and all(same)
    else:
        exact = head.commit.id == before
    merge = Merge.objects.filter(job=job).first()
    resumed = merge is not None and "resumed_ms" in merge.timings
    restart = "under another name" if args.new_name else "under its name"
    print(f"worker restarted {restart}; load average {', '.join(f'{value:.1f}' for value in os.getloadavg())}")
    print(f"kill -> second start: {second_start:.1f} s; kill -> merge ended ({job.status}, attempts {job.attempts}): "
          f"{ended:.1f} s (target 120 s); resumed the prepared result: {resumed}; main exact: {exact}")  # fmt: skip
    for worker_log in sorted(logs.glob("worker-*.log")):
        print(f"  log: {worker_log}")
    sys.exit(0 if exact and ended < 120 else 1)


if __name__ == "__main__":
    main()
