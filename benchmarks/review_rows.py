"""Review shows the data (docs/README.md#review-shows-the-data): what a reviewer waits for.

    python benchmarks/review_rows.py [--rows 1000000] [--tables 50] [--repeat 5]

1. The first page of changed rows of a primary-key table in which every one of `--rows` rows changed (main holds
   the rows, branch `dev` updated all of them): the first view of the pair of commits (read from the files and
   compared in this process with pyarrow; the whole diff is kept after the page is answered), a repeat (a slice of
   the kept diff), and a far page; then the same for a table without a key. Through `table_diff_read`, the service
   the API and the pages call. The first view is measured `--repeat` times (the kept diff removed before each, and
   its keeping waited for after each): the very first one in the process, and the median.
2. The page load of a merge request with `--tables` changed tables (each changed on both sides: a row loaded on
   either branch), through Django's test client: the HTML the reviewer gets first (each table's rows are fetched
   when its section is opened, so they are not part of it), first view and repeat.

Data jobs run in this process as real jobs (`job_execute`, Spark local), as `make run`'s demo does: no worker
needed. Uses DATABASE_URL when set, else an embedded PostgreSQL server in a throwaway folder. Prints one line per
figure.
"""

import argparse
import io
import shutil
import statistics
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
from setup import django_setup, run_job, timed

django_setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: E402
from django.test import Client  # noqa: E402

from catalog_app.job_specs import FileUpload, LoadSpec  # noqa: E402
from catalog_app.selectors.refs import ref_resolve  # noqa: E402
from catalog_app.services.commits import WriteTarget  # noqa: E402
from catalog_app.services.data_submit import table_data_submit, table_load_submit  # noqa: E402
from catalog_app.services.databases import database_create  # noqa: E402
from catalog_app.services.refs import branch_create, catalog_create  # noqa: E402
from catalog_app.services.table_diff import table_diff_read  # noqa: E402
from catalog_app.services.tables import table_create  # noqa: E402
from merge_app.models import MergeRequest  # noqa: E402
from merge_app.services.merge_requests import merge_request_open  # noqa: E402

COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "amount", "type": "long"},
    {"name": "region", "type": "string"},
]


def changed_table(catalog, user, table: str, rows: int, key: bool) -> None:
    """`table` with `rows` rows on main (one Parquet upload), every row's amount changed on dev."""
    main = WriteTarget(catalog=catalog, branch="main", author=user)
    table_create(target=main, database="shop", name=table, columns=COLUMNS, primary_key=["id"] if key else None)
    ids = pa.array(range(rows), pa.int64())
    frame = pa.table({"id": ids, "amount": ids, "region": pa.array(["eu"] * rows)})
    sink = io.BytesIO()
    pq.write_table(frame, sink)
    upload = FileUpload(file=SimpleUploadedFile("rows.parquet", sink.getvalue()), format="parquet")
    spec = LoadSpec(strategy="append_only", source=upload)
    run_job(table_load_submit(target=main, database="shop", table=table, spec=spec))
    branch = f"dev_{table}"
    branch_create(catalog=catalog, name=branch, source="main", created_by=user)
    dev = WriteTarget(catalog=catalog, branch=branch, author=user)
    update = {"set": {"amount": "amount + 1"}, "where": "id >= 0"}
    run_job(table_data_submit(target=dev, database="shop", table=table, kind="table_update", params=update))


def rows_figures(catalog, user, table: str, rows: int, repeat: int) -> None:
    source, target = ref_resolve(catalog=catalog, ref="main"), ref_resolve(catalog=catalog, ref=f"dev_{table}")

    def page(n: int):
        return table_diff_read(source=source, target=target, database="shop", table=table, user=user, page=n)

    firsts = []
    for _ in range(repeat):  # the first view of the pair, again: its kept diff removed
        shutil.rmtree(settings.VAR_DIR / "row-diffs", ignore_errors=True)
        first, result = timed(lambda: page(1))
        assert result["kept"] is False and result["read_by"] == "web", result
        assert sum(result["counts"].values()) >= rows, result["counts"]
        firsts.append(first)
        kept, settled = timed(lambda: page(1))  # waits for the whole diff being kept, if that is still under way
        assert settled["kept"] is True and settled["rows"] == result["rows"] and settled["counts"] == result["counts"]
    again = [timed(lambda: page(1))[0] for _ in range(repeat)]
    far = [timed(lambda: page(result["pages"]))[0] for _ in range(repeat)]
    print(
        f"{table}: {result['counts']} changed rows, {result['segments_read']} segments; first page: first view "
        f"{firsts[0]:.0f} ms (median of {repeat} first views {statistics.median(firsts):.0f} ms, "
        f"{min(firsts):.0f}-{max(firsts):.0f}), kept after {kept:.0f} ms more; repeat "
        f"{statistics.median(again):.1f} ms (median of {repeat}), last page {statistics.median(far):.1f} ms"
    )


def merge_request_figures(catalog, user, tables: int, repeat: int) -> None:
    main = WriteTarget(catalog=catalog, branch="main", author=user)
    database_create(target=main, name="many")
    for i in range(tables):
        table_create(target=main, database="many", name=f"t{i:03}", columns=COLUMNS, primary_key=["id"])
    branch_create(catalog=catalog, name="wide", source="main", created_by=user)
    for branch, base in (("wide", 1), ("main", 2)):
        target = WriteTarget(catalog=catalog, branch=branch, author=user)
        for i in range(tables):
            params = {"strategy": "append_only", "rows": [{"id": base, "amount": i, "region": branch}]}
            run_job(table_data_submit(target=target, database="many", table=f"t{i:03}", kind="table_load",
                                      params=params))  # fmt: skip
    opened = merge_request_open(catalog=catalog, source="wide", target="main", title="Wide", author=user)
    opened.refresh_from_db()
    run_job(opened.plan_job)
    client = Client(HTTP_HOST="127.0.0.1")  # a host the settings allow
    client.force_login(user)
    url = f"/catalogs/{catalog.name}/merge-requests/{opened.number}"
    first, response = timed(lambda: client.get(url))
    assert response.status_code == 200 and response.content.count(b'class="changed-rows"') >= tables
    again = [timed(lambda: client.get(url))[0] for _ in range(repeat)]
    size = len(response.content) / 1024
    print(
        f"merge request with {tables} changed tables: page load first {first:.0f} ms, repeat "
        f"{statistics.median(again):.0f} ms (median of {repeat}), {size:.0f} KiB of HTML"
    )
    assert MergeRequest.objects.get(id=opened.id).plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    user, _ = get_user_model().objects.get_or_create(username="bench_review")
    catalog = catalog_create(name=f"review_{uuid.uuid4().hex[:6]}", description="benchmark", created_by=user)
    database_create(target=WriteTarget(catalog=catalog, branch="main", author=user), name="shop")
    shutil.rmtree(settings.VAR_DIR / "row-diffs", ignore_errors=True)
    for table, key in (("keyed", True), ("keyless", False)):
        setup, _ = timed(lambda table=table, key=key: changed_table(catalog, user, table, args.rows, key))
        print(f"{table}: {args.rows} rows loaded and all updated on a branch in {setup / 1000:.0f} s (setup)")
        rows_figures(catalog, user, table, args.rows, args.repeat)
    merge_request_figures(catalog, user, args.tables, args.repeat)


if __name__ == "__main__":
    main()
