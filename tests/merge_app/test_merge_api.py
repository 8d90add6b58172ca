"""The diff and merge API, the SQL branch commands, and the merge job's guarantees, with the real worker."""

import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from catalog_app.models import Commit
from catalog_app.services.refs import branch_create, tag_create
from lakeui.jobs.models import Job
from lakeui.jobs.registry import job_kind_get
from lakeui.jobs.services import JobOutcome, job_create, job_execute
from merge_app.models import Merge
from merge_app.services.merges import MERGE_JOB, merge_submit
from tests.conftest import wait_for_job
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import read
from tests.support.merges import change, insert
from tests.support.sql import sql_followed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def rows(*ids):
    return [{"id": i, "amount": i, "region": "eu"} for i in ids]


def branches_with_a_change(user=None):
    catalog = make_catalog(user=user)
    make_table(catalog)
    insert(catalog, rows(1, 2))
    branch_create(catalog=catalog, name="dev", source="main")
    insert(catalog, rows(3), branch="dev")
    return catalog


def api_merge(client, catalog, **payload):
    response = client.post(f"/api/v1/catalogs/{catalog.name}/merges", {"source": "dev", "target": "main", **payload},
                           format="json")  # fmt: skip
    assert response.status_code == 202, response.json()
    return wait_for_job(response.json()["id"], timeout=120)


def test_diff_reports_each_side_and_the_verdicts(user_client):
    catalog = branches_with_a_change()
    change(catalog, "table_delete", {"where": "id = 1"}, branch="dev")
    insert(catalog, rows(9))
    response = user_client.get(f"/api/v1/catalogs/{catalog.name}/diff", {"from": "dev", "to": "main"})
    assert response.status_code == 200
    report = response.json()
    assert (report["mergeable"], report["counts"]["conflicts"]) == (False, 1)
    [table] = report["objects"]
    assert (table["name"], table["change"], table["rule_table"], table["verdict"]) == (
        "sales.orders", "changed_in_both", "table", "conflict",
    )  # fmt: skip
    assert [op["op"] for op in table["source_operations"]] == ["insert", "delete"]
    assert table["source_operations"][1]["details"]["segments_touched"]
    cells = {(p["row"], p["column"]): (p["cell"], p["verdict"]) for p in table["pairs"]}
    assert cells == {("insert", "insert"): ("ok", "ok"), ("delete", "insert"): ("conflict", "conflict")}
    assert user_client.get(f"/api/v1/catalogs/{catalog.name}/diff", {"from": "dev"}).status_code == 400
    missing = user_client.get(f"/api/v1/catalogs/{catalog.name}/diff", {"from": "nope", "to": "main"})
    assert (missing.status_code, missing.json()["code"]) == (404, "ref_not_found")


def test_merge_api_dry_run_then_merge_then_audit_log(spark, user, user_client):
    catalog = branches_with_a_change(user)
    before = head(catalog)
    planned = api_merge(user_client, catalog, dry_run=True)
    assert (planned.status, planned.result["status"], planned.result["commit"]) == ("succeeded", "planned", None)
    assert head(catalog) == before

    job = api_merge(user_client, catalog)
    assert job.status == "succeeded", job.error_message
    assert job.result["commit"] == head(catalog)
    assert sorted(r["id"] for r in read(spark, catalog).collect()) == [1, 2, 3]
    audit = user_client.get(f"/api/v1/catalogs/{catalog.name}/merges/{job.result['merge']}").json()
    assert (audit["requested_by"], audit["target_head"], audit["commit"]) == ("alice", before, head(catalog))
    assert audit["source_head"] == head(catalog, "dev")
    [obj] = audit["log"]["objects"]
    # main changed nothing since dev forked: it takes dev's version of the table, its insert recorded
    assert (obj["name"], obj["how"], obj["operations"]) == ("sales.orders", "rows_taken", ["insert"])
    [taken] = audit["log"]["files"]
    assert taken["rows"] == 1 and taken["path"].startswith(f"{catalog.id}/")
    listed = user_client.get(f"/api/v1/catalogs/{catalog.name}/merges").json()
    assert [m["status"] for m in listed["results"]] == ["merged", "planned"]


def test_a_conflicting_merge_job_fails_409_and_is_logged(user_client):
    catalog = branches_with_a_change()
    change(catalog, "table_delete", {"where": "id = 1"}, branch="dev")
    insert(catalog, rows(9))
    before = head(catalog)
    job = api_merge(user_client, catalog)
    assert (job.status, job.error_code, job.error_status) == ("failed", "merge_conflict", 409)
    assert head(catalog) == before
    assert Merge.objects.get(id=job.result["merge"]).status == Merge.Status.CONFLICT


def test_merge_refuses_a_tag_target_and_unknown_refs(user_client):
    catalog = branches_with_a_change()
    tag_create(catalog=catalog, name="v1", ref="main")
    url = f"/api/v1/catalogs/{catalog.name}/merges"
    tagged = user_client.post(url, {"source": "dev", "target": "v1"}, format="json")
    assert (tagged.status_code, tagged.json()["code"]) == (400, "read_only_ref")
    unknown = user_client.post(url, {"source": "ghost", "target": "main"}, format="json")
    assert (unknown.status_code, unknown.json()["code"]) == (404, "ref_not_found")
    assert not Job.objects.filter(kind=MERGE_JOB).exists()


@pytest.mark.parametrize(
    "resolution",
    [{"tables": "x"}, {"keys": ["x"]}, {"keys": {"sales.orders": "source_wins"}}, {"default": ["fail"]},
     {"tables": {"sales.orders": {"a": 1}}}],
)  # fmt: skip
def test_a_malformed_resolution_is_a_400_and_queues_nothing(user_client, resolution):
    catalog = branches_with_a_change()
    url = f"/api/v1/catalogs/{catalog.name}/merges"
    response = user_client.post(url, {"source": "dev", "target": "main", "resolution": resolution}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_resolution")
    assert not Job.objects.filter(kind=MERGE_JOB).exists()


def test_sql_create_use_and_merge_branch(spark, user_client):
    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1))
    url = f"/api/v1/catalogs/{catalog.name}/sql"

    created = user_client.post(url, {"statement": "CREATE BRANCH feature/x FROM main"}, format="json")
    assert created.status_code == 200, created.json()
    assert (created.json()["kind"], created.json()["commit"]) == ("create_branch", head(catalog))
    insert(catalog, rows(2), branch="feature/x")
    used = user_client.post(url, {"statement": "use branch main;"}, format="json")
    assert used.json() == {"kind": "use_branch", "branch": "main", "commit": head(catalog)}
    status, merged = sql_followed(user_client, catalog, "MERGE BRANCH `feature/x`")  # 202, then its job
    assert status == 200, merged
    assert (merged["target"], merged["status"], merged["commit"]) == ("main", "merged", head(catalog))
    assert sorted(r["id"] for r in read(spark, catalog).collect()) == [1, 2]


@pytest.mark.parametrize(
    ("statement", "position"),
    [("MERGE BRANCH", 12), ("MERGE BRANCH dev INTO main", 17), ("CREATE BRANCH x AT 2024", 19), ("DROP TABLE t", 0)],
)
def test_sql_statements_that_do_not_parse_give_the_position(user_client, statement, position):
    catalog = make_catalog()
    response = user_client.post(f"/api/v1/catalogs/{catalog.name}/sql", {"statement": statement}, format="json")
    assert response.status_code == 400
    assert response.json()["details"]["position"] == position


def test_a_merge_delivered_again_after_its_commit_returns_that_commit(user):
    catalog = branches_with_a_change()
    job = wait_for_job(merge_submit(catalog=catalog, source="dev", target="main", user=user).id)
    assert job.status == "succeeded"
    commits = Commit.objects.count()

    # As if the worker died after committing, before recording the outcome: the job is taken over and run again.
    stale = timezone.now() - timedelta(seconds=settings.LAKEUI_JOB_STALE_AFTER + 5)
    Job.objects.filter(id=job.id).update(status=Job.Status.RUNNING, heartbeat_at=stale)
    assert job_execute(job_id=str(job.id), worker="second") is JobOutcome.RAN
    again = Job.objects.get(id=job.id)
    assert (again.status, again.result["commit"]) == ("succeeded", job.result["commit"])
    assert Commit.objects.count() == commits
    assert Merge.objects.filter(job=job).count() == 1

    class Progress:
        job_id = str(job.id)

        def report(self, percent, message=""):
            pass

    assert job_kind_get(MERGE_JOB).handler(job.params, Progress())["commit"] == job.result["commit"]
    assert Commit.objects.count() == commits


def test_concurrent_merges_into_one_branch_both_land(spark, user):
    catalog = make_catalog()
    make_table(catalog)
    make_table(catalog, table="refunds")
    for name, table in (("a", "orders"), ("b", "refunds")):
        branch_create(catalog=catalog, name=name, source="main")
        insert(catalog, rows(1), branch=name, table=table)
    jobs = []

    def submit(source):
        jobs.append(merge_submit(catalog=catalog, source=source, target="main", user=user))
        connection.close()

    threads = [threading.Thread(target=submit, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    finished = [wait_for_job(job.id) for job in jobs]
    assert [job.status for job in finished] == ["succeeded", "succeeded"]
    merges = Commit.objects.filter(catalog=catalog, merge_parent__isnull=False)
    assert sorted(c.merge_parent_id for c in merges) == sorted([head(catalog, "a"), head(catalog, "b")])
    assert read(spark, catalog, table="orders").count() == 1
    assert read(spark, catalog, table="refunds").count() == 1


@pytest.mark.skipif(
    settings.CELERY_BROKER_URL.startswith("filesystem"),
    reason="kombu's filesystem broker does not redeliver the task of a dead worker (no late ack)",
)
def test_a_worker_killed_mid_merge_leaves_the_target_unchanged_and_the_retry_merges_once(spark, user):
    catalog = branches_with_a_change()
    before = head(catalog)
    params = {"catalog_id": str(catalog.id), "source": "dev", "target": "main"}
    job = wait_for_job(job_create(kind="test.merge_then_die", params=params, requested_by=user).id, timeout=180)
    assert (job.status, job.attempts) == ("succeeded", 2), job.error_message
    merge_commit = Commit.objects.get(id=head(catalog))
    assert (merge_commit.parent_id, merge_commit.merge_parent_id) == (before, head(catalog, "dev"))
    assert Commit.objects.filter(catalog=catalog, merge_parent__isnull=False).count() == 1
    assert Merge.objects.filter(job=job).count() == 1
