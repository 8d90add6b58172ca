"""Reads answered before the view when their answer is kept (lakeui/api/conditional.py): at a ref, and the
catalog list, a catalog, its branches and its tags."""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve
from rest_framework.views import APIView

from catalog_app.apis.catalogs import (
    BranchDetailApi,
    BranchListApi,
    CatalogDetailApi,
    CatalogListApi,
    TagDetailApi,
    TagListApi,
)
from catalog_app.apis.permissions import CatalogRolePermission, required_role
from catalog_app.selectors.access import role_at_least
from catalog_app.selectors.objects import versions_on_line
from catalog_app.selectors.token_reads import BRANCH, BRANCHES, CATALOG, CATALOGS, REF, TAG, TAGS, token_read
from lakeui.api.authentication import QuickTokenAuthentication
from lakeui.api.conditional import KNOWN_ACCESS, KNOWN_REF, KNOWN_STATE, TOKEN_USER, carried, kept_answer

PREFIX = "/api/v1/catalogs"
# The reads not at a ref answered here, each marking the state it reads the same way (its view's state_read).
STATE_READS = {CatalogListApi: CATALOGS, CatalogDetailApi: CATALOG, BranchListApi: BRANCHES, TagListApi: TAGS}
NAMED_READS = {BranchDetailApi: (BRANCH, "branch"), TagDetailApi: (TAG, "tag")}  # a branch or a tag: its URL name


def _changed(line: int, after: int, upto: int) -> list[tuple] | None:
    return versions_on_line(line_id=line, after_seq=after, upto_seq=upto)


class CachedReadMiddleware:
    """Answers a GET at a branch or tag whose answer is already kept (or that the client already holds: a 304)
    before Django resolves the view and DRF runs, which cost most of such a read's time: one query reads the
    token's user, the catalog with the user's role in it and the ref's commit now (a branch is never served stale),
    and the answer is the one the normal way keeps for that ETag, with the same headers. Likewise the catalog list,
    a catalog, its branches and its tags (STATE_READS), whose query reads instead the state of the rows the answer
    reads (token_reads.catalog_state: it changes with any of them, so an answer is never stale); when no answer is
    kept, the view takes that state rather than reading it again.

    The innermost middleware, so every other one runs as for any request. It answers only a GET with an API token
    whose user is active and has the role the view needs in that catalog, for a view whose authentication and
    permission are the API's (token first, CatalogRolePermission). Anything else (no token, a role short of the
    view's, a commit id, time travel, an answer not kept) goes the normal way, which answers or refuses it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.views: dict[object, tuple[str, dict[str, str]] | None] = {}

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "GET" and request.path_info.startswith(PREFIX):
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
        view_class = getattr(match.func, "view_class", None)
        if view_class not in self.views:
            self.views[view_class] = _view_terms(view_class)
        view, catalog, ref = self.views[view_class], match.kwargs.get("catalog"), match.kwargs.get("ref")
        kind = STATE_READS.get(view_class) if ref is None else REF
        if view_class in NAMED_READS and settings.LAKEUI_READ_CARRY:
            kind, ref = NAMED_READS[view_class][0], match.kwargs.get(NAMED_READS[view_class][1])
        if view is None or kind is None or (catalog is None and kind != CATALOGS):
            return None
        wanted, headers = view
        found = token_read(key=key, kind=kind, catalog=catalog, ref=ref)
        if found is None or not found.user.is_active:
            return None  # the normal way answers 401
        request.__dict__[TOKEN_USER] = (key, found.user)  # its token authentication takes this user, no query
        if kind != CATALOGS and (found.catalog is None or not role_at_least(found.role, wanted)):
            return None  # the normal way answers 404 or 403
        # the view takes the catalog and the role this query read for its permission check: not read again
        request.__dict__[KNOWN_ACCESS] = (found.user.pk, found.catalog, found.role)
        if found.state is None:
            return None  # the normal way resolves a commit id, or makes the answer each time
        response = kept_answer(request, state=found.state, user_pk=found.user.pk)
        if response is None and found.head is not None and settings.LAKEUI_READ_CARRY:
            response = carried(request, state=found.state, head=found.head, user_pk=found.user.pk, changed=_changed)
        if response is None:
            # and the state (its state_read), or the ref, its commit and its chain (read_ref)
            if kind != REF:
                request.__dict__[KNOWN_STATE] = found.state
            else:
                request.__dict__[KNOWN_REF] = (catalog, ref, found)
            return None
        for name, value in headers.items():
            response[name] = value
        return response


def _view_terms(view_class: object) -> tuple[str, dict[str, str]] | None:
    """The role a GET of the view needs and the headers DRF adds to its answers; None if this path cannot stand
    in for it (not DRF's, no GET, a role that depends on the request, its own authentication or permission)."""
    if not (isinstance(view_class, type) and issubclass(view_class, APIView) and hasattr(view_class, "get")):
        return None
    if callable(getattr(view_class, "required_role", None)):
        return None
    if list(view_class.permission_classes) != [CatalogRolePermission]:
        return None
    if not view_class.authentication_classes or view_class.authentication_classes[0] is not QuickTokenAuthentication:
        return None
    view, probe = view_class(), HttpRequest()
    probe.method = "GET"
    view.setup(probe)  # as Django's as_view() does (a view with GET answers HEAD, so DRF's Allow names it)
    return required_role(view, probe), view.default_response_headers
