"""The permission matrix: every API endpoint and method, for anonymous users, users without a role, and each role.

The URL patterns are enumerated, so a new endpoint (or method) without an entry in MATRIX fails here. A refused
call is made over HTTP and must change nothing; an allowed one is checked against the permission class alone (so
this test runs no job and no Spark; the merge request tests make the allowed calls for real).
"""

import re
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.exceptions import APIException
from rest_framework.test import APIClient, APIRequestFactory, force_authenticate

from catalog_app.models import Branch, Catalog, CatalogRole, Commit, ProtectedBranch, Tag
from catalog_app.selectors.access import role_at_least
from catalog_app.services.access import catalog_role_grant
from catalog_app.services.refs import branch_create, tag_create
from lakeui.errors import ApplicationError
from lakeui.jobs.models import Job
from merge_app.models import Merge, MergeRequest, MergeRequestReview
from merge_app.services.merge_requests import merge_request_open
from tests.support.catalogs import make_catalog, make_table

pytestmark = pytest.mark.django_db

V, E, A, ADMIN = "viewer", "editor", "approver", "admin"
OPEN, SIGNED_IN = "open", "signed_in"  # endpoints outside a catalog

# (view class, method) -> who may call it: a role in the catalog, or OPEN / SIGNED_IN outside catalogs.
MATRIX = {
    ("HealthApi", "get"): OPEN, ("HealthDeepApi", "get"): SIGNED_IN,
    ("SpectacularAPIView", "get"): SIGNED_IN, ("SpectacularSwaggerView", "get"): SIGNED_IN,
    # Unknown paths under /api/: a JSON 404 for anyone, whatever the method.
    ("NotFoundApi", "get"): OPEN, ("NotFoundApi", "post"): OPEN, ("NotFoundApi", "put"): OPEN,
    ("NotFoundApi", "patch"): OPEN, ("NotFoundApi", "delete"): OPEN,
    ("JobListApi", "get"): SIGNED_IN, ("JobDetailApi", "get"): SIGNED_IN, ("JobCancelApi", "post"): SIGNED_IN,
    ("CatalogListApi", "get"): SIGNED_IN, ("CatalogListApi", "post"): SIGNED_IN,
    ("CatalogDetailApi", "get"): V, ("CatalogDetailApi", "delete"): ADMIN,
    ("BranchListApi", "get"): V, ("BranchListApi", "post"): E,
    ("BranchDetailApi", "get"): V, ("BranchDetailApi", "delete"): E,
    ("TagListApi", "get"): V, ("TagListApi", "post"): E,
    ("TagDetailApi", "get"): V, ("TagDetailApi", "delete"): E,
    ("CommitLogApi", "get"): V,
    ("DatabaseListApi", "get"): V, ("DatabaseListApi", "post"): E,
    ("DatabaseDetailApi", "get"): V, ("DatabaseDetailApi", "patch"): E, ("DatabaseDetailApi", "delete"): E,
    ("ObjectHistoryApi", "get"): V,
    ("TableListApi", "get"): V, ("TableListApi", "post"): E,
    ("TableDetailApi", "get"): V, ("TableDetailApi", "patch"): E, ("TableDetailApi", "delete"): E,
    ("ColumnListApi", "post"): E,
    ("ColumnDetailApi", "patch"): E, ("ColumnDetailApi", "delete"): E,
    ("TableLoadApi", "post"): E, ("TableDeleteApi", "post"): E, ("TableUpdateApi", "post"): E,
    ("TableCompactApi", "post"): E,
    ("TableRowsApi", "get"): V, ("TableScanApi", "get"): V, ("TableStagingApi", "post"): E,
    ("CatalogGcApi", "post"): ADMIN, ("ChangesApi", "get"): V, ("TableBlameApi", "get"): V,
    # A consumer reads and acknowledges a subscription's changes with read access; editors create and delete them.
    ("SubscriptionListApi", "get"): V, ("SubscriptionListApi", "post"): E,
    ("SubscriptionDetailApi", "get"): V, ("SubscriptionDetailApi", "delete"): E,
    ("SubscriptionChangesApi", "get"): V, ("SubscriptionChangesApi", "post"): V,
    ("BranchObjectListApi", "get"): V, ("BranchObjectListApi", "post"): E,
    ("BranchObjectDetailApi", "get"): V, ("BranchObjectDetailApi", "delete"): E,
    ("CatalogRoleListApi", "get"): V, ("CatalogRoleListApi", "post"): ADMIN,
    ("CatalogRoleDetailApi", "delete"): ADMIN,
    ("ProtectedBranchListApi", "get"): V, ("ProtectedBranchListApi", "post"): ADMIN,
    ("ProtectedBranchDetailApi", "delete"): ADMIN,
    ("SqlApi", "post"): E,  # CREATE BRANCH / MERGE BRANCH; SELECT and USE BRANCH need viewer (test below)
    ("DiffApi", "get"): V,
    ("MergeListApi", "get"): V, ("MergeListApi", "post"): E,
    ("MergeDetailApi", "get"): V,
    ("DiffKeysApi", "get"): V, ("DiffRowsApi", "get"): V, ("CommitDetailApi", "get"): V,
    ("RestoreListApi", "get"): V, ("RestoreListApi", "post"): E,
    ("RestoreDetailApi", "get"): V,
    ("RevertListApi", "get"): V, ("RevertListApi", "post"): E,
    ("CherryPickListApi", "get"): V, ("CherryPickListApi", "post"): E,
    ("MergeRequestListApi", "get"): V, ("MergeRequestListApi", "post"): E,
    ("MergeRequestDetailApi", "get"): V, ("MergeRequestDetailApi", "patch"): E,
    ("MergeRequestReviewApi", "post"): A,
    ("MergeRequestMergeApi", "post"): E,
    ("MergeRequestResolutionApi", "get"): V, ("MergeRequestResolutionApi", "put"): E,
    # The merge queue: an editor (the author; the service refuses others but admins) joins and leaves it.
    ("MergeRequestQueueApi", "get"): V, ("MergeRequestQueueApi", "post"): E, ("MergeRequestQueueApi", "delete"): E,
    ("BranchQueueApi", "get"): V,
    # Retention is admin-only, its preview included; storage is read by whoever reads the catalog.
    ("RetentionApi", "get"): ADMIN, ("RetentionApi", "put"): ADMIN, ("RetentionPreviewApi", "post"): ADMIN,
    ("RetentionExpireApi", "post"): ADMIN, ("StorageApi", "get"): V,
    # Merge checks: everyone who sees the catalog reads them, admins keep them; CI posts statuses as an approver.
    ("MergeRequestChecksApi", "get"): V, ("MergeRequestChecksApi", "post"): A,
    ("CheckListApi", "get"): V, ("CheckListApi", "post"): ADMIN,
    ("CheckDetailApi", "get"): V, ("CheckDetailApi", "patch"): ADMIN, ("CheckDetailApi", "delete"): ADMIN,
    ("CheckRunListApi", "get"): V, ("CheckRunListApi", "post"): ADMIN, ("CheckRunDetailApi", "get"): V,
    # Webhooks are admin-managed, reads included (tests/hooks_app/test_webhooks_api.py).
    ("WebhookListApi", "get"): ADMIN, ("WebhookListApi", "post"): ADMIN,
    ("WebhookDetailApi", "get"): ADMIN, ("WebhookDetailApi", "patch"): ADMIN, ("WebhookDetailApi", "delete"): ADMIN,
    ("DeliveryListApi", "get"): ADMIN, ("DeliveryDetailApi", "get"): ADMIN, ("DeliveryRedeliverApi", "post"): ADMIN,
}  # fmt: skip

SAMPLE = {
    "catalog": "lake", "ref": "dev", "database": "sales", "table": "orders", "column": "amount", "branch": "dev",
    "tag": "v1", "name": "x", "merge_id": str(uuid.uuid4()), "number": "1", "user": "vic", "rule_id": "1",
    "job_id": str(uuid.uuid4()), "restore_id": str(uuid.uuid4()), "commit_id": "0" * 32,
    "webhook_id": "1", "delivery_id": str(uuid.uuid4()), "check_id": "1", "run_id": str(uuid.uuid4()),
}  # fmt: skip
BODY = {"statement": "CREATE BRANCH other FROM main", "name": "x", "source": "dev", "target": "main"}
PEOPLE = {"viewer": "vic", "editor": "eddie", "approver": "abby", "admin": "ada"}


def _endpoints():
    """(path, view class, methods) of every pattern under /api/."""
    found = []

    def walk(patterns, prefix):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                route = prefix + str(pattern.pattern)
                view_class = getattr(pattern.callback, "view_class", None) or getattr(pattern.callback, "cls", None)
                if route.startswith("api/") and view_class is not None:
                    methods = [m for m in view_class.http_method_names if m not in ("options", "head", "trace")]
                    found.append((route, view_class, [m for m in methods if hasattr(view_class, m)]))

    walk(get_resolver().url_patterns, "")
    return found


def _concrete(route: str) -> str:
    path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: SAMPLE[m.group(1)], route)
    return "/" + path.replace("^", "").replace(".*$", "anything").replace("$", "")


def _state():
    counts = tuple(
        model.objects.count()
        for model in (Catalog, Branch, Tag, Commit, Job, CatalogRole, ProtectedBranch, MergeRequest,
                      MergeRequestReview, Merge)
    )  # fmt: skip
    heads = sorted(Branch.objects.values_list("catalog__name", "name", "head_id"))
    return heads, counts


@pytest.fixture
def lake(user):
    catalog = make_catalog()  # alice's
    make_table(catalog)
    branch_create(catalog=catalog, name="dev", source="main")
    tag_create(catalog=catalog, name="v1", ref="main")
    users = {role: get_user_model().objects.create_user(name) for role, name in PEOPLE.items()}
    for role, person in users.items():
        catalog_role_grant(catalog=catalog, username=person.username, role=role, granted_by=user)
    merge_request_open(catalog=catalog, source="dev", target="main", title="t", author=users["editor"])
    ProtectedBranch.objects.create(catalog=catalog, pattern="release/*")
    users["outsider"] = get_user_model().objects.create_user("otto")
    users["anonymous"] = None
    return catalog, users


def test_every_endpoint_and_method_has_a_rule():
    seen = {(view.__name__, method) for _, view, methods in _endpoints() for method in methods}
    assert seen - set(MATRIX) == set(), "endpoints without a permission rule in MATRIX"
    assert set(MATRIX) - seen == set(), "rules for endpoints that no longer exist"


def _allowed_by_permissions(view_class, method, path, kwargs, user) -> bool:
    factory = APIRequestFactory()
    request = getattr(factory, method)(path, BODY, format="json")
    force_authenticate(request, user=user)
    view = view_class()
    view.args, view.kwargs, view.format_kwarg = (), kwargs, None
    drf_request = view.initialize_request(request)
    view.request = drf_request
    try:
        view.check_permissions(drf_request)
    except (ApplicationError, APIException):
        return False
    return True


@pytest.mark.parametrize("who", ["anonymous", "outsider", "viewer", "editor", "approver", "admin"])
def test_the_permission_matrix(lake, who):
    _, users = lake
    person = users[who]
    client = APIClient()
    if person is not None:
        client.force_authenticate(person)
    checked = 0
    for route, view_class, methods in _endpoints():
        kwargs_names = re.findall(r"<(?:\w+:)?(\w+)>", route)
        path = _concrete(route)
        kwargs = {name: SAMPLE[name] for name in kwargs_names}
        for method in methods:
            needed = MATRIX[(view_class.__name__, method)]
            if needed == OPEN:
                allowed = True
            elif needed == SIGNED_IN:
                allowed = person is not None
            else:
                allowed = who in (V, E, A, ADMIN) and role_at_least(who, needed)
            if allowed:
                if needed == OPEN:
                    continue
                assert _allowed_by_permissions(view_class, method, path, kwargs, person), (who, method, path)
            else:
                before = _state()
                response = getattr(client, method)(path, BODY, format="json")
                expected = {"anonymous": 401, "outsider": 404}.get(who, 403)
                assert response.status_code == expected, (who, method, path, response.content[:300])
                if view_class.__name__.startswith("Spectacular"):  # the schema and docs pages render their own way
                    checked += 1
                    continue
                body = response.json()
                assert set(body) == {"code", "message", "details"}
                if expected == 403:
                    assert (body["code"], body["details"]["required"]) == ("role_required", needed), (method, path)
                if expected == 404:
                    assert body["code"] == "catalog_not_found"
                assert _state() == before, (who, method, path)
            checked += 1
    assert checked > 40


def test_sql_reads_need_viewer_and_writes_editor(lake):
    catalog, users = lake
    client = APIClient()
    client.force_authenticate(users["viewer"])
    url = f"/api/v1/catalogs/{catalog.name}/sql"
    heads = _state()
    for statement in ("CREATE BRANCH b2", "MERGE BRANCH dev TO main", "MERGE BRANCH dev TO main DRY RUN"):
        response = client.post(url, {"statement": statement}, format="json")
        assert (response.status_code, response.json()["code"]) == (403, "role_required")
    assert _state() == heads
    used = client.post(url, {"statement": "USE BRANCH dev"}, format="json")
    assert used.status_code == 200, used.json()


def test_catalog_lists_show_only_catalogs_one_may_see(lake, staff_user):
    catalog, users = lake
    make_catalog("other")  # alice's too
    mine = make_catalog("own", user=users["outsider"])

    def names(person):
        client = APIClient()
        client.force_authenticate(person)
        return [c["name"] for c in client.get("/api/v1/catalogs").json()["results"]]

    assert names(users["viewer"]) == [catalog.name]
    assert names(users["outsider"]) == [mine.name]
    assert names(staff_user) == ["lake", "other", "own"]
    anonymous = APIClient().get("/api/v1/catalogs")
    assert anonymous.status_code == 401
    assert APIClient().get("/api/v1/health").status_code in (200, 503)
    assert APIClient().get("/api/v1/health/deep").status_code == 401  # the check that runs a Spark job


def test_admins_manage_roles_and_protection_through_the_api(lake):
    catalog, users = lake
    admin, editor = APIClient(), APIClient()
    admin.force_authenticate(users["admin"])
    editor.force_authenticate(users["editor"])
    base = f"/api/v1/catalogs/{catalog.name}"

    granted = admin.post(f"{base}/roles", {"user": "otto", "role": "approver"}, format="json")
    assert granted.status_code == 201, granted.json()
    assert {r["user"]: r["role"] for r in editor.get(f"{base}/roles").json()["results"]}["otto"] == "approver"
    assert admin.post(f"{base}/roles", {"user": "nobody", "role": "viewer"}, format="json").json()["code"] == (
        "user_not_found"
    )
    assert admin.post(f"{base}/roles", {"user": "otto", "role": "owner"}, format="json").status_code == 400
    assert admin.delete(f"{base}/roles/otto").status_code == 204
    assert admin.delete(f"{base}/roles/otto").status_code == 404

    rule = admin.post(f"{base}/protected-branches", {"pattern": "main", "required_approvals": 2}, format="json")
    assert rule.status_code == 201, rule.json()
    assert editor.get(f"{base}/protected-branches").json()["results"][-1]["required_approvals"] in (1, 2)
    refused = editor.post(f"{base}/refs/main/databases", {"name": "blocked"}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (403, "branch_protected")
    assert admin.delete(f"{base}/protected-branches/{rule.json()['id']}").status_code == 204
    allowed = editor.post(f"{base}/refs/main/databases", {"name": "open_again"}, format="json")
    assert allowed.status_code == 201, allowed.json()
