"""The client follows the jobs the server answers with at once (no web thread waits for them): a diff whose
primary-key tables are compared by key on a worker, the conflicting keys of one, and SQL statements that run as
jobs (MERGE BRANCH, and its refusal). Against a live server and the real workers."""

import json

import pytest
from lakeui_client import JobConflict, LakeUIError

from catalog_app.services.refs import branch_create
from lakeui.jobs.models import Job
from merge_app.services.keys import KEYS_JOB
from tests.clients.test_client_cli import run
from tests.merge_app.test_no_wait import key_conflict
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.merges import change, insert

pytestmark = pytest.mark.usefixtures("celery_worker")


def test_the_client_reads_the_diff_once_its_keys_are_compared(live_server, client, token, user):
    key_conflict(user)
    unwaited = client.diff("lake", "dev", "main", wait=False)  # answered at once: the comparison is running
    assert (unwaited["complete"], unwaited["job"]["kind"]) == (False, KEYS_JOB)
    report = client.diff("lake", "dev", "main")
    [orders] = report["objects"]
    assert (report["complete"], report["job"], orders["verdict"], orders["keys"]["conflicts"]) == (
        True, None, "conflict", 1,
    )  # fmt: skip
    [key] = client.diff_keys("lake", "dev", "main", "sales.orders")
    assert (key["key"], key["source"]["amount"], key["target"]["amount"]) == ({"id": 1}, -1, -2)
    assert Job.objects.filter(kind=KEYS_JOB).count() == 1  # however many reads followed it
    shown = run(live_server, token, "--json", "diff", "lake", "dev", "--into", "main")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["objects"][0]["verdict"] == "conflict"


def test_sql_merge_branch_is_followed_to_its_result(live_server, client, token, user):
    catalog = make_catalog(user=user)
    make_table(catalog)
    insert(catalog, [{"id": 1, "amount": 1, "region": "eu"}])
    branch_create(catalog=catalog, name="dev", source="main")
    insert(catalog, [{"id": 2, "amount": 2, "region": "eu"}], branch="dev")
    submitted = client.sql("lake", "MERGE BRANCH dev TO main DRY RUN", wait=False)
    assert (submitted["kind"], submitted["sql"]["kind"]) == ("branch_merge", "merge_branch")
    merged = client.sql("lake", "MERGE BRANCH dev TO main")
    assert (merged["kind"], merged["source"], merged["status"], merged["commit"]) == (
        "merge_branch", "dev", "merged", head(catalog),
    )  # fmt: skip
    shown = run(live_server, token, "--json", "sql", "lake", "MERGE BRANCH dev TO main")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "up_to_date"
    change(catalog, "table_delete", {"where": "id = 1"}, branch="dev")  # a delete against an insert: a conflict
    insert(catalog, [{"id": 9, "amount": 9, "region": "eu"}])
    with pytest.raises(JobConflict) as refused:  # the job's refusal, as a refused request would raise
        client.sql("lake", "MERGE BRANCH dev TO main")
    assert refused.value.code == "merge_conflict" and refused.value.details["merge"]


SPARK_SELECT = "SELECT id, amount + 1 AS next FROM sales.orders ORDER BY id"  # an expression: Spark answers it
JOINED = "SELECT o.id FROM sales.orders o JOIN sales.orders p ON o.id = p.id WHERE o.amount < 0"  # Spark parses it


def two_rows(user):
    catalog = make_catalog(user=user)
    make_table(catalog)
    insert(catalog, [{"id": 1, "amount": 10, "region": "eu"}, {"id": 2, "amount": 20, "region": "us"}])
    return catalog


def test_a_select_spark_answers_is_followed_to_its_rows(live_server, client, token, user):
    catalog = two_rows(user)
    submitted = client.sql("lake", SPARK_SELECT, wait=False)  # answered at once with its job
    assert (submitted["kind"], submitted["sql"]) == ("sql_select", {"kind": "select", "ref": "main",
                                                                   "commit": head(catalog)})  # fmt: skip
    answered = client.sql("lake", SPARK_SELECT)
    assert (answered["kind"], answered["rows"]) == ("select", [[1, 11], [2, 21]])
    shown = run(live_server, token, "--json", "sql", "lake", SPARK_SELECT)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["rows"] == [[1, 11], [2, 21]]
    with pytest.raises(LakeUIError) as refused:  # the job's refusal, as a refused request would raise
        client.sql("lake", "SELECT assert_true(false)")
    assert refused.value.code == "sql_error"


def test_rows_a_worker_reads_are_followed_to_the_page(live_server, client, token, user, settings, tmp_path):
    catalog = two_rows(user)
    branch_create(catalog=catalog, name="dev", source="main")
    change(catalog, "table_update", {"set": {"amount": "-1"}, "where": "id = 1"}, branch="dev")
    settings.LAKEUI_WAREHOUSE = str(tmp_path / "elsewhere")  # the server cannot read the files: a worker does
    pending = client.rows("lake", "dev", "sales.orders", wait=False)
    assert (pending["complete"], pending["job"]["kind"]) == (False, "table_rows")
    page = client.rows("lake", "dev", "sales.orders")
    assert (page["count"], sorted(page["rows"])) == (2, [[1, -1, "eu"], [2, 20, "us"]]), page
    changed = client.data_diff("lake", "main", "dev", "sales.orders")
    assert (changed["counts"], changed["read_by"]) == ({"insert": 1, "update": 0, "delete": 1}, "worker")
    shown = run(live_server, token, "--json", "diff", "lake", "main", "dev", "--table", "sales.orders")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["counts"] == changed["counts"]


def test_a_check_spark_parses_is_followed_to_the_saved_check(live_server, client, token, user):
    two_rows(user)
    made = client.check_create("lake", "joined", "main", JOINED)
    assert (made["name"], made["tables"], made["version"]) == ("joined", ["sales.orders"], 1)
    unwaited = client.check_update("lake", made["id"], sql=JOINED + " AND p.amount < 0", wait=False)
    assert (unwaited["kind"], unwaited["status"] in {"queued", "running", "succeeded"}) == ("check_statement", True)
    shown = run(live_server, token, "--json", "check", "create", "lake", "bad", "--branches", "main",
                "--sql", JOINED.replace("JOIN sales.orders", "JOIN sales.missing"))  # fmt: skip
    assert shown.returncode != 0 and "table_not_found" in shown.stderr + shown.stdout
