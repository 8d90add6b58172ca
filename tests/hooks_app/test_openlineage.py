"""OpenLineage run events for real (docs/changes.md#openlineage): a webhook that names `openlineage.run` gets a
load's and a merge's START and COMPLETE, each body a RunEvent whose datasets are named by catalog, branch and table,
with LakeUI's facet (the commit, the merge request and its approvers), delivered as webhooks are; a webhook that
listens to every other kind ("*") gets none of them, and a merge request's plan (a dry run) tells no run."""

import json

import pytest
from django.contrib.auth import get_user_model

from catalog_app.services.access import catalog_role_grant
from catalog_app.services.refs import branch_create
from hooks_app.services import webhook_create
from lakeui.jobs.services import job_execute
from merge_app.services.merge_requests import merge_request_merge, merge_request_open, merge_request_review
from tests.conftest import wait_for_job
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.merges import insert
from tests.support.webhooks import Receiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

SECRET = "a-secret-for-the-tests"


def events(receiver, count) -> list[dict]:
    got = [json.loads(r.body) for r in receiver.wait_for(count, timeout=120)]
    assert len(got) == count, got
    assert all(r.headers["x-lakeui-event"] == "openlineage.run" for r in receiver.received)
    return got


def of_run(found, run_id) -> dict[str, dict]:
    """A run's events by type (deliveries are sent by concurrent tasks: they may arrive in any order)."""
    told = [e for e in found if e["run"]["runId"] == run_id]
    assert len(told) == len({e["eventType"] for e in told}), told
    return {e["eventType"]: e for e in told}


def test_a_load_and_a_merge_request_s_merge_tell_their_runs(user):
    catalog = make_catalog()
    make_table(catalog)
    with Receiver() as lineage, Receiver() as everything:
        webhook_create(catalog=catalog, url=lineage.url, events=["openlineage.run"], secret=SECRET)
        webhook_create(catalog=catalog, url=everything.url, events=["*"], secret=SECRET)
        load = insert(catalog, [{"id": 1, "amount": 10, "region": "eu"}])
        found = events(lineage, 2)
        told = of_run(found, str(load.id))
        assert set(told) == {"START", "COMPLETE"} and told["START"]["eventTime"] <= told["COMPLETE"]["eventTime"]
        complete = told["COMPLETE"]
        assert complete["job"] == {"namespace": "lakeui://lake", "name": "table_load"}
        assert complete["outputs"] == [{"namespace": "lakeui://lake", "name": "main/sales.orders"}]
        assert complete["run"]["facets"]["lakeui"]["commit"] == head(catalog)
        assert complete["schemaURL"].startswith("https://openlineage.io/spec/") and complete["producer"]

        branch_create(catalog=catalog, name="dev", source="main")
        insert(catalog, [{"id": 2, "amount": 20, "region": "us"}], branch="dev")
        reviewer = get_user_model().objects.create_user("rita")
        catalog_role_grant(catalog=catalog, username="rita", role="approver", granted_by=user)
        request = merge_request_open(catalog=catalog, source="dev", target="main", title="add 2", author=user)
        job_execute(job_id=str(request.plan_job_id), worker="test-process")  # a dry run: no run told
        wait_for_job(request.plan_job_id)  # a worker may have taken it first
        request.refresh_from_db()
        merge_request_review(merge_request=request, reviewer=reviewer, decision="approve")
        job = merge_request_merge(merge_request=request, user=user)
        job_execute(job_id=str(job.id), worker="test-process")
        assert wait_for_job(job.id).status == "succeeded"
        found = events(lineage, 6)  # the dev load's two, the merge's two
        told = of_run(found, str(job.id))
        assert set(told) == {"START", "COMPLETE"}
        merged = told["COMPLETE"]
        assert merged["job"]["name"] == "branch_merge"
        assert merged["inputs"] == [{"namespace": "lakeui://lake", "name": "dev/sales.orders"}]
        assert merged["outputs"] == [{"namespace": "lakeui://lake", "name": "main/sales.orders"}]
        facet = merged["run"]["facets"]["lakeui"]
        assert (facet["commit"], facet["merge_request"], facet["approvers"]) == (
            head(catalog),
            request.number,
            ["rita"],
        )
        assert not [r for r in everything.received if r.headers["x-lakeui-event"] == "openlineage.run"]
        assert {json.loads(r.body)["event"] for r in everything.wait_for(1)} >= {"branch.created"}
