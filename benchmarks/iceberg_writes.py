"""Iceberg REST writes: the latency of a pyiceberg append commit through LakeUI against pyiceberg's own SqlCatalog
(SQLite) on the same files, and the files a filtered scan reads with and without the manifests' column statistics.

    python benchmarks/iceberg_writes.py [--repeat 5] [--rows 1000]

Uses DATABASE_URL when set, else an embedded PostgreSQL server in a throwaway folder; the warehouse is a temporary
folder. The server is the real Django application behind a WSGI server in this process (a thread), reached over HTTP by
pyiceberg's RestCatalog with a bearer token. Each measured commit is `Transaction.add_files` of 1 or 100 new Parquet
files (written beforehand by pyarrow with field ids into the table's write location on the branch): both catalogs read
the same footers on the client and write a manifest and a manifest list; LakeUI then checks every file (location,
Parquet footer, field ids and types, NOT NULL), reads the snapshot's manifests and records the insert, where the
SqlCatalog writes a metadata.json. Prints the median and the best of `--repeat` commits per size.

The scan part appends 20 files of consecutive ids to an unpartitioned table and plans `id < 50` (one file's rows):
with the manifests LakeUI serves (bounds and counts from the segments' footers) and with the same manifests
stripped of them (as they were served before: partitions only), counting the files pyiceberg would read.
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

os.environ.setdefault("LAKEUI_WAREHOUSE", tempfile.mkdtemp(prefix="lakeui-iceberg-writes-bench-"))
from setup import django_setup

django_setup()

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from pyiceberg.catalog.rest import RestCatalog  # noqa: E402
from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402
from pyiceberg.expressions import LessThan  # noqa: E402
from pyiceberg.schema import Schema  # noqa: E402
from pyiceberg.types import LongType, NestedField, StringType  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from catalog_app.engine import iceberg_metadata as engine_iceberg  # noqa: E402
from catalog_app.models import DataFile  # noqa: E402
from catalog_app.services.refs import catalog_create, catalog_delete  # noqa: E402

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "v", StringType(), required=False))
ARROW = pa.schema([
    pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
    pa.field("v", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
])  # fmt: skip


class Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


class ThreadedServer(WSGIServer):
    daemon_threads = True

    def process_request(self, request, client_address):
        threading.Thread(target=self._handle, args=(request, client_address), daemon=True).start()

    def _handle(self, request, client_address):
        try:
            self.finish_request(request, client_address)
        finally:
            self.shutdown_request(request)


def files(folder: Path, count: int, rows: int, first: int = 0) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        start = first + index * rows
        table = pa.table([pa.array(range(start, start + rows), pa.int64()), pa.array([f"r{i}" for i in range(rows)])],
                         schema=ARROW)  # fmt: skip
        path = folder / f"{uuid.uuid4().hex}.parquet"
        pq.write_table(table, path)
        paths.append(str(path))
    return paths


def timed_add(table, paths: list[str]) -> float:
    started = time.perf_counter()
    with table.transaction() as transaction:
        transaction.add_files(paths)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()

    user, _ = get_user_model().objects.get_or_create(username="iceberg-writes-bench")
    token = Token.objects.get_or_create(user=user)[0].key
    name = f"bench_{uuid.uuid4().hex[:8]}"
    catalog = catalog_create(name=name, created_by=user)
    server = make_server("127.0.0.1", 0, get_wsgi_application(), server_class=ThreadedServer, handler_class=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    lake = RestCatalog("lake", uri=f"http://127.0.0.1:{server.server_port}/iceberg/{name}/main", token=token)
    scratch = Path(tempfile.mkdtemp(prefix="pyiceberg-sql-"))
    sql = SqlCatalog("sql", uri=f"sqlite:///{scratch}/catalog.db", warehouse=f"file://{scratch}")
    try:
        lake.create_namespace("bench")
        sql.create_namespace("bench")
        print(f"append commit latency (add_files, {args.rows} rows per file, median / best of {args.repeat}):")
        for count in (1, 100):
            through_lake = lake.create_table(f"bench.t{count}", SCHEMA)
            sql.create_table(f"bench.t{count}", SCHEMA)
            folder = Path(through_lake.properties["write.data.path"])
            lake_times, sql_times = [], []
            for attempt in range(args.repeat):
                paths = files(folder / f"a{attempt}", count, args.rows)
                lake_times.append(timed_add(lake.load_table(f"bench.t{count}"), paths))
                sql_times.append(timed_add(sql.load_table(f"bench.t{count}"), paths))
            for label, times in (("LakeUI REST", lake_times), ("SqlCatalog ", sql_times)):
                print(f"  {count:>3} files  {label}  {statistics.median(times) * 1000:8.1f} ms  "
                      f"(best {min(times) * 1000:.1f} ms)")  # fmt: skip

        scanned = lake.create_table("bench.scan", SCHEMA)
        folder = Path(scanned.properties["write.data.path"]) / "scan"
        for index in range(20):
            timed_add(lake.load_table("bench.scan"), files(folder, 1, 50, first=index * 50))
        with_stats = len(lake.load_table("bench.scan").scan(row_filter=LessThan("id", 50)).plan_files())
        original = engine_iceberg.column_statistics
        engine_iceberg.column_statistics = lambda file, types: {}
        engine_iceberg.FORMAT_REVISION += "-nostats"  # new file names: the manifests written again without them
        try:
            from catalog_app.iceberg import services

            services._KEPT.clear()
            engine_iceberg._LISTED.clear()
            without = len(lake.load_table("bench.scan").scan(row_filter=LessThan("id", 50)).plan_files())
        finally:
            engine_iceberg.column_statistics = original
        print(f"filtered scan (id < 50) of 20 files: {with_stats} file(s) read with the manifests' column statistics, "
              f"{without} without them")  # fmt: skip
    finally:
        server.shutdown()
        DataFile.objects.filter(catalog=catalog).delete()  # its schema versions are protected while files name them
        catalog_delete(catalog=catalog)
    return 0


if __name__ == "__main__":
    sys.exit(main())
