"""Every API error leaves as JSON `{code, message, details}`; this is the only place that maps errors to HTTP."""

import logging

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.views import exception_handler as drf_exception_handler

from lakeui.api.conditional import Answered
from lakeui.errors import ApplicationError

logger = logging.getLogger(__name__)

MESSAGE_INVALID_INPUT = "The request is not valid; see details for each field."
MESSAGE_TOO_LARGE = "The request body is larger than this server accepts."
MESSAGE_TOO_MANY_FIELDS = "The request holds more fields or files than this server accepts."
MESSAGE_INTERNAL = "An unexpected error occurred; it has been logged."


def exception_handler(exc: Exception, context: dict) -> Response:
    if isinstance(exc, Answered):
        return exc.response
    if isinstance(exc, ApplicationError):
        return Response(exc.as_dict(), status=exc.status)
    if isinstance(exc, RequestDataTooBig):
        return _error("payload_too_large", MESSAGE_TOO_LARGE, status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
        return _error("payload_too_large", MESSAGE_TOO_MANY_FIELDS, status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(as_serializer_error(exc))

    response = drf_exception_handler(exc, context)
    if response is None:
        logger.exception("Unhandled error in %s", context.get("view"), exc_info=exc)
        return _error("internal_error", MESSAGE_INTERNAL, status.HTTP_500_INTERNAL_SERVER_ERROR)
    if isinstance(exc, exceptions.ValidationError):
        response.data = {"code": "invalid_input", "message": MESSAGE_INVALID_INPUT, "details": response.data}
    else:
        code = exc.get_codes() if isinstance(exc.detail, str) else exc.default_code
        response.data = {"code": code, "message": str(exc.detail), "details": None}
    return response


def _error(code: str, message: str, http_status: int) -> Response:
    return Response({"code": code, "message": message, "details": None}, status=http_status)
