"""The API's version, sent as a header on every /api/ answer so a client can tell, without an extra request,
whether it speaks the server's API. MAJOR is the path (`/api/v1/`); MINOR grows with each backwards-compatible
addition, so a client knows which endpoints and fields it may count on."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

API_VERSION = "1.0"
HEADER = "LakeUI-API-Version"


class ApiVersionMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path.startswith("/api/"):
            response[HEADER] = API_VERSION
        return response
