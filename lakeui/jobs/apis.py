"""The job APIs (list, detail, cancel) and the health report."""

import django_filters
from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from lakeui.api.pagination import PagedApi, paginated
from lakeui.jobs.health import health_report
from lakeui.jobs.models import Job
from lakeui.jobs.selectors import job_get, job_list
from lakeui.jobs.services import job_cancel


class JobOutputSerializer(serializers.ModelSerializer):
    requested_by = serializers.CharField(source="requested_by.username", default=None)

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "params",
            "status",
            "progress",
            "progress_message",
            "result",
            "error_code",
            "error_message",
            "error_status",
            "requested_by",
            "created_at",
            "started_at",
            "finished_at",
            "attempts",
        ]


class JobFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Job.Status.choices)
    kind = django_filters.CharFilter()

    class Meta:
        model = Job
        fields = ["status", "kind"]


class JobListApi(PagedApi):
    @extend_schema(
        responses=JobOutputSerializer(many=True),
        parameters=[
            OpenApiParameter("status", str, enum=Job.Status.values),
            OpenApiParameter("kind", str),
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int),
        ],
    )
    def get(self, request):
        jobs = JobFilter(request.query_params, queryset=job_list(user=request.user))
        if not jobs.is_valid():
            raise serializers.ValidationError(jobs.errors)
        return paginated(request, self, jobs.qs, JobOutputSerializer)


class JobDetailApi(APIView):
    @extend_schema(responses=JobOutputSerializer)
    def get(self, request, job_id):
        return Response(JobOutputSerializer(job_get(user=request.user, job_id=job_id)).data)


class JobCancelApi(APIView):
    @extend_schema(request=None, responses={202: JobOutputSerializer})
    def post(self, request, job_id):
        job = job_cancel(job=job_get(user=request.user, job_id=job_id))
        return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


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
