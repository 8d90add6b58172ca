"""Diffs of two refs and merges: the diff is read at once (metadata only); merges run as jobs (202)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import UserField, request_catalog, validated
from catalog_app.selectors.refs import ref_resolve
from catalog_app.services.table_diff import table_diff_read
from lakeui.api.pagination import PagedApi, paginated
from lakeui.errors import ApplicationError, NotFoundError
from lakeui.jobs.apis import JobOutputSerializer
from merge_app.selectors.diff import MergeDiff, diff_as_dict
from merge_app.selectors.merges import key_comparison_get, merge_get, merge_list, restore_get, restore_list
from merge_app.services.merges import merge_plan, merge_submit
from merge_app.services.restores import restore_submit


class DiffApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("from", str, required=True, description="The source: the ref whose changes would merge"),
            OpenApiParameter("to", str, required=True, description="The target: the branch they would merge into"),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, catalog):
        return Response(diff_as_dict(diff_read(request, request_catalog(request, catalog))))


def diff_read(request, catalog) -> MergeDiff:
    source, target = request.query_params.get("from"), request.query_params.get("to")
    if not source or not target:
        raise ApplicationError("invalid_input", "Give the two refs to compare as ?from=<source>&to=<target>.")
    return merge_plan(catalog=catalog, source=source, target=target, user=request.user).diff


class DiffKeysApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("from", str, required=True), OpenApiParameter("to", str, required=True),
            OpenApiParameter("table", str, required=True, description="db.table"),
            OpenApiParameter("page", int), OpenApiParameter("page_size", int),
        ],
        responses=OpenApiTypes.OBJECT,
        description="The conflicting keys of a primary-key table: each with the ancestor's, the source's and the "
        "target's row and the cells that conflict.",
    )  # fmt: skip
    def get(self, request, catalog):
        diff = diff_read(request, request_catalog(request, catalog))
        name = request.query_params.get("table", "")
        table = next((obj for obj in diff.objects if obj.name == name and obj.key_mode), None)
        if table is None or table.keys is None:
            raise NotFoundError("table_not_compared", f"{name!r} is not a primary-key table changed on both sides.")
        stored = key_comparison_get(
            table_id=table.object_id, base=diff.base.id, source_head=diff.source_head.id,
            target_head=diff.target_head.id,
        )  # fmt: skip
        return paginated(request, self, stored.conflicts)


class DiffRowsApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("from", str, required=True), OpenApiParameter("to", str, required=True),
            OpenApiParameter("table", str, required=True, description="db.table"),
        ],
        responses=OpenApiTypes.OBJECT,
        description="The data diff of one table between two refs: counts of rows added, deleted and changed, and up "
        "to 200 of each (by key, with the changed cells, for a table with a primary key).",
    )  # fmt: skip
    def get(self, request, catalog):
        found = request_catalog(request, catalog)
        source, target = request.query_params.get("from"), request.query_params.get("to")
        database, _, table = request.query_params.get("table", "").partition(".")
        if not source or not target or not table:
            raise ApplicationError("invalid_input", "Give ?from=<ref>&to=<ref>&table=<database.table>.")
        result = table_diff_read(
            source=ref_resolve(catalog=found, ref=source), target=ref_resolve(catalog=found, ref=target),
            database=database, table=table, user=request.user,
        )  # fmt: skip
        return Response(result)


class MergeOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    source = serializers.CharField()
    target = serializers.CharField()
    source_head = serializers.CharField()
    target_head = serializers.CharField()
    base = serializers.CharField()
    commit = serializers.CharField(source="commit_id", allow_null=True)
    dry_run = serializers.BooleanField()
    status = serializers.CharField()
    requested_by = UserField(allow_null=True)
    job = serializers.UUIDField(source="job_id", allow_null=True)
    created_at = serializers.DateTimeField()
    timings = serializers.DictField()


class MergeDetailOutputSerializer(MergeOutputSerializer):
    report = serializers.DictField()
    log = serializers.DictField()


class MergeListApi(PagedApi):
    class InputSerializer(serializers.Serializer):
        source = serializers.CharField(max_length=255)
        target = serializers.CharField(max_length=255)
        dry_run = serializers.BooleanField(default=False)
        resolution = serializers.DictField(
            required=False,
            help_text='{"default": fail|source_wins|target_wins, "tables": {"db.t": choice}, "keys": {"db.t": {key: '
            "choice}}}",
        )
        expected_heads = serializers.DictField(
            child=serializers.CharField(max_length=32), required=False,
            help_text="{source, target}: the heads the merge was planned on; a moved branch is a 409",
        )  # fmt: skip

    @extend_schema(responses=MergeOutputSerializer(many=True))
    def get(self, request, catalog):
        return paginated(request, self, merge_list(catalog=request_catalog(request, catalog)), MergeOutputSerializer)

    @extend_schema(request=InputSerializer, responses={202: JobOutputSerializer})
    def post(self, request, catalog):
        return _submitted(request, self.InputSerializer, merge_submit, catalog)


def _submitted(request, input_serializer, submit, catalog: str) -> Response:
    """Validate, submit the job (a merge or a restore) and answer 202 with it."""
    data = validated(input_serializer, request.data)
    job = submit(catalog=request_catalog(request, catalog), user=request.user, **data)
    return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class MergeDetailApi(APIView):
    @extend_schema(responses=MergeDetailOutputSerializer)
    def get(self, request, catalog, merge_id):
        merge = merge_get(catalog=request_catalog(request, catalog), merge_id=merge_id)
        return Response(MergeDetailOutputSerializer(merge).data)


class RestoreOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    branch = serializers.CharField()
    database = serializers.CharField()
    table = serializers.CharField()
    point = serializers.CharField()
    head_before = serializers.CharField()
    commit = serializers.CharField(source="commit_id", allow_null=True)
    requested_by = UserField(allow_null=True)
    job = serializers.UUIDField(source="job_id", allow_null=True)
    log = serializers.DictField()
    timings = serializers.DictField()
    created_at = serializers.DateTimeField()


class RestoreListApi(PagedApi):
    class InputSerializer(serializers.Serializer):
        branch = serializers.CharField(max_length=255)
        database = serializers.CharField(max_length=63, required=False)
        table = serializers.CharField(max_length=63, required=False)
        timestamp = serializers.CharField(max_length=64, required=False, help_text="ISO 8601: the branch as it was")
        commit = serializers.CharField(max_length=32, required=False, help_text="A commit id (or 8+ hex prefix)")

    @extend_schema(responses=RestoreOutputSerializer(many=True))
    def get(self, request, catalog):
        return paginated(
            request, self, restore_list(catalog=request_catalog(request, catalog)), RestoreOutputSerializer
        )

    @extend_schema(request=InputSerializer, responses={202: JobOutputSerializer})
    def post(self, request, catalog):
        return _submitted(request, self.InputSerializer, restore_submit, catalog)


class RestoreDetailApi(APIView):
    @extend_schema(responses=RestoreOutputSerializer)
    def get(self, request, catalog, restore_id):
        restore = restore_get(catalog=request_catalog(request, catalog), restore_id=restore_id)
        return Response(RestoreOutputSerializer(restore).data)
