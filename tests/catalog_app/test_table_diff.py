"""The data diff of a table between two refs, through the API and the UI, read by the real worker."""

import pytest

from catalog_app.services.refs import branch_create
from tests.support.catalogs import make_catalog, make_table
from tests.support.merges import change, insert
from tests.support.reads import read_followed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def rows(*ids):
    return [{"id": i, "amount": i * 10, "region": "eu"} for i in ids]


def two_refs(**table_kwargs):
    catalog = make_catalog()
    make_table(catalog, **table_kwargs)
    insert(catalog, rows(1, 2, 3))
    insert(catalog, rows(5, 6))  # a segment neither ref changes: never read
    branch_create(catalog=catalog, name="dev", source="main")
    change(catalog, "table_update", {"set": {"amount": "-1"}, "where": "id = 1"}, branch="dev")
    change(catalog, "table_delete", {"where": "id = 2"}, branch="dev")
    insert(catalog, rows(4), branch="dev")
    return catalog


def test_a_primary_key_table_is_compared_by_key_with_its_changed_cells(user_client, client, user):
    catalog = two_refs(primary_key=["id"])
    query = {"from": "main", "to": "dev", "table": "sales.orders"}
    response = read_followed(user_client, f"/api/v1/catalogs/{catalog.name}/diff/rows", query)
    assert response.status_code == 200, response.json()
    result = response.json()
    assert result["counts"] == {"insert": 1, "update": 1, "delete": 1}
    # main's changed segment, and on dev that segment (with its deletes) and the two segments dev wrote.
    assert result["segments_read"] == 1 + 3
    by_change = {row["change"]: row for row in result["rows"]}
    assert by_change["update"]["cells"] == ["amount"]
    assert (by_change["update"]["before"], by_change["update"]["after"]) == ([1, 10, "eu"], [1, -1, "eu"])
    assert by_change["delete"]["before"] == [2, 20, "eu"] and by_change["insert"]["after"] == [4, 40, "eu"]
    client.force_login(user)
    page = client.get(f"/catalogs/{catalog.name}/browse/sales/orders/data-diff", {"from": "main", "ref": "dev"})
    assert page.status_code == 200
    assert b'class="cell-changed"' in page.content and b"<del>10</del> &rarr; <ins>-1</ins>" in page.content
    # It reads in the direction of the refs, and colors added and deleted rows.
    words = " ".join(page.content.decode().split())
    assert "1 row added</strong> (in dev, not in main)" in words and "1 deleted</strong> (in main, not in dev)" in words
    assert '<tr class="diff-insert">' in words and '<tr class="diff-delete">' in words


def test_a_table_without_a_key_is_compared_as_rows(user_client):
    catalog = two_refs()
    query = {"from": "main", "to": "dev", "table": "sales.orders"}
    result = read_followed(user_client, f"/api/v1/catalogs/{catalog.name}/diff/rows", query).json()
    assert result["counts"] == {"insert": 2, "update": 0, "delete": 2}  # the updated row: one out, one in
    assert result["read_by"] == "web" and result["kept"] is False  # pyarrow here, no Spark job
    deleted = sorted(row["before"] for row in result["rows"] if row["change"] == "delete")
    added = sorted(row["after"] for row in result["rows"] if row["change"] == "insert")
    assert (deleted, added) == ([[1, 10, "eu"], [2, 20, "eu"]], [[1, -1, "eu"], [4, 40, "eu"]])
    # A second page of one row each, from the diff kept for the pair of commits.
    paged = read_followed(
        user_client, f"/api/v1/catalogs/{catalog.name}/diff/rows", {**query, "page": 2, "page_size": 1}
    ).json()
    assert (paged["kept"], paged["pages"], paged["total"], len(paged["rows"])) == (True, 4, 4, 1)
    assert paged["rows"][0] == result["rows"][1]
    # Without a table: the changed tables, each with the URL of its rows.
    listed = read_followed(
        user_client, f"/api/v1/catalogs/{catalog.name}/diff/rows", {"from": "main", "to": "dev"}
    ).json()
    assert [(t["table"], t["change"]) for t in listed["tables"]] == [("sales.orders", "changed")]
    assert read_followed(user_client, listed["tables"][0]["rows"]).json()["counts"] == result["counts"]
    bad = read_followed(user_client, f"/api/v1/catalogs/{catalog.name}/diff/rows", {"from": "main"})
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_input")


def test_the_commit_api_names_each_operation_s_table_and_links_its_rows(user_client):
    from tests.support.catalogs import head

    catalog = two_refs(primary_key=["id"])
    commit = head(catalog, "dev")
    response = user_client.get(f"/api/v1/catalogs/{catalog.name}/commits/{commit[:12]}")
    assert response.status_code == 200, response.json()
    detail = response.json()
    assert detail["id"] == commit and len(detail["parents"]) == 1 and detail["merge"] is None
    assert [(op["op"], op["object"], op["rows"]) for op in detail["operations"]] == [
        ("insert", "sales.orders", {"rows_inserted": 1, "rows_updated": 0, "rows_deleted": 0})
    ]
    rows = read_followed(user_client, detail["tables"][0]["rows"]).json()
    assert [(r["change"], r["after"]) for r in rows["rows"]] == [("insert", [4, 40, "eu"])]
    missing = user_client.get(f"/api/v1/catalogs/{catalog.name}/commits/{'0' * 32}")
    assert (missing.status_code, missing.json()["code"]) == (404, "commit_not_found")


def test_restore_from_the_table_history_in_the_ui_and_its_log(client, user):
    from lakeui.jobs.models import Job
    from merge_app.models import Restore
    from tests.conftest import wait_for_job
    from tests.support.catalogs import head

    catalog = make_catalog()
    make_table(catalog)
    insert(catalog, rows(1))
    point = head(catalog)
    insert(catalog, rows(2))
    client.force_login(user)
    table_page = client.get(f"/catalogs/{catalog.name}/browse/sales/orders", {"ref": "main"})
    assert b"Restore to here" in table_page.content
    token = table_page.cookies["csrftoken"].value if "csrftoken" in table_page.cookies else None
    post = {"branch": "main", "commit": point, **({"csrfmiddlewaretoken": token} if token else {})}
    response = client.post(f"/catalogs/{catalog.name}/browse/sales/orders/restore", post)
    assert response.status_code == 302
    job = wait_for_job(Job.objects.get(kind="branch_restore").id)
    assert job.status == "succeeded", job.error_message
    restore = Restore.objects.get(job=job)
    assert restore.commit_id == head(catalog) and restore.point == point
    log_page = client.get(f"/catalogs/{catalog.name}/restores/{restore.id}")
    assert log_page.status_code == 200 and point.encode() in log_page.content
    assert b"live again" in log_page.content or b"removed" in log_page.content
    listed = client.get(f"/catalogs/{catalog.name}/restores")
    assert str(restore.id).encode() in listed.content


def test_the_first_timestamp_is_listed(user_client):
    """0001-01-01 00:00, which PySpark's collect cannot make a datetime of, in a diff's rows (read through Arrow)."""
    catalog = make_catalog()
    make_table(catalog, columns=[{"name": "id", "type": "long"}, {"name": "at", "type": "timestamp"}])
    branch_create(catalog=catalog, name="dev", source="main")
    insert(catalog, [{"id": 1, "at": "0001-01-01T00:00:00"}], branch="dev")
    query = {"from": "main", "to": "dev", "table": "sales.orders"}
    result = read_followed(user_client, f"/api/v1/catalogs/{catalog.name}/diff/rows", query).json()
    assert [(row["change"], row["after"]) for row in result["rows"]] == [("insert", [1, "0001-01-01T00:00:00"])]


def test_segments_of_an_older_schema_are_diffed_here_without_a_worker(user_client):
    """A column renamed, one widened and one added with a default on dev: every segment was written in the older
    schema, and the web process projects them by column id as Spark does (no worker job), in under a second."""
    import time

    from catalog_app.services.commits import WriteTarget
    from catalog_app.services.tables import column_add, column_update
    from lakeui.jobs.models import Job

    catalog = two_refs(primary_key=["id"])
    dev = {"target": WriteTarget(catalog=catalog, branch="dev"), "database": "sales", "table": "orders"}
    column_update(**dev, column="amount", changes={"name": "total", "type": "long"})
    column_update(**dev, column="region", changes={"name": "area"})
    column_add(**dev, spec={"name": "note", "type": "string", "default": "n/a"})
    jobs = Job.objects.count()
    query = {"from": "main", "to": "dev", "table": "sales.orders", "page_size": 2}
    started = time.monotonic()
    first = read_followed(user_client, f"/api/v1/catalogs/{catalog.name}/diff/rows", query).json()
    elapsed = time.monotonic() - started
    assert (first["read_by"], Job.objects.count()) == ("web", jobs), first
    assert elapsed < 1, elapsed
    assert [(c["name"], c["type"]) for c in first["columns"]] == [
        ("id", "long"), ("total", "long"), ("area", "string"), ("note", "string")]  # fmt: skip
    assert first["counts"] == {"insert": 1, "update": 1, "delete": 1}
    assert (first["pages"], [r["change"] for r in first["rows"]]) == (2, ["update", "delete"])  # ids 1, 2
    update = first["rows"][0]
    assert (update["before"], update["after"]) == ([1, 10, "eu", "n/a"], [1, -1, "eu", "n/a"])
    assert update["cells"] == ["total"]
    second = read_followed(user_client, f"/api/v1/catalogs/{catalog.name}/diff/rows", {**query, "page": 2}).json()
    assert [(r["change"], r["after"]) for r in second["rows"]] == [("insert", [4, 40, "eu", "n/a"])]
