"""Table data endpoints: writes answer 202 with the job; rows are read by a worker and returned."""

import dataclasses

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import (
    AT_PARAMETER,
    IF_MATCH_PARAMETER,
    WriteInputSerializer,
    read_ref,
    request_catalog,
    write_target,
)
from catalog_app.apis.jobs import JobOutputSerializer
from catalog_app.models import Role
from catalog_app.services.data_jobs import (
    staged_upload,
    staging_create,
    table_data_submit,
    table_for_write,
    table_rows_read,
    table_scan,
    upload_store,
)
from catalog_app.services.jobs import job_create
from lakeui.errors import ApplicationError

DEFAULT_GRACE_HOURS = 24


def _accepted(job):
    return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class TableLoadApi(APIView):
    class InputSerializer(WriteInputSerializer):
        strategy = serializers.CharField()
        rows = serializers.ListField(child=serializers.JSONField(), required=False)
        file = serializers.FileField(required=False, help_text="Multipart upload: a Parquet, CSV or JSON-lines file")
        format = serializers.CharField(required=False, help_text="parquet, csv or json (with `file`)")
        query = serializers.CharField(
            required=False, max_length=100_000, help_text="A Spark SQL SELECT over tables of the same ref"
        )
        partitions = serializers.ListField(child=serializers.DictField(), required=False)
        key_columns = serializers.ListField(
            child=serializers.CharField(), required=False, help_text="Key strategies: the columns that identify a row"
        )
        watermark = serializers.CharField(required=False, help_text="incremental: the column that orders a key's rows")
        valid_from_column = serializers.CharField(required=False, help_text="scd2: timestamp column opening a version")
        valid_to_column = serializers.CharField(required=False, help_text="scd2: timestamp column closing a version")
        partition_column = serializers.CharField(required=False, help_text="snapshot: the partition column replaced")
        staged = serializers.CharField(
            required=False, max_length=64, help_text="The id of a staging location (POST .../staging) to load from"
        )

    @extend_schema(request=InputSerializer, responses={202: JobOutputSerializer}, parameters=[IF_MATCH_PARAMETER])
    def post(self, request, catalog, ref, database, table):
        rows = request.data.get("rows") if hasattr(request.data, "get") else None
        if isinstance(rows, list) and len(rows) > settings.LAKEUI_MAX_ROWS:
            raise ApplicationError(
                "payload_too_large",
                f"A load may send at most {settings.LAKEUI_MAX_ROWS} rows; upload a file or load in parts.",
                status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        skipped = ("file", "format", "message", "staged")
        params = {key: value for key, value in data.validated_data.items() if key not in skipped}
        target = write_target(request, catalog, ref)
        if "staged" in data.validated_data:
            if "file" in data.validated_data:
                raise ApplicationError("invalid_input", "Give either an uploaded file or `staged`, not both.")
            params["upload"] = staged_upload(catalog=target.catalog, staged=data.validated_data["staged"])
        if "file" in data.validated_data:
            current = table_for_write(target, database, table)
            file_format = data.validated_data.get("format") or data.validated_data["file"].name.rsplit(".", 1)[-1]
            params["upload"] = upload_store(
                catalog=target.catalog,
                table=current,
                upload=data.validated_data["file"],
                file_format=file_format.lower(),
            )
        return _accepted(
            table_data_submit(target=target, database=database, table=table, kind="table_load", params=params)
        )


class TableDeleteApi(APIView):
    class InputSerializer(WriteInputSerializer):
        where = serializers.CharField(max_length=10_000, help_text="A predicate over the table's columns")

    @extend_schema(request=InputSerializer, responses={202: JobOutputSerializer}, parameters=[IF_MATCH_PARAMETER])
    def post(self, request, catalog, ref, database, table):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        job = table_data_submit(
            target=write_target(request, catalog, ref), database=database, table=table, kind="table_delete",
            params={"where": data.validated_data["where"]},
        )  # fmt: skip
        return _accepted(job)


class TableUpdateApi(APIView):
    class InputSerializer(WriteInputSerializer):
        set = serializers.DictField(child=serializers.CharField(max_length=10_000), help_text="column: expression")
        where = serializers.CharField(max_length=10_000, required=False, help_text="Default: every row")

    @extend_schema(request=InputSerializer, responses={202: JobOutputSerializer}, parameters=[IF_MATCH_PARAMETER])
    def post(self, request, catalog, ref, database, table):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = {"set": data.validated_data["set"], "where": data.validated_data.get("where")}
        job = table_data_submit(
            target=write_target(request, catalog, ref),
            database=database,
            table=table,
            kind="table_update",
            params=params,
        )
        return _accepted(job)


class TableCompactApi(APIView):
    @extend_schema(request=WriteInputSerializer, responses={202: JobOutputSerializer}, parameters=[IF_MATCH_PARAMETER])
    def post(self, request, catalog, ref, database, table):
        job = table_data_submit(
            target=write_target(request, catalog, ref), database=database, table=table, kind="table_compact", params={}
        )
        return _accepted(job)


class TableRowsApi(APIView):
    class OutputSerializer(serializers.Serializer):
        count = serializers.IntegerField()
        page = serializers.IntegerField()
        page_size = serializers.IntegerField()
        columns = serializers.ListField(child=serializers.DictField())
        rows = serializers.ListField(child=serializers.ListField())

    @extend_schema(
        parameters=[AT_PARAMETER, OpenApiParameter("page", int), OpenApiParameter("page_size", int)],
        responses=OutputSerializer,
    )
    def get(self, request, catalog, ref, database, table):
        try:
            page = int(request.query_params.get("page", 1))
            page_size = int(request.query_params.get("page_size", 50))
        except ValueError:
            raise ApplicationError("invalid_input", "page and page_size must be whole numbers.") from None
        result = table_rows_read(
            resolved=read_ref(request, catalog, ref), database=database, table=table, page=page, page_size=page_size,
            user=request.user, timeout=settings.LAKEUI_READ_TIMEOUT,
        )  # fmt: skip
        return Response(result)


class TableScanApi(APIView):
    """The scan plan: what a client's own SparkSession reads to get the table's rows at the ref (viewer role)."""

    class OutputSerializer(serializers.Serializer):
        commit = serializers.CharField()
        table_id = serializers.CharField()
        warehouse = serializers.CharField(help_text="The warehouse root: a local folder or a URI such as s3a://")
        base = serializers.CharField(help_text="The table's folder, relative to the warehouse")
        columns = serializers.ListField(child=serializers.DictField(), help_text="id, name, type, nullable, default")
        partition_by = serializers.ListField(child=serializers.IntegerField(), help_text="Column ids")
        primary_key = serializers.ListField(child=serializers.IntegerField(), help_text="Column ids")
        row_count = serializers.IntegerField(help_text="Live rows: the segments' rows less the deleted ones")
        segments = serializers.ListField(
            child=serializers.DictField(),
            help_text="id, path, uri, row_count, size_bytes, order, partition_values and stats (by column id), "
            "columns (the schema the file was written with, by column id), deletes (position files: path, uri, "
            "row_count)",
        )

    @extend_schema(
        parameters=[
            AT_PARAMETER,
            OpenApiParameter("where", str, description="A predicate (as deletes take it): only the segments whose "
                             "partition values and statistics do not rule it out"),
            OpenApiParameter("time_zone", str, description="The reader's session time zone, for timestamps "
                             "without an offset in `where` (default UTC)"),
        ],
        responses=OutputSerializer,
    )  # fmt: skip
    def get(self, request, catalog, ref, database, table):
        params = request.query_params
        plan = table_scan(
            resolved=read_ref(request, catalog, ref), database=database, table=table, where=params.get("where"),
            time_zone=params.get("time_zone") or "UTC",
        )  # fmt: skip
        return Response(self.OutputSerializer(dataclasses.asdict(plan)).data)


class TableStagingApi(APIView):
    """A staging location for a staged load (editor role, a writable branch): the client writes Parquet there
    and loads it with `{"staged": id}`."""

    class OutputSerializer(serializers.Serializer):
        id = serializers.CharField()
        path = serializers.CharField(help_text="Relative to the warehouse")
        uri = serializers.CharField(help_text="Where to write the Parquet files")
        format = serializers.CharField()

    @extend_schema(request=None, responses={201: OutputSerializer})
    def post(self, request, catalog, ref, database, table):
        staging = staging_create(target=write_target(request, catalog, ref), database=database, table=table)
        return Response(self.OutputSerializer(staging).data, status=status.HTTP_201_CREATED)


class CatalogGcApi(APIView):
    required_roles = {"POST": Role.ADMIN}

    class InputSerializer(serializers.Serializer):
        grace_hours = serializers.FloatField(required=False, default=DEFAULT_GRACE_HOURS, help_text="Default 24")

    @extend_schema(request=InputSerializer, responses={202: JobOutputSerializer})
    def post(self, request, catalog):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        grace_seconds = round(data.validated_data["grace_hours"] * 3600)
        if grace_seconds <= 0:
            raise ApplicationError("invalid_grace_period", "grace_hours must be more than 0.")
        found = request_catalog(request, catalog)
        params = {"catalog_id": str(found.id), "grace_seconds": grace_seconds}
        return _accepted(job_create(kind="catalog_gc", params=params, requested_by=request.user))
