"""Metadata reads through the API at 50 concurrent clients on loopback (DESIGN.md section 6: p99 under 100 ms).

    python benchmarks/api_reads.py [--clients 50] [--seconds 20] [--warmup 3] [--workers 3] [--threads 4]
                                   [--tables 50]

Seeds a catalog (a database with N tables, a few branches and a tag, a few hundred commits), starts the API as
the Docker image serves it (gunicorn, gthread workers) on a free loopback port, and runs C clients, each a
keep-alive HTTP/1.1 connection sending one GET after another (a closed loop, token authentication) over the
catalog's metadata endpoints: catalogs, a catalog, branches, tags, the commit log, databases, tables, a table,
its history. Prints the throughput and the latency percentiles, overall and per endpoint (beside each endpoint's
queries on a first read and on a repeat at the same commit), and whether p99 is under 100 ms. The load generator
(asyncio, one process) runs on the same machine as the server.

Uses DATABASE_URL when set (e.g. the PostgreSQL of the machine, as in production), else a throwaway SQLite file.
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
from collections import defaultdict

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


def serve(port: int, workers: int, threads: int) -> subprocess.Popen:
    command = [sys.executable, "-m", "gunicorn", "lakeui.wsgi", "--bind", f"127.0.0.1:{port}", "--workers",
               str(workers), "--threads", str(threads), "--worker-class", "gthread",
               "--log-level", "warning"]  # fmt: skip
    environment = {**os.environ, "DEBUG": "false"}  # as production serves: no query log, no debug pages
    return subprocess.Popen(command, cwd=ROOT, env=environment, start_new_session=True)


async def get(reader, writer, path: str, token: str) -> int:
    """One GET on a keep-alive connection; the status (the body is read and dropped)."""
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\nAccept: application/json\r\n\r\n"
        .encode()
    )  # fmt: skip
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
    await reader.readexactly(length)
    return int(lines[0].split()[1])


async def client(port: int, token: str, targets: list[tuple[str, str]], offset: int, until: float, warm_until: float,
                 timings: dict[str, list[float]], failures: list[str]) -> None:  # fmt: skip
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    index = offset
    try:
        while (now := time.perf_counter()) < until:
            name, path = targets[index % len(targets)]
            index += 1
            status = await get(reader, writer, path, token)
            if status != 200:
                failures.append(f"{name}: {status}")
            if now >= warm_until:
                timings[name].append(time.perf_counter() - now)
    finally:
        writer.close()


async def load(port: int, token: str, catalog: str, clients: int, seconds: float, warmup: float):
    targets = list(paths(catalog).items())
    timings: dict[str, list[float]] = defaultdict(list)
    failures: list[str] = []
    start = time.perf_counter()
    warm_until, until = start + warmup, start + warmup + seconds
    await asyncio.gather(
        *[client(port, token, targets, n, until, warm_until, timings, failures) for n in range(clients)]
    )
    return timings, failures


def wait_until_up(port: int, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"gunicorn exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    sys.exit("gunicorn did not start")


def queries_per_read(catalog: str, token: str) -> dict[str, tuple[int, int]]:
    """Each endpoint's queries, on a first read and on a repeat at the same commit (in this process, as the web
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
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def line(name: str, values: list[float], queries: tuple[int, int] | None = None) -> str:
    ms = [v * 1000 for v in values]
    counted = f"  queries {queries[0]:>2} first, {queries[1]:>2} repeated" if queries else ""
    return (
        f"{name:<10} {len(ms):>7,}  p50 {statistics.median(ms):6.1f} ms  p95 {percentile(ms, 0.95):6.1f} ms  "
        f"p99 {percentile(ms, 0.99):6.1f} ms  max {max(ms):6.1f} ms{counted}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--warmup", type=float, default=3)
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers (the Docker image runs 3)")
    parser.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker")
    parser.add_argument("--tables", type=int, default=50)
    args = parser.parse_args()
    catalog, token = seed(args.tables)
    queries = queries_per_read(catalog, token)
    port = free_port()
    server = serve(port, args.workers, args.threads)
    try:
        wait_until_up(port, server)
        timings, failures = asyncio.run(load(port, token, catalog, args.clients, args.seconds, args.warmup))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    everything = [value for values in timings.values() for value in values]
    vendor = "PostgreSQL" if os.environ.get("DATABASE_URL") else "SQLite"
    print(
        f"{args.clients} clients, {args.seconds:.0f} s (after {args.warmup:.0f} s warm-up), gunicorn {args.workers} "
        f"workers x {args.threads} threads, {vendor}, {os.cpu_count()} cores shared with the load generator"
    )
    print(f"{len(everything):,} requests, {len(everything) / args.seconds:,.0f} per second, {len(failures)} not 200")
    for name in paths(catalog):
        print("  " + line(name, timings[name], queries[name]))
    print("  " + line("all", everything))
    p99 = percentile(everything, 0.99) * 1000
    print(f"p99 {p99:.1f} ms: {'under' if p99 < 100 else 'NOT under'} the 100 ms target")
    if failures:
        print(f"first failures: {failures[:5]}")


if __name__ == "__main__":
    main()
