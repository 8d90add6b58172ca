"""Table data endpoints: writes answer 202 with the job; rows are read by a worker and returned."""

import dataclasses

from drf_spectacular.types import OpenApiTypes
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
    validated,
    write_target,
)
from catalog_app.job_specs import LOAD_FIELDS, CompactSpec, DeleteSpec, LoadSpec, UpdateSpec
from catalog_app.models import Role
from catalog_app.services.data_submit import (
    catalog_gc_submit,
    load_rows_check,
    staging_create,
    table_compact_submit,
    table_delete_submit,
    table_load_submit,
    table_rows_read,
    table_scan,
    table_update_submit,
)
from lakeui.errors import ApplicationError
from lakeui.jobs.apis import JobOutputSerializer
from lakeui.jobs.services import read_is_pending

DEFAULT_GRACE_HOURS = 24


def _accepted(job):
    return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


LOAD_FIELD_KINDS = {
    "column": lambda help_text: serializers.CharField(required=False, help_text=help_text),
    "columns": lambda help_text: serializers.ListField(
        child=serializers.CharField(), required=False, help_text=help_text
    ),
    "partitions": lambda help_text: serializers.ListField(
        child=serializers.DictField(), required=False, help_text=help_text
    ),
}


class TableLoadApi(APIView):
    class InputSerializer(WriteInputSerializer):
        """The strategies' fields are made from job_specs.LOAD_FIELDS (`get_fields`), the one list of them."""

        strategy = serializers.CharField()
        rows = serializers.ListField(child=serializers.JSONField(), required=False)
        file = serializers.FileField(  # an empty file is refused by the one check of every entry point (upload_check)
            required=False, allow_empty_file=True, help_text="Multipart upload: a Parquet, CSV or JSON-lines file"
        )
        format = serializers.CharField(required=False, help_text="parquet, csv or json (with `file`)")
        query = serializers.CharField(
            required=False, max_length=100_000, help_text="A Spark SQL SELECT over tables of the same ref"
        )
        staged = serializers.CharField(
            required=False, max_length=64, help_text="The id of a staging location (POST .../staging) to load from"
        )

        def get_fields(self):
            fields = super().get_fields()
            for field in LOAD_FIELDS:
                fields[field.name] = LOAD_FIELD_KINDS[field.metadata["kind"]](field.metadata["help"])
            return fields

    @extend_schema(request=InputSerializer, responses={202: JobOutputSerializer}, parameters=[IF_MATCH_PARAMETER])
    def post(self, request, catalog, ref, database, table):
        load_rows_check(request.data.get("rows") if hasattr(request.data, "get") else None)
        data = validated(self.InputSerializer, request.data)
        target = write_target(request, catalog, ref)
        spec = LoadSpec.from_request(data)
        return _accepted(table_load_submit(target=target, database=database, table=table, spec=spec))


class TableDeleteApi(APIView):
    class InputSerializer(WriteInputSerializer):
        where = serializers.CharField(max_length=10_000, help_text="A predicate over the table's columns")

    @extend_schema(request=InputSerializer, responses={202: JobOutputSerializer}, parameters=[IF_MATCH_PARAMETER])
    def post(self, request, catalog, ref, database, table):
        data = validated(self.InputSerializer, request.data)
        target, spec = write_target(request, catalog, ref), DeleteSpec.from_request(data)
        return _accepted(table_delete_submit(target=target, database=database, table=table, spec=spec))


class TableUpdateApi(APIView):
    class InputSerializer(WriteInputSerializer):
        set = serializers.DictField(child=serializers.CharField(max_length=10_000), help_text="column: expression")
        where = serializers.CharField(max_length=10_000, required=False, help_text="Default: every row")

    @extend_schema(request=InputSerializer, responses={202: JobOutputSerializer}, parameters=[IF_MATCH_PARAMETER])
    def post(self, request, catalog, ref, database, table):
        data = validated(self.InputSerializer, request.data)
        target, spec = write_target(request, catalog, ref), UpdateSpec.from_request(data)
        return _accepted(table_update_submit(target=target, database=database, table=table, spec=spec))


class TableCompactApi(APIView):
    @extend_schema(request=WriteInputSerializer, responses={202: JobOutputSerializer}, parameters=[IF_MATCH_PARAMETER])
    def post(self, request, catalog, ref, database, table):
        target = write_target(request, catalog, ref)
        return _accepted(table_compact_submit(target=target, database=database, table=table, spec=CompactSpec()))


class TableRowsApi(APIView):
    class OutputSerializer(serializers.Serializer):
        count = serializers.IntegerField()
        page = serializers.IntegerField()
        page_size = serializers.IntegerField()
        columns = serializers.ListField(child=serializers.DictField())
        rows = serializers.ListField(child=serializers.ListField())

    @extend_schema(
        parameters=[AT_PARAMETER, OpenApiParameter("page", int), OpenApiParameter("page_size", int)],
        responses={200: OutputSerializer, 202: OpenApiTypes.OBJECT},
        description="A page of the table's rows at the ref. Read at once from the files when it can be; else a "
        "worker's Spark reads it: 202 `{complete: false, job}` (the job's id, status, progress) until it has "
        "finished; read again then (the same read follows the same job and starts no second one).",
    )  # fmt: skip
    def get(self, request, catalog, ref, database, table):
        try:
            page = int(request.query_params.get("page", 1))
            page_size = int(request.query_params.get("page_size", 50))
        except ValueError:
            raise ApplicationError("invalid_input", "page and page_size must be whole numbers.") from None
        result = table_rows_read(
            resolved=read_ref(request, catalog, ref), database=database, table=table, page=page, page_size=page_size,
            user=request.user,
        )  # fmt: skip
        return Response(result, status=status.HTTP_202_ACCEPTED if read_is_pending(result) else status.HTTP_200_OK)


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
        data = validated(self.InputSerializer, request.data)
        job = catalog_gc_submit(
            catalog=request_catalog(request, catalog), grace_hours=data["grace_hours"], user=request.user
        )
        return _accepted(job)
