"""A full scan of a 10,000,000-row table by another engine (docs/README.md#targets): pyiceberg through LakeUI's
Iceberg REST catalog, against the client's own readers (`read_arrow`, and PySpark `read_table`).

    python benchmarks/iceberg_scan.py [--rows 10000000] [--segments 20] [--repeat 3]

Uses DATABASE_URL when set, else an embedded PostgreSQL server in a throwaway folder; the warehouse is a temporary
folder. Table `db.t` (id long, v string, amount double) gets `--segments` commits of one segment each (real Parquet
files written by pyarrow with column ids as field ids, recorded as the services record them), then this process serves
LakeUI on a loopback port (the real WSGI application: token, roles, the Iceberg REST views and the scan-plan API) and
reads the table at `main` four ways, each checked to return every row once (count and sum of ids):
- pyiceberg: `RestCatalog(uri=.../iceberg/{cat}/main).load_table("db.t").scan().to_arrow()` (loadTable, then
  pyiceberg plans from the manifests and reads the segments with pyarrow);
- DuckDB over pyiceberg's Arrow: the same scan, then `SELECT count(*), sum(amount)` in DuckDB;
- the client's `read_arrow` (the scan plan from LakeUI's API, the segments read with pyarrow);
- the client's PySpark `read_table`, every column aggregated in one pass, on a local[2] session already started
  (its start is printed on its own).
Medians of `--repeat`, with the ratio of each to pyiceberg.
"""

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

os.environ.setdefault("LAKEUI_WAREHOUSE", tempfile.mkdtemp(prefix="lakeui-iceberg-scan-"))
from setup import django_setup

django_setup()

from socketserver import ThreadingMixIn  # noqa: E402

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from iceberg import commit_segments  # noqa: E402
from lakeui_client import Client  # noqa: E402
from lakeui_client.arrow import read_arrow  # noqa: E402
from lakeui_client.spark import read_table  # noqa: E402
from pyiceberg.catalog.rest import RestCatalog  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from catalog_app.models import DataFile, ObjectVersion  # noqa: E402
from catalog_app.services.commits import WriteTarget  # noqa: E402
from catalog_app.services.databases import database_create  # noqa: E402
from catalog_app.services.refs import catalog_create, catalog_delete  # noqa: E402
from catalog_app.services.tables import table_create  # noqa: E402

COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "v", "type": "string"},
    {"name": "amount", "type": "double"},
]
SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"1"}),
    pa.field("v", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
    pa.field("amount", pa.float64(), metadata={b"PARQUET:field_id": b"3"}),
])  # fmt: skip


def wide_segment(warehouse: Path, path: str, start: int, rows: int) -> int:
    ids = pa.array(np.arange(start, start + rows, dtype=np.int64))
    amounts = pa.array((np.arange(rows) % 1000) / 10.0)
    table = pa.Table.from_arrays([ids, pc.cast(ids, pa.string()), amounts], schema=SCHEMA)
    target = warehouse / path
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, target)
    return target.stat().st_size


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


def serve() -> tuple[str, _Server]:
    server = make_server("127.0.0.1", 0, get_wsgi_application(), server_class=_Server, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}", server


def timed(read, repeat: int, expected: tuple[int, int]) -> float:
    """The median seconds of `read()`, which returns (rows, sum of ids): checked against `expected` every time."""
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        got = read()
        times.append(time.perf_counter() - began)
        assert got == expected, f"read {got}, expected {expected}"
    return statistics.median(times)


def arrow_totals(table: pa.Table) -> tuple[int, int]:
    return table.num_rows, pc.sum(table["id"]).as_py()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--segments", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    per_segment = args.rows // args.segments
    rows = per_segment * args.segments
    expected = (rows, rows * (rows - 1) // 2)

    user, _ = get_user_model().objects.get_or_create(username=f"bench-{uuid.uuid4().hex[:6]}")
    token = Token.objects.create(user=user).key
    catalog = catalog_create(name=f"bench_scan_{uuid.uuid4().hex[:6]}", created_by=user)
    spark = None
    try:
        target = WriteTarget(catalog=catalog, branch="main")
        database_create(target=target, name="db")
        table_create(target=target, database="db", name="t", columns=COLUMNS)
        table = ObjectVersion.objects.filter(catalog=catalog, kind="table", name="t").order_by("-seq").first()
        began = time.perf_counter()
        commit_segments(catalog, table, args.segments, 0, rows=per_segment, write=wide_segment)
        size = sum(f.size_bytes for f in DataFile.objects.filter(catalog=catalog))
        print(f"table: {rows:,} rows in {args.segments} segments ({size / 1e6:.0f} MB of Parquet), "
              f"written in {time.perf_counter() - began:.1f} s")  # fmt: skip
        url, server = serve()
        client = Client(url=url, token=token)
        iceberg = RestCatalog("lake", uri=f"{url}/iceberg/{catalog.name}/main", token=token)

        def pyiceberg_scan() -> tuple[int, int]:
            return arrow_totals(iceberg.load_table("db.t").scan().to_arrow())

        def duckdb_scan() -> tuple[int, int]:
            frame = iceberg.load_table("db.t").scan().to_arrow()
            connection = duckdb.connect()
            connection.register("frame", frame)
            ((count, ids, _),) = connection.execute("SELECT count(*), sum(id), sum(amount) FROM frame").fetchall()
            return count, int(ids)

        def client_arrow() -> tuple[int, int]:
            return arrow_totals(read_arrow(client, catalog.name, "main", "db.t"))

        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F

        started = time.perf_counter()
        spark = SparkSession.builder.master("local[2]").appName("iceberg-scan-bench").getOrCreate()
        spark.range(1).count()
        spark_start = time.perf_counter() - started

        def spark_scan() -> tuple[int, int]:
            frame = read_table(spark, client, catalog.name, "main", "db.t")
            # one pass reading every column of every row
            count, ids, _, _ = frame.agg(F.count("*"), F.sum("id"), F.sum(F.length("v")), F.sum("amount")).first()
            return count, ids

        pyiceberg_scan()  # warm: the table's Iceberg metadata written once, the OS cache filled
        figures = {
            "pyiceberg scan().to_arrow() via the Iceberg REST catalog": timed(pyiceberg_scan, args.repeat, expected),
            "DuckDB over pyiceberg's Arrow (count, sum)": timed(duckdb_scan, args.repeat, expected),
            "client read_arrow (scan plan + pyarrow)": timed(client_arrow, args.repeat, expected),
            "client PySpark read_table (every column, count and sums)": timed(spark_scan, args.repeat, expected),
        }
        reference = next(iter(figures.values()))
        print(f"local Spark session start (once, not in the figures): {spark_start:.1f} s")
        for label, seconds in figures.items():
            print(f"{label}: median {seconds:.2f} s of {args.repeat} ({seconds / reference:.2f}x pyiceberg)")
        server.shutdown()
    finally:
        if spark is not None:
            spark.stop()
        DataFile.objects.filter(catalog=catalog).delete()  # its schema versions are protected while files name them
        catalog_delete(catalog=catalog)


if __name__ == "__main__":
    sys.exit(main())
