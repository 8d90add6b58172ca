from rest_framework import exceptions
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView


class NotFoundApi(APIView):
    """Any unknown path under /api/ answers the JSON 404, whatever DEBUG says."""

    permission_classes = [AllowAny]
    schema = None

    def http_method_not_allowed(self, request, *args, **kwargs):
        raise exceptions.NotFound()

    get = post = put = patch = delete = http_method_not_allowed
