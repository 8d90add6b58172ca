"""Your own Spark job against LakeUI (issue 15): `read_table` of a big table and `write_table` of an upsert, next to
the same upsert through the API with an uploaded file, and the bytes each sent through the web server.

    python benchmarks/client_roundtrip.py [--rows 10000000] [--upsert 100000] [--repeat 3]

Starts the product as `make run` does (the API under gunicorn, a jobs worker and an interactive worker) on
DATABASE_URL (else an embedded PostgreSQL server in a throwaway folder) and REDIS_URL (else the filesystem broker), on
queues of its own, and a SparkSession of the user's own in this process (`local[2]`). Loads a table of `--rows` rows
with `write_table`, then prints, medians of `--repeat`:

- `read_table(...).count()` of the whole table (the scan plan from the API, the files read by the user's Spark);
- `write_table(df, strategy="upsert")` of `--upsert` rows (half of them new keys), from the call to the job's end;
- the same upsert as a Parquet file uploaded through the API (`client.load(file=...)`);
- the bytes sent to and received from the web server by each (target for `write_table`: no table data).
"""

import argparse
import statistics
import time
import uuid
from pathlib import Path

from setup import django_setup

django_setup()

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from interactive import running_product  # noqa: E402  (the product's processes, as interactive.py starts them)
from lakeui_client import Client  # noqa: E402
from lakeui_client.spark import read_table, write_table  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "amount", "type": "int"},
    {"name": "region", "type": "string"},
]
TABLE = "shop.orders"


class Traffic:
    """Bytes of the requests sent to the web server and of its answers, counted on the client's HTTP calls."""

    def __init__(self, client: Client) -> None:
        self.sent = self.received = 0
        client.http.event_hooks = {"request": [self._request], "response": [self._response]}

    def _request(self, request) -> None:
        self.sent += int(request.headers.get("content-length", 0))

    def _response(self, response) -> None:
        response.read()
        self.received += len(response.content)

    def measured(self, action):
        """What `action()` returns, its seconds, and the bytes it sent and received."""
        sent, received, started = self.sent, self.received, time.perf_counter()
        result = action()
        return result, time.perf_counter() - started, self.sent - sent, self.received - received


def rows(spark: SparkSession, first: int, count: int, amount: int):
    return spark.range(first, first + count).select(
        F.col("id"), F.lit(amount).cast("int").alias("amount"),
        F.when(F.col("id") % 2 == 0, "us").otherwise("eu").alias("region"),
    )  # fmt: skip


def run(client: Client, args, logs: Path) -> None:
    spark = SparkSession.builder.master("local[2]").appName("your-own-job").getOrCreate()
    traffic = Traffic(client)
    catalog = f"bench_{uuid.uuid4().hex[:6]}"
    client.catalog_create(catalog)
    client.database_create(catalog, "main", "shop")
    client.table_create(catalog, "main", TABLE, COLUMNS, primary_key=["id"])
    started = time.perf_counter()
    loaded = write_table(rows(spark, 0, args.rows, 1), client, catalog, "main", TABLE)
    assert loaded["status"] == "succeeded", loaded
    print(f"set-up: {args.rows:,} rows written with write_table in {time.perf_counter() - started:.1f} s")

    reads = [
        traffic.measured(lambda: read_table(spark, client, catalog, "main", TABLE).count()) for _ in range(args.repeat)
    ]
    assert all(count == args.rows for count, *_ in reads), [count for count, *_ in reads]

    half, upserts, uploads = args.upsert // 2, [], []
    for n in range(args.repeat):
        first = args.rows - half + n * args.upsert  # half existing keys, half new ones (so is the upload's range)
        frame = rows(spark, first, args.upsert, 10 + n)
        job, *figures = traffic.measured(lambda: write_table(frame, client, catalog, "main", TABLE, "upsert", ["id"]))  # noqa: B023
        assert job["status"] == "succeeded", job
        upserts.append((job, *figures))
        source = logs / f"upsert-{n}.parquet"
        ids = pa.array(range(first + half, first + half + args.upsert), pa.int64())  # half existing, half new too
        pq.write_table(pa.table({"id": ids, "amount": pa.array([n] * args.upsert, pa.int32()),
                                 "region": pa.array(["eu"] * args.upsert)}), source)  # fmt: skip
        job, *figures = traffic.measured(
            lambda: client.load(catalog, "main", TABLE, file=str(source), strategy="upsert", key_columns=["id"])  # noqa: B023
        )
        assert job["status"] == "succeeded", job
        uploads.append((job, *figures))

    def line(name: str, runs: list) -> str:
        seconds = statistics.median(r[1] for r in runs)
        return (f"{name}: median {seconds:.2f} s over {len(runs)}; sent {statistics.median(r[2] for r in runs):,.0f} "
                f"bytes, received {statistics.median(r[3] for r in runs):,.0f} bytes")  # fmt: skip

    print(line(f"read_table + count() of {args.rows:,} rows", reads))
    print(line(f"write_table upsert of {args.upsert:,} rows", upserts))
    print(line(f"API upsert of the same rows as an uploaded Parquet file ({source.stat().st_size:,} bytes)", uploads))
    sent = statistics.median(r[2] for r in upserts)
    verdict = "met" if sent < 10_000 else "NOT met"
    print(f"table data through the web server with write_table: {sent:,.0f} bytes of requests ({verdict}: JSON only)")
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--upsert", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    with running_product("bench_client", timeout=600) as (client, logs):
        run(client, args, logs)


if __name__ == "__main__":
    main()
