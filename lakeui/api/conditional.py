"""Conditional reads: what a read at a commit returns never changes, so it is named by an ETag made of the
commits it read (with the path, query, user and API version). A client that already holds it gets a
`304 Not Modified`, and any client the answer already made for it, before any expensive work is done (the
answers are kept in the `reads` cache, per process). A branch read names the branch's head at that moment:
after a write the head, and so the ETag, is a new one (a branch is never served stale)."""

import hashlib
from collections.abc import Callable

from django.core.cache import caches
from django.db import connection
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.urls import Resolver404, resolve
from rest_framework.request import Request

from lakeui.api.version import API_VERSION

_COMMITS = "lakeui_commits_read"
_FROM_CACHE = "lakeui_answered_from_cache"
_ETAG = "lakeui_etag"  # set by the cached-read path, which knows the reader without request.user
TOKEN_USER = "lakeui_token_user"  # (key, user) the cached-read path read, for token authentication to take
CACHED_ANSWER_BYTES = 256 * 1024  # larger answers (a page of wide rows, say) are made anew each time
CACHED_FOR_SECONDS = 3600


class Answered(Exception):
    """The answer is known before the view's work: the exception handler returns `response` as it is."""

    def __init__(self, response: HttpResponse) -> None:
        super().__init__(response.status_code)
        self.response = response


def commit_read(request: Request | HttpRequest, commit_id: str) -> None:
    """Note that the answer to `request` reads the state at `commit_id`. If the client's `If-None-Match` already
    names the answer over the commits read so far, answer 304; if the answer was made before, answer it."""
    django_request = getattr(request, "_request", request)
    commits = django_request.__dict__.setdefault(_COMMITS, [])
    commits.append(commit_id)
    if django_request.method not in ("GET", "HEAD"):
        return
    etag = _etag(django_request, commits)
    if etag in {tag.strip() for tag in django_request.headers.get("If-None-Match", "").split(",")}:
        raise Answered(HttpResponseNotModified(headers={"ETag": etag}))
    cached = caches["reads"].get(_cache_key(etag)) if django_request.method == "GET" else None
    if cached is not None:
        content, content_type = cached
        django_request.__dict__[_FROM_CACHE] = True
        raise Answered(HttpResponse(content, content_type=content_type))


def _etag(request: HttpRequest, commits: list[str], user_pk: object = None) -> str:
    if user_pk is None:
        user_pk = getattr(getattr(request, "user", None), "pk", "")
    parts = [  # the host too: an answer's links name it
        API_VERSION,
        request.get_host(),
        request.get_full_path(),
        request.headers.get("Accept", ""),
        str(user_pk),
        *commits,
    ]
    return '"' + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32] + '"'


def _cache_key(etag: str) -> str:
    return "read-" + etag.strip('"')


class ConditionalReadMiddleware:
    """Adds the ETag to a successful GET whose view read commits through `commit_read`, and keeps its answer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        commits = request.__dict__.get(_COMMITS)
        if commits and request.method in ("GET", "HEAD") and response.status_code == 200:
            etag = request.__dict__.get(_ETAG) or _etag(request, commits)
            response["ETag"] = etag
            response["Cache-Control"] = "private, no-cache"  # keep it, but ask again (a branch head moves)
            fresh = request.method == "GET" and not request.__dict__.get(_FROM_CACHE) and not response.streaming
            json = response.get("Content-Type", "").startswith("application/json")  # a page of HTML holds a token
            if fresh and json and len(response.content) <= CACHED_ANSWER_BYTES:
                content = (response.content, response["Content-Type"])
                caches["reads"].set(_cache_key(etag), content, CACHED_FOR_SECONDS)
        return response


class CachedReadMiddleware:
    """Answers a read at a ref whose answer is already kept (or that the client already holds: a 304) before
    Django resolves the view and DRF runs, which cost most of such a read's time: one query reads the token's
    user, the catalog with the user's role in it and the ref's commit (a branch's head now, so a branch is never
    served stale), and the answer is the one the normal path keeps for that ETag, with the same headers.

    The innermost middleware, so every other one runs as for any request. It only ever answers a GET with a token
    whose user is active and has the role the view needs on that catalog, through the view's own permission and
    authentication classes when they are the API's defaults; anything else (no token, a role short of the view's,
    a commit id or time travel, an answer not kept) goes the normal way, which answers or refuses it."""

    PREFIX = "/api/v1/catalogs/"

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.views: dict[type, tuple[str, dict[str, str]] | None] = {}
        self.sql = ""

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "GET" and request.path_info.startswith(self.PREFIX) and "/refs/" in request.path_info:
            answer = self.answer(request)
            if answer is not None:
                return answer
        return self.get_response(request)

    def answer(self, request: HttpRequest) -> HttpResponse | None:
        keyword, _, key = request.headers.get("Authorization", "").partition(" ")
        if keyword.lower() != "token" or not key or " " in key or "at" in request.GET:
            return None
        try:
            match = resolve(request.path_info)
        except Resolver404:
            return None
        view = self._view(getattr(match.func, "view_class", None))
        catalog, ref = match.kwargs.get("catalog"), match.kwargs.get("ref")
        if view is None or catalog is None or ref is None:
            return None
        wanted, headers = view
        with connection.cursor() as cursor:
            cursor.execute(self._sql(), [ref, ref, catalog, key])
            row = cursor.fetchone()
        if row is None:
            return None  # no such token: the normal way answers 401
        user_pk, active, staff, superuser = (row[index] for index in self.user_at)
        catalog_pk, creator_pk, granted, head, tagged = row[-5:]
        if active:  # the normal way's token authentication takes the user read here (no second query)
            user = self.user_model.from_db(connection.alias, self.user_fields, row[: len(self.user_fields)])
            request.__dict__[TOKEN_USER] = (key, user)
        if not active or catalog_pk is None:
            return None
        from catalog_app.models import Role  # here: the models are not ready when this module loads
        from catalog_app.selectors.access import role_at_least

        # catalog_with_role's rule (catalog_app/selectors/access.py), on the row read here
        role = Role.ADMIN if staff or superuser or (creator_pk is not None and creator_pk == user_pk) else granted
        commit = head if head is not None else tagged  # a branch first, as ref_resolve reads a ref
        if not role_at_least(role, wanted) or commit is None:
            return None
        etag = _etag(request, [commit], user_pk)
        if etag in {tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")}:
            response = HttpResponseNotModified(headers={"ETag": etag})
        else:
            cached = caches["reads"].get(_cache_key(etag))
            if cached is None:
                return None
            content, content_type = cached
            response = HttpResponse(content, content_type=content_type)
            request.__dict__.update({_COMMITS: [commit], _ETAG: etag, _FROM_CACHE: True})
        for name, value in headers.items():
            response[name] = value
        return response

    def _view(self, view_class: type | None) -> tuple[str, dict[str, str]] | None:
        """The role a GET of the view needs and the headers DRF adds to its answers; None if this path cannot
        stand in for it (a view that is not DRF's, not a GET, or with its own permission or authentication)."""
        if view_class not in self.views:
            self.views[view_class] = _view_terms(view_class)
        return self.views[view_class]

    def _sql(self) -> str:
        if not self.sql:
            from django.contrib.auth import get_user_model
            from rest_framework.authtoken.models import Token

            from catalog_app.models import Branch, Catalog, CatalogRole, Tag

            self.user_model = get_user_model()
            fields = self.user_model._meta.concrete_fields
            self.user_fields = [field.attname for field in fields]
            self.user_at = [self.user_fields.index(name) for name in ("id", "is_active", "is_staff", "is_superuser")]
            table = {model: model._meta.db_table for model in (Branch, Catalog, CatalogRole, Tag, Token)}
            self.sql = (
                f"SELECT {', '.join(f'u.{connection.ops.quote_name(field.column)}' for field in fields)},"
                " c.id, c.created_by_id,"
                f" (SELECT r.role FROM {table[CatalogRole]} r WHERE r.catalog_id = c.id AND r.user_id = u.id),"
                f" (SELECT b.head_id FROM {table[Branch]} b WHERE b.catalog_id = c.id AND b.name = %s),"
                f" (SELECT g.commit_id FROM {table[Tag]} g WHERE g.catalog_id = c.id AND g.name = %s)"
                f" FROM {table[Token]} t JOIN {self.user_model._meta.db_table} u ON u.id = t.user_id"
                f" LEFT JOIN {table[Catalog]} c ON c.name = %s WHERE t.key = %s"
            )
        return self.sql


def _view_terms(view_class: type | None) -> tuple[str, dict[str, str]] | None:
    from rest_framework.views import APIView

    from catalog_app.apis.permissions import CatalogRolePermission, required_role
    from lakeui.api.authentication import QuickTokenAuthentication

    if not (isinstance(view_class, type) and issubclass(view_class, APIView) and hasattr(view_class, "get")):
        return None
    if callable(getattr(view_class, "required_role", None)):
        return None  # its role depends on the request
    if list(view_class.permission_classes) != [CatalogRolePermission]:
        return None  # not (only) the API's role rule
    if not view_class.authentication_classes or view_class.authentication_classes[0] is not QuickTokenAuthentication:
        return None
    view, probe = view_class(), HttpRequest()
    probe.method = "GET"
    view.setup(probe)  # as Django's as_view() does (a view with GET answers HEAD, so DRF's Allow names it)
    return required_role(view, probe), view.default_response_headers
