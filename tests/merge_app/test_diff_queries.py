"""What a diff costs in queries: its reads (catalog_app's selectors, called by merge_app/selectors/diff.py and
graph.py) each read every table at once, so a diff of six changed tables runs as many queries as one of two."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog_app.services.refs import branch_create
from catalog_app.services.tables import table_update
from merge_app.selectors.diff import merge_diff
from tests.support.catalogs import make_catalog, make_table, on

pytestmark = pytest.mark.django_db


def _diff_of(name: str, tables: int) -> tuple[int, int]:
    """(objects in the diff, queries it ran) of two branches that each set a property of every one of `tables`."""
    catalog = make_catalog(name=name)
    for n in range(tables):
        make_table(catalog, table=f"t{n}")
    branch_create(catalog=catalog, name="dev", source="main")
    for branch, key in (("dev", "a"), ("main", "b")):
        for n in range(tables):
            table_update(target=on(catalog, branch), database="sales", name=f"t{n}", set_properties={key: "1"})
    with CaptureQueriesContext(connection) as queries:
        diff = merge_diff(catalog=catalog, source="dev", target="main")
    return len(diff.objects), len(queries)


def test_a_diff_of_more_tables_runs_no_more_queries():
    (few, few_queries), (many, many_queries) = _diff_of("few", 2), _diff_of("many", 6)
    assert (few, many) == (2, 6)
    assert few_queries == many_queries
