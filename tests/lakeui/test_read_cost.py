"""What a metadata read costs (issue 16): the queries of each endpoint, counted so they stay counted, and reads
at a commit answered from that commit's answer (lakeui/api/conditional.py) without a stale branch."""

import pytest

from tests.lakeui.conftest import API, BASE, MAIN

pytestmark = pytest.mark.django_db

# endpoint: (path, queries on a first read, queries on a repeat) with token authentication, for a viewer. Before the
# view, one query reads the token's user, the catalog with the reader's role, and the ref's commit and its chain (or
# the state of the rows a read not at a ref reads): catalog_app/middleware.py. A repeat whose answer is kept: that
# query alone. A first read: the view takes the user, the role and the ref from it, and reads what it answers.
READS = {
    "catalogs": (API, 2, 1),  # the page (which the list fits: no COUNT)
    "catalog": (BASE, 2, 1),  # and its creator
    "branches": (f"{BASE}/branches", 2, 1),
    "tags": (f"{BASE}/tags", 2, 1),
    "commits": (f"{MAIN}/commits", 2, 1),
    "databases": (f"{MAIN}/databases", 2, 1),
    "tables": (f"{MAIN}/databases/db/tables", 3, 1),  # the database, then its tables
    "table": (f"{MAIN}/databases/db/tables/t3", 2, 1),  # with its database, in one query
    "history": (f"{MAIN}/databases/db/tables/t3/history", 4, 1),  # the table, its versions, its schemas
    "at a tag": (f"{API}/lake/refs/v1/databases/db/tables/t3", 2, 1),
    "a branch": (f"{BASE}/branches/dev", 2, 1),  # the branch's state, the branch
    "a tag": (f"{BASE}/tags/v1", 2, 1),
}
# After a commit that changed none of what they read, answers at the branch cost the token's query and one probe
# of the versions recorded since (lakeui/api/conditional.carried); the commit log, which every commit changes, is
# made again.
CARRIED = {"databases": 2, "table": 2, "history": 2, "tables": 2}


@pytest.mark.parametrize("endpoint", CARRIED)
def test_a_read_after_a_commit_elsewhere_costs_two_queries(reader, user_client, endpoint, django_assert_num_queries):
    path = READS[endpoint][0]
    assert user_client.post(f"{MAIN}/databases", {"name": "other"}, format="json").status_code == 201
    table = {"name": "x", "columns": [{"name": "id", "type": "long"}]}
    kept = reader.get(path)
    assert user_client.post(f"{MAIN}/databases/other/tables", table, format="json").status_code == 201
    with django_assert_num_queries(CARRIED[endpoint]):
        again = reader.get(path)
    assert (again.status_code, again.content) == (200, kept.content)


@pytest.mark.parametrize("endpoint", READS)
def test_a_read_costs_its_counted_queries_and_a_repeat_at_the_same_commit_fewer(
    reader, endpoint, django_assert_max_num_queries
):
    path, first, repeat = READS[endpoint]
    with django_assert_max_num_queries(first):
        answer = reader.get(path)
    assert answer.status_code == 200, answer.content
    with django_assert_max_num_queries(repeat):
        again = reader.get(path)
    assert (again.status_code, again.content) == (200, answer.content)


def test_a_repeated_read_is_the_same_answer_for_its_reader_only_and_never_a_stale_branch(reader, user_client):
    table = f"{MAIN}/databases/db/tables/t3"
    first = reader.get(table)
    assert reader.get(table).content == first.content
    assert reader.get(table).headers["ETag"] == first.headers["ETag"]
    assert user_client.get(table).headers["ETag"] != first.headers["ETag"]  # another reader, another answer

    patch = {"set_properties": {"owner": "ops"}}
    assert user_client.patch(table, patch, format="json").status_code == 200  # main moves
    fresh = reader.get(table)
    assert fresh.json()["properties"] == {"owner": "ops"} and fresh.headers["ETag"] != first.headers["ETag"]
    assert reader.get(f"{API}/lake/refs/v1/databases/db/tables/t3").json()["properties"] == {}  # the tag stays

    assert user_client.delete(f"{BASE}/roles/bob").status_code in (200, 204)  # a cached answer is not a permit
    refused = reader.get(f"{API}/lake/refs/v1/databases/db/tables/t3")
    assert (refused.status_code, refused.json()["code"]) == (404, "catalog_not_found")
