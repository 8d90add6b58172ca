"""Metadata reads through the API on loopback (docs/benchmarks.md#api-reads): closed and open loop, over a spread of
paths, with and without a writer committing, against the numbers before the change in the same run.

    python benchmarks/api_reads.py [--clients 50] [--seconds 15] [--warmup 3] [--repeat 3] [--server SPEC ...]
        [--spread] [--databases 4] [--tables 300] [--branches 8] [--tags 6] [--commit-refs 6] [--paths 500]
        [--phases closed,closed+writer,open,open+writer] [--rate 300] [--writer-rate 2] [--compare] [--cold]

Seeds a catalog, starts the API as `manage.py serve` and the Docker image serve it (gunicorn with
lakeui/gunicorn_conf.py, DEBUG off) on a free loopback port, waits until every worker answers, reads every path
twice (a server in use, not one answering each path for the first time), and runs the phases against it, one after
another, with an API token over keep-alive HTTP/1.1 connections (asyncio, one process on the same machine; a
connection is opened again when the server closes it):

- `closed`: C clients, each sending one GET after another (a closed loop: a client waits for its answer, so its
  latency includes its wait behind the others, and p50 is about C / throughput).
- `open`: GETs sent at a fixed arrival rate (`--rate` per second) over C connections, whatever the answers do; each
  latency is taken from the time the request was due, not from when a connection was free to send it, so a server
  that falls behind shows the queue it builds (the generator's own delay in sending is printed as `lag`).
- `+writer`: the same while another process commits `--writer-rate` times a second on `main` (each commit sets a
  property of one table, chosen at random: a table's metadata at a head that did not change it stays the same).
- `cold` (`--cold`: `cold` and `cold+writer` over `--spread`, 20 s each): the closed loop against a server just
  started, on nothing read before it (no priming, no warm-up), measured from its first request: what a catalog whose
  reads are mostly new to the process answering them sees. Each cold phase starts a server of its own. `--cold` also
  prints what each kind of read costs uncached, in this process: the median and p90 time of reads of distinct paths
  with the read caches emptied before each, and their queries.

Without `--spread` the paths are the 9 of the first benchmark (catalogs, a catalog, branches, tags, the commit log,
databases, tables, a table, its history at `main`). With `--spread` the catalog has `--tables` tables over
`--databases` databases, `--branches` branches forked along its history (some with commits of their own), `--tags`
tags and `--commit-refs` commit ids read as refs, and `--paths` distinct paths are drawn from the mix a UI and
engines make (SPREAD_MIX: a table's metadata and its history and schema most, table lists, the commit log, branches,
tags and the catalog), each client reading them in its own order.

Each `--server` is a server configuration: `default` (the product's) or gunicorn options and environment over it,
comma-separated (`workers=4,threads=2,preload,LAKEUI_READ_CARRY=0`: upper case is an environment variable).
`--compare` adds BEFORE (the read path as it was before issue 40: no answer carried across commits, reads at a
commit id, a branch and a tag made each time, catalog answers moving with every commit, the token's query planned
each time: `LAKEUI_READ_CARRY=0,LAKEUI_READ_PREPARED=0`). Configurations alternate (A B A B ...), so a shared
machine's load falls on each alike; each is run `--repeat` times and its figures are the medians of its runs, with
the ratios of every configuration to the first.

Per run and phase it prints the throughput, p50/p95/p99/max, the server's and the generator's CPU per request, how
busy the machine was and its load average, and how the requests spread over the gunicorn workers. Uses DATABASE_URL
when set (e.g. postgres://.../lakeui_bench, as in production), else an embedded PostgreSQL server in a throwaway folder.
"""

import argparse
import asyncio
import multiprocessing
import os
import random
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
from django.core.cache import caches  # noqa: E402
from django.db import connection, connections  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, override_settings  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from catalog_app.models import Catalog, Commit  # noqa: E402
from catalog_app.services.commits import WriteTarget  # noqa: E402
from catalog_app.services.databases import database_create, database_update  # noqa: E402
from catalog_app.services.refs import branch_create, catalog_create, tag_create  # noqa: E402
from catalog_app.services.tables import table_create, table_update  # noqa: E402

COLUMNS = [{"name": "id", "type": "long", "nullable": False}, {"name": "v", "type": "string"}]
WORKER_HEADER = "lakeui-worker:"  # lakeui/middleware.py WorkerHeaderMiddleware, lower case as read here
TICKS = os.sysconf("SC_CLK_TCK")
BEFORE = "LAKEUI_READ_CARRY=0,LAKEUI_READ_PREPARED=0"
# What a UI and engines read, and how often (weights): a table's metadata most, then its history and schema.
SPREAD_MIX = {
    "table": 30, "history": 12, "tables": 10, "commits": 10, "database": 5, "databases": 5, "branch": 5,
    "branches": 5, "tags": 3, "tag": 3, "catalog": 4, "catalogs": 3,
}  # fmt: skip
REF_MIX = {"main": 40, "branch": 35, "tag": 15, "commit": 10}  # which refs the reads at a ref name
PHASES = ("closed", "closed+writer", "open", "open+writer", "cold", "cold+writer")
TARGETS = {"closed": 100, "closed+writer": 150, "open": 50, "cold": 100, "cold+writer": 150}  # p99, ms (issues 40, 57)
UNCACHED_TARGET = 5.0  # ms of server time for one read with nothing kept (issue 57)


@dataclass
class Spread:
    databases: int
    tables: dict[str, int]  # ref -> how many tables it holds (t0 ... t{n-1}, table ti in database db{i % databases})
    refs: dict[str, list[str]]  # REF_MIX kind -> names

    def table(self, ref: str, rng: random.Random) -> tuple[str, str]:
        """A table the ref holds, and its database."""
        index = rng.randrange(self.tables[ref])
        return f"db{index % self.databases}", f"t{index}"


def _user_and_token():
    user, _ = get_user_model().objects.get_or_create(username="bench_api")
    token, _ = Token.objects.get_or_create(user=user)
    return user, token


def seed(tables: int) -> tuple[str, str]:
    """A catalog with one database of `tables` tables and some history; the name and an API token."""
    user, token = _user_and_token()
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


def seed_spread(args, rng: random.Random) -> tuple[str, str, Spread]:
    """A catalog of `--tables` tables over `--databases` databases, with branches forked and tags set along its
    history (half the branches with commits of their own) and commit ids of its last commits to read at; the name,
    a token and the spread."""
    user, token = _user_and_token()
    catalog = catalog_create(name=f"bench_spread_{uuid.uuid4().hex[:6]}", created_by=user)
    main = WriteTarget(catalog=catalog, branch="main", author=user)
    for index in range(args.databases):
        database_create(target=main, name=f"db{index}")
    spread = Spread(databases=args.databases, tables={"main": args.tables}, refs={"branch": [], "tag": []})
    every = max(1, args.tables // max(1, args.branches + args.tags))
    for index in range(args.tables):
        table_create(target=main, database=f"db{index % args.databases}", name=f"t{index}", columns=COLUMNS)
        if index % every == every - 1:
            kind = "branch" if len(spread.refs["branch"]) < args.branches else "tag"
            if len(spread.refs[kind]) < (args.branches if kind == "branch" else args.tags):
                name = f"feature_{len(spread.refs[kind])}" if kind == "branch" else f"v{len(spread.refs[kind])}"
                create = branch_create if kind == "branch" else tag_create
                create(catalog=catalog, name=name, created_by=user, **{"source" if kind == "branch" else "ref": "main"})
                spread.refs[kind].append(name)
                spread.tables[name] = index + 1
    for index in range(100):  # history: properties set on tables of main
        database, table = spread.table("main", rng)
        table_update(target=main, database=database, name=table, set_properties={"n": str(index)})
    for branch in spread.refs["branch"][::2]:  # half the branches with commits of their own
        target = WriteTarget(catalog=catalog, branch=branch, author=user)
        for index in range(5):
            database, table = spread.table(branch, rng)
            table_update(target=target, database=database, name=table, set_properties={"b": str(index)})
    log = list(Commit.objects.filter(catalog=catalog, line__branch__name="main").order_by("-seq")[:100])
    spread.refs["commit"] = [log[int(len(log) * i / args.commit_refs)].id for i in range(args.commit_refs)]
    spread.tables.update(dict.fromkeys(spread.refs["commit"], args.tables))
    spread.refs = {"main": ["main"], **{kind: names or ["main"] for kind, names in spread.refs.items()}}
    return catalog.name, token.key, spread


def paths(catalog: str) -> dict[str, str]:
    base, ref = f"/api/v1/catalogs/{catalog}", f"/api/v1/catalogs/{catalog}/refs/main"
    return {
        "catalogs": "/api/v1/catalogs", "catalog": base, "branches": f"{base}/branches", "tags": f"{base}/tags",
        "commits": f"{ref}/commits", "databases": f"{ref}/databases", "tables": f"{ref}/databases/db/tables",
        "table": f"{ref}/databases/db/tables/t7", "history": f"{ref}/databases/db/tables/t7/history",
    }  # fmt: skip


def spread_path(kind: str, catalog: str, spread: Spread, rng: random.Random) -> str:
    base = f"/api/v1/catalogs/{catalog}"
    name = rng.choice(spread.refs[rng.choices(list(REF_MIX), weights=list(REF_MIX.values()))[0]])
    database, table = spread.table(name, rng)
    ref = f"{base}/refs/{name}"
    return {
        "catalogs": "/api/v1/catalogs", "catalog": base, "branches": f"{base}/branches", "tags": f"{base}/tags",
        "branch": f"{base}/branches/{rng.choice(spread.refs['branch'] + ['main'])}",
        "tag": f"{base}/tags/{rng.choice(spread.refs['tag'])}", "commits": f"{ref}/commits",
        "databases": f"{ref}/databases", "database": f"{ref}/databases/{database}",
        "tables": f"{ref}/databases/{database}/tables", "table": f"{ref}/databases/{database}/tables/{table}",
        "history": f"{ref}/databases/{database}/tables/{table}/history",
    }[kind]  # fmt: skip


def spread_paths(catalog: str, spread: Spread, count: int, rng: random.Random) -> list[tuple[str, str]]:
    """`count` distinct paths drawn from SPREAD_MIX."""
    found: dict[str, str] = {}
    for _ in range(count * 50):
        if len(found) >= count:
            break
        kind = rng.choices(list(SPREAD_MIX), weights=list(SPREAD_MIX.values()))[0]
        found.setdefault(spread_path(kind, catalog, spread, rng), kind)
    return [(kind, path) for path, kind in found.items()]


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
    phase: str = "closed"
    timings: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    lags: list[float] = field(default_factory=list)  # open loop: how late the generator sent each request
    failures: list[str] = field(default_factory=list)
    requests_by_worker: Counter = field(default_factory=Counter)
    connections_by_worker: Counter = field(default_factory=Counter)
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    machine_busy: float = 0.0
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    seconds: float = 0.0
    commits: list[float] = field(default_factory=list)  # the writer's commit times

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


class Connection:
    """A keep-alive connection, opened again when the server closes it; it notes which worker it reached."""

    def __init__(self, port: int) -> None:
        self.port, self.reader, self.writer, self.worker = port, None, None, None

    async def get(self, path: str, token: str, run: Run, measured: bool) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
            self.worker = None
        status, worker, closes = await get(self.reader, self.writer, path, token)
        if measured:
            run.requests_by_worker[worker] += 1
            if self.worker is None:
                self.worker = worker
                run.connections_by_worker[worker] += 1
        if closes:  # a sync worker: one request per connection
            self.close()
        return status

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def _order(targets: list[tuple[str, str]], seed: int) -> list[tuple[str, str]]:
    ordered = list(targets)
    random.Random(seed).shuffle(ordered)
    return ordered


async def closed_client(port: int, token: str, targets, offset: int, until: float, warm_until: float, run: Run) -> None:
    """One client of the closed loop: one GET after another, each timed from its send."""
    conn, ordered, index = Connection(port), _order(targets, offset), 0
    try:
        while (now := time.perf_counter()) < until:
            name, path = ordered[index % len(ordered)]
            index += 1
            status = await conn.get(path, token, run, now >= warm_until)
            if status != 200:
                run.failures.append(f"{name}: {status}")
            if now >= warm_until:
                run.timings[name].append(time.perf_counter() - now)
    finally:
        conn.close()


async def open_loop(port: int, token: str, targets, rate: float, connections: int, start: float, warm_until: float,
                    until: float, run: Run) -> None:  # fmt: skip
    """GETs due at a fixed rate from `start`, over a pool of `connections`; each timed from when it was due (a
    request waits for a free connection, and that wait is part of its time, as a server's queue is)."""
    pool: asyncio.Queue = asyncio.Queue()
    for _ in range(connections):
        pool.put_nowait(Connection(port))
    ordered = _order(targets, 0)

    async def one(due: float, name: str, path: str) -> None:
        measured = due >= warm_until
        if measured:  # the generator's own delay (a free connection may take longer: that is the server's queue)
            run.lags.append(time.perf_counter() - due)
        conn = await pool.get()
        try:
            status = await conn.get(path, token, run, measured)
        except (OSError, asyncio.IncompleteReadError):
            conn.close()
            status = 0
        pool.put_nowait(conn)
        if status != 200:
            run.failures.append(f"{name}: {status}")
        if measured:
            run.timings[name].append(time.perf_counter() - due)

    tasks, index = set(), 0
    while (due := start + index / rate) < until:
        if (wait := due - time.perf_counter()) > 0:
            await asyncio.sleep(wait)
        name, path = ordered[index % len(ordered)]
        task = asyncio.create_task(one(due, name, path))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        index += 1
    if tasks:
        await asyncio.gather(*list(tasks))
    while not pool.empty():
        pool.get_nowait().close()


def writer_main(catalog: str, rate: float, spread: Spread, stop, times) -> None:
    """The writer's process: a commit on `main` every 1/rate s (a property of a random table), each timed."""
    connections.close_all()  # this process's own connections, not the parent's
    user, _ = _user_and_token()
    target = WriteTarget(catalog=Catalog.objects.get(name=catalog), branch="main", author=user)
    rng, index, began = random.Random(7), 0, time.perf_counter()
    while not stop.is_set():
        database, table = spread.table("main", rng)
        start = time.perf_counter()
        table_update(target=target, database=database, name=table, set_properties={"w": str(index)})
        times.put(time.perf_counter() - start)
        index += 1
        stop.wait(max(0.0, began + index / rate - time.perf_counter()))


class Writer:
    """The writer process for a phase `+writer`: started before the phase's warm-up, stopped after it."""

    def __init__(self, catalog: str, rate: float, spread: Spread) -> None:
        context = multiprocessing.get_context("fork")
        self.stop, self.times = context.Event(), context.Queue()
        connections.close_all()  # not shared with the child
        self.process = context.Process(target=writer_main, args=(catalog, rate, spread, self.stop, self.times))
        self.process.start()

    def finish(self) -> list[float]:
        self.stop.set()
        self.process.join(timeout=30)
        found = []
        while not self.times.empty():
            found.append(self.times.get())
        return found


async def load(port: int, server_pid: int, token: str, targets, phase: str, args, run: Run) -> None:
    start = time.perf_counter()
    warmup = 0.0 if phase.startswith("cold") else args.warmup
    warm_until, until = start + warmup, start + warmup + args.seconds

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

    if phase.startswith("open"):
        generators = [open_loop(port, token, targets, args.rate, args.clients, start, warm_until, until, run)]
    else:
        generators = [closed_client(port, token, targets, n, until, warm_until, run) for n in range(args.clients)]
    await asyncio.gather(meter(), *generators)


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


async def prime(port: int, token: str, targets, connections: int, workers: int, passes: int = 8) -> None:
    """Every path read until each worker has answered it (at most `passes` times), so the phases measure a server in
    use, each of whose processes keeps its own answers, not one answering each path for the first time."""
    answered: dict[str, set[str]] = defaultdict(set)
    run = Run("prime")

    async def reader(paths: list[str]) -> None:
        conn = Connection(port)
        try:
            for path in paths:
                await conn.get(path, token, run, True)
                answered[path].add(conn.worker)
                conn.worker = None  # the worker of its next answer (the same connection may be served by another)
        finally:
            conn.close()

    for shift in range(passes):
        left = [path for _, path in targets if len(answered[path]) < workers]
        if not left:
            break
        left = left[shift % len(left) :] + left[: shift % len(left)]  # each path on another connection than before
        await asyncio.gather(*[reader(left[n::connections]) for n in range(connections)])


def measure(spec: str, token: str, targets, spread: Spread | None, catalog: str, args) -> list[Run]:
    """One server of configuration `spec`, primed, each phase run against it in turn; each cold phase on a server of
    its own, not primed."""
    warm = [phase for phase in args.phases if not phase.startswith("cold")]
    runs = [run for phase in args.phases if phase.startswith("cold")
            for run in _served(spec, token, targets, spread, catalog, args, [phase])]  # fmt: skip
    return runs + (_served(spec, token, targets, spread, catalog, args, warm) if warm else [])


def _served(spec: str, token: str, targets, spread: Spread | None, catalog: str, args, phases: list[str]) -> list[Run]:
    runs = []
    port = free_port()
    server = serve(port, spec)
    try:
        wait_until_up(port, server, workers_of(spec), token)
        if not phases[0].startswith("cold"):
            asyncio.run(prime(port, token, targets, args.clients, workers_of(spec)))
        for phase in phases:
            run = Run(spec, phase)
            writer = Writer(catalog, args.writer_rate, spread) if phase.endswith("+writer") else None
            try:
                asyncio.run(load(port, server.pid, token, targets, phase, args, run))
            finally:
                if writer is not None:
                    run.commits = writer.finish()
            runs.append(run)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    return runs


def queries_per_read(token: str, targets: list[tuple[str, str]]) -> dict[str, tuple[int, int]]:
    """One path of each endpoint: its queries on a first read and on a repeat of the same state (in this process, as
    the web process runs them: token authentication, the same catalog)."""
    client = Client(HTTP_AUTHORIZATION=f"Token {token}", HTTP_ACCEPT="application/json")
    counts = {}
    with override_settings(ALLOWED_HOSTS=["*"]):
        for name, path in targets:
            if name in counts:
                continue
            runs = []
            for _ in range(2):
                with CaptureQueriesContext(connection) as captured:
                    assert client.get(path).status_code == 200, path
                runs.append(len(captured.captured_queries))
            counts[name] = (runs[0], runs[1])
    return counts


def uncached_costs(token: str, catalog: str, spread: Spread, per_kind: int = 25) -> dict[str, dict[str, float]]:
    """Each kind of read (SPREAD_MIX) of `per_kind` distinct paths, answered in this process with the read caches
    emptied before each (nothing kept: a process's first read of the path): median and p90 ms, the median CPU time
    of this process's thread (the Python side alone: on a loaded machine a truer measure than the wall time), and
    queries."""
    client = Client(HTTP_AUTHORIZATION=f"Token {token}", HTTP_ACCEPT="application/json")
    rng, costs = random.Random(57), {}
    with override_settings(ALLOWED_HOSTS=["*"]):
        client.get(f"/api/v1/catalogs/{catalog}")  # the process's first request (imports, connection) left out
        for kind in SPREAD_MIX:
            times, cpu, queries = [], [], []
            for path in {spread_path(kind, catalog, spread, rng) for _ in range(per_kind)}:
                for cache in ("reads", "default"):
                    caches[cache].clear()
                with CaptureQueriesContext(connection) as captured:
                    began, began_cpu = time.perf_counter(), time.thread_time()
                    assert client.get(path).status_code == 200, path
                    times.append((time.perf_counter() - began) * 1000)
                    cpu.append((time.thread_time() - began_cpu) * 1000)
                queries.append(len(captured.captured_queries))
            costs[kind] = {"n": len(times), "p50": percentile(times, 0.5), "p90": percentile(times, 0.9),
                           "cpu": statistics.median(cpu), "queries": statistics.median(queries),
                           "most": max(queries)}  # fmt: skip
    return costs


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
    extra = ""
    if run.lags:
        extra += f" | generator lag p99 {percentile(run.lags, 0.99) * 1000:.1f} ms"
    if run.commits:
        extra += f" | {len(run.commits)} commits, median {statistics.median(run.commits) * 1000:.0f} ms"
    return (
        f"{total / run.seconds:6.0f} req/s  p50 {every['p50']:5.1f}  p95 {every['p95']:5.1f}  p99 {every['p99']:5.1f}"
        f"  max {every['max']:6.1f} ms | server {run.server_cpu * 1000 / max(1, total):.2f} ms CPU/req, client "
        f"{run.client_cpu * 1000 / max(1, total):.2f} | machine {run.machine_busy:.0%} busy, load "
        f"{run.load[0]:.2f} | requests by worker {spread(run.requests_by_worker)}, connections "
        f"{spread(run.connections_by_worker)}" + extra + (f" | {len(run.failures)} not 200" if run.failures else "")
    )


def endpoint_line(name: str, runs: list[Run], queries: tuple[int, int] | None = None) -> str:
    per_run = [figures(run.timings[name] if name != "all" else run.everything) for run in runs]
    med = {key: statistics.median(f[key] for f in per_run) for key in ("n", "p50", "p95", "p99", "max")}
    counted = f"  queries {queries[0]:>2} first, {queries[1]:>2} repeated" if queries else ""
    return (
        f"{name:<10} {med['n']:>7,.0f}  p50 {med['p50']:6.1f} ms  p95 {med['p95']:6.1f} ms  p99 {med['p99']:6.1f} ms"
        f"  max {med['max']:6.1f} ms{counted}"
    )


def summary(runs: list[Run]) -> dict[str, float]:
    """The medians of a configuration's runs of one phase."""
    every = [figures(run.everything) for run in runs]
    return {
        "rate": statistics.median(len(run.everything) / run.seconds for run in runs),
        **{key: statistics.median(f[key] for f in every) for key in ("p50", "p95", "p99", "max")},
        "cpu": statistics.median(run.server_cpu * 1000 / max(1, len(run.everything)) for run in runs),
        "load": statistics.median(run.load[0] for run in runs),
        "commits": statistics.median([statistics.median(run.commits) * 1000 for run in runs if run.commits] or [0]),
        "failures": sum(len(run.failures) for run in runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50, help="closed loop: clients; open loop: connections")
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--warmup", type=float, default=3)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each server configuration (medians)")
    parser.add_argument("--tables", type=int, default=None, help="50 (300 with --spread)")
    parser.add_argument("--server", action="append", help="`default` or gunicorn options (repeat to compare)")
    parser.add_argument("--compare", action="store_true", help=f"add the configuration before the change: {BEFORE}")
    parser.add_argument("--spread", action="store_true", help="many tables, databases and refs (SPREAD_MIX)")
    parser.add_argument("--databases", type=int, default=4)
    parser.add_argument("--branches", type=int, default=8)
    parser.add_argument("--tags", type=int, default=6)
    parser.add_argument("--commit-refs", type=int, default=6)
    parser.add_argument("--paths", type=int, default=500, help="distinct paths drawn with --spread")
    parser.add_argument("--phases", default=None, help=f"comma-separated of {','.join(PHASES)}")
    parser.add_argument("--rate", type=float, default=300, help="open loop: requests per second")
    parser.add_argument("--writer-rate", type=float, default=2, help="+writer: commits per second on main")
    parser.add_argument("--cold", action="store_true", help="cold,cold+writer over --spread, 20 s; uncached costs")
    args = parser.parse_args()
    if args.cold:
        args.spread, args.phases = True, args.phases or "cold,cold+writer"
        args.seconds = 20 if args.seconds == parser.get_default("seconds") else args.seconds
    args.tables = args.tables or (300 if args.spread else 50)
    warm = ",".join(phase for phase in PHASES if not phase.startswith("cold"))
    args.phases = (args.phases or (warm if args.spread else "closed")).split(",")
    if not set(args.phases) <= set(PHASES) or (not args.spread and any("writer" in p for p in args.phases)):
        parser.error(f"--phases: of {', '.join(PHASES)} (a writer needs --spread)")
    specs = (args.server or ["default"]) + ([BEFORE] if args.compare else [])
    vendor = "PostgreSQL" if os.environ.get("DATABASE_URL") else "the embedded PostgreSQL"
    print(
        f"{args.clients} clients, {args.seconds:.0f} s per run and phase (after {args.warmup:.0f} s warm-up; none in a "
        f"cold phase), "
        f"{args.repeat} runs per configuration, {vendor}, {os.cpu_count()} cores shared with the load generator; "
        f"load average {' '.join(f'{value:.2f}' for value in os.getloadavg())}",
        flush=True,
    )
    rng = random.Random(40)
    if args.spread:
        catalog, token, layout = seed_spread(args, rng)
        targets = spread_paths(catalog, layout, args.paths, rng)
        print(
            f"spread: {args.tables} tables in {args.databases} databases, refs {layout.refs['branch']}, "
            f"{layout.refs['tag']}, {len(layout.refs['commit'])} commit ids; {len(targets)} distinct paths "
            f"({', '.join(f'{k} {v}' for k, v in sorted(Counter(k for k, _ in targets).items()))})",
            flush=True,
        )
    else:
        (catalog, token), layout = seed(args.tables), None
        targets = list(paths(catalog).items())
    queries = queries_per_read(token, targets)
    if args.cold:
        print(f"\nuncached, in this process (read caches emptied before each read; target < {UNCACHED_TARGET:.0f} ms):")
        for kind, cost in uncached_costs(token, catalog, layout).items():
            verdict = "met" if cost["p50"] < UNCACHED_TARGET else "NOT met"
            print(f"  {kind:<10} {cost['n']:>3} paths  p50 {cost['p50']:6.2f} ms  p90 {cost['p90']:6.2f} ms  "
                  f"CPU {cost['cpu']:5.2f} ms  queries {cost['queries']:.0f} (most {cost['most']})  {verdict}",
                  flush=True)  # fmt: skip
    runs: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for round_ in range(args.repeat):
        for spec in specs:
            for run in measure(spec, token, targets, layout, catalog, args):
                runs[(spec, run.phase)].append(run)
                print(f"run {round_ + 1} [{spec}] {run.phase:<13} {run_line(run)}", flush=True)
    names = sorted({name for name, _ in targets}, key=lambda name: -sum(1 for n, _ in targets if n == name))
    for spec in specs:
        for phase in args.phases:
            done = runs[(spec, phase)]
            by_request = statistics.median(imbalance(run.requests_by_worker) for run in done)
            figures_ = summary(done)
            print(f"\n[{spec}] {phase}: medians of {len(done)} runs: {figures_['rate']:,.0f} requests/s; server "
                  f"{figures_['cpu']:.2f} ms CPU per request; per worker max/mean {by_request:.2f} of the requests; "
                  f"load average {figures_['load']:.2f}")  # fmt: skip
            for name in names:
                print("  " + endpoint_line(name, done, queries.get(name)))
            print("  " + endpoint_line("all", done))
    print("\nphase           configuration                      req/s      p50      p95      p99   target  commits")
    for phase in args.phases:
        first = summary(runs[(specs[0], phase)])
        for spec in specs:
            f = summary(runs[(spec, phase)])
            target = TARGETS.get(phase if phase != "open" or args.rate == 300 else "")
            verdict = "-" if target is None else ("met" if f["p99"] < target else "NOT met") + f" <{target}"
            print(
                f"{phase:<15} {spec[:32]:<32} {f['rate']:7,.0f} {f['p50']:8.1f} {f['p95']:8.1f} {f['p99']:8.1f} "
                f"{verdict:>9} {f['commits']:6.0f} ms" + (f"  {f['failures']} not 200" if f["failures"] else "")
            )
            if spec != specs[0]:
                print(
                    f"{'':<15} {'  ratio ' + specs[0][:20] + ' / this':<32} {first['rate'] / f['rate']:7.2f} "
                    f"{first['p50'] / f['p50']:8.2f} {first['p95'] / f['p95']:8.2f} {first['p99'] / f['p99']:8.2f}"
                )


if __name__ == "__main__":
    main()
