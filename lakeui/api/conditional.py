"""Conditional reads: what a read at a commit returns never changes, so it is named by an ETag made of the
commits it read (with the path, query, user and API version). A client that already holds it gets a
`304 Not Modified`, and any client the answer already made for it, before any expensive work is done (the
answers are kept in the `reads` cache, per process). A branch read names the branch's head at that moment:
after a write the head, and so the ETag, is a new one (a branch is never served stale). A read not at a commit
(the catalog list, a catalog, its branches or tags) names instead a state that changes whenever its answer could
(`state_read`)."""

import hashlib
from collections.abc import Callable

from django.core.cache import caches
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from rest_framework.request import Request

from lakeui.api.version import API_VERSION

_COMMITS = "lakeui_commits_read"
_FROM_CACHE = "lakeui_answered_from_cache"
_ETAG = "lakeui_etag"  # set by the cached-read path, which knows the reader without request.user
TOKEN_USER = "lakeui_token_user"  # (key, user) read before the view, for token authentication to take
KNOWN_STATE = "lakeui_known_state"  # the state read before the view (with TOKEN_USER), for its state_read to take
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
    answer = _known_answer(django_request, _etag(django_request, commits))
    if answer is not None:
        raise Answered(answer)


def state_read(request: Request | HttpRequest, read_state: Callable[[], str | None]) -> None:
    """`commit_read` for an answer that reads rows which change: `read_state()` names their state now (and changes
    whenever the answer could), read before the answer is made; the one the cached-read path read for this request
    if it read one. No state (None): the answer is made each time, with no ETag."""
    django_request = getattr(request, "_request", request)
    state = django_request.__dict__.pop(KNOWN_STATE, None) or read_state()
    if state is not None:
        commit_read(request, state)


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


def _known_answer(request: HttpRequest, etag: str) -> HttpResponse | None:
    """The 304 if the client holds the answer named `etag`, else (for a GET) the answer kept for it, else None."""
    if etag in {tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")}:
        return HttpResponseNotModified(headers={"ETag": etag})
    cached = caches["reads"].get(_cache_key(etag)) if request.method == "GET" else None
    if cached is None:
        return None
    request.__dict__[_FROM_CACHE] = True
    content, content_type = cached
    return HttpResponse(content, content_type=content_type)


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


def kept_answer(request: HttpRequest, *, state: str, user_pk: object) -> HttpResponse | None:
    """For a GET whose answer reads only `state` (a commit, or what `state_read` names), by the user `user_pk` (who
    may read it: the caller checked): the 304 if the client holds that answer, else the answer kept for it, else
    None. For a caller answering before the view (catalog_app/middleware.py), with the ETag the normal way would
    give; ConditionalReadMiddleware adds it to the answer."""
    etag = _etag(request, [state], user_pk)
    answer = _known_answer(request, etag)
    if answer is not None and answer.status_code == 200:
        request.__dict__.update({_COMMITS: [state], _ETAG: etag})
    return answer
