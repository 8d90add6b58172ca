"""A read at a ref whose answer is kept is answered before the view (catalog_app/middleware.py
CachedReadMiddleware): the same answer and headers as the normal path, in one query, and never a permit or a
stale branch."""

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from rest_framework.test import APIClient

from catalog_app.models import Catalog, ExpiredCommit
from tests.lakeui.conftest import API, BASE, MAIN, token_client

pytestmark = pytest.mark.django_db

FAST = "catalog_app.middleware.CachedReadMiddleware"
TABLE = f"{MAIN}/databases/db/tables/t3"
AT_REF = [
    f"{MAIN}/commits",
    f"{MAIN}/databases",
    f"{MAIN}/databases/db",
    f"{MAIN}/databases/db/tables",
    TABLE,
    f"{TABLE}/history",
    f"{API}/lake/refs/v1/databases/db/tables/t3",  # a tag
    f"{MAIN}/databases/db/tables?page_size=2&page=2",
]


def normal_way(client: APIClient, path: str, **headers):
    """The answer without the cached-read path (a fresh handler loads the middleware without it)."""
    with override_settings(MIDDLEWARE=[name for name in settings.MIDDLEWARE if name != FAST]):
        fresh = APIClient()
        fresh.credentials(**client._credentials)
        return fresh.get(path, **headers)


def test_the_cached_read_path_is_in_the_middleware():
    assert settings.MIDDLEWARE[-1] == FAST  # innermost: every other middleware runs for its answers too


@pytest.mark.parametrize("path", AT_REF)
def test_a_kept_answer_is_the_normal_ways_answer_with_its_headers_in_one_query(reader, path, django_assert_num_queries):
    first = reader.get(path)
    assert first.status_code == 200, first.content
    with django_assert_num_queries(1):  # the token's user, the catalog with the role, the ref's commit
        fast = reader.get(path)
    normal = normal_way(reader, path)
    assert (fast.status_code, fast.content) == (normal.status_code, normal.content) == (200, first.content)
    assert dict(fast.headers) == dict(normal.headers)
    assert fast.headers["ETag"] == first.headers["ETag"]


@pytest.mark.parametrize("path", [TABLE, f"{MAIN}/commits"])
def test_a_client_holding_the_answer_gets_304_with_the_normal_ways_headers(reader, path, django_assert_num_queries):
    etag = reader.get(path).headers["ETag"]
    with django_assert_num_queries(1):
        fast = reader.get(path, HTTP_IF_NONE_MATCH=f'"other", {etag}')
    normal = normal_way(reader, path, HTTP_IF_NONE_MATCH=etag)
    assert fast.status_code == normal.status_code == 304
    assert fast.content == normal.content == b""
    assert dict(fast.headers) == dict(normal.headers)
    assert fast.headers["ETag"] == etag


def test_a_revoked_role_is_refused_though_the_answer_is_kept(reader, user_client):
    etag = reader.get(TABLE).headers["ETag"]
    assert user_client.delete(f"{BASE}/roles/bob").status_code in (200, 204)
    for headers in ({}, {"HTTP_IF_NONE_MATCH": etag}):
        refused = reader.get(TABLE, **headers)
        assert (refused.status_code, refused.json()["code"]) == (404, "catalog_not_found")


def test_an_inactive_user_or_a_wrong_token_or_none_is_refused_though_the_answer_is_kept(reader):
    assert reader.get(TABLE).status_code == 200
    anonymous = APIClient()
    assert anonymous.get(TABLE).status_code == 401
    anonymous.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert anonymous.get(TABLE).status_code == 401
    anonymous.credentials(HTTP_AUTHORIZATION="Token")
    assert anonymous.get(TABLE).status_code == 401

    get_user_model().objects.filter(username="bob").update(is_active=False)
    assert reader.get(TABLE).status_code == 401


def test_another_reader_never_gets_anothers_kept_answer(reader, user_client):
    kept = reader.get(TABLE)
    carol = get_user_model().objects.create_user("carol")
    assert user_client.post(f"{BASE}/roles", {"user": "carol", "role": "viewer"}, format="json").status_code == 201
    theirs = token_client(carol).get(TABLE, HTTP_IF_NONE_MATCH=kept.headers["ETag"])
    assert theirs.status_code == 200 and theirs.headers["ETag"] != kept.headers["ETag"]


def test_a_branch_read_after_a_write_is_the_new_head(reader, user_client):
    kept = reader.get(TABLE)
    assert reader.get(TABLE).headers["ETag"] == kept.headers["ETag"]
    assert user_client.patch(TABLE, {"set_properties": {"owner": "ops"}}, format="json").status_code == 200
    fresh = reader.get(TABLE, HTTP_IF_NONE_MATCH=kept.headers["ETag"])
    assert fresh.status_code == 200 and fresh.json()["properties"] == {"owner": "ops"}
    assert fresh.headers["ETag"] != kept.headers["ETag"]
    tag = reader.get(f"{API}/lake/refs/v1/databases/db/tables/t3")
    assert tag.json()["properties"] == {}  # the tag stays where it was


def test_time_travel_and_commit_id_prefixes_go_the_normal_way(reader):
    commit = reader.get(f"{MAIN}/commits").json()["results"][0]["id"]
    for path in (f"{TABLE}?at=2999-01-01T00:00:00Z", f"{API}/lake/refs/{commit[:12]}/databases/db/tables/t3"):
        first = reader.get(path)
        assert first.status_code == 200, first.content
        with CaptureQueriesContext(connection) as queries:
            again = reader.get(path)
        assert (again.status_code, again.content) == (200, first.content)
        assert len(queries) > 1  # the view resolved the ref (a prefix may name several commits: it says so)


# Reads not at a ref: their answer is named by the state of the rows it reads (token_reads.catalog_state).
NOT_AT_REF = [API, BASE, f"{BASE}/branches", f"{BASE}/tags", f"{BASE}/branches?page_size=1&page=2", f"{API}?name=x"]


@pytest.mark.parametrize("path", NOT_AT_REF)
def test_a_kept_answer_not_at_a_ref_is_the_normal_ways_in_one_query(reader, path, django_assert_num_queries):
    first = reader.get(path)
    assert first.status_code == 200, first.content
    with django_assert_num_queries(1):  # the token's user, the catalog with the role, the state of what it reads
        fast = reader.get(path)
    normal = normal_way(reader, path)
    assert (fast.status_code, fast.content) == (normal.status_code, normal.content) == (200, first.content)
    assert dict(fast.headers) == dict(normal.headers)
    assert fast.headers["ETag"] == first.headers["ETag"] == normal.headers["ETag"]


@pytest.mark.parametrize("path", NOT_AT_REF[:4])
def test_a_client_holding_an_answer_not_at_a_ref_gets_304(reader, path, django_assert_num_queries):
    etag = reader.get(path).headers["ETag"]
    with django_assert_num_queries(1):
        fast = reader.get(path, HTTP_IF_NONE_MATCH=f'"other", {etag}')
    normal = normal_way(reader, path, HTTP_IF_NONE_MATCH=etag)
    assert fast.status_code == normal.status_code == 304
    assert dict(fast.headers) == dict(normal.headers)
    assert fast.headers["ETag"] == etag


def test_the_normal_way_takes_the_state_the_cached_read_path_read(reader, django_assert_num_queries):
    # first read: the path's one query (it keeps the state, and the view takes the catalog and role it read for its
    # role check) and the page (which the list fits, so it is counted by its length, no COUNT); no more
    with django_assert_num_queries(2):
        assert reader.get(f"{BASE}/branches").status_code == 200


def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [item["name"] for item in response.json()["results"]]


def test_a_new_or_deleted_branch_or_tag_or_a_moved_head_shows_at_once(reader, user_client):
    branches, tags = f"{BASE}/branches", f"{BASE}/tags"
    kept = {path: reader.get(path) for path in (branches, tags)}
    assert names(reader.get(branches)) == ["dev", "main"] and names(reader.get(tags)) == ["v1"]

    assert user_client.post(branches, {"name": "feature", "source": "main"}, format="json").status_code == 201
    assert user_client.post(tags, {"name": "v2", "ref": "main"}, format="json").status_code == 201
    fresh = reader.get(branches, HTTP_IF_NONE_MATCH=kept[branches].headers["ETag"])
    assert names(fresh) == ["dev", "feature", "main"] and fresh.headers["ETag"] != kept[branches].headers["ETag"]
    assert names(reader.get(tags, HTTP_IF_NONE_MATCH=kept[tags].headers["ETag"])) == ["v1", "v2"]

    assert user_client.delete(f"{branches}/feature").status_code == 204
    assert user_client.delete(f"{tags}/v2").status_code == 204
    assert names(reader.get(branches)) == ["dev", "main"] and names(reader.get(tags)) == ["v1"]

    heads = {item["name"]: item["head"] for item in reader.get(branches).json()["results"]}
    patch = {"set_properties": {"owner": "ops"}}
    assert user_client.patch(f"{MAIN}/databases/db/tables/t3", patch, format="json").status_code == 200
    moved = {item["name"]: item["head"] for item in reader.get(branches).json()["results"]}
    assert moved["dev"] == heads["dev"] and moved["main"] != heads["main"]
    assert moved["main"] == reader.get(f"{MAIN}/commits").json()["results"][0]["id"]


def test_a_change_to_a_catalog_or_its_creator_shows_at_once(reader, user_client, user):
    kept = {path: reader.get(path) for path in (API, BASE, f"{BASE}/branches")}
    assert kept[BASE].json()["created_by"] == "alice"
    user.username = "alicia"
    user.save()  # the answers show the creator's name
    for path, answer in kept.items():
        fresh = reader.get(path, HTTP_IF_NONE_MATCH=answer.headers["ETag"])
        assert fresh.status_code == 200 and fresh.headers["ETag"] != answer.headers["ETag"]
        assert "alicia" in fresh.content.decode() and 'alice"' not in fresh.content.decode()

    Catalog.objects.filter(name="lake").update(description="the lake")  # any change of its row
    assert reader.get(BASE).json()["description"] == "the lake"
    assert reader.get(API).json()["results"][0]["description"] == "the lake"


def test_the_catalog_list_shows_at_once_a_catalog_made_visible_or_hidden_and_never_one_not_visible(reader, user_client):
    assert names(reader.get(API)) == ["lake"]
    assert user_client.post(API, {"name": "pond"}, format="json").status_code == 201  # bob has no role in it
    assert names(reader.get(API)) == ["lake"]
    assert reader.get(f"{API}/pond").status_code == 404 and reader.get(f"{API}/pond/branches").status_code == 404
    assert user_client.post(f"{API}/pond/roles", {"user": "bob", "role": "viewer"}, format="json").status_code == 201
    assert names(reader.get(API)) == ["lake", "pond"]
    assert user_client.delete(f"{API}/pond/roles/bob").status_code in (200, 204)
    assert names(reader.get(API)) == ["lake"]
    assert user_client.delete(f"{API}/pond").status_code == 204
    assert user_client.post(API, {"name": "pool"}, format="json").status_code == 201
    assert names(reader.get(API)) == ["lake"]


def test_staff_see_every_catalog_and_a_user_made_staff_at_once(reader, user_client):
    assert user_client.post(API, {"name": "pond"}, format="json").status_code == 201
    assert names(reader.get(API)) == ["lake"]
    get_user_model().objects.filter(username="bob").update(is_staff=True)
    assert names(reader.get(API)) == ["lake", "pond"]
    assert reader.get(f"{API}/pond/tags").status_code == 200  # staff are admin everywhere


@pytest.mark.parametrize("path", NOT_AT_REF[1:4])
def test_a_revoked_role_is_refused_though_an_answer_not_at_a_ref_is_kept(reader, user_client, path):
    etag = reader.get(path).headers["ETag"]
    assert user_client.delete(f"{BASE}/roles/bob").status_code in (200, 204)
    for headers in ({}, {"HTTP_IF_NONE_MATCH": etag}):
        refused = reader.get(path, **headers)
        assert (refused.status_code, refused.json()["code"]) == (404, "catalog_not_found")
    assert names(reader.get(API)) == []


@pytest.mark.parametrize("path", NOT_AT_REF[:4])
def test_no_user_gets_anothers_answer_not_at_a_ref(reader, user_client, path):
    kept = reader.get(path)
    carol = get_user_model().objects.create_user("carol")
    assert user_client.post(f"{BASE}/roles", {"user": "carol", "role": "viewer"}, format="json").status_code == 201
    theirs = token_client(carol).get(path, HTTP_IF_NONE_MATCH=kept.headers["ETag"])
    assert theirs.status_code == 200 and theirs.headers["ETag"] != kept.headers["ETag"]
    assert theirs.content == kept.content  # the same catalog seen alike, each answer of its own

    dave = get_user_model().objects.create_user("dave")  # no role in it
    refused = token_client(dave).get(path, HTTP_IF_NONE_MATCH=kept.headers["ETag"])
    if path == API:
        assert names(refused) == [] and refused.headers["ETag"] != kept.headers["ETag"]
    else:
        assert refused.status_code == 404


def test_an_inactive_user_or_a_wrong_token_is_refused_an_answer_not_at_a_ref(reader):
    for path in NOT_AT_REF[:4]:
        assert reader.get(path).status_code == 200
        anonymous = APIClient()
        anonymous.credentials(HTTP_AUTHORIZATION="Token not-a-token")
        assert anonymous.get(path).status_code == 401
    get_user_model().objects.filter(username="bob").update(is_active=False)
    for path in NOT_AT_REF[:4]:
        assert reader.get(path).status_code == 401


# Reads at a commit id, of one branch and of one tag: kept and answered before the view too.
NAMED = [f"{BASE}/branches/main", f"{BASE}/branches/dev", f"{BASE}/tags/v1"]


def test_a_read_at_a_commit_id_is_kept_and_an_expired_commit_is_still_410(reader, django_assert_num_queries):
    commit = reader.get(f"{MAIN}/commits").json()["results"][1]["id"]  # the commit that made t4
    path = f"{API}/lake/refs/{commit}/databases/db/tables/t3"
    first = reader.get(path)
    assert first.status_code == 200, first.content
    with django_assert_num_queries(1):
        fast = reader.get(path)
    caches["reads"].clear()
    normal = normal_way(reader, path)
    assert (fast.status_code, fast.content) == (normal.status_code, normal.content) == (200, first.content)
    assert dict(fast.headers) == dict(normal.headers)

    ExpiredCommit.objects.create(commit_id=commit, catalog=Catalog.objects.get(name="lake"))  # as retention does
    expired = reader.get(path)
    assert (expired.status_code, expired.json()["code"]) == (410, "history_expired")


@pytest.mark.parametrize("path", NAMED)
def test_a_kept_branch_or_tag_is_the_normal_ways_in_one_query_and_moves_at_once(
    reader, user_client, path, django_assert_num_queries
):
    first = reader.get(path)
    assert first.status_code == 200, first.content
    with django_assert_num_queries(1):
        fast = reader.get(path)
    normal = normal_way(reader, path)
    assert (fast.status_code, fast.content) == (normal.status_code, normal.content) == (200, first.content)
    assert dict(fast.headers) == dict(normal.headers)

    assert user_client.patch(TABLE, {"set_properties": {"owner": "ops"}}, format="json").status_code == 200
    head = reader.get(f"{MAIN}/commits").json()["results"][0]["id"]
    moved = reader.get(path)
    assert (moved.json().get("head") == head) == path.endswith("/main")
    if path.endswith("/main"):
        return
    kind, name = path.rsplit("/", 2)[1:]
    assert user_client.delete(path).status_code == 204
    assert reader.get(path).status_code == 404
    source = {"ref": "main"} if kind == "tags" else {"source": "main"}
    assert user_client.post(f"{BASE}/{kind}", {"name": name, **source}, format="json").status_code == 201
    again = reader.get(path, HTTP_IF_NONE_MATCH=first.headers["ETag"])
    assert again.status_code == 200 and again.content != first.content  # made again: its commit and time differ
    assert again.content == fresh_answer(reader, path).content


def test_catalog_answers_stay_kept_across_commits(reader, user_client, django_assert_num_queries):
    kept = {path: reader.get(path) for path in (API, BASE)}
    assert user_client.patch(TABLE, {"set_properties": {"owner": "ops"}}, format="json").status_code == 200
    for path, answer in kept.items():
        with django_assert_num_queries(1):  # a commit moves the catalog's sequence, which no answer shows
            again = reader.get(path)
        assert (again.content, again.headers["ETag"]) == (answer.content, answer.headers["ETag"])


# Answers carried from one head of a branch to the next (lakeui/api/conditional.carried): a commit that records no
# version of what the answer read leaves it, and the next read takes it without its view.
CARRIED = [TABLE, f"{TABLE}/history", f"{MAIN}/databases/db", f"{MAIN}/databases/db/history", f"{MAIN}/databases"]
NOT_CARRIED = [f"{MAIN}/databases/db/tables", f"{MAIN}/commits"]


def fresh_answer(client: APIClient, path: str):
    """The normal way's answer made anew (no answer kept: none carried either)."""
    caches["reads"].clear()
    return normal_way(client, path)


def test_an_answer_a_commit_did_not_change_is_carried_to_the_new_head_as_the_normal_way_makes_it(
    reader, user_client, django_assert_num_queries, django_assert_max_num_queries
):
    kept = {path: reader.get(path) for path in CARRIED + NOT_CARRIED}
    other = f"{MAIN}/databases/db/tables/t1"
    for index in range(3):  # three commits, none touching t3 or the database
        assert user_client.patch(other, {"set_properties": {"n": str(index)}}, format="json").status_code == 200
    served = {}
    for path in CARRIED:
        with django_assert_num_queries(2):  # the token's query, and the versions the commits in between recorded
            carried = reader.get(path)
        with django_assert_num_queries(1):
            again = reader.get(path)  # now kept at the new head
        served[path] = (carried, again)
    for path, (carried, again) in served.items():
        normal = fresh_answer(reader, path)
        assert (
            (carried.status_code, carried.content) == (normal.status_code, normal.content) == (200, kept[path].content)
        )
        assert dict(carried.headers) == dict(normal.headers) == dict(again.headers)
        assert carried.headers["ETag"] != kept[path].headers["ETag"]  # the new head's answer, named by it
    for path in NOT_CARRIED:
        with django_assert_max_num_queries(10):
            changed = reader.get(path)
        assert changed.content != kept[path].content and changed.content == fresh_answer(reader, path).content


def column(name: str) -> dict:
    return {"name": name, "columns": [{"name": "id", "type": "long"}, {"name": "x", "type": "string"}]}


DB = f"{MAIN}/databases/db"
CHANGES = {  # a commit on main: (method, path, body)
    "a property of the table read": ("patch", TABLE, {"set_properties": {"owner": "ops"}}),
    "a property of another table": ("patch", f"{DB}/tables/t1", {"set_properties": {"owner": "ops"}}),
    "the table renamed": ("patch", TABLE, {"name": "t9"}),
    "another table renamed to a read one's old name": ("patch", f"{DB}/tables/t1", {"name": "t8"}),
    "the table dropped": ("delete", TABLE, None),
    "a column added to the table": ("post", f"{TABLE}/columns", {"name": "x", "type": "string"}),
    "a new table": ("post", f"{DB}/tables", column("t7")),
    "a new database": ("post", f"{MAIN}/databases", {"name": "db2"}),
    "the database's property": ("patch", DB, {"set_properties": {"owner": "ops"}}),
    "the database renamed": ("patch", DB, {"name": "dbx"}),
}


@pytest.mark.parametrize("change", CHANGES)
def test_after_any_commit_every_read_at_the_branch_is_the_normal_ways_answer(reader, user_client, change):
    """A read after a commit sees the commit: carried or made, each answer is what the normal way makes anew."""
    paths = CARRIED + NOT_CARRIED + [f"{DB}/tables/t1", f"{DB}/tables/t8", f"{DB}/tables/t9", f"{DB}/tables/t7"]
    for path in paths:
        reader.get(path)
        reader.get(path)
    method, path, body = CHANGES[change]
    assert getattr(user_client, method)(path, body, format="json").status_code in (200, 201, 204)
    served = {path: reader.get(path) for path in paths}  # all before any answer is made anew (that drops them)
    for path, answer in served.items():
        normal = fresh_answer(reader, path)
        assert (answer.status_code, answer.content) == (normal.status_code, normal.content), path
        if answer.status_code == 200:
            assert dict(answer.headers) == dict(normal.headers), path
    if change == "a property of the table read":
        assert reader.get(TABLE).json()["properties"] == {"owner": "ops"}
