"""Branch creation time at 10 tables and at 10,000 tables with 100,000 commits (docs/README.md#targets).

    python benchmarks/branch_create.py [--tables 10000] [--commits 100000] [--repeat 200]

Uses DATABASE_URL when set (e.g. the PostgreSQL of the machine), else an embedded PostgreSQL server in a throwaway
folder. The large catalog is bulk-inserted with the row shapes the services write (one root line for main, feature
branches forked from it, one object version per commit); the branches measured are created through the service, from
a branch head, from a commit and from a timestamp. Prints the medians and the ratio large / small (target < 2).
"""

import argparse
import statistics
import time
import uuid
from datetime import timedelta

from setup import django_setup

django_setup()

from django.db import transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from catalog_app.models import Branch, Catalog, Commit, Line, ObjectVersion, SchemaVersion  # noqa: E402
from catalog_app.services.commits import WriteTarget  # noqa: E402
from catalog_app.services.databases import database_create  # noqa: E402
from catalog_app.services.refs import branch_create, catalog_create, catalog_delete  # noqa: E402
from catalog_app.services.tables import table_create  # noqa: E402

COLUMNS = [{"name": "id", "type": "long", "nullable": False}, {"name": "v", "type": "string"}]
BATCH = 5000


def small_catalog(tables: int) -> Catalog:
    catalog = catalog_create(name=f"bench_small_{uuid.uuid4().hex[:6]}")
    target = WriteTarget(catalog=catalog, branch="main")
    database_create(target=target, name="db")
    for index in range(tables):
        table_create(target=target, database="db", name=f"t{index}", columns=COLUMNS)
    return catalog


@transaction.atomic
def large_catalog(tables: int, commits: int, forks: int = 50) -> Catalog:
    catalog = catalog_create(name=f"bench_large_{uuid.uuid4().hex[:6]}")
    main = Branch.objects.get(catalog=catalog, name="main")
    root = main.head
    line = Line.objects.get(id=root.line_id)
    database_id = uuid.uuid4()
    table_ids = [uuid.uuid4() for _ in range(tables)]
    start = timezone.now() - timedelta(days=365)
    seq = root.seq
    parent_id = root.id
    rows, versions = [], []
    for index in range(commits):
        seq += 1
        commit = Commit(
            id=uuid.uuid4().hex, catalog=catalog, seq=seq, line=line, parent_id=parent_id,
            created_at=start + timedelta(seconds=seq), message=f"change {index}",
        )  # fmt: skip
        rows.append(commit)
        if index == 0:
            kind, object_id, name, parent, state = (
                "database",
                database_id,
                "db",
                None,
                {"properties": {}, "comment": ""},
            )
        else:
            table = (index - 1) % tables
            kind, object_id, name, parent = "table", table_ids[table], f"t{table}", database_id
            state = {"columns": COLUMNS, "last_column_id": 2, "partition_by": [], "primary_key": [],
                     "properties": {"rev": str(index)}, "comment": ""}  # fmt: skip
        versions.append(
            ObjectVersion(
                catalog=catalog,
                object_id=object_id,
                kind=kind,
                parent_id=parent,
                name=name,
                commit=commit,
                line=line,
                seq=seq,
                state=state,
            )
        )
        parent_id = commit.id
        if len(rows) >= BATCH:
            Commit.objects.bulk_create(rows)
            ObjectVersion.objects.bulk_create(versions)
            rows, versions = [], []
    Commit.objects.bulk_create(rows)
    ObjectVersion.objects.bulk_create(versions)
    SchemaVersion.objects.bulk_create(
        SchemaVersion(catalog=catalog, table_id=t, columns=COLUMNS, commit_id=parent_id, line=line, seq=seq)
        for t in table_ids
    )
    Line.objects.filter(id=line.id).update(tip_seq=seq)
    Catalog.objects.filter(id=catalog.id).update(last_seq=seq)
    Branch.objects.filter(id=main.id).update(head_id=parent_id)
    # Feature branches forked along main's history, each with a line of its own.
    for fork in range(forks):
        at = Commit.objects.get(catalog=catalog, seq=root.seq + 1 + fork * (commits // forks))
        branch = Branch.objects.create(catalog=catalog, name=f"feature/{fork}", head=at)
        seq += 1
        fork_line = Line.objects.create(catalog=catalog, parent=line, fork_seq=at.seq, tip_seq=seq, branch=branch)
        tip = Commit.objects.create(
            catalog=catalog, seq=seq, line=fork_line, parent=at, created_at=at.created_at, message="feature"
        )
        Branch.objects.filter(id=branch.id).update(head=tip)
    Catalog.objects.filter(id=catalog.id).update(last_seq=seq)
    return Catalog.objects.get(id=catalog.id)


def median_ms(catalog: Catalog, repeat: int, **source) -> float:
    timings = []
    for index in range(repeat):
        started = time.perf_counter()
        branch_create(catalog=catalog, name=f"bench/{source.get('label', 'x')}/{index}", **{
            k: v for k, v in source.items() if k != "label"})  # fmt: skip
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1000


def measure(catalog: Catalog, repeat: int) -> dict[str, float]:
    middle = Commit.objects.filter(catalog=catalog).order_by("seq")[Commit.objects.filter(catalog=catalog).count() // 2]
    return {
        "from branch head": median_ms(catalog, repeat, source="main", label="head"),
        "from a commit": median_ms(catalog, repeat, source=middle.id, label="commit"),
        "from main at a timestamp": median_ms(catalog, repeat, source="main", at=middle.created_at, label="time"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--commits", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    from django.db import connection

    print(f"database: PostgreSQL {connection.pg_version}; repeat {args.repeat} branch creations per figure")
    started = time.perf_counter()
    small = small_catalog(10)
    large = large_catalog(args.tables, args.commits)
    print(f"set-up: {time.perf_counter() - started:.1f} s ({args.tables} tables, {args.commits} commits, 50 forks)")
    small_figures, large_figures = measure(small, args.repeat), measure(large, args.repeat)
    print(f"{'branch creation (median)':<28}{'10 tables':>12}{f'{args.tables} tables':>16}{'ratio':>8}")
    for label in small_figures:
        ratio = large_figures[label] / small_figures[label]
        print(f"{label:<28}{small_figures[label]:>10.2f}ms{large_figures[label]:>14.2f}ms{ratio:>8.2f}")
    worst = max(large_figures[label] / small_figures[label] for label in small_figures)
    print(f"worst ratio {worst:.2f} (target < 2): {'PASS' if worst < 2 else 'FAIL'}")
    catalog_delete(catalog=small)
    catalog_delete(catalog=large)


if __name__ == "__main__":
    main()
