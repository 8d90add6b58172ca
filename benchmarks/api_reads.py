"""Metadata reads through the API at 50 concurrent clients on loopback (docs/README.md#targets: p99 under 100 ms).

    python benchmarks/api_reads.py [--clients 50] [--seconds 15] [--warmup 3] [--repeat 3] [--tables 50]
                                   [--server SPEC ...]

Seeds a catalog (a database with N tables, a few branches and a tag, a few hundred commits), starts the API as
`manage.py serve` and the Docker image serve it (gunicorn with lakeui/gunicorn_conf.py) on a free loopback port,
and runs C clients, each a keep-alive HTTP/1.1 connection sending one GET after another (a closed loop, token
authentication; a client reconnects when the server closes) over the catalog's metadata endpoints: catalogs, a
catalog, branches, tags, the commit log, databases, tables, a table, its history.

Each `--server` is a server configuration: `default` (the product's) or gunicorn options over it, comma-separated
(`workers=4,threads=2,worker-connections=13,preload`). With several, the runs alternate (A B A B ...) so a shared
machine's load falls on each alike; each is run `--repeat` times and its figures are the medians of its runs.

Per run it prints the throughput, p50/p95/p99, how the requests and connections spread over the gunicorn worker
processes (each answer names its worker in a header the benchmark turns on, LAKEUI_WORKER_HEADER), the CPU per
request of the server and of the load generator, how busy the machine was and its load average. Then per
configuration the medians, per endpoint too (beside each endpoint's queries on a first read and on a repeat of the
same state, a commit or the rows read, counted in this process with the default settings), and whether p99 is
under 100 ms. The load generator (asyncio, one process) runs on the same machine.

Uses DATABASE_URL when set (e.g. postgres://.../lakeui_bench, the PostgreSQL of the machine, as in production),
else a throwaway SQLite file.
"""

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from setup import ROOT, django_setup

django_setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, override_settings  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from catalog_app.services.commits import WriteTarget  # noqa: E402
from catalog_app.services.databases import database_create, database_update  # noqa: E402
from catalog_app.services.refs import branch_create, catalog_create, tag_create  # noqa: E402
from catalog_app.services.tables import table_create  # noqa: E402

COLUMNS = [{"name": "id", "type": "long", "nullable": False}, {"name": "v", "type": "string"}]
WORKER_HEADER = "lakeui-worker:"  # lakeui/middleware.py WorkerHeaderMiddleware, lower case as read here
TICKS = os.sysconf("SC_CLK_TCK")


def seed(tables: int) -> tuple[str, str]:
    """A catalog with one database of `tables` tables and some history; the name and an API token."""
    user, _ = get_user_model().objects.get_or_create(username="bench_api")
    token, _ = Token.objects.get_or_create(user=user)
    catalog = catalog_create(name=f"bench_api_{uuid.uuid4().hex[:6]}", created_by=user)
    main = WriteTarget(catalog=catalog, branch="main", author=user)
    database_create(target=main, name="db")
    for index in range(tables):
        table_create(target=main, database="db", name=f"t{index}", columns=COLUMNS)
    for index in range(200):
        database_update(target=main, name="db", set_properties={"n": str(index)})
    for name in ("dev", "feature_a", "feature_b"):
        branch_create(catalog=catalog, name=name, source="main")
    tag_create(catalog=catalog, name="v1", ref="main")
    return catalog.name, token.key


def paths(catalog: str) -> dict[str, str]:
    base, ref = f"/api/v1/catalogs/{catalog}", f"/api/v1/catalogs/{catalog}/refs/main"
    return {
        "catalogs": "/api/v1/catalogs", "catalog": base, "branches": f"{base}/branches", "tags": f"{base}/tags",
        "commits": f"{ref}/commits", "databases": f"{ref}/databases", "tables": f"{ref}/databases/db/tables",
        "table": f"{ref}/databases/db/tables/t7", "history": f"{ref}/databases/db/tables/t7/history",
    }  # fmt: skip


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_options(spec: str) -> tuple[list[str], dict[str, str]]:
    """gunicorn options and environment over the product's configuration (lakeui/gunicorn_conf.py): `default`,
    or `workers=4,threads=2,preload,LAKEUI_WEB_REUSE_PORT=0` (upper case: an environment variable)."""
    options, environment = [], {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        if item == "default":
            continue
        key, _, value = item.partition("=")
        if key.isupper():
            environment[key] = value
        else:
            options += [f"--{key}", value] if value else [f"--{key}"]
    return options, environment


def serve(port: int, spec: str) -> subprocess.Popen:
    options, environment = server_options(spec)
    command = [sys.executable, "-m", "gunicorn", "lakeui.wsgi", "--config", "python:lakeui.gunicorn_conf",
               "--bind", f"127.0.0.1:{port}", "--log-level", "warning", *options]  # fmt: skip
    # As production serves: no query log, no debug pages; each answer names its worker process for the spread.
    environment = {**os.environ, "DEBUG": "false", "LAKEUI_WORKER_HEADER": "1", **environment}
    return subprocess.Popen(command, cwd=ROOT, env=environment, start_new_session=True)


def process_tree(pid: int) -> list[int]:
    """The gunicorn master and its workers."""
    found = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            for child in children.read().split():
                found += process_tree(int(child))
    except OSError:
        pass
    return found


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except OSError:
            pass
    return total / TICKS


def machine_ticks() -> tuple[int, int]:
    """Busy and total CPU ticks of the whole machine."""
    with open("/proc/stat") as stat:
        values = [int(value) for value in stat.readline().split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


@dataclass
class Run:
    spec: str
    timings: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    failures: list[str] = field(default_factory=list)
    requests_by_worker: Counter = field(default_factory=Counter)
    connections_by_worker: Counter = field(default_factory=Counter)
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    machine_busy: float = 0.0
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    seconds: float = 0.0

    @property
    def everything(self) -> list[float]:
        return [value for values in self.timings.values() for value in values]


async def get(reader, writer, path: str, token: str) -> tuple[int, str, bool]:
    """One GET on a keep-alive connection: the status, the worker that answered and whether the server closes
    the connection (the body is read and dropped)."""
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\nAccept: application/json\r\n\r\n"
        .encode()
    )  # fmt: skip
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").lower().split("\r\n")
    length, worker, closes = 0, "?", False
    for line in lines[1:]:
        if line.startswith("content-length:"):
            length = int(line.split(":", 1)[1])
        elif line.startswith(WORKER_HEADER):
            worker = line[len(WORKER_HEADER) :].strip()
        elif line.startswith("connection:") and "close" in line:
            closes = True
    await reader.readexactly(length)
    return int(lines[0].split()[1]), worker, closes


async def client(port: int, token: str, targets: list[tuple[str, str]], offset: int, until: float, warm_until: float,
                 run: Run) -> None:  # fmt: skip
    index, connection_worker = offset, None
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while (now := time.perf_counter()) < until:
            name, path = targets[index % len(targets)]
            index += 1
            status, worker, closes = await get(reader, writer, path, token)
            if status != 200:
                run.failures.append(f"{name}: {status}")
            if now >= warm_until:
                run.timings[name].append(time.perf_counter() - now)
                run.requests_by_worker[worker] += 1
                if connection_worker is None:
                    connection_worker = worker
                    run.connections_by_worker[worker] += 1
            if closes:  # a sync worker: one request per connection
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                connection_worker = None
    finally:
        writer.close()


async def load(port: int, server_pid: int, token: str, catalog: str, args, run: Run) -> None:
    targets = list(paths(catalog).items())
    start = time.perf_counter()
    warm_until, until = start + args.warmup, start + args.warmup + args.seconds

    async def meter() -> None:
        await asyncio.sleep(max(0.0, warm_until - time.perf_counter()))
        pids = process_tree(server_pid)
        server, mine, machine, began = cpu_seconds(pids), time.process_time(), machine_ticks(), time.perf_counter()
        await asyncio.sleep(max(0.0, until - time.perf_counter()))
        run.seconds = time.perf_counter() - began
        run.server_cpu = cpu_seconds(pids) - server
        run.client_cpu = time.process_time() - mine
        busy, total = machine_ticks()
        run.machine_busy = (busy - machine[0]) / max(1, total - machine[1])
        run.load = os.getloadavg()

    clients = [client(port, token, targets, n, until, warm_until, run) for n in range(args.clients)]
    await asyncio.gather(meter(), *clients)


def wait_until_up(port: int, process: subprocess.Popen, workers: int, token: str, timeout: float = 90) -> None:
    """Until every worker has loaded the application and answered (so no run measures a worker's start)."""
    deadline, seen = time.monotonic() + timeout, set()

    async def probe() -> str:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return (await get(reader, writer, "/api/v1/catalogs", token))[1]
        finally:
            writer.close()

    async def probes() -> set[str]:
        return set(await asyncio.gather(*[probe() for _ in range(4 * workers)]))

    while time.monotonic() < deadline and len(seen) < workers:
        if process.poll() is not None:
            sys.exit(f"gunicorn exited with {process.returncode}")
        try:
            seen |= asyncio.run(probes())
        except OSError:
            time.sleep(0.2)
    if len(seen) < workers:
        print(f"  (only {len(seen)} of {workers} workers answered within {timeout:.0f} s)")


def workers_of(spec: str) -> int:
    for option in spec.split(","):
        key, _, value = option.strip().partition("=")
        if key in ("workers", "w", "WEB_CONCURRENCY"):
            return int(value)
    from lakeui import gunicorn_conf

    return gunicorn_conf.workers


def measure(spec: str, catalog: str, token: str, args) -> Run:
    run = Run(spec)
    port = free_port()
    server = serve(port, spec)
    try:
        wait_until_up(port, server, workers_of(spec), token)
        asyncio.run(load(port, server.pid, token, catalog, args, run))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    return run


def queries_per_read(catalog: str, token: str) -> dict[str, tuple[int, int]]:
    """Each endpoint's queries, on a first read and on a repeat of the same state (in this process, as the web
    process runs them: token authentication, the same catalog)."""
    client = Client(HTTP_AUTHORIZATION=f"Token {token}", HTTP_ACCEPT="application/json")
    counts = {}
    with override_settings(ALLOWED_HOSTS=["*"]):
        for name, path in paths(catalog).items():
            runs = []
            for _ in range(2):
                with CaptureQueriesContext(connection) as captured:
                    assert client.get(path).status_code == 200, path
                runs.append(len(captured.captured_queries))
            counts[name] = (runs[0], runs[1])
    return counts


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def figures(values: list[float]) -> dict[str, float]:
    ms = [value * 1000 for value in values]
    return {
        "n": len(ms),
        "p50": percentile(ms, 0.5),
        "p95": percentile(ms, 0.95),
        "p99": percentile(ms, 0.99),
        "max": max(ms, default=float("nan")),
    }


def spread(counts: Counter) -> str:
    """Per worker, fewest to most, and the most over the mean (1.00 is perfectly even)."""
    values = sorted(counts.values())
    if not values:
        return "-"
    return f"{'/'.join(str(value) for value in values)} (max/mean {max(values) / statistics.mean(values):.2f})"


def imbalance(counts: Counter) -> float:
    return max(counts.values()) / statistics.mean(counts.values()) if counts else float("nan")


def run_line(run: Run) -> str:
    every, total = figures(run.everything), len(run.everything)
    return (
        f"{total / run.seconds:6.0f} req/s  p50 {every['p50']:5.1f}  p95 {every['p95']:5.1f}  p99 {every['p99']:5.1f}"
        f"  max {every['max']:6.1f} ms | server {run.server_cpu * 1000 / max(1, total):.2f} ms CPU/req, client "
        f"{run.client_cpu * 1000 / max(1, total):.2f} | machine {run.machine_busy:.0%} busy, load "
        f"{run.load[0]:.2f} | requests by worker {spread(run.requests_by_worker)}, connections "
        f"{spread(run.connections_by_worker)}" + (f" | {len(run.failures)} not 200" if run.failures else "")
    )


def endpoint_line(name: str, runs: list[Run], queries: tuple[int, int] | None = None) -> str:
    per_run = [figures(run.timings[name] if name != "all" else run.everything) for run in runs]
    med = {key: statistics.median(f[key] for f in per_run) for key in ("n", "p50", "p95", "p99", "max")}
    counted = f"  queries {queries[0]:>2} first, {queries[1]:>2} repeated" if queries else ""
    return (
        f"{name:<10} {med['n']:>7,.0f}  p50 {med['p50']:6.1f} ms  p95 {med['p95']:6.1f} ms  p99 {med['p99']:6.1f} ms"
        f"  max {med['max']:6.1f} ms{counted}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--warmup", type=float, default=3)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each server configuration (medians)")
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--server", action="append", help="`default` or gunicorn options (repeat to compare)")
    args = parser.parse_args()
    specs = args.server or ["default"]
    vendor = "PostgreSQL" if os.environ.get("DATABASE_URL") else "SQLite"
    print(
        f"{args.clients} clients, {args.seconds:.0f} s per run (after {args.warmup:.0f} s warm-up), {args.repeat} "
        f"runs per configuration, {vendor}, {os.cpu_count()} cores shared with the load generator; load average "
        f"{' '.join(f'{value:.2f}' for value in os.getloadavg())}",
        flush=True,
    )
    catalog, token = seed(args.tables)
    queries = queries_per_read(catalog, token)
    runs: dict[str, list[Run]] = defaultdict(list)
    for round_ in range(args.repeat):
        for spec in specs:
            run = measure(spec, catalog, token, args)
            runs[spec].append(run)
            print(f"run {round_ + 1} [{spec}] {run_line(run)}", flush=True)
    for spec in specs:
        done = runs[spec]
        every = [len(run.everything) / run.seconds for run in done]
        cpu = statistics.median(run.server_cpu * 1000 / max(1, len(run.everything)) for run in done)
        by_request = statistics.median(imbalance(run.requests_by_worker) for run in done)
        by_connection = statistics.median(imbalance(run.connections_by_worker) for run in done)
        print(f"\n[{spec}] medians of {len(done)} runs: {statistics.median(every):,.0f} requests/s "
              f"({min(every):,.0f}-{max(every):,.0f}); server {cpu:.2f} ms CPU per request; per worker max/mean "
              f"{by_request:.2f} of the requests, {by_connection:.2f} of the connections; load average "
              f"{statistics.median(run.load[0] for run in done):.2f}")  # fmt: skip
        for name in paths(catalog):
            print("  " + endpoint_line(name, done, queries[name]))
        print("  " + endpoint_line("all", done))
        p99 = statistics.median(figures(run.everything)["p99"] for run in done)
        failures = sum(len(run.failures) for run in done)
        print(f"  p99 {p99:.1f} ms (median of the runs): {'under' if p99 < 100 else 'NOT under'} the 100 ms target"
              + (f"; {failures} answers not 200, first {done[0].failures[:3]}" if failures else ""))  # fmt: skip


if __name__ == "__main__":
    main()
