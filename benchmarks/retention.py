"""Retention preview and expiry of a catalog with 100 branches, 100,000 commits and 1,000,000 files (docs/retention.md).

    DATABASE_URL=postgres://... python benchmarks/retention.py [--branches 100] [--commits 100000]
        [--files-per-commit 10]

Needs PostgreSQL (the catalog is written with COPY). The catalog is bulk-inserted with the row shapes the services
write: `main` and 99 `scratch/<n>` branches, each forked from main's history on a line of its own, one table
rewritten copy-on-write by every commit (each commit removes the table's 10 live files and adds 10 new ones, so
every commit's files are its own). Commit times rise with the sequence over the last 365 days. The rule keeps 3
days of `scratch/*` and everything on `main`. It prints the preview's and the expiry's times and what they
predict, then checks the prediction against what garbage collection would reclaim: the bytes of the files whose
paths GC no longer counts as referenced (`data_file_paths`). No data file is written: GC's removal of the files
themselves is measured in tests/merge_app/test_retention.py.
"""

import argparse
import io
import time
import uuid
from datetime import timedelta

from setup import django_setup

django_setup()

from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from catalog_app.models import Branch, Catalog, Commit, DataFile, FileEntry, Line  # noqa: E402
from catalog_app.selectors.retention import Rule, retention_expiry  # noqa: E402
from catalog_app.selectors.table_files import data_file_paths  # noqa: E402
from catalog_app.services.refs import catalog_create, catalog_delete  # noqa: E402
from catalog_app.services.retention import retention_expire, rules_set  # noqa: E402

RULES = [{"pattern": "scratch/*", "keep_days": 3}, {"pattern": "main"}]


class _Copy:
    """Rows for one table, sent with COPY a few megabytes at a time (a million rows never sit in memory)."""

    def __init__(self, table: str, columns: str) -> None:
        self.table, self.columns, self.rows = table, columns, io.StringIO()

    def write(self, line: str) -> None:
        self.rows.write(line)
        if self.rows.tell() > 16 << 20:
            self.flush()

    def flush(self) -> None:
        with (
            connection.cursor() as cursor,
            cursor.cursor.copy(f"COPY {self.table} ({self.columns}) FROM STDIN") as copy,
        ):
            copy.write(self.rows.getvalue())
        self.rows = io.StringIO()


@transaction.atomic
def build(branches: int, commits: int, per_commit: int) -> Catalog:
    catalog = catalog_create(name=f"bench_retention_{uuid.uuid4().hex[:6]}")
    main = Branch.objects.get(catalog=catalog, name="main")
    root = main.head
    main_line = Line.objects.get(id=root.line_id)
    table_id = uuid.uuid4()
    main_commits = commits // 2
    per_branch = (commits - main_commits) // (branches - 1)
    start, step = timezone.now() - timedelta(days=365), timedelta(days=365) / (commits + 1)
    commit_rows = _Copy(Commit._meta.db_table, "id, catalog_id, seq, line_id, parent_id, created_at, message")
    file_rows = _Copy(DataFile._meta.db_table, "id, catalog_id, table_id, kind, path, row_count, size_bytes,"
                      " partition_values, stats, schema_visible, created_at")  # fmt: skip
    entry_rows = _Copy(FileEntry._meta.db_table, "catalog_id, table_id, file_id, commit_id, line_id, seq, removed")
    seq = root.seq

    def commit(line_id: int, parent: str, live_files: list[str]) -> tuple[str, list[str]]:
        nonlocal seq
        seq += 1
        commit_id = uuid.uuid4().hex
        when = (start + step * seq).isoformat()
        commit_rows.write(f"{commit_id}\t{catalog.id}\t{seq}\t{line_id}\t{parent}\t{when}\trewrite\n")
        for file_id in live_files:
            entry_rows.write(f"{catalog.id}\t{table_id}\t{file_id}\t{commit_id}\t{line_id}\t{seq}\tt\n")
        added = []
        for index in range(per_commit):
            file_id = str(uuid.uuid4())
            size = 1000 + (seq * 7 + index * 13) % 50_000
            path = f"{catalog.id}/{table_id}/data/{file_id}.parquet"
            file_rows.write(
                f"{file_id}\t{catalog.id}\t{table_id}\tsegment\t{path}\t100\t{size}\t{{}}\t{{}}\tt\t{when}\n"
            )
            entry_rows.write(f"{catalog.id}\t{table_id}\t{file_id}\t{commit_id}\t{line_id}\t{seq}\tf\n")
            added.append(file_id)
        return commit_id, added

    head, files = root.id, []
    main_history = []
    for _ in range(main_commits):
        head, files = commit(main_line.id, head, files)
        main_history.append((seq, head, files))
    main_head = head
    forks = []
    for number in range(branches - 1):  # forked along main's history, each on its own line
        fork_seq, fork_id, fork_files = main_history[(number * len(main_history)) // (branches - 1)]
        line = Line.objects.create(catalog=catalog, parent=main_line, fork_seq=fork_seq, tip_seq=fork_seq)
        forks.append((number, line, fork_id, fork_files))
    heads = {}
    for number, line, fork_id, fork_files in forks:
        head, files = fork_id, fork_files
        for _ in range(per_branch):
            head, files = commit(line.id, head, files)
        heads[number] = (line, head)
    for rows in (commit_rows, file_rows, entry_rows):
        rows.flush()
    Line.objects.filter(id=main_line.id).update(tip_seq=main_history[-1][0])
    Branch.objects.filter(id=main.id).update(head_id=main_head)
    for number, (line, head) in heads.items():
        branch = Branch.objects.create(catalog=catalog, name=f"scratch/{number}", head_id=head)
        Line.objects.filter(id=line.id).update(branch=branch, tip_seq=Commit.objects.get(id=head).seq)
    Catalog.objects.filter(id=catalog.id).update(last_seq=seq)
    return Catalog.objects.get(id=catalog.id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--branches", type=int, default=100)
    parser.add_argument("--commits", type=int, default=100_000)
    parser.add_argument("--files-per-commit", type=int, default=10)
    args = parser.parse_args()
    started = time.perf_counter()
    catalog = build(args.branches, args.commits, args.files_per_commit)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    files = DataFile.objects.filter(catalog=catalog).count()
    commits = Commit.objects.filter(catalog=catalog).count()
    print(f"set-up: {time.perf_counter() - started:.1f} s ({args.branches} branches, {commits} commits, {files} files)")
    try:
        rules_set(catalog=catalog, rules=RULES)
        before = data_file_paths(catalog.id)
        started = time.perf_counter()
        plan = retention_expiry(catalog=catalog, rules=[Rule(**r) for r in RULES])
        preview_s = time.perf_counter() - started
        predicted = sum(plan.reclaimed.values())
        print(f"preview: {preview_s:.1f} s; {len(plan.expiring)} commits expiring, {len(plan.reclaimed)} files, "
              f"{predicted:,} bytes reclaimed")  # fmt: skip
        started = time.perf_counter()
        done = retention_expire(catalog=catalog, now=plan.now)  # as of the preview: the same cutoff
        expire_s = time.perf_counter() - started
        print(f"expiry:  {expire_s:.1f} s; {len(done.expiring)} commits expired, {len(done.reclaimed)} files reclaimed")
        started = time.perf_counter()
        after = data_file_paths(catalog.id)
        gc_s = time.perf_counter() - started
        sizes = dict(DataFile.objects.filter(catalog=catalog).values_list("path", "size_bytes"))
        reclaimed = sum(sizes[p] for p in before - after)
        print(f"GC's referenced set: {gc_s:.1f} s; {len(before - after)} files, {reclaimed:,} bytes no longer "
              f"referenced; prediction {'MATCHES' if reclaimed == predicted else 'DIFFERS'}")  # fmt: skip
        worst = max(preview_s, expire_s)
        print(f"slowest step {worst:.1f} s (target < 60 s): {'PASS' if worst < 60 else 'FAIL'}")
    finally:
        catalog_delete(catalog=catalog)


if __name__ == "__main__":
    main()
