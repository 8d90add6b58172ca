"""Crash recovery: a worker SIGKILLed mid-job at random moments, N times, on each broker (issue 18).

    python benchmarks/crash_recovery.py [--kills 20] [--rows 200000] [--stale-after 10] [--brokers embedded,redis]
                                        [--seed 1]

For each broker it runs in a process of its own: `embedded` is `make run`'s defaults (an embedded PostgreSQL server in a
throwaway folder, kombu's filesystem broker, a warehouse folder); `redis` is DATABASE_URL (default the machine's
PostgreSQL, database `lakeui_bench`, created if missing) with REDIS_URL (default db 9), on a queue of its own. One real
Celery worker (concurrency 1, its own process group: pool and Spark JVM) runs `append_only` loads of a Parquet
file of R rows into one table. Two loads, not killed, start Spark and measure how long a load runs on a warm
worker (each new worker is warm once it has run the job it recovered). Then N times: submit a load, wait until a
worker claimed it, wait a random moment within that run time, SIGKILL the worker's process group, start a new
worker. The new worker's recovery loop (every
LAKEUI_JOB_RECOVER_EVERY, half of LAKEUI_JOB_STALE_AFTER) sends the job again once its heartbeat is older than
LAKEUI_JOB_STALE_AFTER.

Prints per broker: jobs ended (succeeded / failed), the median and max time from the kill to the job's end (and
to its second start), heads consistent (the branch moved by exactly one commit, the job's, holding exactly R
more rows, or not at all for a failed job), files unreadable (every data and delete file the head references
opened with pyarrow; target 0) and the findings of the consistency check (`lakeui_check`; target 0).
"""

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from setup import ROOT

COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "amount", "type": "int"},
    {"name": "region", "type": "string"},
]
READY_TIMEOUT = 180


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--stale-after", type=int, default=10, help="LAKEUI_JOB_STALE_AFTER for the run (s)")
    parser.add_argument("--brokers", default="embedded,redis")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return run(args)
    for broker in args.brokers.split(","):
        env = dict(os.environ, LAKEUI_JOB_STALE_AFTER=str(args.stale_after), LAKEUI_QUEUE=f"crash-{uuid.uuid4().hex}")
        env["LAKEUI_VAR_DIR"] = tempfile.mkdtemp(prefix=f"lakeui-crash-{broker}-")
        if broker == "embedded":
            env.pop("DATABASE_URL", None), env.pop("REDIS_URL", None)
        elif broker == "redis":
            env.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/lakeui_bench")
            env.setdefault("REDIS_URL", "redis://127.0.0.1:6379/9")
            _create_database(env["DATABASE_URL"])
        else:
            sys.exit(f"unknown broker {broker!r}: embedded or redis")
        subprocess.run([sys.executable, __file__, *sys.argv[1:], "--child", broker], env=env, check=True)


def _create_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    exists = subprocess.run(["psql", admin, "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{name}'"],
                            capture_output=True, text=True)  # fmt: skip
    if exists.stdout.strip() != "1":
        subprocess.run(["psql", admin, "-qc", f'CREATE DATABASE "{name}"'], check=True)


class Worker:
    """A real Celery worker in its own process group, as `make run` starts it."""

    def __init__(self, log_dir: Path, index: int) -> None:
        self.log_path = log_dir / f"worker-{index}.log"
        name = f"crash{index}-{uuid.uuid4().hex[:6]}@%h"
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

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()


def run(args) -> None:
    from setup import django_setup

    django_setup()
    import pyarrow as pa
    import pyarrow.parquet as pq
    from django.conf import settings
    from django.core.files import File
    from django.db import transaction

    from catalog_app.engine.warehouse import Warehouse, arrow_filesystem
    from catalog_app.models import Commit
    from catalog_app.selectors.consistency import catalog_findings
    from catalog_app.selectors.refs import branch_get, ref_resolve
    from catalog_app.selectors.table_files import table_files
    from catalog_app.services.commits import WriteTarget
    from catalog_app.services.data_submit import table_data_submit, upload_store
    from catalog_app.services.databases import database_create
    from catalog_app.services.refs import catalog_create
    from catalog_app.services.tables import table_create
    from lakeui.jobs.models import Job

    broker, rng = args.child, random.Random(args.seed)
    catalog = catalog_create(name=f"crash_{uuid.uuid4().hex[:8]}")
    target = WriteTarget(catalog=catalog, branch="main")
    database_create(target=target, name="sales")
    table = table_create(target=target, database="sales", name="orders", columns=COLUMNS)
    source = Path(settings.VAR_DIR) / "rows.parquet"
    n = args.rows
    ids = pa.array(range(n), pa.int64())
    amounts = pa.array([i % 100 for i in range(n)], pa.int32())
    pq.write_table(pa.table({"id": ids, "amount": amounts, "region": pa.array(["eu"] * n)}), source)
    warehouse = Warehouse(settings.LAKEUI_WAREHOUSE)

    def submit() -> Job:
        with source.open("rb") as handle, transaction.atomic():
            upload = upload_store(catalog=catalog, table=table, upload=File(handle), file_format="parquet")
            params = {"strategy": "append_only", "upload": upload}
            return table_data_submit(target=target, database="sales", table="orders", kind="table_load", params=params)

    def wait(job: Job, statuses, timeout: float) -> Job:
        deadline = time.monotonic() + timeout
        while (job := Job.objects.get(id=job.id)).status not in statuses and time.monotonic() < deadline:
            time.sleep(0.05)
        return job

    def files():
        return table_files(ref_resolve(catalog=catalog, ref="main").chain, table_id=table.object_id)

    def live_rows() -> int:
        return files().live_rows(warehouse)

    def unreadable() -> int:
        """The data and delete files the head references that pyarrow cannot open as Parquet."""
        at_head = files()
        paths = [s.path for s in at_head.segments] + [d.path for ds in at_head.deltas.values() for d in ds]
        failed = 0
        for path in paths:
            filesystem, located = arrow_filesystem(warehouse.uri(path))
            try:
                pq.read_metadata(located, filesystem=filesystem)
            except (OSError, pa.ArrowException):
                failed += 1
        return failed

    log_dir = Path(settings.VAR_DIR) / "crash-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    started = 0
    worker = Worker(log_dir, started)
    timeout = args.stale_after * 3 + 300
    for _ in range(2):  # the first starts Spark; the second, measured, runs as every later one (warm)
        first = wait(submit(), Job.FINISHED, timeout)
        assert first.status == Job.Status.SUCCEEDED, (first.error_code, first.error_message)
    run_time = (first.finished_at - first.started_at).total_seconds()
    print(f"[{broker}] a load of {n:,} rows runs {run_time:.1f} s on a warm worker; {args.kills} kills follow")

    outcomes = []
    for kill in range(args.kills):
        before, rows_before = branch_get(catalog=catalog, name="main").head_id, live_rows()
        job = wait(submit(), (Job.Status.RUNNING, *Job.FINISHED), timeout)
        time.sleep(rng.uniform(0, run_time))
        during = Job.objects.get(id=job.id).status == Job.Status.RUNNING
        worker.kill()
        killed_at = time.monotonic()
        started += 1
        worker = Worker(log_dir, started)
        restarted = wait(job, (Job.Status.RUNNING, *Job.FINISHED), timeout)
        while restarted.attempts < 2 and not restarted.is_finished and time.monotonic() - killed_at < timeout:
            restarted = wait(job, (*Job.FINISHED,), 0.05)
        second_start = time.monotonic() - killed_at
        job = wait(job, Job.FINISHED, timeout)
        ended = time.monotonic() - killed_at
        head = branch_get(catalog=catalog, name="main").head_id
        new = list(Commit.objects.filter(catalog=catalog, parent_id=before).values_list("id", "job_id"))
        if job.status == Job.Status.SUCCEEDED:
            consistent = new == [(head, job.id)] and live_rows() == rows_before + n
        else:
            consistent = head == before and live_rows() == rows_before
        findings, _ = catalog_findings(warehouse=settings.LAKEUI_WAREHOUSE, catalog=catalog.name)
        outcomes.append({"status": job.status, "code": job.error_code, "during": during, "ended": ended,
                         "second_start": second_start, "attempts": job.attempts, "consistent": consistent,
                         "unreadable": unreadable(), "findings": len(findings)})  # fmt: skip
        last = outcomes[-1]
        print(f"[{broker}] kill {kill + 1}: {'mid-job' if during else 'after the job ended'}, "
              f"{last['status']} {last['code']} after {ended:.1f} s (attempts {job.attempts}), "
              f"consistent={consistent}, unreadable={last['unreadable']}, findings={last['findings']}")  # fmt: skip
    worker.stop()
    report(broker, args, outcomes)


def report(broker: str, args, outcomes: list[dict]) -> None:
    mid = [o for o in outcomes if o["during"]]
    ended = [o["ended"] for o in mid]
    restarts = [o["second_start"] for o in mid]
    succeeded = sum(o["status"] == "succeeded" for o in outcomes)
    print(f"\n== {broker}: {len(outcomes)} kills ({len(mid)} mid-job), LAKEUI_JOB_STALE_AFTER={args.stale_after} s, "
          f"{args.rows:,} rows per load")  # fmt: skip
    print(f"jobs ended:            {sum(o['status'] in ('succeeded', 'failed', 'cancelled') for o in outcomes)}"
          f" of {len(outcomes)} ({succeeded} succeeded)")  # fmt: skip
    if mid:
        print(f"kill -> second start:  median {statistics.median(restarts):.1f} s, max {max(restarts):.1f} s")
        print(f"kill -> job ended:     median {statistics.median(ended):.1f} s, max {max(ended):.1f} s")
    print(f"heads consistent:      {sum(o['consistent'] for o in outcomes)} of {len(outcomes)}")
    print(f"files unreadable:      {sum(o['unreadable'] for o in outcomes)} (target 0)")
    print(f"check findings:        {sum(o['findings'] for o in outcomes)} (target 0)")


if __name__ == "__main__":
    main()
