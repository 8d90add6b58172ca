from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.services.health import health_report


class HealthApi(APIView):
    """Open to anyone (load balancers, monitors); the Spark check job it runs is shared between callers."""

    permission_classes = [AllowAny]

    class InputSerializer(serializers.Serializer):
        timeout = serializers.IntegerField(min_value=1, max_value=120, required=False)

    @extend_schema(
        parameters=[OpenApiParameter("timeout", int, description="Seconds to wait for the worker's Spark check")],
        responses=inline_serializer("Health", {"status": serializers.CharField(), "parts": serializers.DictField()}),
    )
    def get(self, request):
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        report = health_report(timeout=params.validated_data.get("timeout", settings.LAKEUI_HEALTH_TIMEOUT))
        code = status.HTTP_200_OK if report["status"] == "ok" else status.HTTP_503_SERVICE_UNAVAILABLE
        return Response(report, status=code)
