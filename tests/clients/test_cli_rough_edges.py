"""The `lakeui` command's rough edges a new user hit (issues 41 and 52): refusals with their per-field details,
uploads refused saying what is wrong with the file, job results as JSON values with nulls as the UI shows them, no
blank line before an error, a merge's rows described as what the merge brings to its target, jobs printed one field
a line, and a merged request shown without blockers."""

import json
import re
from pathlib import Path

import pytest

from merge_app.management.commands.lakeui_demo import ORDER_COLUMNS
from tests.clients.test_client_cli import COLUMNS, run

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def orders(client):
    client.catalog_create("sales")
    client.database_create("sales", "main", "shop")
    client.table_create("sales", "main", "shop.orders", COLUMNS)
    return "shop.orders"


@pytest.mark.parametrize(
    ("name", "contents", "expected"),
    [
        ("empty.csv", b"", "error: empty_file: The file is empty (0 bytes): there are no rows to load.\n"),
        ("orders.parquet", b"id,amount\n1,10\n", "error: unreadable_file: The file is not a Parquet file: it looks "
         "like CSV text; send it with format csv.\n"),
    ],
)  # fmt: skip
def test_cli_load_of_an_empty_or_mislabelled_file_is_refused_saying_what_is_wrong(
    live_server, token, orders, tmp_path, name, contents, expected
):
    path = tmp_path / name
    path.write_bytes(contents)
    refused = run(live_server, token, "load", "sales", "main", orders, str(path))
    assert refused.returncode == 1
    assert (refused.stdout, refused.stderr) == ("", expected)  # the error first: no blank line before it


def test_cli_shows_a_refusals_details_for_each_field(live_server, token, orders, tmp_path):
    path = tmp_path / "orders.csv"
    path.write_text("id,amount\n1,10\n")
    refused = run(live_server, token, "load", "sales", "main", orders, str(path), "--strategy", "upsert", "--key", "")
    assert refused.returncode == 1
    lines = refused.stderr.splitlines()
    assert lines[0] == "error: invalid_input: The request is not valid; see details for each field.", refused.stderr
    assert lines[1:] == ["  key_columns.0: This field may not be blank."], refused.stderr


def test_cli_job_results_are_json_values_and_nulls_as_the_ui_shows_them(
    live_server, client, token, orders, celery_worker
):
    client.branch_create("sales", "dev")
    client.load("sales", "dev", orders, strategy="append_only", rows=[{"id": 1, "amount": None}])
    dry = client.merge("sales", "dev", "main", dry_run=True)
    waited = run(live_server, token, "job", "wait", dry["id"])
    assert waited.returncode == 0, waited.stderr
    assert "False" not in waited.stdout and "None" not in waited.stdout and "'" not in waited.stdout, waited.stdout
    assert "  dry_run: true\n" in waited.stdout, waited.stdout

    rows = run(live_server, token, "diff", "sales", "dev", "--into", "main", "--table", orders)
    assert rows.returncode == 0, rows.stderr
    assert re.search(r"added\s+│ 1\s+│ null\s", rows.stdout), rows.stdout


def test_cli_diff_rows_into_describes_what_the_merge_brings_to_the_target(
    live_server, client, token, orders, celery_worker
):
    """dev adds two rows, main adds one of its own: merging dev into main adds dev's two rows to main (the
    review pages' "added"), and main's own row is no change the merge makes."""
    client.branch_create("sales", "dev")
    client.load("sales", "dev", orders, strategy="append_only", rows=[{"id": 1, "amount": 10}, {"id": 2, "amount": 20}])
    client.load("sales", "main", orders, strategy="append_only", rows=[{"id": 9, "amount": 90}])
    shown = run(live_server, token, "diff", "sales", "dev", "--into", "main", "--rows")
    assert shown.returncode == 0, shown.stderr
    assert "merging dev into main" in shown.stdout, shown.stdout
    assert "2 added, 0 deleted, 0 changed" in shown.stdout, shown.stdout
    assert re.search(r"added\s+│ 1\s+│ 10\s", shown.stdout) and re.search(r"added\s+│ 2\s+│ 20\s", shown.stdout)
    assert not re.search(r"│ 9\s+│ 90\s", shown.stdout), shown.stdout  # main's own row (a commit id may hold "90")
    as_json = json.loads(run(live_server, token, "--json", "diff", "sales", "dev", "--into", "main", "--rows").stdout)
    assert [(t["table"], t["counts"]) for t in as_json] == [(orders, {"insert": 2, "update": 0, "delete": 0})]


def test_cli_prints_a_job_readably_and_a_merged_request_without_blockers(
    live_server, client, token, orders, celery_worker, tmp_path
):
    """Issue 52: `load`, `merge` and `mr merge` print the job's id, kind and state on one line and its result one
    field a line (not the job's JSON in a table wider than a terminal; `--json` keeps the raw form), and `mr show`
    of a merged request says how it merged rather than listing what would block merging it."""
    client.branch_create("sales", "dev")
    path = tmp_path / "orders.csv"
    path.write_text("id,amount\n1,10\n2,20\n")
    loaded = run(live_server, token, "load", "sales", "dev", orders, str(path), "--strategy", "upsert", "--key", "id")
    assert loaded.returncode == 0, loaded.stderr
    lines = loaded.stdout.splitlines()
    assert re.fullmatch(r"job [0-9a-f-]{36} \(table_load\): succeeded", lines[0]), loaded.stdout
    assert "  rows_inserted: 2" in lines and "  strategy: upsert" in lines, loaded.stdout
    assert "{" not in loaded.stdout and "│" not in loaded.stdout and max(map(len, lines)) < 80, loaded.stdout

    merged = run(live_server, token, "merge", "sales", "dev", "--into", "main", "--dry-run")
    assert merged.returncode == 0, merged.stderr
    assert "(branch_merge): succeeded\n" in merged.stdout, merged.stdout
    assert "  counts: objects 1, conflicts 0, discarded 0\n" in merged.stdout, merged.stdout
    assert "  dry_run: true\n" in merged.stdout, merged.stdout

    number = str(client.merge_request_open("sales", "dev", "main", "load orders")["number"])
    raw = run(live_server, token, "--json", "mr", "merge", "sales", number)
    assert raw.returncode == 0, raw.stderr
    job = json.loads(raw.stdout)  # --json: the job as the API gives it
    assert job["status"] == "succeeded" and job["result"]["status"] == "merged", job
    again = run(live_server, token, "job", "wait", job["id"])
    assert again.stdout.startswith(f"job {job['id']} ({job['kind']}): succeeded\n"), again.stdout
    assert "  status: merged\n" in again.stdout, again.stdout

    shown = run(live_server, token, "mr", "show", "sales", number)
    assert shown.returncode == 0, shown.stderr
    assert f"!{number} load orders (dev into main): merged" in shown.stdout, shown.stdout
    assert "merged by alice at " in shown.stdout, shown.stdout
    assert "merge_request_not_open" not in shown.stdout and "not mergeable" not in shown.stdout, shown.stdout


def test_the_readmes_example_csv_upserts_by_key_as_the_tour_says(live_server, client, token, celery_worker):
    """The tour's `lakeui load ... docs/examples/orders.csv --strategy upsert --key id` on the demo's keyed
    orders: orders 3 and 4 move to `us` and order 101 is added (the CSV ships in the repository)."""
    readme = (ROOT / "README.md").read_text()
    assert "lakeui load demo fix-regions sales.orders docs/examples/orders.csv --strategy upsert --key id" in readme
    client.catalog_create("demo")
    client.database_create("demo", "main", "sales")
    client.table_create("demo", "main", "sales.orders", ORDER_COLUMNS, primary_key=["id"])
    client.load("demo", "main", "sales.orders", strategy="append_only",
                rows=[{"id": i, "amount": 10 * i, "region": "eu"} for i in range(1, 7)])  # fmt: skip
    loaded = run(live_server, token, "load", "demo", "main", "sales.orders", str(ROOT / "docs/examples/orders.csv"),
                 "--strategy", "upsert", "--key", "id")  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    lines = loaded.stdout.splitlines()
    assert "  rows_updated: 2" in lines and "  rows_inserted: 1" in lines and "  rows_deleted: 0" in lines, lines
    regions = client.sql("demo", "SELECT id, region FROM sales.orders WHERE region = 'us' ORDER BY id")["rows"]
    assert [list(r.values()) if isinstance(r, dict) else r for r in regions] == [[3, "us"], [4, "us"]]
