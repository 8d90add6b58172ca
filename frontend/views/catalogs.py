"""Catalogs, the branch graph, refs and the commit log."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from catalog_app.models import Role
from catalog_app.selectors.access import catalogs_visible, queue_required_branches
from catalog_app.selectors.changes import TOUCHED_COMMITS
from catalog_app.selectors.commits import commits_with_operations
from catalog_app.selectors.refs import (
    branch_list,
    catalog_list,
    commit_log,
    commits_newest,
    tag_list,
    timestamp_parse,
)
from catalog_app.selectors.retention import storage_per_branch
from catalog_app.selectors.subscriptions import (
    subscription_behind,
    subscription_describe,
    subscription_get,
    subscription_list,
)
from catalog_app.services.refs import branch_create, catalog_create, tag_create
from frontend.graph import MAX_COMMITS, graph_layout
from frontend.views.common import back, get_catalog, ref_context, refused, ui_view
from lakeui.errors import ApplicationError, NotFoundError
from merge_app.selectors.queue import queue_lengths

LOG_PAGE_SIZE = 50


@ui_view
def catalog_index(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        name = request.POST.get("name", "").strip()
        try:
            catalog = catalog_create(
                name=name, description=request.POST.get("description", ""), created_by=request.user
            )
        except ApplicationError as error:
            refused(request, error)
            return render(
                request, "frontend/catalogs.html", {"catalogs": _visible(request), "form": request.POST}, status=400
            )
        messages.success(request, f"Catalog {catalog.name} created with branch {catalog.default_branch}.")
        return redirect("frontend:catalog", catalog=catalog.name)
    return render(request, "frontend/catalogs.html", {"catalogs": _visible(request), "form": {}})


def _visible(request: HttpRequest):
    return catalogs_visible(user=request.user, catalogs=catalog_list())


def _refs(catalog):
    return list(branch_list(catalog=catalog)), list(tag_list(catalog=catalog))


@ui_view
def catalog_detail(request: HttpRequest, catalog: str) -> HttpResponse:
    found = get_catalog(request, catalog)
    branches, tags = _refs(found)
    commits = commits_newest(catalog=found, limit=MAX_COMMITS + 1)
    graph = graph_layout(commits, branches, tags)
    context = {"catalog": found, "branches": branches, "tags": tags, "graph": graph, "queues": _queues(found, branches)}
    # On request only: it reads every branch's and tag's live files (docs/retention.md).
    context["storage"] = storage_per_branch(catalog=found) if request.GET.get("storage") else None
    context["subscriptions"] = [_subscription(s) for s in subscription_list(catalog=found)]
    return render(request, "frontend/catalog.html", context)


SUBSCRIPTION_PAGE_SIZE = 50


@ui_view
def subscription_page(request: HttpRequest, catalog: str, name: str) -> HttpResponse:
    """One subscription: its cursor and batch, and the changes it has not acknowledged, a page at a time."""
    found = get_catalog(request, catalog)
    subscription = subscription_get(catalog=found, name=name)
    if subscription is None:
        raise NotFoundError("subscription_not_found", f"The catalog has no subscription {name!r}.")
    described = _subscription(subscription, keep=True)
    feed = described.pop("feed")
    page, tables = None, []
    if feed is not None:
        page, tables = Paginator(feed, SUBSCRIPTION_PAGE_SIZE).get_page(request.GET.get("page")), feed.tables
        feed.keep()
    context = {"catalog": found, "s": described, "page": page, "tables": [t.describe() for t in tables]}
    return render(request, "frontend/subscription.html", context)


def _subscription(subscription, *, keep: bool = False) -> dict:
    """The subscription as the API describes it, with the rows it is behind (`rows_behind`; `behind_error` when
    they cannot be counted here). `keep`: with the unacknowledged changes themselves (`feed`). The catalog page
    counts the rows of a subscription at most TOUCHED_COMMITS commits behind (the changed tables found from those
    commits; each pair of commits is read once, then kept); one further behind is counted on its own page."""
    described = subscription_describe(subscription)
    feed, described["behind_error"] = None, None
    far = described["lag_commits"] is not None and described["lag_commits"] > TOUCHED_COMMITS
    try:
        feed = subscription_behind(subscription) if keep or not far else None
    except ApplicationError as error:  # an expired cursor (410), files the web process cannot read (503)
        described["behind_error"] = error.message
    described["rows_behind"] = len(feed) if feed is not None else None
    if feed is not None and not keep:
        feed.keep()  # the next count of the same pair is a read of the kept diff
    if keep:
        described["feed"] = feed
    return described


def _queues(catalog, branches) -> dict[str, int]:
    """The branches whose merge queue the page links to, with how many requests wait in it: those a rule makes
    merge only through their queue, and any other a request waits in."""
    required = queue_required_branches(catalog=catalog, branches=[b.name for b in branches])
    waiting = queue_lengths(catalog=catalog)
    return {name: waiting.get(name, 0) for name in sorted(required | set(waiting))}


def _ref_new(request: HttpRequest, catalog: str, create) -> HttpResponse:
    """Create a branch or a tag from a form; a refusal is a message on the page the form was on."""
    found = get_catalog(request, catalog, Role.EDITOR)
    try:
        messages.success(request, create(found))
    except ApplicationError as error:
        refused(request, error)
    return back(request, reverse("frontend:catalog", args=[found.name]))


@ui_view
@require_POST
def branch_new(request: HttpRequest, catalog: str) -> HttpResponse:
    def create(found) -> str:
        name, source = request.POST.get("name", "").strip(), request.POST.get("source", "").strip()
        at = timestamp_parse(request.POST.get("at"))
        branch = branch_create(
            catalog=found, name=name, source=source or found.default_branch, at=at, created_by=request.user
        )
        return f"Branch {branch.name} created at {branch.head_id[:12]}."

    return _ref_new(request, catalog, create)


@ui_view
@require_POST
def tag_new(request: HttpRequest, catalog: str) -> HttpResponse:
    def create(found) -> str:
        name, ref = request.POST.get("name", "").strip(), request.POST.get("ref", "").strip()
        tag = tag_create(catalog=found, name=name, ref=ref or found.default_branch, created_by=request.user)
        return f"Tag {tag.name} created at {tag.commit_id[:12]}."

    return _ref_new(request, catalog, create)


@ui_view
def commit_log_page(request: HttpRequest, catalog: str) -> HttpResponse:
    found = get_catalog(request, catalog)
    ref = ref_context(request, found)
    page = Paginator(commit_log(ref.resolved.chain), LOG_PAGE_SIZE).get_page(request.GET.get("page"))
    branches, tags = _refs(found)
    context = {
        "catalog": found, "ref": ref, "page": page, "branches": branches, "tags": tags,
        "commits": commits_with_operations(page),  # each operation with the table or database it touched
    }  # fmt: skip
    return render(request, "frontend/log.html", context)
