"""Conditional reads: what a read at a commit returns never changes, so it is named by an ETag made of the
commits it read (with the path, query, user and API version). A client that already holds it gets a
`304 Not Modified`, and any client the answer already made for it, before any expensive work is done (the
answers are kept in the `reads` cache, per process). A branch read names the branch's head at that moment:
after a write the head, and so the ETag, is a new one (a branch is never served stale). A read not at a commit
(the catalog list, a catalog, its branches or tags) names instead a state that changes whenever its answer could
(`state_read`).

An answer at a branch head that a commit did not change is carried to the new head (`carried`): a view notes what
its answer read (`objects_read`: objects by id, the children of some, every top-level object), and a read at the
new head whose answer is not kept takes the answer kept at the old one if no commit between the two recorded a
version of anything it read, without running the view. A commit moves the ETag as before; only the work is saved."""

import hashlib
from collections.abc import Callable, Iterable

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from rest_framework.request import Request

from lakeui.api.version import API_VERSION

_COMMITS = "lakeui_commits_read"
_FROM_CACHE = "lakeui_answered_from_cache"
_ETAG = "lakeui_etag"  # set by the cached-read path, which knows the reader without request.user
TOKEN_USER = "lakeui_token_user"  # (key, user) read before the view, for token authentication to take
KNOWN_STATE = "lakeui_known_state"  # the state read before the view (with TOKEN_USER), for its state_read to take
KNOWN_ACCESS = "lakeui_known_access"  # (user pk, catalog, role) read with TOKEN_USER, for the permission check
KNOWN_REF = "lakeui_known_ref"  # (catalog name, ref, TokenRead) read with TOKEN_USER, for the view's read_ref
_READ_SET = "lakeui_read_set"  # what the answer read (objects_read), to carry it across commits
_HEAD = "lakeui_branch_head"  # the branch head a read at a branch read: (commit id, line, seq)
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


def head_read(request: Request | HttpRequest, *, commit_id: str, line: int, seq: int) -> None:
    """Note that the answer reads the branch head `commit_id` (at `seq` on `line`): an answer whose view notes what
    it read (`objects_read`) may be carried from it to a later head of the branch (`carried`)."""
    getattr(request, "_request", request).__dict__[_HEAD] = (commit_id, line, seq)


def objects_read(
    request: Request | HttpRequest, *, objects: Iterable[object] = (), children_of: Iterable[object] = (),
    top: bool = False,
) -> None:  # fmt: skip
    """Note what the answer read: these objects (by id), every object whose parent is one of `children_of`, and
    with `top` every object without a parent. Nothing else may change the answer: a commit that records a version
    of none of them leaves it as it was (a name a path looks up can only move to another object if the object that
    held it is renamed or dropped, which records a version of it)."""
    found = getattr(request, "_request", request).__dict__.setdefault(_READ_SET, (set(), set(), [False]))
    found[0].update(str(value) for value in objects)
    found[1].update(str(value) for value in children_of)
    found[2][0] = found[2][0] or top


def _parts(request: HttpRequest, user_pk: object) -> list[str]:
    if user_pk is None:
        user_pk = getattr(getattr(request, "user", None), "pk", "")
    return [  # the host too: an answer's links name it
        API_VERSION,
        request.get_host(),
        request.get_full_path(),
        request.headers.get("Accept", ""),
        str(user_pk),
    ]


def _etag(request: HttpRequest, commits: list[str], user_pk: object = None) -> str:
    parts = [*_parts(request, user_pk), *commits]
    return '"' + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32] + '"'


def _carry_key(request: HttpRequest, user_pk: object = None) -> str:
    return "carry-" + hashlib.sha256("\n".join(_parts(request, user_pk)).encode()).hexdigest()[:32]


def _keep_carry(request: HttpRequest, etag: str, commits: list[str]) -> None:
    """Remember, for this request's path and reader, the branch head its answer read and what it read there."""
    head, read = request.__dict__.get(_HEAD), request.__dict__.get(_READ_SET)
    if head is None or read is None or commits != [head[0]] or not settings.LAKEUI_READ_CARRY:
        return
    record = (*head, frozenset(read[0]), frozenset(read[1]), read[2][0], etag)
    caches["reads"].set(_carry_key(request), record, CACHED_FOR_SECONDS)


def carried(
    request: HttpRequest, *, state: str, head: tuple[int, int], user_pk: object,
    changed: Callable[[int, int, int], list[tuple[object, object]] | None],
) -> HttpResponse | None:  # fmt: skip
    """For a GET at a branch whose head is `state` (at `head`: line, seq) and whose answer is not kept: the answer
    kept at an earlier head of the same line, if no commit since recorded a version of anything it read, now kept
    for `state` too; else None. `changed(line, after_seq, upto_seq)` gives the (object id, parent id) of the
    versions recorded on the line in between (None: too many to look at). The caller checked the reader."""
    key = _carry_key(request, user_pk)
    record = caches["reads"].get(key)
    if record is None:
        return None
    _, line, seq, objects, parents, top, etag = record
    if line != head[0] or not seq < head[1]:
        return None  # another line (the branch was reset or restored), or the same head whose answer was dropped
    content = caches["reads"].get(_cache_key(etag))
    touched = None if content is None else changed(line, seq, head[1])
    if touched is None:
        return None
    for object_id, parent_id in touched:
        if str(object_id) in objects or (parent_id is None and top) or str(parent_id) in parents:
            return None
    etag = _etag(request, [state], user_pk)
    caches["reads"].set(_cache_key(etag), content, CACHED_FOR_SECONDS)
    caches["reads"].set(key, (state, line, head[1], objects, parents, top, etag), CACHED_FOR_SECONDS)
    request.__dict__.update({_COMMITS: [state], _ETAG: etag, _FROM_CACHE: True})
    return HttpResponse(content[0], content_type=content[1])


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
                _keep_carry(request, etag, commits)
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
