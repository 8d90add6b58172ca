"""Diff, conflict preview and merge of two branches with N changed tables (DESIGN.md section 6).

    python benchmarks/merge.py [--tables 1000] [--repeat 5]

Builds a catalog with N tables; a branch `dev` appends a small Parquet segment to every table and `main` appends
another, so every table is changed on both sides and each needs its rule cells decided. The segments are written
here with pyarrow (with Parquet field ids, as the engine writes them) and registered with the commit service as
one insert commit per table and branch, the row shapes a load job commits: the diff and the merge read only
metadata, so Spark is not needed to set them up. Prints the median diff (with the conflict preview) time against
the target of 2 s, the merge time, and the bytes and data files the merge created (target: zero for appended
data). Uses DATABASE_URL when set, else a throwaway SQLite file; the warehouse is LAKEUI_WAREHOUSE's folder.
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
from django.conf import settings  # noqa: E402
from django.db import transaction  # noqa: E402

from catalog_app.models import DataFile, ObjectKind, Operation  # noqa: E402
from catalog_app.services.commits import WriteTarget  # noqa: E402
from catalog_app.services.databases import database_create  # noqa: E402
from catalog_app.services.refs import branch_create, catalog_create  # noqa: E402
from catalog_app.services.tables import table_create  # noqa: E402
from merge_app.selectors.diff import diff_as_dict, merge_diff  # noqa: E402
from merge_app.services.merges import branch_merge  # noqa: E402

COLUMNS = [{"name": "id", "type": "long", "nullable": False}, {"name": "v", "type": "string"}]
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
        pa.field("v", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
    ]
)


def append(catalog, branch: str, table, rows: int = 100) -> None:
    """Write one segment with pyarrow and commit it as an insert, as a load job would."""
    relative = f"{catalog.id}/{table.object_id}/data/bench-{uuid.uuid4().hex}/part-0.parquet"
    path = Path(settings.LAKEUI_WAREHOUSE) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": list(range(rows)), "v": [branch] * rows}, schema=SCHEMA), path)
    with transaction.atomic():
        draft = WriteTarget(catalog=catalog, branch=branch).begin()
        current = draft.get(ObjectKind.TABLE, table.name, table.parent_id)
        segment = DataFile(
            catalog=catalog, table_id=table.object_id, kind=DataFile.Kind.SEGMENT, path=relative, row_count=rows,
            size_bytes=path.stat().st_size, stats={"1": {"min": 0, "max": rows - 1, "nulls": 0}},
            schema_version_id=current.state["schema_version_id"],
        )  # fmt: skip
        draft.add_file(segment)
        draft.put(kind=ObjectKind.TABLE, object_id=table.object_id, name=table.name, parent_id=table.parent_id,
                  state=current.state)  # fmt: skip
        details = {"segments_added": [str(segment.id)], "segments_touched": [], "rows_inserted": rows}
        draft.operation(object_id=table.object_id, kind=ObjectKind.TABLE, op=Operation.Op.INSERT, details=details)
        draft.commit(author=None, message=f"append to {table.name}")


def warehouse_bytes(catalog) -> int:
    return sum(f.stat().st_size for f in (Path(settings.LAKEUI_WAREHOUSE) / str(catalog.id)).rglob("*") if f.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    started = time.monotonic()
    catalog = catalog_create(name=f"bench_merge_{uuid.uuid4().hex[:6]}")
    main_target = WriteTarget(catalog=catalog, branch="main")
    database_create(target=main_target, name="db")
    tables = [
        table_create(target=main_target, database="db", name=f"t{i}", columns=COLUMNS) for i in range(args.tables)
    ]
    branch_create(catalog=catalog, name="dev", source="main")
    for table in tables:
        append(catalog, "dev", table)
        append(catalog, "main", table)
    print(f"set-up: {args.tables} tables changed on both branches in {time.monotonic() - started:.1f} s")

    timings = []
    for _ in range(args.repeat):
        begin = time.perf_counter()
        report = diff_as_dict(merge_diff(catalog=catalog, source="dev", target="main"))
        timings.append(time.perf_counter() - begin)
    pairs = sum(len(obj["pairs"]) for obj in report["objects"])
    median = statistics.median(timings)
    print(f"diff + conflict preview: {len(report['objects'])} objects, {pairs} rule cells decided, "
          f"mergeable={report['mergeable']}; median {median:.3f} s over {args.repeat} (target < 2 s: "
          f"{'met' if median < 2 else 'NOT met'})")  # fmt: skip

    files_before, bytes_before = DataFile.objects.filter(catalog=catalog).count(), warehouse_bytes(catalog)
    begin = time.perf_counter()
    merge = branch_merge(catalog=catalog, source="dev", target="main")
    elapsed = time.perf_counter() - begin
    files_after, bytes_after = DataFile.objects.filter(catalog=catalog).count(), warehouse_bytes(catalog)
    taken = merge.log["files"]
    print(f"merge: {merge.status} in {elapsed:.3f} s; {len(taken)} segments taken over by reference "
          f"({sum(f['bytes'] for f in taken):,} bytes referenced)")  # fmt: skip
    print(
        f"data copied by the merge: {bytes_after - bytes_before} bytes, {files_after - files_before} new data "
        f"files (target 0: {'met' if bytes_after == bytes_before and files_after == files_before else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
