"""Refuses, before any view runs, a request whose path or query string holds text the database cannot store
(a NUL character or a lone surrogate): the answer is the API's JSON error, a 400 `invalid_input`."""

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
                return JsonResponse({"code": "invalid_input", "message": problem, "details": None}, status=400)
        return self.get_response(request)


class WorkerHeaderMiddleware:
    """Names the process that answered in a `LakeUI-Worker` header, for benchmarks/api_reads.py to count how the
    requests spread over the web server's workers. Only in the middleware when LAKEUI_WORKER_HEADER is set."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response["LakeUI-Worker"] = str(os.getpid())  # not kept: with --preload, the master built the middleware
        return response
