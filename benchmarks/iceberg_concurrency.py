"""Many engines committing at once through LakeUI's Iceberg REST catalog, against pyiceberg's own SqlCatalog (SQLite)
doing the same work, in one run (issue 57):

    python benchmarks/iceberg_concurrency.py [--writers 4] [--commits 10] [--rows 1000] [--branches 10] [--rounds 6]
        [--busy-commits 30]

- one writer: `--commits` appends of `--rows` rows to a keyed table (pyiceberg's `append`, each a commit), in a
  process of its own: the median commit and the commits per second;
- `--writers` writers, each a process of its own, on a table of its own (on LakeUI each on a branch of its own): the
  commits per second of all together and the speed-up over one writer;
- a LakeUI branch create (`POST /api/v1/catalogs/{c}/branches`), 0.1 s apart, in turns on a new connection and on
  one kept alive (as LakeUI's Python client keeps one): `--branches` of each idle, and while `--writers` writers make
  `--busy-commits` commits each, as many as end while every writer still commits: median and max of each;
- two processes upserting overlapping keys on one LakeUI table, `--rounds` rounds each, each upsert retried on fresh
  metadata when it fails as a commit conflict: the answers counted by kind (anything but CommitFailedException or
  pyiceberg's ValidationException, a 400 above all, is a failure).

Results are checked exact, else the script exits 1: every table holds each id it was given once (no row lost or
doubled), and after the upserts every key is held once. The server is gunicorn as `manage.py serve` and the Docker
image start it (lakeui/gunicorn_conf.py), DEBUG off, in a process of its own; the SqlCatalog's catalog file and
warehouse are a temporary folder. Uses DATABASE_URL when set, else an embedded PostgreSQL server in a throwaway
folder; the LakeUI warehouse is a temporary folder.
"""

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def arrow_rows(first: int, count: int, amount: int = 0):
    import pyarrow as pa

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("amount", pa.int32()),
                        pa.field("region", pa.string())])  # fmt: skip
    ids = list(range(first, first + count))
    return pa.table([pa.array(ids, pa.int64()), pa.array([amount] * count, pa.int32()),
                     pa.array(["eu"] * count)], schema=schema)  # fmt: skip


def catalog_of(spec: dict):
    """A pyiceberg catalog from plain values (a writer process builds its own)."""
    if spec["kind"] == "sql":
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog("sql", uri=spec["uri"], warehouse=spec["warehouse"])
    from pyiceberg.catalog.rest import RestCatalog

    return RestCatalog("lake", uri=spec["uri"], token=spec["token"])


def writer(spec: dict, table: str, commits: int, rows: int, first: int, start, results) -> None:
    """`commits` appends of `rows` new ids from `first` on, once `start` is set; each commit's seconds to `results`."""
    catalog = catalog_of(spec)
    loaded = catalog.load_table(table)
    batches = [arrow_rows(first + i * rows, rows) for i in range(commits)]
    start.wait()
    times = []
    for batch in batches:
        began = time.perf_counter()
        loaded.append(batch)
        times.append(time.perf_counter() - began)
    results.put(times)


def upserter(spec: dict, table: str, number: int, rounds: int, start, results) -> None:
    """Upserts of ids overlapping the other upserter's each round, each retried on fresh metadata after a commit
    conflict; the kinds of failure seen to `results`."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    catalog = catalog_of(spec)
    seen: dict[str, int] = {}
    start.wait()
    for round_ in range(rounds):
        batch = arrow_rows(round_ * 3, 6, amount=number)  # ids 3r .. 3r+5: half of them the other's too
        for _ in range(30):
            loaded = catalog.load_table(table)
            try:
                loaded.upsert(batch)
                break
            except (CommitFailedException, ValidationException) as conflict:
                seen[type(conflict).__name__] = seen.get(type(conflict).__name__, 0) + 1
            except Exception as failure:  # a 400 (BadRequestError) or anything else: the catalog's failure
                seen[f"{type(failure).__name__}: {str(failure)[:200]}"] = 1
                results.put(seen)
                return
        else:
            seen["never committed"] = seen.get("never committed", 0) + 1
    results.put(seen)


def together(target, argument_lists: list[tuple]) -> tuple[float, list]:
    """Start a process per argument list, let them go at once, and wait: the seconds from go to the last one's end
    and what each put."""
    context = multiprocessing.get_context("spawn")
    start, results = context.Event(), context.Queue()
    processes = [context.Process(target=target, args=(*arguments, start, results)) for arguments in argument_lists]
    for process in processes:
        process.start()
    time.sleep(3)  # each has loaded its table and made its rows
    began = time.perf_counter()
    start.set()
    answers = [results.get(timeout=900) for _ in processes]
    seconds = time.perf_counter() - began
    for process in processes:
        process.join()
    return seconds, answers


def held_ids(catalog, table: str) -> list[int]:
    return sorted(catalog.load_table(table).scan(selected_fields=("id",)).to_arrow()["id"].to_pylist())


def check_exact(label: str, catalog, table: str, expected: list[int], problems: list[str]) -> None:
    held = held_ids(catalog, table)
    if held != sorted(expected):
        lost = len(set(expected) - set(held))
        problems.append(f"{label} {table}: {len(held)} rows for {len(expected)} ids ({lost} lost, "
                        f"{len(held) - len(set(held))} doubled)")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--branches", type=int, default=10)
    parser.add_argument("--busy-commits", type=int, default=30, help="each writer's commits while branches are made")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()

    os.environ.setdefault("LAKEUI_WAREHOUSE", tempfile.mkdtemp(prefix="lakeui-iceberg-concurrency-bench-"))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from setup import django_setup

    django_setup()
    import requests
    from api_reads import free_port, serve, wait_until_up, workers_of
    from django.contrib.auth import get_user_model
    from pyiceberg.schema import Schema
    from pyiceberg.types import IntegerType, LongType, NestedField, StringType
    from rest_framework.authtoken.models import Token

    schema = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "amount", IntegerType()),
                    NestedField(3, "region", StringType()), identifier_field_ids=[1])  # fmt: skip
    user, _ = get_user_model().objects.get_or_create(
        username="iceberg-concurrency-bench", defaults={"is_superuser": True}
    )
    token = Token.objects.get_or_create(user=user)[0].key
    name = f"bench_{uuid.uuid4().hex[:8]}"
    port = free_port()
    server = serve(port, "default")
    base = f"http://127.0.0.1:{port}"
    api = {"Authorization": f"Token {token}"}
    wait_until_up(port, server, workers_of("default"), token)
    answer = requests.post(f"{base}/api/v1/catalogs", json={"name": name}, headers=api)
    if answer.status_code >= 300:
        sys.exit(f"catalog create: {answer.status_code} {answer.text[:300]}")
    scratch = Path(tempfile.mkdtemp(prefix="pyiceberg-sql-"))
    sql = {"kind": "sql", "uri": f"sqlite:///{scratch}/catalog.db", "warehouse": f"file://{scratch}"}

    def lake(branch: str) -> dict:
        return {"kind": "rest", "uri": f"{base}/iceberg/{name}/{branch}", "token": token}

    problems: list[str] = []
    figures: dict[str, dict] = {}
    try:
        main_lake, sql_catalog = catalog_of(lake("main")), catalog_of(sql)
        for catalog in (main_lake, sql_catalog):
            catalog.create_namespace("bench")
            for index in ["one", *range(args.writers), "upsert"]:
                catalog.create_table(f"bench.t{index}", schema)
        for index in range(args.writers):
            requests.post(f"{base}/api/v1/catalogs/{name}/branches", json={"name": f"w{index}", "source": "main"},
                          headers=api).raise_for_status()  # fmt: skip

        for label, spec_of in (("LakeUI", lake), ("SqlCatalog", lambda branch: sql)):
            seconds, (times,) = together(writer, [(spec_of("main"), "bench.tone", args.commits, args.rows, 0)])
            one = args.commits / seconds
            check_exact(label, catalog_of(spec_of("main")), "bench.tone", list(range(args.commits * args.rows)),
                        problems)  # fmt: skip
            jobs = [(spec_of(f"w{i}"), f"bench.t{i}", args.commits, args.rows, 0) for i in range(args.writers)]
            seconds, _ = together(writer, jobs)
            many = args.writers * args.commits / seconds
            for i in range(args.writers):
                check_exact(label, catalog_of(spec_of(f"w{i}")), f"bench.t{i}", list(range(args.commits * args.rows)),
                            problems)  # fmt: skip
            figures[label] = {"median": statistics.median(times) * 1000, "one": one, "many": many}

        kept = requests.Session()  # a connection kept alive, as LakeUI's Python client (httpx.Client) keeps one

        def branch_create_ms(prefix: str, during: list | None = None) -> list[float]:
            """`--branches` creates 0.1 s apart, each alternately on a new connection and on the kept one; `during`
            (writer processes): as many as end while all of them still run, the one that ends after the first
            writer is done left out. The times, a new connection's at even places."""
            taken = []
            for index in range(2 * args.branches if during is None else 10**6):
                post = requests.post if index % 2 == 0 else kept.post
                began = time.perf_counter()
                answer = post(f"{base}/api/v1/catalogs/{name}/branches",
                              json={"name": f"{prefix}{index}", "source": "main"}, headers=api)  # fmt: skip
                if during is not None and not all(process.is_alive() for process in during):
                    break
                taken.append((time.perf_counter() - began) * 1000)
                if answer.status_code != 201:
                    problems.append(f"branch create: {answer.status_code} {answer.text[:200]}")
                time.sleep(0.1)
            return taken

        idle = branch_create_ms("idle")
        context = multiprocessing.get_context("spawn")
        start, results = context.Event(), context.Queue()
        busy_writers = [
            context.Process(target=writer, args=(lake(f"w{i}"), f"bench.t{i}", args.busy_commits, args.rows, 10**7,
                                                 start, results))
            for i in range(args.writers)
        ]  # fmt: skip
        for process in busy_writers:
            process.start()
        time.sleep(3)
        start.set()
        time.sleep(0.5)
        busy = branch_create_ms("busy", during=busy_writers)
        if len(busy) < 2:
            problems.append("no branch create ended while the writers committed: give them more --busy-commits")
        for _ in busy_writers:
            results.get(timeout=900)
        for process in busy_writers:
            process.join()

        _, seen = together(upserter, [(lake("main"), "bench.tupsert", n, args.rounds) for n in (1, 2)])
        conflicts: dict[str, int] = {}
        for one in seen:
            for kind, count in one.items():
                conflicts[kind] = conflicts.get(kind, 0) + count
        failures = {k: v for k, v in conflicts.items() if k not in ("CommitFailedException", "ValidationException")}
        if failures:
            problems.append(f"upserts: answers other than conflicts: {failures}")
        check_exact("LakeUI", main_lake, "bench.tupsert", list(range(args.rounds * 3 + 3)), problems)
    finally:
        server.terminate()
        server.wait(timeout=30)

    lake_figures, sql_figures = figures["LakeUI"], figures["SqlCatalog"]
    print(f"{args.writers} writers, {args.commits} commits of {args.rows} rows each (keyed table), load average "
          f"{os.getloadavg()[0]:.1f} at the end")  # fmt: skip
    print("| figure | LakeUI | SqlCatalog | ratio |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| one writer, commit median | {lake_figures['median']:.0f} ms | {sql_figures['median']:.0f} ms | "
          f"{lake_figures['median'] / sql_figures['median']:.1f}x |")  # fmt: skip
    print(f"| one writer: commits/s | {lake_figures['one']:.1f} | {sql_figures['one']:.1f} | "
          f"{lake_figures['one'] / sql_figures['one']:.2f}x |")  # fmt: skip
    print(f"| {args.writers} writers on {args.writers} tables: commits/s | {lake_figures['many']:.1f} | "
          f"{sql_figures['many']:.1f} | {lake_figures['many'] / sql_figures['many']:.2f}x |")  # fmt: skip
    print(f"| {args.writers} writers: speed-up over one | {lake_figures['many'] / lake_figures['one']:.2f}x | "
          f"{sql_figures['many'] / sql_figures['one']:.2f}x | |")  # fmt: skip
    for label, first in (("on a new connection", 0), ("on a kept connection", 1)):
        calm, loaded = idle[first::2], busy[first::2]
        ratio = statistics.median(loaded) / statistics.median(calm)
        print(f"| branch create {label} while engines commit (idle: {statistics.median(calm):.0f} ms median, "
              f"{max(calm):.0f} max; {len(loaded)} while busy) | {statistics.median(loaded):.0f} ms median, "
              f"{max(loaded):.0f} max | | {ratio:.1f}x idle |")  # fmt: skip
    print(f"| 2 upserters, overlapping keys, {args.rounds} rounds each: answers | {conflicts or 'no conflict'} | | |")
    for problem in problems:
        print(f"NOT EXACT: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
