"""Conditional reads: what a read at a commit returns never changes, so it is named by an ETag made of the
commits it read (with the path, query, user and API version), and a client that already holds it gets a
`304 Not Modified` before any expensive work is done. A branch read names the branch's head at that moment:
after a write the head, and so the ETag, is a new one (a branch is never served stale)."""

import hashlib
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from rest_framework.request import Request

from lakeui.api.version import API_VERSION

_COMMITS = "lakeui_commits_read"


class NotModified(Exception):
    def __init__(self, etag: str) -> None:
        super().__init__(etag)
        self.etag = etag


def commit_read(request: Request | HttpRequest, commit_id: str) -> None:
    """Note that the answer to `request` reads the state at `commit_id`. If the client's `If-None-Match` already
    names the answer over the commits read so far, raise NotModified (the exception handler answers 304)."""
    django_request = getattr(request, "_request", request)
    commits = django_request.__dict__.setdefault(_COMMITS, [])
    commits.append(commit_id)
    etag = _etag(django_request, commits)
    wanted = django_request.headers.get("If-None-Match", "")
    if django_request.method in ("GET", "HEAD") and etag in {tag.strip() for tag in wanted.split(",")}:
        raise NotModified(etag)


def _etag(request: HttpRequest, commits: list[str]) -> str:
    user = getattr(request, "user", None)
    parts = [API_VERSION, request.get_full_path(), request.headers.get("Accept", ""), str(getattr(user, "pk", "")),
             *commits]  # fmt: skip
    return '"' + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32] + '"'


class ConditionalReadMiddleware:
    """Adds the ETag to a successful GET whose view read commits through `commit_read`."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        commits = request.__dict__.get(_COMMITS)
        if commits and request.method in ("GET", "HEAD") and response.status_code == 200:
            response["ETag"] = _etag(request, commits)
            response["Cache-Control"] = "private, no-cache"  # keep it, but ask again (a branch head moves)
        return response
