"""Interactive reads under load and the fixed cost of small jobs, end to end through the API (issue 16).

    python benchmarks/interactive.py [--rows 4000000] [--repeat 20]

Starts the product as `make run` does (the API under gunicorn, a jobs worker and an interactive worker, each its
own process group) on DATABASE_URL (else an embedded PostgreSQL server in a throwaway folder) and REDIS_URL (else the
filesystem broker), on queues of its own. Seeds a table, warms both workers, then measures through the Python client
(httpx):

- a 10-row `append_only` load and a one-row `update`, each from POST to `succeeded` as a user sees it, median of
  `--repeat` on the warm jobs worker (target: well under a second);
- a table preview (the first rows page) while a load of `--rows` rows (a Parquet upload) runs on the jobs worker,
  median and max of 5 (target under 1 s): the preview goes to the interactive worker; each asks a page size of
  its own, so each is read anew (the same page again at the same commit is answered from the answer kept for it,
  printed apart).

With `pip install -r requirements-bench.txt` it prints the same 10-row append and one-row update with delta-rs
(`deltalake`) on a local Delta table of the same size, for scale (in-process, no server, no queue).
"""

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from setup import ROOT, django_setup

django_setup()

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from lakeui_client import Client  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "amount", "type": "int"},
    {"name": "region", "type": "string"},
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(command: list[str], log: Path, ready: str | None = None, port: int | None = None) -> subprocess.Popen:
    """A process of the product in its own process group; waits for `ready` in its log or its port to answer."""
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"{command[:4]} exited:\n{log.read_text()[-3000:]}")
        if ready and ready in log.read_text(errors="replace"):
            return process
        if port:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return process
            except OSError:
                pass
        time.sleep(0.2)
    sys.exit(f"{command[:4]} did not start:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    with running_product("bench_interactive") as (client, logs):
        run(client, args, logs)


@contextmanager
def running_product(username: str, timeout: float = 60) -> Iterator[tuple[Client, Path]]:
    """The product as `make run` starts it (gunicorn, a jobs worker and an interactive worker, each its own process
    group) on queues of its own; yields a client of it signed in as `username`, and the folder of the logs."""
    user, _ = get_user_model().objects.get_or_create(username=username)
    token = Token.objects.get_or_create(user=user)[0].key
    logs = Path(tempfile.mkdtemp(prefix=f"lakeui-{username}-"))
    port, queue = free_port(), f"bench-{uuid.uuid4().hex[:8]}"
    os.environ.update(LAKEUI_QUEUE=queue, LAKEUI_INTERACTIVE_QUEUE=f"{queue}-interactive", DEBUG="false")
    os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost")
    celery = [sys.executable, "-m", "celery", "-A", "lakeui", "worker", "--loglevel", "INFO", "--concurrency", "1"]
    web = [sys.executable, "-m", "gunicorn", "lakeui.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2",
           "--threads", "4", "--worker-class", "gthread", "--timeout", "600"]  # fmt: skip
    interactive = [*celery, "-Q", f"{queue}-interactive", "-n", f"interactive-{queue}@%h"]
    processes = [
        start([*celery, "-Q", queue, "-n", f"jobs-{queue}@%h"], logs / "jobs.log", ready=" ready."),
        start(interactive, logs / "interactive.log", ready=" ready."),
        start(web, logs / "web.log", port=port),
    ]
    try:
        with Client(url=f"http://127.0.0.1:{port}", token=token, timeout=timeout) as client:
            yield client, logs
    finally:
        for process in reversed(processes):
            stop(process)


def run(client: Client, args, logs: Path) -> None:
    catalog, table = f"bench_{uuid.uuid4().hex[:6]}", "shop.orders"
    client.catalog_create(catalog)
    client.database_create(catalog, "main", "shop")
    client.table_create(catalog, "main", table, COLUMNS)
    ids = iter(range(10**9))

    def finished(job: dict) -> None:
        assert client.wait(job["id"], interval=0.02)["status"] == "succeeded"  # polled as tightly as a UI could

    def append() -> None:
        rows = [{"id": next(ids), "amount": 1, "region": "eu"} for _ in range(10)]
        finished(client.load(catalog, "main", table, strategy="append_only", rows=rows, wait=False))

    def update() -> None:
        finished(client.update_rows(catalog, "main", table, set={"amount": "amount + 1"}, where="id = 1", wait=False))

    sizes = iter(range(50, 10**6))

    def preview() -> dict:  # a page size of its own each time: a fresh read, not the answer kept for the commit
        return client.rows(catalog, "main", table, page=1, page_size=next(sizes))

    def repeated_preview() -> dict:  # the same page again at the same commit (lakeui/api/conditional.py)
        return client.rows(catalog, "main", table, page=1, page_size=50)

    append(), update(), preview(), repeated_preview()  # Spark starts on both workers
    appends = [timed(append) for _ in range(args.repeat)]
    updates = [timed(update) for _ in range(args.repeat)]

    source = logs / "big.parquet"
    n = args.rows
    frame = pa.table({"id": pa.array(range(10**8, 10**8 + n), pa.int64()),
                      "amount": pa.array([i % 1000 for i in range(n)], pa.int32()),
                      "region": pa.array(["eu", "us"] * (n // 2) + ["eu"] * (n % 2))})  # fmt: skip
    pq.write_table(frame, source)
    submitted = time.perf_counter()
    job = client.load(catalog, "main", table, strategy="append_only", file=str(source), wait=False)
    while client.job(job["id"])["status"] == "queued":
        time.sleep(0.05)
    previews, during = [], 0
    for _ in range(5):
        previews.append(timed(preview))
        during += client.job(job["id"])["status"] == "running"
    repeats = [timed(repeated_preview) for _ in range(5)]
    load = client.wait(job["id"])
    load_seconds = time.perf_counter() - submitted

    print(f"10-row append, POST to succeeded:  median {statistics.median(appends) * 1000:.0f} ms, "
          f"max {max(appends) * 1000:.0f} ms ({args.repeat} runs, warm jobs worker)")  # fmt: skip
    print(f"one-row update, POST to succeeded: median {statistics.median(updates) * 1000:.0f} ms, "
          f"max {max(updates) * 1000:.0f} ms")  # fmt: skip
    print(f"table preview while a {n:,}-row load runs: median {statistics.median(previews) * 1000:.0f} ms, "
          f"max {max(previews) * 1000:.0f} ms ({during} of 5 taken while the load was running; target under 1 s); "
          f"the load ({load['status']}) took {load_seconds:.1f} s from its upload")  # fmt: skip
    print(f"the same preview again at the same commit: median {statistics.median(repeats) * 1000:.1f} ms "
          f"(the answer kept for the commit, no job)")  # fmt: skip
    delta_rs(args, n)


def delta_rs(args, n: int) -> None:
    try:
        from deltalake import DeltaTable, write_deltalake
    except ImportError:
        print("delta-rs: not installed (pip install -r requirements-bench.txt)")
        return
    path = tempfile.mkdtemp(prefix="lakeui-delta-")
    base = pa.table({"id": pa.array(range(n), pa.int64()), "amount": pa.array([1] * n, pa.int32()),
                     "region": pa.array(["eu"] * n)})  # fmt: skip
    write_deltalake(path, base)
    ids = iter(range(10**9, 2 * 10**9))

    def append() -> None:
        rows = pa.table({"id": pa.array([next(ids) for _ in range(10)], pa.int64()),
                         "amount": pa.array([1] * 10, pa.int32()), "region": pa.array(["eu"] * 10)})  # fmt: skip
        write_deltalake(path, rows, mode="append")

    appends = [timed(append) for _ in range(args.repeat)]
    updates = [timed(lambda: DeltaTable(path).update(updates={"amount": "amount + 1"}, predicate="id = 1"))
               for _ in range(args.repeat)]  # fmt: skip
    print(f"delta-rs on a {n:,}-row table: 10-row append median {statistics.median(appends) * 1000:.0f} ms, "
          f"one-row update median {statistics.median(updates) * 1000:.0f} ms (in process, no server)")  # fmt: skip


if __name__ == "__main__":
    print(f"database: {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[1]}")
    main()
