import django_filters
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.models import Job
from catalog_app.selectors import job_get, job_list
from catalog_app.services import job_cancel
from lakeui.api.pagination import PagePagination


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


class JobListApi(APIView):
    pagination_class = PagePagination  # its list is answered a page at a time (and so documented)

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
        paginator = PagePagination()
        page = paginator.paginate_queryset(jobs.qs, request, view=self)
        return paginator.get_paginated_response(JobOutputSerializer(page, many=True).data)


class JobDetailApi(APIView):
    @extend_schema(responses=JobOutputSerializer)
    def get(self, request, job_id):
        return Response(JobOutputSerializer(job_get(user=request.user, job_id=job_id)).data)


class JobCancelApi(APIView):
    @extend_schema(request=None, responses={202: JobOutputSerializer})
    def post(self, request, job_id):
        job = job_cancel(job=job_get(user=request.user, job_id=job_id))
        return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)
