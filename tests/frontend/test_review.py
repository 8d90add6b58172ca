"""Review shows the data: the changed rows of a primary-key table and of a table without a key, changed on both
sides, on the diff page (per table, loaded when opened), the Compare page, the commit page and the log; through
Django's test client against the real worker's writes."""

import re

import pytest
from django.test import Client

from catalog_app.services.refs import branch_create
from tests.frontend.test_views import text
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import load, run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def rows(*ids):
    return [{"id": i, "amount": i * 10, "region": "eu"} for i in ids]


def both_sides_changed(user):
    """orders (key id) and events (no key) hold ids 1-3 on main; dev sets id 1's amount to -1 in both; main sets
    it to 99 in orders and loads id 7 into events."""
    catalog = make_catalog(user=user)
    make_table(catalog, primary_key=["id"])
    make_table(catalog, table="events")
    load(catalog, rows(1, 2, 3))
    load(catalog, rows(1, 2, 3), table="events")
    branch_create(catalog=catalog, name="dev", source="main")
    run(catalog, "table_update", {"set": {"amount": "-1"}, "where": "id = 1"}, branch="dev")
    run(catalog, "table_update", {"set": {"amount": "-1"}, "where": "id = 1"}, branch="dev", table="events")
    run(catalog, "table_update", {"set": {"amount": "99"}, "where": "id = 1"})
    load(catalog, rows(7), table="events")
    return catalog


def fragment_urls(html: str) -> dict[str, str]:
    """The changed-rows fragments a page loads per table, by their summary."""
    found = re.findall(
        r'<details class="changed-rows" data-rows-url="([^"]+)"[^>]*>\s*<summary>([^<]+)</summary>', html
    )
    return {summary: url.replace("&amp;", "&") for url, summary in found}


def test_diff_compare_commit_and_log_pages_show_the_changed_rows(user):
    catalog = both_sides_changed(user)
    client = Client()
    client.force_login(user)

    diff = client.get("/catalogs/lake/diff", {"from": "dev", "to": "main"}).content.decode()
    sections = diff.split('<section class="card object')
    orders = next(s for s in sections if "Table sales.orders" in s)
    events = next(s for s in sections if "Table sales.events" in s)
    # Below the rule cells of each table: the rows each side changed since the base, loaded when opened.
    assert orders.index('class="rules') < orders.index('class="changed-rows"')
    source_rows = client.get(fragment_urls(orders)["Source dev vs base"]).content.decode()
    target_rows = client.get(fragment_urls(orders)["Target main vs base"]).content.decode()
    assert '<tr class="diff-update">' in source_rows and "<del>10</del> &rarr; <ins>-1</ins>" in source_rows
    assert "<del>10</del> &rarr; <ins>99</ins>" in target_rows and "by key id" in target_rows
    keyless = client.get(fragment_urls(events)["Target main vs base"]).content.decode()
    assert "1 added" in text_of(keyless) and '<tr class="diff-insert">' in keyless and "<td>7</td>" in keyless
    keyless_source = text_of(client.get(fragment_urls(events)["Source dev vs base"]).content.decode())
    assert "1 added, 1 deleted, 0 changed" in keyless_source  # the updated row: out with 10, in with -1

    # Compare any two refs: a tag against a branch, both tables listed, rows per table.
    from catalog_app.services.refs import tag_create

    tag_create(catalog=catalog, name="v1", ref="main", created_by=user)
    compare = client.get("/catalogs/lake/compare", {"from": "v1", "to": "dev"})
    words = text(compare)
    assert "2 changed tables" in words and "Table sales.events changed" in words
    urls = re.findall(r'data-rows-url="([^"]+)"', compare.content.decode())
    first = client.get(urls[0].replace("&amp;", "&")).content.decode()
    assert "<del>99</del> &rarr; <ins>-1</ins>" in first or "<td>7</td>" in first

    # The commit page of dev's head: its operation names the table, its rows are compared with its parent.
    commit = head(catalog, "dev")
    page = client.get(f"/catalogs/lake/commits/{commit}").content.decode()
    assert "table update" in text_of(page) and "sales.events" in page
    parent = catalog.commits.get(id=commit).parent_id
    assert f'href="/catalogs/lake/commits/{parent}"' in page  # parents link to their commit pages
    url = re.search(r'data-rows-url="([^"]+)"', page).group(1).replace("&amp;", "&")
    changed = client.get(url).content.decode()
    assert "1 added" in text_of(changed) and "1 deleted" in text_of(changed)
    # The full page (without script) of the same rows.
    full = client.get(url.replace("&fragment=1", ""))
    assert full.status_code == 200 and "Changed rows of sales.events" in text(full)

    # The log names each operation's table and links each commit.
    log = client.get("/catalogs/lake/log", {"ref": "dev"}).content.decode()
    assert "table update <strong>sales.events</strong>" in log
    assert f'href="/catalogs/lake/commits/{commit}"' in log
    graph = client.get("/catalogs/lake").content.decode()
    assert f'href="/catalogs/lake/commits/{commit}"' in graph

    # A dry run's audit log: the same rows per table, at the heads it was planned on.
    from merge_app.services.merges import branch_merge

    dry = branch_merge(catalog=catalog, source="dev", target="main", dry_run=True, user=user)
    audit = client.get(f"/catalogs/lake/merges/{dry.id}").content.decode()
    urls = fragment_urls(audit)
    assert "Source dev vs base" in urls and "Target main vs base" in urls
    assert "<del>10</del> &rarr; <ins>-1</ins>" in client.get(urls["Source dev vs base"]).content.decode()


def text_of(html: str) -> str:
    return re.sub(r" ([,.:;)])", r"\1", re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


def test_an_invisible_schema_names_where_its_original_is(user):
    """ "v5 invisible (copy of v3)" while v3 is listed nowhere on the page: say it is the merged branch's schema and
    link the commit it was written at."""
    from catalog_app.services.commits import WriteTarget
    from catalog_app.services.tables import column_add
    from merge_app.services.merges import branch_merge

    catalog = make_catalog(user=user)
    make_table(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    column_add(target=WriteTarget(catalog=catalog, branch="dev"), database="sales", table="orders",
               spec={"name": "discount", "type": "int", "nullable": True})  # fmt: skip
    load(catalog, [{"id": 1, "amount": 1, "region": "eu", "discount": 5}], branch="dev")
    column_add(target=WriteTarget(catalog=catalog, branch="dev"), database="sales", table="orders",
               spec={"name": "note", "type": "string", "nullable": True})  # fmt: skip
    branch_merge(catalog=catalog, source="dev", target="main", user=user)
    client = Client()
    client.force_login(user)
    page = client.get("/catalogs/lake/browse/sales/orders", {"ref": "main"}).content.decode()
    found = re.search(r"a copy of v(\d+), a schema of the merged branch that is not in this branch's history, "
                      r'written at <a href="/catalogs/lake/commits/(\w+)">', page)  # fmt: skip
    assert found, page[page.find("Schema versions") :][:3000]
    assert f">v{found.group(1)}<" not in page  # not listed here: hence the words
    assert client.get(f"/catalogs/lake/commits/{found.group(2)}").status_code == 200
