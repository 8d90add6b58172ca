"""Refuses, before any view runs, a request whose path or query string holds text the database cannot store
(a NUL character or a lone surrogate): a 400 in the caller's protocol, Iceberg's error body under /iceberg/
(`{"error": {message, type, code}}`), the API's `invalid_input` elsewhere."""

import os
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from lakeui.api.parsers import text_problem


class BadTextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        texts = [request.path, *request.GET.keys()]
        texts += [value for key in request.GET for value in request.GET.getlist(key)]
        for text in texts:
            problem = text_problem(text)
            if problem:
                return bad_request(request, "invalid_input", problem)
        return self.get_response(request)


ICEBERG_PREFIX = "/iceberg/"


def bad_request(request: HttpRequest, code: str, message: str) -> JsonResponse:
    """A 400 answered before any view, in the protocol of the path: the Iceberg REST catalog's error body (its
    BadRequestException, as catalog_app/apis/iceberg.py answers), else the API's."""
    if request.path.startswith(ICEBERG_PREFIX):
        return JsonResponse({"error": {"message": message, "type": "BadRequestException", "code": 400}}, status=400)
    return JsonResponse({"code": code, "message": message, "details": None}, status=400)


class WorkerHeaderMiddleware:
    """Names the process that answered in a `LakeUI-Worker` header, for benchmarks/api_reads.py to count how the
    requests spread over the web server's workers. Only in the middleware when LAKEUI_WORKER_HEADER is set."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response["LakeUI-Worker"] = str(os.getpid())  # not kept: with --preload, the master built the middleware
        return response
