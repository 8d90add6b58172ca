"""The job APIs (list, detail, cancel) and the health report."""

import django_filters
from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from lakeui.api.pagination import PagedApi, paginated
from lakeui.jobs.health import DEEP_WAIT_MAX, health_deep, health_report
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


HEALTH_OUTPUT = inline_serializer("Health", {"status": serializers.CharField(), "parts": serializers.DictField()})


def _health_status(report: dict) -> int:
    return status.HTTP_200_OK if report["status"] == "ok" else status.HTTP_503_SERVICE_UNAVAILABLE


class HealthApi(APIView):
    """Open to anyone (load balancers, monitors): answers at once from the workers' heartbeats, waits for nothing."""

    permission_classes = [AllowAny]

    @extend_schema(responses={200: HEALTH_OUTPUT, 503: HEALTH_OUTPUT})
    def get(self, request):
        report = health_report()
        return Response(report, status=_health_status(report))


class HealthDeepApi(APIView):
    """For signed-in users: the public report and a real Spark job on the interactive worker, shared between
    callers; 202 while that job has not finished (ask again)."""

    permission_classes = [IsAuthenticated]

    class InputSerializer(serializers.Serializer):
        timeout = serializers.FloatField(min_value=0, max_value=DEEP_WAIT_MAX, required=False)

    @extend_schema(
        parameters=[OpenApiParameter("timeout", float, description=f"Seconds to wait for the Spark check job "
                                     f"(at most {DEEP_WAIT_MAX:.0f}; default LAKEUI_HEALTH_TIMEOUT)")],
        responses={200: HEALTH_OUTPUT, 202: HEALTH_OUTPUT, 503: HEALTH_OUTPUT},
    )  # fmt: skip
    def get(self, request):
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        report, pending = health_deep(wait=params.validated_data.get("timeout", settings.LAKEUI_HEALTH_TIMEOUT))
        code = status.HTTP_202_ACCEPTED if pending and report["status"] == "ok" else _health_status(report)
        return Response(report, status=code)
