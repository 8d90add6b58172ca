"""No web thread waits for a job (issue 37): the diff (API, `diff/keys`, the page) and the SQL endpoint's MERGE
BRANCH answer at once with the job to follow, then show its result once a real worker has run it.

Each request is made while no worker serves the queue its job is sent to (the queue is renamed for the request),
so a request that waited for its job would hang until its timeout, and the job would not be run: the answer comes
back at once, with the job queued. The job is then sent to the session's real workers, and the next read shows the
whole result.
"""

import re
import time
import uuid

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from catalog_app.services.access import catalog_role_grant
from catalog_app.services.refs import branch_create, tag_create
from lakeui.celery import app as celery_app
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_send
from merge_app.job_specs import KeysSpec
from merge_app.services.keys import KEYS_JOB
from merge_app.services.sql import sql_job_result
from tests.conftest import wait_for_job
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.merges import change, insert, merge

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

AT_ONCE = 5  # seconds: far below LAKEUI_INTERACTIVE_TIME_LIMIT (and the SQL endpoint's former 60 s wait)


def key_conflict(user):
    """orders (key id): dev and main set id 1's amount to -1 and -2; dev also inserts id 3."""
    catalog = make_catalog(user=user)
    make_table(catalog, primary_key=["id"])
    insert(catalog, [{"id": i, "amount": i * 10, "region": "eu"} for i in (1, 2)])
    branch_create(catalog=catalog, name="dev", source="main")
    change(catalog, "table_update", {"set": {"amount": "-1"}, "where": "id = 1"}, branch="dev")
    insert(catalog, [{"id": 3, "amount": 30, "region": "eu"}], branch="dev")
    change(catalog, "table_update", {"set": {"amount": "-2"}, "where": "id = 1"}, branch="main")
    return catalog


class NoWorker:
    """While in effect, jobs of this kind of queue go to a queue no worker serves; `release` sends a job to the
    real one (the worker's recovery would too, after LAKEUI_JOB_STALE_AFTER)."""

    def __init__(self, settings_fixture, name: str) -> None:
        self.settings, self.name = settings_fixture, name
        self.real, self.nobody = getattr(settings, name), f"nobody-{uuid.uuid4().hex[:8]}"
        setattr(self.settings, name, self.nobody)

    def release(self, job: Job) -> Job:
        setattr(self.settings, self.name, self.real)
        with celery_app.connection_for_write() as connection:  # the message parked on the unserved queue
            connection.default_channel.queue_delete(self.nobody)
        job_send(str(job.id), job.kind)
        return wait_for_job(job.id, timeout=240)


def timed(call):
    started = time.monotonic()
    answer = call()
    return answer, time.monotonic() - started


def test_the_diff_answers_at_once_with_the_key_comparison_to_follow(user, user_client, settings):
    catalog = key_conflict(user)
    api = f"/api/v1/catalogs/{catalog.name}/diff"
    page_client = Client()
    page_client.force_login(user)
    queue = NoWorker(settings, "LAKEUI_INTERACTIVE_QUEUE")

    response, took = timed(lambda: user_client.get(api, {"from": "dev", "to": "main"}))
    assert response.status_code == 200 and took < AT_ONCE, (response.status_code, took)
    report = response.json()
    [orders] = report["objects"]
    assert (report["complete"], report["mergeable"], orders["verdict"]) == (False, False, "pending")
    job = Job.objects.get(id=report["job"]["id"])
    assert (job.kind, report["job"]["status"]) == (KEYS_JOB, "queued")
    assert KeysSpec.from_params(job.params) == KeysSpec(str(catalog.id), head(catalog, "dev"), head(catalog, "main"))

    # Every read meanwhile (the API again, diff/keys, the page and its polling) follows the same job.
    again = user_client.get(api, {"from": "dev", "to": "main"}).json()
    keys, took = timed(lambda: user_client.get(f"{api}/keys", {"from": "dev", "to": "main", "table": "sales.orders"}))
    assert keys.status_code == 202 and took < AT_ONCE
    assert again["job"]["id"] == keys.json()["job"]["id"] == str(job.id) and keys.json()["results"] == []
    page, took = timed(lambda: page_client.get("/catalogs/lake/diff", {"from": "dev", "to": "main"}))
    html = page.content.decode()
    assert page.status_code == 200 and took < AT_ONCE and "Comparing keys…" in html
    [status_url] = re.findall(r'data-job-status="([^"]+)" data-reload', html)
    assert status_url == f"/catalogs/lake/diff/jobs/{job.id}.json"
    assert page_client.get(status_url).json()["status"] == "queued"
    assert Job.objects.filter(kind=KEYS_JOB).count() == 1

    assert queue.release(job).status == "succeeded"
    done = user_client.get(api, {"from": "dev", "to": "main"}).json()
    [orders] = done["objects"]
    assert (done["complete"], done["job"], orders["verdict"], orders["keys"]["conflicts"]) == (
        True, None, "conflict", 1,
    )  # fmt: skip
    [key] = user_client.get(f"{api}/keys", {"from": "dev", "to": "main", "table": "sales.orders"}).json()["results"]
    assert (key["key"], key["source"]["amount"], key["target"]["amount"]) == ({"id": 1}, -1, -2)
    shown = page_client.get("/catalogs/lake/diff", {"from": "dev", "to": "main"}).content.decode()
    assert "Comparing keys…" not in shown and "1 key changed on both sides" in shown
    assert Job.objects.filter(kind=KEYS_JOB).count() == 1  # served from what is stored: no new job


def test_another_reader_follows_the_same_job_on_the_page(user, settings):
    """The comparison is shared by every reader of the same heads; the page's status URL is the catalog's, so a
    viewer who did not start the job follows it (the jobs pages show a job only to who started it)."""
    catalog = key_conflict(user)
    bob = get_user_model().objects.create_user("bob")
    catalog_role_grant(catalog=catalog, username="bob", role="viewer", granted_by=user)
    NoWorker(settings, "LAKEUI_INTERACTIVE_QUEUE")
    alice, viewer = Client(), Client()
    alice.force_login(user)
    viewer.force_login(bob)
    first = alice.get("/catalogs/lake/diff", {"from": "dev", "to": "main"}).content.decode()
    second = viewer.get("/catalogs/lake/diff", {"from": "dev", "to": "main"}).content.decode()
    [url] = set(re.findall(r'data-job-status="([^"]+)"', first + second))
    assert viewer.get(url).json()["status"] == "queued"
    outsider = Client()
    outsider.force_login(get_user_model().objects.create_user("eve"))
    assert outsider.get(url).status_code == 404  # no role in the catalog: as if it did not exist


def test_sql_merge_branch_answers_at_once_with_its_job(user, user_client, settings):
    catalog = make_catalog(user=user)
    make_table(catalog)
    insert(catalog, [{"id": 1, "amount": 1, "region": "eu"}])
    branch_create(catalog=catalog, name="dev", source="main")
    insert(catalog, [{"id": 2, "amount": 2, "region": "eu"}], branch="dev")
    before = head(catalog)
    queue = NoWorker(settings, "CELERY_TASK_DEFAULT_QUEUE")

    url = f"/api/v1/catalogs/{catalog.name}/sql"
    response, took = timed(lambda: user_client.post(url, {"statement": "MERGE BRANCH dev TO main"}, format="json"))
    assert response.status_code == 202 and took < AT_ONCE, (response.status_code, took)
    answer = response.json()
    assert (answer["kind"], answer["status"], answer["sql"]) == (
        "branch_merge", "queued", {"kind": "merge_branch", "source": "dev", "target": "main"},
    )  # fmt: skip
    assert head(catalog) == before  # nothing merged yet: the job has not run

    job = queue.release(Job.objects.get(id=answer["id"]))
    assert job.status == "succeeded", job.error_message
    assert user_client.get(f"/api/v1/jobs/{job.id}").json()["result"]["commit"] == head(catalog) != before
    result = sql_job_result(job)
    assert (result["kind"], result["source"], result["target"], result["status"]) == (
        "merge_branch", "dev", "main", "merged",
    )  # fmt: skip


def test_the_sql_console_follows_the_job_of_its_statement(user, settings):
    catalog = make_catalog(user=user)
    make_table(catalog)
    insert(catalog, [{"id": 1, "amount": 1, "region": "eu"}])
    branch_create(catalog=catalog, name="dev", source="main")
    insert(catalog, [{"id": 2, "amount": 2, "region": "eu"}], branch="dev")
    queue = NoWorker(settings, "CELERY_TASK_DEFAULT_QUEUE")
    client = Client()
    client.force_login(user)
    client.get("/catalogs/lake/sql")
    token = client.cookies["csrftoken"].value

    posted, took = timed(lambda: client.post("/catalogs/lake/sql", {"statement": "MERGE BRANCH dev",
                                                                    "csrfmiddlewaretoken": token}))  # fmt: skip
    assert posted.status_code == 302 and took < AT_ONCE
    job = Job.objects.get(kind="branch_merge")
    assert posted.url.startswith(f"/catalogs/lake/sql?job={job.id}&statement=MERGE+BRANCH+dev")
    running = client.get(posted.url).content.decode()
    assert (
        "The statement runs as a job" in running
        and "data-reload" in running
        and "MERGE BRANCH dev</textarea>" in running
    )

    assert queue.release(job).status == "succeeded"
    shown = re.sub(r"\s+", " ", client.get(posted.url).content.decode())
    assert "The statement runs as a job" not in shown
    assert 'MERGE BRANCH dev → main: <strong class="t-merged">merged</strong>' in shown
    assert f"commit <code>{head(catalog)[:12]}</code>" in shown
    missing = client.get("/catalogs/lake/sql", {"job": "not-a-job"})
    assert missing.status_code == 404


def test_a_criss_cross_diff_answers_with_its_bases_then_from_the_virtual_base(user, user_client, settings):
    """Until the key comparison job has made the virtual base, only the heads and the merge bases are known."""
    catalog = make_catalog(user=user)
    make_table(catalog)
    insert(catalog, [{"id": 1, "amount": 1, "region": "eu"}])
    branch_create(catalog=catalog, name="dev", source="main")
    insert(catalog, [{"id": 5, "amount": 5, "region": "eu"}])
    insert(catalog, [{"id": 6, "amount": 6, "region": "eu"}], branch="dev")
    bases = {head(catalog, "main"), head(catalog, "dev")}
    tag_create(catalog=catalog, name="main-then", ref="main", created_by=user)
    merge(catalog, source="dev", target="main")
    merge(catalog, source="main-then", target="dev")  # each side merged the other's then-head
    insert(catalog, [{"id": 7, "amount": 7, "region": "eu"}], branch="dev")
    queue = NoWorker(settings, "LAKEUI_INTERACTIVE_QUEUE")

    api = f"/api/v1/catalogs/{catalog.name}/diff"
    response, took = timed(lambda: user_client.get(api, {"from": "dev", "to": "main"}))
    assert response.status_code == 200 and took < AT_ONCE, (response.status_code, took)
    report = response.json()
    assert (report["base"], set(report["bases"]), report["objects"], report["complete"]) == (None, bases, [], False)
    assert report["target"]["head"] == head(catalog) and report["job"]["status"] == "queued"

    assert queue.release(Job.objects.get(id=report["job"]["id"])).status == "succeeded"
    done = user_client.get(api, {"from": "dev", "to": "main"}).json()
    assert (done["complete"], done["virtual_base"], done["mergeable"]) == (True, True, True)
    assert done["base"] not in bases and [obj["name"] for obj in done["objects"]] == ["sales.orders"]
