"""The merge request page pages through a table's conflicting keys (the resolution's preview, 20 keys a page), and a
cell picked on a later page is saved with the values it was made on (docs/merge-semantics.md#cell-picks)."""

import re

import pytest
from django.test import Client

from catalog_app.services.refs import branch_create
from lakeui.jobs.services import job_execute
from merge_app.models import MergeRequest
from merge_app.services.merge_requests import merge_request_open
from tests.conftest import wait_for_job
from tests.support.catalogs import make_catalog, make_table
from tests.support.data import run_in_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

COLUMNS = [{"name": "id", "type": "long", "nullable": False}, {"name": "amount", "type": "long"}]
KEYS = 25


def planned(merge_request: MergeRequest) -> MergeRequest:
    merge_request.refresh_from_db()
    job_execute(job_id=str(merge_request.plan_job_id), worker="test-process")
    wait_for_job(merge_request.plan_job_id)  # a worker may have taken it first
    return MergeRequest.objects.get(id=merge_request.id)


def test_the_page_pages_through_conflicting_keys_and_saves_a_pick_on_a_later_page(spark, user):
    user_client = Client()
    user_client.force_login(user)
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"], columns=COLUMNS)
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": [{"id": i, "amount": i} for i in range(KEYS)]})
    branch_create(catalog=catalog, name="dev", source="main")
    for branch, step in (("dev", 100), ("main", 200)):  # every key's amount changed differently on each side
        rows = [{"id": i, "amount": i + step} for i in range(KEYS)]
        run_in_process(spark, catalog, {"strategy": "upsert", "key_columns": ["id"], "rows": rows}, branch=branch)
    opened = planned(merge_request_open(catalog=catalog, source="dev", target="main", title="amounts", author=user))
    url = f"/catalogs/{catalog.name}/merge-requests/{opened.number}"

    first = user_client.get(url).content.decode()
    assert "1 to 20 of the 25 listed here" in first and "Next keys" in first and "Previous keys" not in first
    second = user_client.get(url, {"keys_table": "sales.orders", "keys_offset": 20}).content.decode()
    assert "21 to 25 of the 25 listed here" in second and "Previous keys" in second and "Next keys" not in second
    on_first, on_second = (re.findall(r'aria-label="Cells of key \[(\d+)\]"', html) for html in (first, second))
    assert (len(on_first), len(on_second)) == (20, 5)
    assert sorted(map(int, on_first + on_second)) == list(range(KEYS))  # every key once, in the comparison's order
    key = int(on_second[0])

    page = user_client.get(url)  # the CSRF token of the form
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())[1]
    saved = user_client.post(f"{url}/resolutions", {"csrfmiddlewaretoken": token,
                                                     f"cell:sales.orders:[{key}]:amount": "source"}, follow=True)  # fmt: skip
    assert "Resolutions saved" in saved.content.decode()
    picked = MergeRequest.objects.get(id=opened.id).resolutions["cells"]["sales.orders"][f"[{key}]"]["amount"]
    assert (picked["pick"], picked["inputs"], picked["by"]) == (
        "source", {"base": key, "source": key + 100, "target": key + 200}, "alice")  # fmt: skip
    planned(MergeRequest.objects.get(id=opened.id))
    shown = user_client.get(url, {"keys_table": "sales.orders", "keys_offset": 20}).content.decode()
    row = re.search(rf'aria-label="Cells of key \[{key}\]".*?</table>', shown, re.S)[0]
    assert f"<code>{key + 100}</code>" in row and "(pick)" in row
