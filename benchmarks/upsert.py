"""Upsert of M rows into an N-row table of F files whose matched keys sit in 2 files (docs/README.md#targets).

    python benchmarks/upsert.py [--rows 2000000] [--files 20] [--upsert 20000] [--repeat 3] [--large]
                                 [--peers delta-rs,pyiceberg,duckdb] [--no-peers]

`--large` is 10,000,000 rows in 100 files and an upsert of 100,000. The target holds ids 0..N-1 in F files of
consecutive ids (id long, value long, label string). Half the incoming rows update keys of 2 files (every
k-th id of files F/4 and 3F/4, k chosen so that they make half of M: 20 at the defaults), half insert new keys
above the maximum. The upsert runs as the `table_load` job does (incoming Parquet file -> load_change ->
commit), for copy-on-write and for merge-on-read taking turns, once cold and `--repeat - 1` times warm, each on
a fresh branch at the seeded commit (the target is seeded once; branches share its files). Spark start-up is
timed apart. It prints segments read / rewritten / written, bytes read / written, a check of the resulting
rows, and, for each of deltalake (delta-rs), pyiceberg and duckdb that is installed (`pip install -r
requirements-bench.txt`), the same upsert on the same rows in the same F files, with the ratio of its warm time
to LakeUI's.

Uses DATABASE_URL when set, else an embedded PostgreSQL server in a throwaway folder; the warehouse is LAKEUI_WAREHOUSE
or a temporary folder.
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

os.environ.setdefault("LAKEUI_WAREHOUSE", tempfile.mkdtemp(prefix="lakeui-bench-warehouse-"))

from setup import django_setup

django_setup()

from django.conf import settings  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from catalog_app.engine.warehouse import Warehouse  # noqa: E402
from catalog_app.job_specs import LoadSpec  # noqa: E402
from catalog_app.models import DataFile  # noqa: E402
from catalog_app.selectors.refs import branch_get, commit_chain  # noqa: E402
from catalog_app.selectors.table_rows import table_frame_at  # noqa: E402
from catalog_app.services.commits import WriteTarget  # noqa: E402
from catalog_app.services.data_changes import DataChange, data_change_commit, table_snapshot  # noqa: E402
from catalog_app.services.databases import database_create  # noqa: E402
from catalog_app.services.load_changes import load_change  # noqa: E402
from catalog_app.services.refs import branch_create, catalog_create  # noqa: E402
from catalog_app.services.tables import table_create, table_update  # noqa: E402
from catalog_app.spark import spark_session  # noqa: E402
from lakeui.jobs.models import Job  # noqa: E402

COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "value", "type": "long"},
    {"name": "label", "type": "string"},
]
MODES = ("copy-on-write", "merge-on-read")


def seed(spark, rows: int, files: int):
    """A catalog whose table on main holds ids 0..rows-1 in `files` segments, and the seeded commit."""
    catalog = catalog_create(name=f"bench_upsert_{uuid.uuid4().hex[:6]}")
    main = WriteTarget(catalog=catalog, branch="main")
    database_create(target=main, name="db")
    table = table_create(target=main, database="db", name="t", columns=COLUMNS)
    snapshot = table_snapshot(
        catalog_id=str(catalog.id), branch="main", table_id=str(table.object_id), warehouse=settings.LAKEUI_WAREHOUSE
    )
    data = spark.range(0, rows, numPartitions=files)  # partition i holds ids [i * rows / files, (i + 1) * rows / files)
    data = data.select("id", (F.col("id") * 7).alias("value"), F.concat(F.lit("v"), "id").alias("label"))
    written = snapshot.write(data, tag="seed")
    change = DataChange("insert", new_segments=written, counts={"rows_inserted": rows})
    commit = data_change_commit(snapshot=snapshot, change=change, job=_claimed(kind="seed"), message="seed")
    return catalog, table, snapshot.base, commit


def _claimed(**fields) -> Job:
    """A job as a worker's delivery holds it: its commit is fenced by the claim."""
    return Job.objects.create(**fields, status=Job.Status.RUNNING, worker="benchmark/upsert")


def incoming(spark, rows: int, files: int, upsert: int):
    """Half updates of keys in files F/4 and 3F/4 (every k-th id), half new keys above the maximum."""
    per_file, half = rows // files, upsert // 2
    stride = max(1, 2 * per_file // half)
    chosen = [files // 4, 3 * files // 4]
    updates = [i * per_file + offset for i in chosen for offset in range(0, per_file, stride)][:half]
    new = spark.range(rows, rows + upsert - len(updates)).select("id")
    keys = spark.createDataFrame([(k,) for k in updates], "id long").union(new)
    frame = keys.select("id", (-F.col("id")).alias("value"), F.lit("upserted").alias("label"))
    return frame.coalesce(1), len(updates), stride, chosen


def lakeui_upsert(catalog, table, branch: str, upload: dict, mode: str) -> tuple[float, dict]:
    target = WriteTarget(catalog=catalog, branch=branch)
    table_update(target=target, database="db", name="t", set_properties={"write.mode": mode})
    spark = spark_session()
    started = time.perf_counter()
    snapshot = table_snapshot(
        catalog_id=str(catalog.id), branch=branch, table_id=str(table.object_id), warehouse=settings.LAKEUI_WAREHOUSE
    )
    params = {"strategy": "upsert", "key_columns": ["id"], "upload": upload}
    job = _claimed(kind="table_load", params=params)
    change = load_change(spark, snapshot, LoadSpec.from_params(params), tag=f"bench-{uuid.uuid4().hex[:8]}")
    data_change_commit(snapshot=snapshot, change=change, job=job, message="upsert")
    return time.perf_counter() - started, change.result()


def check(spark, catalog, branch: str, rows: int, updates: int, upsert: int) -> str:
    chain = commit_chain(branch_get(catalog=catalog, name=branch).head)
    table = table_frame_at(spark, chain, database="db", table="t", warehouse=Warehouse(settings.LAKEUI_WAREHOUSE))
    figures = table.agg(
        F.count(F.lit(1)).alias("rows"),
        F.countDistinct("id").alias("ids"),
        F.sum(F.when(F.col("label") == "upserted", 1).otherwise(0)).alias("upserted"),
        F.sum(F.when((F.col("id") < rows) & (F.col("label") == "upserted"), 1).otherwise(0)).alias("updated"),
        F.sum(F.when((F.col("label") == "upserted") & (F.col("value") != -F.col("id")), 1).otherwise(0)).alias("bad"),
    ).first()
    expected = rows + upsert - updates
    good = (figures["rows"], figures["ids"], figures["upserted"], figures["updated"], figures["bad"]) == (
        expected, expected, upsert, updates, 0
    )  # fmt: skip
    return f"{'OK' if good else 'WRONG'} ({figures['rows']:,} rows, {figures['updated']:,} updated)"


# --- peers, on the same rows in the same F files --------------------------------------------------------


def peer_files(warehouse: Path, base: str) -> list[Path]:
    return sorted((warehouse / base / "data" / "seed").rglob("*.parquet"))


def delta_rs(files: list[Path], source, work: Path, repeat: int):
    import deltalake
    import pyarrow.parquet as pq

    seeded = work / "delta-seed"
    for file in files:
        deltalake.write_deltalake(str(seeded), pq.read_table(file), mode="append")
    timings, metrics = [], {}
    for run in range(repeat):
        path = work / f"delta-{run}"
        shutil.copytree(seeded, path)
        started = time.perf_counter()
        metrics = (
            deltalake.DeltaTable(str(path))
            .merge(source=source, predicate="t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        timings.append(time.perf_counter() - started)
        rows = deltalake.DeltaTable(str(path)).to_pyarrow_table().num_rows
    keys = ("num_target_files_scanned", "num_target_files_skipped_during_scan", "num_target_files_removed",
            "num_target_files_added", "num_target_rows_updated", "num_target_rows_inserted")  # fmt: skip
    return timings, {k: metrics.get(k) for k in keys} | {"rows after": rows}


def pyiceberg_upsert(files: list[Path], source, work: Path, repeat: int):
    import pyarrow.parquet as pq
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("bench", uri=f"sqlite:///{work / 'iceberg.db'}", warehouse=f"file://{work / 'iceberg'}")
    catalog.create_namespace("db")
    timings, result = [], None
    tables = [pq.read_table(file) for file in files]
    schema = tables[0].schema.remove_metadata()
    for run in range(repeat):
        table = catalog.create_table(f"db.t{run}", schema=schema)
        for part in tables:
            table.append(part.replace_schema_metadata(None).cast(schema))
        started = time.perf_counter()
        result = table.upsert(df=source.cast(schema), join_cols=["id"])
        timings.append(time.perf_counter() - started)
    return timings, {"rows_updated": result.rows_updated, "rows_inserted": result.rows_inserted}


def duckdb_merge(files: list[Path], source, work: Path, repeat: int):
    import duckdb

    connection = duckdb.connect(str(work / "duck.db"))
    listing = ", ".join(f"'{file}'" for file in files)
    connection.execute(f"CREATE TABLE seed AS SELECT * FROM read_parquet([{listing}])")
    connection.register("src", source)
    timings, changed = [], None
    for run in range(repeat):
        connection.execute(f"CREATE TABLE t{run} AS SELECT * FROM seed")
        started = time.perf_counter()
        changed = connection.execute(
            f"MERGE INTO t{run} USING src ON t{run}.id = src.id "
            "WHEN MATCHED THEN UPDATE SET value = src.value, label = src.label WHEN NOT MATCHED THEN INSERT *"
        ).fetchall()
        timings.append(time.perf_counter() - started)
    return timings, {"rows changed": changed[0][0] if changed else None, "storage": "DuckDB table (not files)"}


PEERS = {"delta-rs": ("deltalake", delta_rs), "pyiceberg": ("pyiceberg", pyiceberg_upsert),
         "duckdb": ("duckdb", duckdb_merge)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--upsert", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per engine: 1 cold, the rest warm")
    parser.add_argument("--large", action="store_true", help="10,000,000 rows in 100 files, upsert of 100,000")
    parser.add_argument("--peers", default=",".join(PEERS), help=f"which of {', '.join(PEERS)} to run (if installed)")
    parser.add_argument("--no-peers", action="store_true")
    args = parser.parse_args()
    if args.large:
        args.rows, args.files, args.upsert = 10_000_000, 100, 100_000
    started = time.perf_counter()
    spark = spark_session()
    spark.range(1).count()
    print(f"Spark start-up: {time.perf_counter() - started:.1f} s ({spark.sparkContext.master})")
    started = time.perf_counter()
    catalog, table, base, seeded = seed(spark, args.rows, args.files)
    source, updates, stride, chosen = incoming(spark, args.rows, args.files, args.upsert)
    warehouse = Path(settings.LAKEUI_WAREHOUSE)
    upload = {"path": f"{base}/staging/upsert", "format": "parquet"}
    source.write.parquet(str(warehouse / upload["path"]))
    files = peer_files(warehouse, base)
    size = sum(f.stat().st_size for f in files)
    per_file = args.rows // args.files
    holding = [s for s in DataFile.objects.filter(catalog=catalog, kind="segment") if
               any(s.stats["1"]["min"] <= i * per_file <= s.stats["1"]["max"] for i in chosen)]  # fmt: skip
    affected = sum(s.size_bytes for s in holding)
    print(
        f"set-up: {time.perf_counter() - started:.1f} s; target {args.rows:,} rows in {len(files)} files "
        f"({size / 1e6:.1f} MB); upsert {args.upsert:,} rows: {updates:,} updates (every {stride}th id "
        f"of files {chosen}, {affected / 1e6:.2f} MB) and {args.upsert - updates:,} inserts"
    )
    timings, results = {mode: [] for mode in MODES}, {}
    for run in range(args.repeat):  # the modes take turns, so that their warm runs find the JVM equally warm
        for mode in MODES:
            branch = f"{mode}-{run}"
            branch_create(catalog=catalog, name=branch, source=seeded.id)
            seconds, results[mode] = lakeui_upsert(catalog, table, branch, upload, mode)
            timings[mode].append(seconds)
    lakeui_warm = {}
    for mode in MODES:
        result, runs = results[mode], timings[mode]
        warm = statistics.median(runs[1:]) if len(runs) > 1 else runs[0]
        lakeui_warm[mode] = warm
        branch = f"{mode}-{args.repeat - 1}"
        print(
            f"\nLakeUI {mode}: cold {runs[0]:.2f} s, warm {warm:.2f} s (median of {len(runs) - 1}; "
            f"runs {', '.join(f'{t:.2f}' for t in runs)})"
        )
        print(
            f"  segments read {result['segments_read']}, rewritten {result['segments_rewritten']}, written "
            f"{result['segments_written']}, delta files {result['delta_files_written']}; rows updated "
            f"{result['rows_updated']:,}, inserted {result['rows_inserted']:,}"
        )
        print(
            f"  bytes read {result['bytes_read'] / 1e6:.2f} MB ({result['bytes_read'] / affected:.2f}x the 2 affected "
            f"files), written {result['bytes_written'] / 1e6:.2f} MB"
        )
        print(f"  check: {check(spark, catalog, branch, args.rows, updates, args.upsert)}")
    if args.no_peers:
        return
    arrow_source = None
    work = Path(tempfile.mkdtemp(prefix="lakeui-bench-peers-"))
    for name, (module, run_peer) in PEERS.items():
        if name not in args.peers.split(","):
            continue
        try:
            __import__(module)
        except ImportError:
            print(f"\n{name}: not installed (pip install -r requirements-bench.txt)")
            continue
        if arrow_source is None:
            import pyarrow.parquet as pq

            arrow_source = pq.read_table(warehouse / upload["path"])
        try:
            timings, figures = run_peer(files, arrow_source, work, args.repeat)
        except Exception as exc:  # a peer's failure is reported, not fatal to the benchmark
            print(f"\n{name}: failed: {type(exc).__name__}: {str(exc)[:300]}")
            continue
        warm = statistics.median(timings[1:]) if len(timings) > 1 else timings[0]
        ratios = ", ".join(f"LakeUI {mode} / {name} {lakeui_warm[mode] / warm:.2f}x" for mode in MODES)
        print(f"\n{name}: cold {timings[0]:.2f} s, warm {warm:.2f} s; {ratios}")
        print(f"  {figures}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
