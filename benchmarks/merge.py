"""Diff, conflict preview and merge of two branches with N changed tables, and of a small change in a catalog
with a deep history (docs/README.md#targets).

    python benchmarks/merge.py [--tables 1000] [--repeat 5]
    python benchmarks/merge.py --depth 100000 [--repeat 5]

Builds a catalog with N tables and `--repeat` pairs of branches forked from `main` (and one more, diffed and merged
first to warm the process up, not counted); in each pair, one branch appends a small Parquet segment to every table
and the other appends another, so every table is changed on both sides and each needs its rule cells decided. The
segments are written here with pyarrow (with Parquet field ids, as the engine writes them) and registered with the
commit service as one insert commit per table and branch, the row shapes a load job commits: the diff and the merge
read only metadata, so Spark is not needed to set them up. The set-up ends vacuumed, analysed and checkpointed
(`analyze`). Each pair is diffed and then merged, one right after the other, so that the two times of a pair are
taken under the same load (this machine is noisy). Prints the median diff (with the conflict preview, as the API
answers it: `merge_diff_report`) time against the target of 2 s, the median merge time, the median of the pairs'
merge / diff ratios against the target of 2, and the bytes and data files a merge created (target: zero for
appended data).

With `--depth N`, two catalogs are built instead: a fresh one, and one whose `main` has N commits of history (bulk
written, each setting a property of another table: an object version and an operation per commit, as a busy
catalog's commits are; then VACUUM ANALYZE, as autovacuum would have run on a catalog that grew over time). In each,
pairs of branches forked from main's head change one table each and are diffed
and merged; it prints the median diff and merge times in both and the ratio deep / fresh (target under 2: the
cost follows the change, not the history).

Uses DATABASE_URL when set, else an embedded PostgreSQL server in a throwaway folder; the warehouse is
LAKEUI_WAREHOUSE's folder.
"""

import argparse
import os
import statistics
import time
import uuid
from pathlib import Path

from setup import django_setup

django_setup()

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from catalog_app.models import (  # noqa: E402
    Branch,
    Catalog,
    Commit,
    DataFile,
    FileEntry,
    Line,
    ObjectKind,
    ObjectVersion,
    Operation,
    SchemaVersion,
)
from catalog_app.models.catalog import new_commit_id  # noqa: E402
from catalog_app.services.commits import WriteTarget  # noqa: E402
from catalog_app.services.databases import database_create  # noqa: E402
from catalog_app.services.refs import branch_create, catalog_create  # noqa: E402
from catalog_app.services.tables import table_create  # noqa: E402
from merge_app.services.diff_reads import merge_diff_report  # noqa: E402
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


class BulkCommits:
    """Commits appended to a branch's line in bulk, with the rows the commit service writes for them (set-up only:
    the service takes ~10 ms a commit, too slow for 100,000). The branch's head must be the tip of its own line."""

    def __init__(self, catalog, branch: str) -> None:
        self.catalog, self.branch = catalog, Branch.objects.select_related("head").get(catalog=catalog, name=branch)
        self.parent = self.branch.head
        self.line, self.seq = Line.objects.get(id=self.parent.line_id), self.parent.seq
        self.rows: dict[type, list] = {Commit: [], SchemaVersion: [], ObjectVersion: [], DataFile: [], FileEntry: [],
                                       Operation: []}  # fmt: skip

    def commit(self, message: str) -> Commit:
        self.seq += 1
        commit = Commit(id=new_commit_id(), catalog=self.catalog, seq=self.seq, line=self.line,
                        parent_id=self.parent.id, created_at=self.parent.created_at, message=message)  # fmt: skip
        self.rows[Commit].append(commit)
        self.parent = commit
        return commit

    def add(self, row) -> None:
        self.rows[type(row)].append(row)

    def version(self, commit: Commit, table, state: dict, name: str | None = None) -> None:
        self.add(ObjectVersion(catalog=self.catalog, object_id=table.object_id, kind=ObjectKind.TABLE,
                               parent_id=table.parent_id, name=name or table.name, commit=commit, line=self.line,
                               seq=commit.seq, state=state))  # fmt: skip

    def save(self) -> None:
        """Write what was staged (call often: a batch of a few thousand commits) and move the branch head."""
        with transaction.atomic():
            for model, rows in self.rows.items():  # in dependency order: commits first, schemas before versions
                model.objects.bulk_create(rows, batch_size=2000)
                rows.clear()
            Line.objects.filter(id=self.line.id).update(tip_seq=self.seq)
            Catalog.objects.filter(id=self.catalog.id).update(last_seq=self.seq)
            Branch.objects.filter(id=self.branch.id).update(head=self.parent)


def analyze() -> None:
    """The database as a catalog that grew over time leaves it: vacuumed, with statistics (what autovacuum keeps),
    and the set-up's writes checkpointed. Measured right after a bulk set-up, the pairs met autovacuum and the
    checkpointer at work on it, at random: a pair's merge / diff ranged over 0.5 of the ratio."""
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
        cursor.execute("CHECKPOINT")


def deepen(catalog, commits: int, batch: int = 5000) -> None:
    """`commits` commits of history on main, each setting a property of a table of their own."""
    history = table_create(target=WriteTarget(catalog=catalog, branch="main"), database="db", name="history",
                           columns=COLUMNS)  # fmt: skip
    bulk = BulkCommits(catalog, "main")
    for n in range(commits):
        commit = bulk.commit(f"history {n}")
        bulk.version(commit, history, {**history.state, "properties": {"n": str(n)}})
        bulk.add(Operation(commit=commit, position=0, object_id=history.object_id, object_kind=ObjectKind.TABLE,
                           op=Operation.Op.ALTER_PROPERTIES, details={"set": {"n": str(n)}}))  # fmt: skip
        if n % batch == batch - 1:
            bulk.save()
    bulk.save()
    analyze()


def bulk_tables(catalog, count: int) -> list:
    """`count` tables in db, the first through the service and the others in one bulk commit of the same rows."""
    first = table_create(target=WriteTarget(catalog=catalog, branch="main"), database="db", name="t0", columns=COLUMNS)
    create = Operation.objects.get(commit__object_versions=first, object_id=first.object_id)
    bulk = BulkCommits(catalog, "main")
    commit = bulk.commit(f"create {count - 1} tables")
    tables = [ObjectVersion(object_id=uuid.uuid4(), parent_id=first.parent_id, name=f"t{i}") for i in range(1, count)]
    for position, table in enumerate(tables):
        bulk.add(Operation(commit=commit, position=position, object_id=table.object_id, object_kind=ObjectKind.TABLE,
                           op=Operation.Op.CREATE, details={**create.details, "name": table.name}))  # fmt: skip
    bulk.save()  # the commit first: the schema versions' ids go into the tables' states
    schemas = SchemaVersion.objects.bulk_create(
        [SchemaVersion(catalog=catalog, table_id=t.object_id, columns=first.state["columns"], commit=commit,
                       line=bulk.line, seq=commit.seq) for t in tables],
        batch_size=2000,
    )  # fmt: skip
    for table, schema in zip(tables, schemas, strict=True):
        table.state = {**first.state, "schema_version_id": schema.id}
        bulk.version(commit, table, table.state)
    bulk.save()
    return [first, *tables]


def bulk_appends(catalog, branch: str, tables: list, rows: int = 100) -> None:
    """One insert commit per table on `branch`, as `append` makes them: the first through the service (it starts
    the branch's line), the others in bulk, their segments hard links of the first one's file."""
    append(catalog, branch, tables[0], rows)
    bulk = BulkCommits(catalog, branch)
    template = DataFile.objects.filter(catalog=catalog, table_id=tables[0].object_id).latest("created_at")
    source = Path(settings.LAKEUI_WAREHOUSE) / template.path
    for n, table in enumerate(tables[1:], start=1):
        relative = f"{catalog.id}/{table.object_id}/data/bench-{uuid.uuid4().hex}/part-0.parquet"
        path = Path(settings.LAKEUI_WAREHOUSE) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        os.link(source, path)
        commit = bulk.commit(f"append to {table.name}")
        segment = DataFile(id=uuid.uuid4(), catalog=catalog, table_id=table.object_id, kind=DataFile.Kind.SEGMENT,
                           path=relative, row_count=rows, size_bytes=template.size_bytes, stats=template.stats,
                           schema_version_id=table.state["schema_version_id"])  # fmt: skip
        bulk.add(segment)
        bulk.add(FileEntry(catalog=catalog, table_id=table.object_id, file=segment, commit=commit, line=bulk.line,
                           seq=commit.seq))  # fmt: skip
        bulk.version(commit, table, table.state)
        details = {"segments_added": [str(segment.id)], "segments_touched": [], "rows_inserted": rows}
        bulk.add(Operation(commit=commit, position=0, object_id=table.object_id, object_kind=ObjectKind.TABLE,
                           op=Operation.Op.INSERT, details=details))  # fmt: skip
        if n % 2000 == 0:
            bulk.save()
    bulk.save()


def depth_catalog(commits: int, repeat: int) -> dict[str, float]:
    """Median diff and merge times of one table changed on each of two branches forked from main's head."""
    catalog = catalog_create(name=f"bench_depth_{uuid.uuid4().hex[:6]}")
    main = WriteTarget(catalog=catalog, branch="main")
    database_create(target=main, name="db")
    table = table_create(target=main, database="db", name="t", columns=COLUMNS)
    if commits:
        deepen(catalog, commits)
    diffs, merges = [], []
    for n in range(repeat):
        source, target = f"src{n}", f"dest{n}"
        for branch in (source, target):
            branch_create(catalog=catalog, name=branch, source="main")
            append(catalog, branch, table)
        begin = time.perf_counter()
        merge_diff_report(catalog=catalog, source=source, target=target, user=None)
        diffs.append(time.perf_counter() - begin)
        begin = time.perf_counter()
        merged = branch_merge(catalog=catalog, source=source, target=target)
        merges.append(time.perf_counter() - begin)
        assert merged.status == "merged", merged.status
    return {"diff": statistics.median(diffs), "merge": statistics.median(merges)}


def depth_mode(commits: int, repeat: int) -> None:
    started = time.monotonic()
    fresh = depth_catalog(0, repeat)
    deep = depth_catalog(commits, repeat)
    print(f"set-up: a fresh catalog and one with {commits:,} commits of history in {time.monotonic() - started:.1f} s")
    for step in ("diff", "merge"):
        ratio = deep[step] / fresh[step]
        print(f"{step} of one changed table per side: fresh {fresh[step] * 1000:.1f} ms, {commits:,} commits "
              f"{deep[step] * 1000:.1f} ms; ratio {ratio:.2f} (target < 2: {'met' if ratio < 2 else 'NOT met'}), "
              f"medians of {repeat}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--depth", type=int, default=0, help="commits of history: run the history-depth mode")
    args = parser.parse_args()
    if args.depth:
        depth_mode(args.depth, args.repeat)
        return

    started = time.monotonic()
    catalog = catalog_create(name=f"bench_merge_{uuid.uuid4().hex[:6]}")
    database_create(target=WriteTarget(catalog=catalog, branch="main"), name="db")
    tables = bulk_tables(catalog, args.tables)
    pairs = [(f"dev{n}", f"main{n}") for n in range(args.repeat + 1)]  # the first warms up: not counted
    for pair in pairs:
        for branch in pair:
            branch_create(catalog=catalog, name=branch, source="main")
            bulk_appends(catalog, branch, tables)
    analyze()
    print(f"set-up: {args.repeat} pairs of branches, each with {args.tables} tables changed on both sides, in "
          f"{time.monotonic() - started:.1f} s")  # fmt: skip

    diffs, merges, ratios, copied = [], [], [], []
    warm_up, *pairs = pairs  # what a process does once (imports, caches) is no part of a merge's cost
    merge_diff_report(catalog=catalog, source=warm_up[0], target=warm_up[1], user=None)
    branch_merge(catalog=catalog, source=warm_up[0], target=warm_up[1])
    for source, target in pairs:  # each pair diffed, then merged right after: both timed under the same load
        begin = time.perf_counter()
        report = merge_diff_report(catalog=catalog, source=source, target=target, user=None)
        diffs.append(time.perf_counter() - begin)
        files_before, bytes_before = DataFile.objects.filter(catalog=catalog).count(), warehouse_bytes(catalog)
        begin = time.perf_counter()
        merge = branch_merge(catalog=catalog, source=source, target=target)
        merges.append(time.perf_counter() - begin)
        ratios.append(merges[-1] / diffs[-1])
        assert merge.status == "merged", merge.status
        files_after, bytes_after = DataFile.objects.filter(catalog=catalog).count(), warehouse_bytes(catalog)
        copied.append((files_after - files_before, bytes_after - bytes_before))
    pairs_decided = sum(len(obj["pairs"]) for obj in report["objects"])
    diff, ratio = statistics.median(diffs), statistics.median(ratios)
    print(f"diff + conflict preview: {len(report['objects'])} objects, {pairs_decided} rule cells decided, "
          f"mergeable={report['mergeable']}; median {diff:.3f} s over {args.repeat} pairs (target < 2 s: "
          f"{'met' if diff < 2 else 'NOT met'})")  # fmt: skip
    taken = merge.log["files"]
    print(f"merge: median {statistics.median(merges):.3f} s; {len(taken)} segments taken over by reference "
          f"({sum(f['bytes'] for f in taken):,} bytes referenced)")  # fmt: skip
    print(f"merge / diff of the same pair: median {ratio:.2f} (target within 2: {'met' if ratio <= 2 else 'NOT met'});"
          f" each: {', '.join(f'{r:.2f}' for r in ratios)}")  # fmt: skip
    files, written = max(copied, key=lambda c: c[1])
    print(
        f"data copied by a merge: at most {written} bytes, {files} new data files "
        f"(target 0: {'met' if written == 0 and files == 0 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
