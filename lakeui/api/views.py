from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView

from lakeui.api.exception_handlers import MESSAGE_INTERNAL


class NotFoundApi(APIView):
    """Any unknown path under /api/ answers the JSON 404, whatever DEBUG says."""

    permission_classes = [AllowAny]
    schema = None

    def http_method_not_allowed(self, request, *args, **kwargs):
        raise exceptions.NotFound()

    get = post = put = patch = delete = http_method_not_allowed


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's answer to an error that no view's handler turned into its protocol's answer (one raised in a
    middleware, say), with DEBUG off: JSON in the API's and the Iceberg catalog's shapes under their paths, the UI's
    page without a traceback elsewhere. The error itself is logged by Django."""
    if request.path.startswith("/api/"):
        return JsonResponse({"code": "internal_error", "message": MESSAGE_INTERNAL, "details": None}, status=500)
    if request.path.startswith("/iceberg/"):
        body = {"message": MESSAGE_INTERNAL, "type": "ServiceFailureException", "code": 500}
        return JsonResponse({"error": body}, status=500)
    return defaults.server_error(request)
