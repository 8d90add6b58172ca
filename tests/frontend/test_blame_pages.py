"""The blame pages (frontend/views/blame.py, docs/provenance.md) through Django's test client on real data: the
table page links its blame; the blame shows each cell's writer with the chain that brought it (a pick, a merge with
its request, approver and checks, every step a link), paged and per key, everything escaped; a key's history lists
its versions; a merge request's changed rows link each key to the blame of the target's current value; bad input
is a 4xx page and a stranger sees nothing."""

import html
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from catalog_app.services.refs import branch_create
from checks_app.services.checks import check_create
from lakeui.jobs.services import job_execute
from merge_app.services.merge_requests import (
    merge_request_merge,
    merge_request_open,
    merge_request_review,
    merge_request_status_post,
)
from merge_app.services.picks import commits_pick
from tests.conftest import wait_for_job
from tests.frontend.test_review import fragment_urls
from tests.frontend.test_views import text
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.merges import change, insert

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

TABLE = "/catalogs/lake/browse/sales/orders"
HOSTILE = "<script>alert(1)</script>"


def upsert(catalog, rows, **kwargs):
    return change(catalog, "table_load", {"strategy": "upsert", "key_columns": ["id"], "rows": rows}, **kwargs)


def body(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def row_of(page: str, key: int) -> str:
    """The blame row of one key (a one-column key) and its provenance panel below it."""
    start = page.index(f'<tr class="blame-row" data-key="[{key}]">')
    return page[start : page.index("</tr>", page.index('<tr class="blame-chain-row">', start))]


def planned_request(catalog, source, author, title):
    request = merge_request_open(catalog=catalog, source=source, target="main", title=title, author=author)
    job_execute(job_id=str(request.plan_job_id), worker="test-process")
    wait_for_job(request.plan_job_id)  # a worker may have taken it first
    request.refresh_from_db()
    return request


def test_blame_pages_name_each_cells_writer_and_its_chain(user):
    bob, _ = get_user_model().objects.get_or_create(username="bob")
    catalog = make_catalog(user=user)
    make_table(catalog, primary_key=["id"])
    check = check_create(catalog=catalog, name="no negative amounts", branches="main",
                         sql="SELECT id FROM sales.orders WHERE amount < 0", created_by=user)  # fmt: skip
    insert(catalog, [{"id": i, "amount": i, "region": "eu"} for i in range(1, 26)])  # 25 rows: two pages of 20
    first = head(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    upsert(catalog, [{"id": 90, "amount": 90, "region": HOSTILE}], branch="dev")
    written = head(catalog, "dev")
    # Merge request !1, approved by bob, with its SQL check and an external status.
    request = planned_request(catalog, "dev", user, "order 90")
    merge_request_review(merge_request=request, reviewer=bob, decision="approve")
    merge_request_status_post(merge_request=request, user=bob, name="ci/build", state="success", head=written,
                              url="https://ci.example/builds/7?a=1&b=2")  # fmt: skip
    request.refresh_from_db()
    job = merge_request_merge(merge_request=request, user=user)
    job_execute(job_id=str(job.id), worker="test-process")
    assert wait_for_job(job.id).status == "succeeded"
    merged = head(catalog)
    # Its amount fixed on hotfix and picked onto main.
    branch_create(catalog=catalog, name="hotfix", source="main")
    upsert(catalog, [{"id": 90, "amount": 95, "region": HOSTILE}], branch="hotfix")
    fixed = head(catalog, "hotfix")
    (pick,) = commits_pick(catalog=catalog, kind="cherry_pick", branch="main", commits=[fixed])
    alice = signed_in(user)

    # The table page links the blame at its ref.
    table = body(alice.get(TABLE, {"ref": "main"}))
    assert f'<a href="{TABLE}/blame?ref=main">Blame: who wrote each value</a>' in table

    # Page 1: keys 1-20, each cell linked to its writer; the pager to page 2 (and back).
    page = body(alice.get(f"{TABLE}/blame", {"ref": "main"}))
    assert re.findall(r'data-key="\[(\d+)\]"', page) == [str(i) for i in range(1, 21)]
    assert "26 rows; page 1 of 2." in page
    assert page.count(f'class="blame-cell" href="/catalogs/lake/commits/{first}"') == 20 * 3
    assert f'href="{TABLE}/blame?ref=main&amp;page=2" rel="next">Next rows</a>' in page
    second = body(alice.get(f"{TABLE}/blame", {"ref": "main", "page": 2}))
    assert re.findall(r'data-key="\[(\d+)\]"', second) == [*map(str, range(21, 26)), "90"]
    assert 'rel="prev">Previous rows</a>' in second and "Next rows" not in second

    # Key 90: its amount written by the hotfix commit and brought by the pick; its other cells by dev's commit,
    # brought by the merge of !1 (approved by bob, its checks passed), each step a link.
    row = row_of(second, 90)
    amount = row[row.index('data-column="amount"') : row.index('data-column="region"')]
    assert f'class="blame-cell" href="/catalogs/lake/commits/{fixed}"' in amount and "via 1" in amount
    panel = row[row.index('<details class="blame-panel">') :]
    amount_step = re.search(r"<dt>amount</dt>\s*<dd>(.*?)</dd>", panel, re.S).group(1)
    other_steps = re.search(r"<dt>id, region</dt>\s*<dd>(.*?)</dd>", panel, re.S).group(1)
    assert f'<a href="/catalogs/lake/commits/{fixed}" class="blame-commit"><code>{fixed[:12]}</code></a>' in amount_step
    assert "on hotfix" in amount_step and f'<a href="/catalogs/lake/commits/{pick.commit_id}">' in amount_step
    assert f'(picked <a href="/catalogs/lake/commits/{fixed}">' in amount_step
    assert f'<a href="/catalogs/lake/commits/{written}" class="blame-commit">' in other_steps
    assert f'<a href="/catalogs/lake/commits/{merged}"><code>{merged[:12]}</code></a>' in other_steps
    assert '· merge request <a href="/catalogs/lake/merge-requests/1">!1</a>' in other_steps
    assert "· approved by bob" in other_steps
    assert f'<a href="/catalogs/lake/checks/{check.id}" class="blame-check" data-state="success">' in other_steps
    assert ('<a href="https://ci.example/builds/7?a=1&amp;b=2" rel="noopener noreferrer" class="blame-check" '
            'data-state="success">ci/build</a>') in other_steps  # fmt: skip
    # Everything escaped: the hostile value shows as text.
    assert HOSTILE not in second and html.escape(HOSTILE, quote=False) in row
    # The tooltip says the chain in words.
    assert re.search(rf'title="commit {fixed[:12]} by [^"]* on hotfix, [^"]*; then cherry_pick', amount)

    # One key, from the form; its history: every version with its commit and the merge or pick that made it.
    one = body(alice.get(f"{TABLE}/blame", {"ref": "main", "key": "[90]"}))
    assert re.findall(r'data-key="\[(\d+)\]"', one) == ["90"] and f'href="{TABLE}/blame?ref=main">All rows</a>' in one
    (history_url,) = set(re.findall(r'class="key-history" href="([^"]+)"', one))
    assert history_url == f"{TABLE}/key-history?ref=main&amp;key=%5B90%5D"
    history = body(alice.get(html.unescape(history_url)))
    assert re.findall(r'data-change="(\w+)"', history) == ["update", "insert"]
    versions = history.split('data-change="')[1:]
    assert f'href="/catalogs/lake/commits/{fixed}" class="blame-commit"' in versions[0]
    assert f'<a href="/catalogs/lake/commits/{pick.commit_id}">' in versions[0]
    assert f'href="/catalogs/lake/commits/{written}" class="blame-commit"' in versions[1] and "!1</a>" in versions[1]
    assert '<td class="cell-changed">95</td>' in versions[0] and HOSTILE not in history

    # A merge request's changed rows: each key linked to the blame of the target's current value.
    branch_create(catalog=catalog, name="dev2", source="main")
    upsert(catalog, [{"id": 90, "amount": 99, "region": "us"}], branch="dev2")
    upsert(catalog, [{"id": 90, "amount": 97, "region": HOSTILE}])  # main changes its amount too: a conflict
    on_main = head(catalog)
    second_request = planned_request(catalog, "dev2", user, "order 90 again")
    review = body(alice.get(f"/catalogs/lake/merge-requests/{second_request.number}"))
    fragment = fragment_urls(review)["Source dev2 vs base"]
    assert "&blame_at=main" in fragment
    rows = body(alice.get(fragment))
    assert '<th scope="col">On main now</th>' in rows
    link = re.search(r"<a class=\"target-blame\" href=\"([^\"]+)\">who wrote main's value</a>", rows).group(1)
    assert link == f"{TABLE}/blame?ref=main&amp;key=%5B90%5D"
    target = body(alice.get(html.unescape(link)))
    target_row = row_of(target, 90)
    assert (
        f'<td data-column="amount">97\n        <br><a class="blame-cell" href="/catalogs/lake/commits/{on_main}"'
        in (target_row)
    )
    assert f'<td data-column="id">90\n        <br><a class="blame-cell" href="/catalogs/lake/commits/{written}"' in (
        target_row
    )
    # The conflicting key: the blame of main's value beside the three versions of the row, read when opened.
    (inline,) = re.findall(r'<details class="target-provenance" data-rows-url="([^"]+)">', review)
    assert html.unescape(inline) == f"{TABLE}/blame?ref=main&key=%5B90%5D&fragment=1"
    provenance = body(alice.get(html.unescape(inline)))
    assert "<h1>" not in provenance and f'href="/catalogs/lake/commits/{on_main}"' in row_of(provenance, 90)
    # A key the ref does not hold: the fragment says so (the page's script shows it in the box).
    missing = body(alice.get(f"{TABLE}/blame", {"ref": "main", "key": "[77]", "fragment": 1}))
    assert "(key_not_found)" in missing and "<h1>" not in missing

    # Bad input is a 4xx page; a stranger (no role in the catalog) sees a 404 as for a catalog that does not exist.
    for params, status, code in [
        ({"ref": "main", "key": "[9"}, 400, "invalid_key"),
        ({"ref": "main", "key": "[77]"}, 404, "key_not_found"),
        ({"ref": "nope"}, 404, "ref_not_found"),
    ]:
        response = alice.get(f"{TABLE}/blame", params)
        assert response.status_code == status and f"({code})" in text(response), (params, text(response))
    assert alice.get(f"{TABLE}/key-history", {"ref": "main", "key": "[77]"}).status_code == 404
    assert alice.get("/catalogs/lake/browse/sales/nope/blame").status_code == 404
    stranger = signed_in(get_user_model().objects.create(username="mallory"))
    assert stranger.get(f"{TABLE}/blame", {"ref": "main"}).status_code == 404
    assert stranger.get(f"{TABLE}/key-history", {"ref": "main", "key": "[90]"}).status_code == 404
    assert Client().get(f"{TABLE}/blame").status_code == 302  # to the login page
