"""The client follows the jobs the server answers with at once (no web thread waits for them): a diff whose
primary-key tables are compared by key on a worker, the conflicting keys of one, and SQL statements that run as
jobs (MERGE BRANCH, and its refusal). Against a live server and the real workers."""

import json

import pytest
from lakeui_client import JobConflict

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
