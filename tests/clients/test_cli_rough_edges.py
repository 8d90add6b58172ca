"""The `lakeui` command's rough edges a new user hit (issue 41): refusals with their per-field details, uploads
refused saying what is wrong with the file, job results as JSON values with nulls as the UI shows them, no blank
line before an error, and a merge's rows described as what the merge brings to its target."""

import json
import re

import pytest

from tests.clients.test_client_cli import COLUMNS, run

pytestmark = pytest.mark.django_db(transaction=True)


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
    assert '"dry_run": true' in waited.stdout, waited.stdout

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
    assert "90" not in shown.stdout
    as_json = json.loads(run(live_server, token, "--json", "diff", "sales", "dev", "--into", "main", "--rows").stdout)
    assert [(t["table"], t["counts"]) for t in as_json] == [(orders, {"insert": 2, "update": 0, "delete": 0})]
