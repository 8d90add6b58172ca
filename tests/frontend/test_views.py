"""The browser UI's pages through Django's test client: what each page shows, CSRF on every form, and services'
refusals shown as messages. Metadata only (no Spark); the browser test walks the story with a real worker."""

import html as html_lib
import json
import re
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from catalog_app.job_specs import FileUpload, LoadSpec
from catalog_app.models import Branch, Commit, Tag
from catalog_app.services.data_submit import table_load_submit
from catalog_app.services.databases import database_create, database_update
from catalog_app.services.refs import branch_create
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_create, job_execute
from merge_app.models import Merge
from merge_app.services.merges import branch_merge
from tests.conftest import wait_for_job
from tests.support.catalogs import head, make_catalog, make_table, on

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def finish(job_id):
    """Run a merge job here (metadata only); if the suite's worker took it first, wait for that run."""
    job_execute(job_id=job_id, worker="test")
    assert wait_for_job(job_id, timeout=60).is_finished


def csrf(client, url):
    """The CSRF token of the form on a page (every form carries one)."""
    html = client.get(url).content.decode()
    forms = re.findall(r"<form[^>]*method=\"post\"[^>]*>(.*?)</form>", html, re.S)
    assert forms, f"no POST form on {url}"
    assert all("csrfmiddlewaretoken" in form for form in forms)
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)


def text(response) -> str:
    """The page's text, tags dropped and spaces collapsed (none before punctuation)."""
    words = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))
    return html_lib.unescape(re.sub(r" ([,.:;)])", r"\1", words))


def test_pages_need_a_signed_in_user(db):
    response = Client().get("/")
    assert response.status_code == 302 and response.url.startswith("/login/")


def test_sign_in_page_signs_in(user):
    client = Client(enforce_csrf_checks=True)
    token = csrf(client, "/login/")
    response = client.post("/login/", {"username": "alice", "password": "alice-password", "csrfmiddlewaretoken": token})
    assert (response.status_code, response.url) == (302, "/")
    wrong = Client().post("/login/", {"username": "alice", "password": "nope"})
    assert "did not match" in text(wrong)


def test_catalog_create_and_refusal_as_message(client):
    token = csrf(client, "/")
    response = client.post("/", {"name": "lake", "description": "d", "csrfmiddlewaretoken": token}, follow=True)
    assert response.redirect_chain[-1][0] == "/catalogs/lake"
    assert "Catalog lake created" in text(response)
    again = client.post("/", {"name": "lake", "csrfmiddlewaretoken": token})
    assert again.status_code == 400
    assert "A catalog named 'lake' already exists. (name_exists)" in text(again)
    assert client.post("/", {"name": "other"}).status_code == 403  # no CSRF token


def test_branch_graph_draws_forks_merges_and_tags(client, user):
    catalog = make_catalog(user=user)
    database_create(target=on(catalog), name="sales")
    branch_create(catalog=catalog, name="dev", source="main")
    database_update(target=on(catalog, "dev"), name="sales", set_properties={"owner": "dev"})
    merge = branch_merge(catalog=catalog, source="dev", target="main", user=user)
    token = csrf(client, "/catalogs/lake")
    response = client.post("/catalogs/lake/tags/new", {"name": "v1", "ref": "main", "csrfmiddlewaretoken": token},
                           follow=True)  # fmt: skip
    assert "Tag v1 created" in text(response)
    html = response.content.decode()
    svg = re.search(r"<svg class=\"branch-graph\".*?</svg>", html, re.S).group(0)
    assert svg.count("<circle") == Commit.objects.filter(catalog=catalog).count() == 4
    assert svg.count("merge-edge") == 1 and svg.count('class="commit merge-commit"') == 1
    assert "[main]" in svg and "[dev]" in svg and "&lt;v1&gt;" in svg
    assert merge.commit_id[:8] in svg
    assert Tag.objects.get(name="v1").commit_id == head(catalog)


def test_branch_creation_from_the_ui_and_its_errors(client, user):
    make_catalog(user=user)
    token = csrf(client, "/catalogs/lake")
    ok = client.post("/catalogs/lake/branches/new", {"name": "dev", "source": "main", "csrfmiddlewaretoken": token},
                     follow=True)  # fmt: skip
    assert "Branch dev created" in text(ok) and Branch.objects.filter(name="dev").exists()
    bad = client.post("/catalogs/lake/branches/new", {"name": "dev2", "source": "nope", "csrfmiddlewaretoken": token},
                      follow=True)  # fmt: skip
    assert "There is no branch, tag or commit 'nope'. (ref_not_found)" in text(bad)
    when = client.post(
        "/catalogs/lake/branches/new",
        {"name": "dev3", "source": "main", "at": "yesterday", "csrfmiddlewaretoken": token},
        follow=True,
    )
    assert "is not an ISO 8601 timestamp" in text(when)


def test_object_browser_and_table_page_at_a_ref_and_time(client, user):
    catalog = make_catalog(user=user)
    make_table(catalog, partition_by=["region"], properties={"write.mode": "copy-on-write"})
    first = head(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    from catalog_app.services.tables import table_update

    table_update(target=on(catalog, "dev"), database="sales", name="orders", set_properties={"owner": "bob"})
    page = text(client.get("/catalogs/lake/browse?ref=dev"))
    assert "Database sales" in page and "sales.orders" in page
    table = text(client.get("/catalogs/lake/browse/sales/orders?ref=dev"))
    assert "id long NOT NULL" in table and "amount int yes" in table
    assert "Partitioned by region" in table and "owner bob" in table and "write.mode copy-on-write" in table
    assert "Load rows into orders on branch dev" in table and "alter_properties" in table
    old = text(client.get(f"/catalogs/lake/browse/sales/orders?ref={first}"))
    assert "owner" not in old and "read-only" in old
    missing = client.get("/catalogs/lake/browse/sales/nope?ref=dev")
    assert missing.status_code == 404 and "There is no table 'nope' at this ref." in text(missing)
    assert client.get("/catalogs/lake/browse?ref=dev&at=bad").status_code == 400


def test_load_form_refusals_are_messages(client, user):
    catalog = make_catalog(user=user)
    make_table(catalog)
    url = "/catalogs/lake/browse/sales/orders"
    token = csrf(client, url)
    post = {"branch": "main", "strategy": "append_only", "rows": "[{", "csrfmiddlewaretoken": token}
    assert "Rows must be a JSON list of objects" in text(client.post(f"{url}/load", post, follow=True))
    post.update(strategy="nope", rows='[{"id": 1}]')
    assert "strategy must be one of" in text(client.post(f"{url}/load", post, follow=True))
    post.update(strategy="upsert")
    assert "needs key_columns" in text(client.post(f"{url}/load", post, follow=True))
    post.update(key_columns=" id , ")
    client.post(f"{url}/load", post)
    assert Job.objects.get(kind="table_load").params["key_columns"] == ["id"]
    post.update(query="SELECT * FROM sales.orders")
    assert "Give the incoming data as one of" in text(client.post(f"{url}/load", post, follow=True))
    post.pop("rows")
    client.post(f"{url}/load", post)
    assert Job.objects.filter(kind="table_load").latest("created_at").params["query"] == "SELECT * FROM sales.orders"


@pytest.fixture
def load_submits(monkeypatch):
    """The loads the API view and the UI view submit, each through services.data_submit.table_load_submit."""
    submitted = []

    def submit(**kwargs):
        job = table_load_submit(**kwargs)
        submitted.append((kwargs["spec"], job))
        return job

    monkeypatch.setattr("catalog_app.apis.data.table_load_submit", submit)
    monkeypatch.setattr("frontend.views.browser.table_load_submit", submit)
    return submitted


def test_the_load_form_and_the_api_submit_the_same_load_through_one_service(client, user_client, user, load_submits):
    catalog = make_catalog(user=user)
    make_table(catalog)
    url = "/catalogs/lake/browse/sales/orders"
    rows = [{"id": 1, "amount": 10, "region": "eu"}]
    body = {"strategy": "upsert", "key_columns": ["id"], "rows": rows, "message": "nightly"}
    assert (
        user_client.post(
            "/api/v1/catalogs/lake/refs/main/databases/sales/tables/orders/load", body, format="json"
        ).status_code
        == 202
    )
    post = {"branch": "main", "strategy": "upsert", "key_columns": "id", "watermark": "ignored", "rows": json.dumps(rows),
            "message": "nightly", "csrfmiddlewaretoken": csrf(client, url)}  # fmt: skip
    assert client.post(f"{url}/load", post).status_code == 302
    (api_spec, api_job), (ui_spec, ui_job) = load_submits
    assert ui_spec == api_spec == LoadSpec.from_params(api_job.params)
    assert ui_job.params == api_job.params and api_job.params["message"] == "nightly"


def test_one_row_limit_for_the_load_form_and_the_api(client, user_client, user, settings):
    """LAKEUI_MAX_ROWS, checked in the submit service for both (the form said "at most 10000" and let through what
    the API refused): the form states it and refuses more, as the API does."""
    settings.LAKEUI_MAX_ROWS = 3
    catalog = make_catalog(user=user)
    make_table(catalog)
    url = "/catalogs/lake/browse/sales/orders"
    assert "Rows as JSON (a list of objects, at most 3)" in text(client.get(url))
    rows = json.dumps([{"id": i, "amount": i, "region": "eu"} for i in range(4)])
    post = {"branch": "main", "strategy": "append_only", "rows": rows, "csrfmiddlewaretoken": csrf(client, url)}
    refused = text(client.post(f"{url}/load", post, follow=True))
    assert "A load may send at most 3 rows; upload a file or load in parts. (payload_too_large)" in refused
    api = user_client.post("/api/v1/catalogs/lake/refs/main/databases/sales/tables/orders/load",
                           {"strategy": "append_only", "rows": json.loads(rows)}, format="json")  # fmt: skip
    assert (api.status_code, api.json()["code"]) == (413, "payload_too_large")
    assert not Job.objects.filter(kind="table_load").exists()


def test_the_load_form_uploads_a_file_as_the_api_does(client, user_client, user, load_submits):
    catalog = make_catalog(user=user)
    make_table(catalog)
    url = "/catalogs/lake/browse/sales/orders"
    content = b"id,amount,region\n1,10,eu\n"
    api = user_client.post(
        "/api/v1/catalogs/lake/refs/main/databases/sales/tables/orders/load",
        {"strategy": "append_only", "file": SimpleUploadedFile("rows.csv", content)}, format="multipart",
    )  # fmt: skip
    assert api.status_code == 202, api.json()
    post = {"branch": "main", "strategy": "append_only", "rows": "not read: the file is the source",
            "file": SimpleUploadedFile("rows.CSV", content), "csrfmiddlewaretoken": csrf(client, url)}  # fmt: skip
    assert client.post(f"{url}/load", post).status_code == 302
    (_, api_job), (ui_spec, ui_job) = load_submits
    assert isinstance(ui_spec.source, FileUpload)  # stored by the service, as the API's upload is
    uploads = [job.params.pop("upload") for job in (api_job, ui_job)]
    assert ui_job.params == api_job.params
    assert [u["format"] for u in uploads] == ["csv", "csv"] and uploads[0]["path"] != uploads[1]["path"]
    assert all((Path(settings.LAKEUI_WAREHOUSE) / u["path"]).read_bytes() == content for u in uploads)


def test_diff_page_colors_the_rule_table_cells(client, user):
    catalog = make_catalog(user=user)
    database_create(target=on(catalog), name="sales", properties={"a": "1", "b": "2"})
    branch_create(catalog=catalog, name="dev", source="main")
    database_update(target=on(catalog, "dev"), name="sales", set_properties={"x": "1"})
    database_update(target=on(catalog, "dev"), name="sales", unset_properties=["a"])
    database_update(target=on(catalog), name="sales", unset_properties=["a"])
    response = client.get("/catalogs/lake/diff?from=dev&to=main")
    html = response.content.decode()
    assert "4.2 Existing databases" in html
    cells = dict(re.findall(r'<td class="applies cell-(\w+)" title="([^"]*)"', html))
    assert set(cells) == {"ok", "conflict"}
    assert "Both sides unset [&#x27;a&#x27;]" in cells["conflict"]
    page = text(response)
    assert (
        "unset_properties \N{MULTIPLICATION SIGN} unset_properties: cell U*, conflict — Both sides unset ['a']" in page
    )
    assert "set_properties \N{MULTIPLICATION SIGN} unset_properties: cell ok, ok" in page
    assert "Not mergeable" in page and 'disabled aria-disabled="true"' in html
    filtered = text(client.get("/catalogs/lake/diff?from=dev&to=main&verdict=ok"))
    assert "1 object hidden by the filters" in filtered
    assert "There is no branch, tag or commit 'nope'" in text(client.get("/catalogs/lake/diff?from=nope&to=main"))


@pytest.mark.django_db(transaction=True)
def test_job_pages_show_json_results_their_catalog_and_no_stale_step(client, user):
    """A job's result as JSON (not Python's `'dry_run': False`), no step label once finished, the catalog menu on a
    job page, catalog / branch / table columns in the list, and a queued job says what it waits for."""
    catalog = make_catalog(user=user)
    database_create(target=on(catalog), name="sales")
    branch_create(catalog=catalog, name="dev", source="main")
    database_update(target=on(catalog, "dev"), name="sales", set_properties={"x": "1"})
    token = csrf(client, "/catalogs/lake/diff?from=dev&to=main")
    response = client.post("/catalogs/lake/merge", {"source": "dev", "target": "main", "dry_run": "1",
                           "csrfmiddlewaretoken": token})  # fmt: skip
    job_id = response.url.rsplit("/", 1)[-1]
    queued = client.get(f"/jobs/{job_id}.json").json()
    if queued["status"] == "queued":  # the suite's worker may have taken it already
        assert "starts Spark" in queued["message"]
    finish(job_id)
    Job.objects.filter(id=job_id).update(progress_message="Comparing the branches")  # its last step's label
    page = client.get(f"/jobs/{job_id}")
    html, words = page.content.decode(), text(page)
    assert "&quot;dry_run&quot;: true" in html and "&#x27;dry_run&#x27;" not in html and "'dry_run'" not in html
    assert "Comparing the branches" not in words and client.get(f"/jobs/{job_id}.json").json()["message"] == ""
    assert 'href="/catalogs/lake/diff"' in html  # the catalog's menu
    listed = text(client.get("/jobs/"))
    assert "Catalog Branch Table" in listed and "branch_merge lake dev → main" in listed
    # A job no worker has taken yet: recorded, not sent (the suite's workers would take a sent one at once).
    waiting = Job.objects.create(kind="branch_merge", params={"catalog_id": str(catalog.id)}, requested_by=user)
    assert waiting.status == "queued"
    assert "The first data job after a worker starts also starts Spark" in text(client.get(f"/jobs/{waiting.id}"))
    job_execute(job_id=str(waiting.id), worker="test")  # settled (it fails: no source), not left queued


def test_the_diff_page_offers_no_merge_into_a_tag(client, user):
    """ "Merge cleanup into v1" with v1 a tag was an enabled button: a merge target must be a branch."""
    from catalog_app.services.refs import tag_create

    catalog = make_catalog(user=user)
    database_create(target=on(catalog), name="sales")
    tag_create(catalog=catalog, name="v1", ref="main", created_by=user)
    branch_create(catalog=catalog, name="dev", source="main")
    database_update(target=on(catalog, "dev"), name="sales", set_properties={"x": "1"})
    to_tag = client.get("/catalogs/lake/diff?from=dev&to=v1")
    assert "v1 is not a branch: a merge target must be a branch" in text(to_tag)
    assert "Merge dev into v1" not in text(to_tag) and 'name="dry_run"' not in to_tag.content.decode()
    assert "/catalogs/lake/compare?from=dev&amp;to=v1" in to_tag.content.decode()
    to_branch = client.get("/catalogs/lake/diff?from=dev&to=main")
    assert "Merge dev into main" in text(to_branch) and "is not a branch" not in text(to_branch)


@pytest.mark.django_db(transaction=True)
def test_merge_button_submits_a_job_and_the_audit_log_shows_it(client, user):
    catalog = make_catalog(user=user)
    database_create(target=on(catalog), name="sales")
    branch_create(catalog=catalog, name="dev", source="main")
    database_update(target=on(catalog, "dev"), name="sales", set_properties={"x": "1"})
    token = csrf(client, "/catalogs/lake/diff?from=dev&to=main")
    response = client.post("/catalogs/lake/merge", {"source": "dev", "target": "main", "source_head": head(catalog, "dev"),
                           "target_head": head(catalog), "csrfmiddlewaretoken": token})  # fmt: skip
    job_id = response.url.rsplit("/", 1)[-1]
    assert client.get(f"/jobs/{job_id}.json").json()["id"] == job_id
    finish(job_id)
    state = client.get(f"/jobs/{job_id}.json").json()
    assert (state["status"], state["progress"], state["finished"]) == ("succeeded", 100, True)
    page = text(client.get(f"/jobs/{job_id}"))
    merge = Merge.objects.get(job_id=job_id)
    assert (
        "Merge dev → main: merged" in page
        and f"/catalogs/lake/merges/{merge.id}" in client.get(f"/jobs/{job_id}").content.decode()
    )
    audit = text(client.get(f"/catalogs/lake/merges/{merge.id}"))
    assert (
        "Status merged" in audit
        and merge.commit_id[:12] in audit
        and "sales database replayed ok set_properties" in audit
    )
    assert "dev → main" in text(client.get("/catalogs/lake/merges"))
    moved = client.post("/catalogs/lake/merge", {"source": "dev", "target": "main", "target_head": "0" * 32,
                        "csrfmiddlewaretoken": token}, follow=True)  # fmt: skip
    assert "Merge of dev into main submitted" in text(moved)  # the head check runs in the job
    job = moved.redirect_chain[-1][0].rsplit("/", 1)[-1]
    finish(job)
    assert "branch_moved" in text(client.get(f"/jobs/{job}"))


def test_jobs_list_and_other_users_jobs(client, user, staff_user):
    job = job_create(kind="test.echo", params={}, requested_by=user)
    other = job_create(kind="test.echo", params={}, requested_by=staff_user)
    page = client.get("/jobs/").content.decode()
    assert str(job.id)[:8] in page and str(other.id)[:8] not in page
    assert client.get(f"/jobs/{other.id}").status_code == 404
    assert client.get(f"/jobs/{other.id}.json").status_code == 404


def test_sql_console_branch_commands_and_errors_with_position(client, user):
    make_catalog(user=user)
    token = csrf(client, "/catalogs/lake/sql")
    created = text(client.post("/catalogs/lake/sql", {"statement": "CREATE BRANCH dev", "csrfmiddlewaretoken": token}))
    assert "Branch dev created at" in created
    used = text(client.post("/catalogs/lake/sql", {"statement": "USE BRANCH dev", "csrfmiddlewaretoken": token}))
    assert "Now using branch dev" in used and "Your current branch here: dev" in used
    bad = client.post("/catalogs/lake/sql", {"statement": "CREATE BRANCH dev FROM", "csrfmiddlewaretoken": token})
    assert bad.status_code == 400
    assert "Expected a ref at position 22, found the end of the statement." in text(bad)
    assert "At position 22" in text(bad)
    other = text(client.post("/catalogs/lake/sql", {"statement": "DROP TABLE x", "csrfmiddlewaretoken": token}))
    assert "'DROP' is not a statement here" in other


def test_unknown_catalog_is_a_404_page_not_a_trace(client):
    response = client.get("/catalogs/nope")
    assert response.status_code == 404 and "There is no catalog 'nope'. (catalog_not_found)" in text(response)


def test_unknown_page_is_the_ui_404(client):
    response = client.get("/no/such/page")
    assert response.status_code == 404 and "There is no page at this address." in text(response)


@pytest.fixture
def people(user):
    """alice (the `user` fixture) creates the catalogs and is their admin; bob, carol and erin get roles per test."""
    from django.contrib.auth import get_user_model

    clients = {}
    for name in ("bob", "carol", "erin"):
        person = get_user_model().objects.create_user(name, password=f"{name}-password")
        clients[name] = Client(enforce_csrf_checks=True)
        clients[name].force_login(person)
    return clients


def test_ui_views_enforce_the_catalog_roles_of_the_api(client, user, people):
    from catalog_app.services.access import catalog_role_grant

    catalog = make_catalog(user=user)
    make_table(catalog)
    catalog_role_grant(catalog=catalog, username="bob", role="viewer", granted_by=user)
    bob, erin = people["bob"], people["erin"]
    # No role: the catalog is invisible, on every page, and missing from the list.
    for url in ("/catalogs/lake", "/catalogs/lake/browse", "/catalogs/lake/diff", "/catalogs/lake/merges",
                "/catalogs/lake/sql", "/catalogs/lake/merge-requests"):  # fmt: skip
        response = erin.get(url)
        assert response.status_code == 404 and "There is no catalog 'lake'. (catalog_not_found)" in text(response)
    assert "/catalogs/lake" not in erin.get("/").content.decode()
    assert "/catalogs/lake" in bob.get("/").content.decode()
    # A viewer reads, and is told clearly when a form would write; nothing is written.
    assert bob.get("/catalogs/lake/browse/sales/orders").status_code == 200
    assert "Create branch" not in text(bob.get("/catalogs/lake"))  # the forms a viewer may not use are left out
    token = csrf(bob, "/catalogs/lake/diff")
    refused = bob.post("/catalogs/lake/branches/new", {"name": "dev", "source": "main", "csrfmiddlewaretoken": token},
                       HTTP_REFERER="/catalogs/lake", follow=True)  # fmt: skip
    assert refused.redirect_chain[-1][0] == "/catalogs/lake"
    assert "This needs the editor role in catalog 'lake'; you have viewer. (role_required)" in text(refused)
    assert not Branch.objects.filter(name="dev").exists()
    direct = bob.post("/catalogs/lake/browse/sales/orders/load", {"branch": "main", "strategy": "append_only",
                      "rows": '[{"id": 1}]', "csrfmiddlewaretoken": token})  # fmt: skip
    assert direct.status_code == 403 and "(role_required)" in text(direct)
    assert not Job.objects.filter(kind="table_load").exists()
    sql = bob.post("/catalogs/lake/sql", {"statement": "CREATE BRANCH dev", "csrfmiddlewaretoken": token})
    assert sql.status_code == 403 and "This needs the editor role" in text(sql)
    merge = bob.post("/catalogs/lake/merge", {"source": "main", "target": "main", "csrfmiddlewaretoken": token})
    assert merge.status_code == 403
    # An editor writes.
    catalog_role_grant(catalog=catalog, username="bob", role="editor", granted_by=user)
    made = bob.post("/catalogs/lake/branches/new", {"name": "dev", "source": "main", "csrfmiddlewaretoken": token},
                    follow=True)  # fmt: skip
    assert "Branch dev created" in text(made)


def test_writes_to_a_protected_branch_show_the_services_message(client, user):
    from catalog_app.services.access import protected_branch_create

    catalog = make_catalog(user=user)
    make_table(catalog)
    protected_branch_create(catalog=catalog, pattern="main", created_by=user)
    url = "/catalogs/lake/browse/sales/orders"
    token = csrf(client, url)
    post = {"branch": "main", "strategy": "append_only", "rows": '[{"id": 1}]', "csrfmiddlewaretoken": token}
    page = text(client.post(f"{url}/load", post, follow=True))
    assert "Branch 'main' is protected (rule main): it takes no direct write; open a merge request instead." in page
    assert "(branch_protected)" in page and not Job.objects.filter(kind="table_load").exists()
    branch_create(catalog=catalog, name="dev", source="main")
    merged = text(client.post("/catalogs/lake/merge", {"source": "dev", "target": "main", "csrfmiddlewaretoken": token},
                              follow=True))  # fmt: skip
    assert "(branch_protected)" in merged


def request_page(client, number=1):
    return client.get(f"/catalogs/lake/merge-requests/{number}")


def planned_page(client, number=1):
    """The request's page once its plan job has run (here, or on the suite's worker if it took the job first)."""
    from merge_app.models import MergeRequest

    merge_request = MergeRequest.objects.get(number=number)
    finish(str(merge_request.plan_job_id))
    return request_page(client, number)


@pytest.mark.django_db(transaction=True)
def test_merge_request_pages_open_review_and_merge(client, user, people):
    from catalog_app.services.access import catalog_role_grant, protected_branch_create
    from merge_app.models import MergeRequest

    catalog = make_catalog(user=user)
    database_create(target=on(catalog), name="sales")
    branch_create(catalog=catalog, name="dev", source="main")
    database_update(target=on(catalog, "dev"), name="sales", set_properties={"x": "1"})
    database_update(target=on(catalog), name="sales", set_properties={"y": "2"})  # changed on both sides: rule table
    protected_branch_create(catalog=catalog, pattern="main", created_by=user)
    catalog_role_grant(catalog=catalog, username="bob", role="approver", granted_by=user)
    catalog_role_grant(catalog=catalog, username="carol", role="viewer", granted_by=user)
    token = csrf(client, "/catalogs/lake/merge-requests?source=dev")
    assert 'value="dev"' in client.get("/catalogs/lake/merge-requests?source=dev").content.decode()
    missing = client.post("/catalogs/lake/merge-requests", {"source": "dev", "target": "main", "title": " ",
                          "csrfmiddlewaretoken": token})  # fmt: skip
    assert missing.status_code == 400 and "A merge request needs a title. (invalid_input)" in text(missing)
    opened = client.post("/catalogs/lake/merge-requests", {"source": "dev", "target": "main", "title": "Set x",
                         "description": "Why", "csrfmiddlewaretoken": token}, follow=True)  # fmt: skip
    assert opened.redirect_chain[-1][0] == "/catalogs/lake/merge-requests/1"
    assert "Merge request !1 opened" in text(opened)
    page = planned_page(client)
    html, words = page.content.decode(), text(page)
    assert "Set x" in words and "dev into main" in words and "Why" in words
    assert "Side-by-side diff of dev → main" in words and "/catalogs/lake/diff?from=dev&amp;to=main" in html
    assert '<td class="applies cell-ok"' in html and "4.2 Existing databases" in html
    assert "The target 'main' needs 1 approval(s); the request has 0. (approvals_missing)" in words
    assert re.search(r'<button type="submit" aria-describedby="merge-blockers" disabled', html)
    assert "opened to merge dev into main" in words and "merge plan updated (no conflicts)" in words
    # The merge refused while blocked: the blockers as messages.
    refused = text(client.post("/catalogs/lake/merge-requests/1/merge", {"csrfmiddlewaretoken": token}, follow=True))
    assert "(approvals_missing)" in refused
    # The author is not offered Approve (and is refused if it is posted anyway); a viewer cannot review; an approver
    # is offered it and can.
    assert 'value="approve"' not in html and "another user must approve it" in words
    assert 'value="approve">Approve</button>' in request_page(people["bob"]).content.decode()
    own = text(client.post("/catalogs/lake/merge-requests/1/reviews", {"decision": "approve",
               "csrfmiddlewaretoken": token}, follow=True))  # fmt: skip
    assert "You opened this merge request; another user must approve it. (self_approval)" in own
    carol = people["carol"]
    assert "An approver reviews merge requests; your role is viewer." in text(request_page(carol))
    assert carol.post("/catalogs/lake/merge-requests/1/reviews", {"decision": "approve",
                      "csrfmiddlewaretoken": csrf(carol, "/catalogs/lake")}).status_code == 403  # fmt: skip
    bob = people["bob"]
    approved = text(bob.post("/catalogs/lake/merge-requests/1/reviews", {"decision": "approve", "comment": "LGTM",
                    "csrfmiddlewaretoken": csrf(bob, "/catalogs/lake/merge-requests/1")}, follow=True))  # fmt: skip
    assert "Approved." in approved and "approved: “LGTM”" in approved and "Ready to merge." in approved
    # Merge: the job, then the request merged with its audit log.
    merged = client.post("/catalogs/lake/merge-requests/1/merge", {"csrfmiddlewaretoken": token})
    job_id = merged.url.rsplit("/", 1)[-1]
    finish(job_id)
    merge_request = MergeRequest.objects.get(number=1)
    assert merge_request.state == "merged" and merge_request.merge.commit_id == head(catalog)
    done = request_page(client)
    assert "read the audit log" in text(done) and f"/catalogs/lake/merges/{merge_request.merge_id}" in (
        done.content.decode()
    )
    assert "Merge !1" not in text(done) and "This request is merged." in text(done)  # no merge button, no blockers
    assert "(plan_stale)" not in text(done)
    audit = text(client.get(f"/catalogs/lake/merges/{merge_request.merge_id}"))
    assert "Status merged" in audit
    assert "Set x" in text(client.get("/catalogs/lake/merge-requests?state=merged"))
    assert "No open merge requests." in text(client.get("/catalogs/lake/merge-requests"))


@pytest.mark.django_db(transaction=True)
def test_merge_request_resolutions_close_and_reopen(client, user):
    catalog = make_catalog(user=user)
    database_create(target=on(catalog), name="sales", properties={"a": "1"})
    branch_create(catalog=catalog, name="dev", source="main")
    database_update(target=on(catalog, "dev"), name="sales", unset_properties=["a"])
    database_update(target=on(catalog), name="sales", unset_properties=["a"])
    token = csrf(client, "/catalogs/lake/merge-requests")
    client.post("/catalogs/lake/merge-requests", {"source": "dev", "target": "main", "title": "Unset a",
                "csrfmiddlewaretoken": token})  # fmt: skip
    page = planned_page(client)
    html, words = page.content.decode(), text(page)
    assert '<td class="applies cell-conflict"' in html and "Resolve conflicts" in words
    assert "The merge has unresolved conflicts in sales; resolve them in the request. (unresolved_conflicts)" in words
    saved = client.post("/catalogs/lake/merge-requests/1/resolutions", {"default": "fail", "table:sales": "",
                        "csrfmiddlewaretoken": token}, follow=True)  # fmt: skip
    assert "Resolutions saved" in text(saved)  # nothing changed
    bad = client.post("/catalogs/lake/merge-requests/1/resolutions", {"default": "mine", "csrfmiddlewaretoken": token},
                      follow=True)  # fmt: skip
    assert "(invalid_resolution)" in text(bad)
    chosen = client.post("/catalogs/lake/merge-requests/1/resolutions", {"default": "source_wins",
                         "csrfmiddlewaretoken": token}, follow=True)  # fmt: skip
    assert "resolutions changed (default: source_wins)" in text(chosen)
    closed = text(client.post("/catalogs/lake/merge-requests/1/state", {"state": "closed", "csrfmiddlewaretoken": token},
                              follow=True))  # fmt: skip
    assert "Merge request closed." in closed and "Reopen request" in closed
    assert "Unset a" in text(client.get("/catalogs/lake/merge-requests?state=closed"))
    reopened = text(client.post("/catalogs/lake/merge-requests/1/state", {"state": "open", "csrfmiddlewaretoken": token},
                                follow=True))  # fmt: skip
    assert "Merge request reopened." in reopened and "Close request" in reopened


@pytest.mark.django_db(transaction=True)
def test_a_request_whose_source_was_merged_by_other_means_closes_as_merged(client, user):
    """MERGE BRANCH (SQL, API) of the request's source: the request was left open and "Ready to merge" with
    nothing to merge; it closes as merged with a timeline entry, by the workers' upkeep (a read of the page changes
    nothing). A branch with no commit of its own stays open."""
    from merge_app.models import MergeRequest
    from merge_app.services.merge_requests import merge_request_open, merge_requests_follow_heads

    catalog = make_catalog(user=user)
    database_create(target=on(catalog), name="sales")
    branch_create(catalog=catalog, name="dev", source="main")
    branch_create(catalog=catalog, name="idle", source="main")
    database_update(target=on(catalog, "dev"), name="sales", set_properties={"x": "1"})
    merge_request_open(catalog=catalog, source="dev", target="main", title="Set x", author=user)
    merge_request_open(catalog=catalog, source="idle", target="main", title="Nothing yet", author=user)
    merge = branch_merge(catalog=catalog, source="dev", target="main", user=user)
    merge_requests_follow_heads()  # a round of the workers' upkeep
    page = text(request_page(client))
    assert MergeRequest.objects.get(number=1).state == "merged"
    assert f"closed as merged: the source was merged into the target by merge commit {merge.commit_id[:12]}" in page
    assert "This request is merged." in page and "Ready to merge" not in page
    assert MergeRequest.objects.get(number=1).merge_id == merge.id
    request_page(client, 2)
    assert MergeRequest.objects.get(number=2).state == "open"


@pytest.mark.django_db(transaction=True)
def test_a_request_planned_only_after_its_source_was_merged_closes_as_merged(client, user):
    """The plan job runs after the merge (it is sent when the transaction that opened the request commits): the plan
    it stores is of the heads after the merge, with nothing to merge, and the request closes as merged then (the
    upkeep only looks for a merge by other means when the heads moved since the plan)."""
    from django.db import transaction

    from merge_app.models import MergeRequest
    from merge_app.services.merge_requests import merge_request_open

    catalog = make_catalog(user=user)
    database_create(target=on(catalog), name="sales")
    branch_create(catalog=catalog, name="dev", source="main")
    database_update(target=on(catalog, "dev"), name="sales", set_properties={"x": "1"})
    with transaction.atomic():
        merge_request_open(catalog=catalog, source="dev", target="main", title="Set x", author=user)
        merge = branch_merge(catalog=catalog, source="dev", target="main", user=user)
    finish(str(MergeRequest.objects.get(number=1).plan_job_id))
    request = MergeRequest.objects.get(number=1)
    assert (request.state, request.merge_id) == ("merged", merge.id)
    assert request.plan_heads == {"source": head(catalog, "dev"), "target": merge.commit_id}
    assert "closed as merged" in text(request_page(client))


def settled_page(client, number=1, timeout=240):
    """The request's page once its plan is up to date with the heads and resolutions (plans run on the worker)."""
    import time

    from merge_app.models import MergeRequest
    from merge_app.selectors.merge_requests import merge_request_status

    deadline = time.monotonic() + timeout
    while True:
        request_page(client, number)  # viewing the page asks for a plan when the one there is stale
        status = merge_request_status(MergeRequest.objects.select_related("plan_job").get(number=number))
        if not status.planning and not status.stale:
            return request_page(client, number)  # rendered after the plan settled, not before
        assert time.monotonic() < deadline, status
        time.sleep(0.5)


def key_conflict(user):
    """A primary-key table whose row 1 dev and main updated to different amounts (-1 and -2)."""
    from tests.support.merges import change, insert

    catalog = make_catalog(user=user)
    make_table(catalog, primary_key=["id"])
    insert(catalog, [{"id": i, "amount": i * 10, "region": "eu"} for i in (1, 2)])
    branch_create(catalog=catalog, name="dev", source="main")
    change(catalog, "table_update", {"set": {"amount": "-1"}, "where": "id = 1"}, branch="dev")
    change(catalog, "table_update", {"set": {"amount": "-2"}, "where": "id = 1"}, branch="main")
    return catalog


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_primary_key_conflicts_side_by_side_with_a_choice_per_key(client, user, people):
    from catalog_app.services.access import catalog_role_grant

    catalog = key_conflict(user)
    make_table(catalog, table="customers")  # on main only: no conflict in it
    catalog_role_grant(catalog=catalog, username="bob", role="approver", granted_by=user)
    token = csrf(client, "/catalogs/lake/merge-requests")
    client.post("/catalogs/lake/merge-requests", {"source": "dev", "target": "main", "title": "Amounts",
                "csrfmiddlewaretoken": token})  # fmt: skip
    page = settled_page(client)
    html, words = page.content.decode(), text(page)
    assert "Key id = 1: source update, target update" in words
    assert re.findall(r'<td class="conflict-cell">([^<]*)</td>', html) == ["-1", "-2"]  # source, then target
    assert 'name="key:sales.orders:[1]" value="source_wins"' in html
    assert "(unresolved_conflicts)" in words
    bob = people["bob"]
    bob.post("/catalogs/lake/merge-requests/1/reviews", {"decision": "approve",
             "csrfmiddlewaretoken": csrf(bob, "/catalogs/lake/merge-requests/1")})  # fmt: skip
    # Before saving, the editor is told which approvals a choice would dismiss.
    warned = text(request_page(client))
    assert (
        "Approved by bob: saving a choice that changes how a conflict is resolved dismisses these approvals" in warned
    )
    # A choice for a table the plan finds no conflict in changes nothing: bob's approval stays.
    kept = text(client.post("/catalogs/lake/merge-requests/1/resolutions", {"table:sales.customers": "source_wins",
                "csrfmiddlewaretoken": token}, follow=True))  # fmt: skip
    assert "the approvals of bob stay: the choice changes no conflict of the plan" in kept
    assert "approvals of bob kept: the choice changes no conflict" in kept and "Approved by: bob" in kept
    chosen = client.post("/catalogs/lake/merge-requests/1/resolutions", {"key:sales.orders:[1]": "source_wins",
                         "csrfmiddlewaretoken": token}, follow=True)  # fmt: skip
    assert "resolutions changed (sales.orders key [1]: source_wins)" in text(chosen)
    assert "the approvals of bob are dismissed: the choice changes how a conflict merges" in text(chosen)
    resolved = settled_page(client)
    html, words = resolved.content.decode(), text(resolved)
    assert 'value="source_wins" checked' in html
    assert "Ready to merge." in words or "(approvals_missing)" not in words
    # What is resolved shows as resolved, by which choice: no red cell, no "conflicts in" for the new plan.
    at = html.find('class="applies cell-conflict"')
    assert at < 0 and 'class="applies cell-resolved"' in html
    assert "Table sales.orders changed_in_both conflict resolved: 1 key source_wins" in words
    assert "conflict resolved (1 key source_wins)" in words
    assert words.rfind("merge plan updated (conflicts resolved in sales.orders)") > words.rfind("conflicts in sales")
    assert "Conflicts: sales.orders" not in words


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_the_diff_page_shows_a_primary_key_table_compared_by_key(client, user):
    """The page answers at once with the table pending and the key comparison's job to follow (it polls it and
    reloads); once the job has run on the worker, the page shows the keys compared."""
    key_conflict(user)
    client.force_login(user)
    first = client.get("/catalogs/lake/diff", {"from": "dev", "to": "main"})
    assert "Comparing keys…" in text(first)
    [status_url] = re.findall(r'data-job-status="([^"]+)" data-reload', first.content.decode())
    deadline = time.monotonic() + 240
    while not client.get(status_url).json()["finished"]:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    page = client.get("/catalogs/lake/diff", {"from": "dev", "to": "main"})
    html, words = page.content.decode(), text(page)
    assert "pending" not in words and "Comparing keys" not in words
    assert "Compared by key: 1 key changed on both sides, 0 merged cell by cell, 1 conflicting" in words
    assert "Key id = 1: source update, target update" in words
    assert re.findall(r'<td class="conflict-cell">([^<]*)</td>', html) == ["-1", "-2"]
