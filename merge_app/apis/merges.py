"""Diffs of two refs and merges: the diff is read at once (metadata only); merges run as jobs (202)."""

from urllib.parse import urlencode

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import UserField, request_catalog, validated
from catalog_app.selectors.refs import commits_expired, ref_resolve
from catalog_app.services.table_diff import MAX_PAGE_SIZE, PAGE_SIZE, table_diff_read, tables_changed
from lakeui.api.pagination import PagedApi, paginated
from lakeui.errors import ApplicationError, NotFoundError
from lakeui.jobs.apis import JobOutputSerializer
from lakeui.jobs.services import read_is_pending
from merge_app.models import Merge
from merge_app.plan.rules import PENDING
from merge_app.selectors.merges import key_conflicts, merge_get, merge_list, restore_get, restore_list
from merge_app.services.diff_reads import DiffRead, job_brief, merge_diff_read, merge_diff_report
from merge_app.services.merges import merge_submit
from merge_app.services.picks import pick_submit
from merge_app.services.restores import restore_submit


class DiffApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("from", str, required=True, description="The source: the ref whose changes would merge"),
            OpenApiParameter("to", str, required=True, description="The target: the branch they would merge into"),
        ],
        responses=OpenApiTypes.OBJECT,
        description="The merge diff, answered at once. `complete` false: primary-key tables changed on both sides "
        "are `pending` (their key comparison runs on a worker), or, in a criss-cross history whose virtual base is "
        "not made yet, only the heads and `bases` are known; `job` is the key comparison to follow. Read the diff "
        "again once it has finished (each read is metadata only and starts no second job).",
    )  # fmt: skip
    def get(self, request, catalog):
        found = request_catalog(request, catalog)
        source, target = _refs(request)
        return Response(merge_diff_report(catalog=found, source=source, target=target, user=request.user))


def _refs(request) -> tuple[str, str]:
    source, target = request.query_params.get("from"), request.query_params.get("to")
    if not source or not target:
        raise ApplicationError("invalid_input", "Give the two refs to compare as ?from=<source>&to=<target>.")
    return source, target


def diff_read(request, catalog) -> DiffRead:
    source, target = _refs(request)
    return merge_diff_read(catalog=catalog, source=source, target=target, user=request.user)


class DiffKeysApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("from", str, required=True), OpenApiParameter("to", str, required=True),
            OpenApiParameter("table", str, required=True, description="db.table"),
            OpenApiParameter("page", int), OpenApiParameter("page_size", int),
        ],
        responses=OpenApiTypes.OBJECT,
        description="The conflicting keys of a primary-key table: each with the ancestor's, the source's and the "
        "target's row and the cells that conflict. While the table's key comparison runs on a worker: 202 with "
        "`complete` false, no results and the `job` to follow; ask again once it has finished.",
    )  # fmt: skip
    def get(self, request, catalog):
        read = diff_read(request, request_catalog(request, catalog))
        name = request.query_params.get("table", "")
        if read.diff is None:  # a criss-cross history whose virtual base is being made: no table is known yet
            return _comparing(read)
        table = next((obj for obj in read.diff.objects if obj.name == name and obj.key_mode), None)
        if table is not None and table.verdict == PENDING:
            return _comparing(read)
        if table is None or table.keys is None:
            raise NotFoundError("table_not_compared", f"{name!r} is not a primary-key table changed on both sides.")
        diff = read.diff
        conflicts = key_conflicts(
            table_id=table.object_id, base=diff.base.id, source_head=diff.source_head.id,
            target_head=diff.target_head.id,
        )  # fmt: skip
        return paginated(request, self, conflicts)


def _comparing(read: DiffRead) -> Response:
    """202: the key comparison is running; a page with no results, and the job to follow."""
    body = {"count": 0, "next": None, "previous": None, "results": [], "complete": False, "job": job_brief(read.job)}
    return Response(body, status=status.HTTP_202_ACCEPTED)


class DiffRowsApi(APIView):
    class InputSerializer(serializers.Serializer):
        to = serializers.CharField(max_length=255)
        table = serializers.CharField(max_length=255, required=False, default="")
        table_id = serializers.UUIDField(required=False, allow_null=True, default=None)
        page = serializers.IntegerField(min_value=1, default=1)
        page_size = serializers.IntegerField(min_value=1, max_value=MAX_PAGE_SIZE, default=PAGE_SIZE)

    @extend_schema(
        parameters=[
            OpenApiParameter("from", str, required=True, description="a branch, tag or commit id"),
            OpenApiParameter("to", str, required=True, description="a branch, tag or commit id"),
            OpenApiParameter("table", str, description="db.table; without it (and table_id), the changed tables"),
            OpenApiParameter("table_id", str, description="the table's stable id (survives renames)"),
            OpenApiParameter("page", int), OpenApiParameter("page_size", int, description=f"at most {MAX_PAGE_SIZE}"),
        ],
        responses={200: OpenApiTypes.OBJECT, 202: OpenApiTypes.OBJECT},
        description="The rows that differ between two refs. Without a table: every table whose data or definition "
        "differs (metadata only), each with the URL of its rows. With one: a page of its changed rows with the "
        "counts of rows added, deleted and changed: by key with the changed cells (old and new values) for a table "
        "with a primary key, rows added and rows deleted for one without. Read in the web process with pyarrow and "
        "kept per pair of commits (`kept`: a later page or a reload is a slice of the kept diff), or by a worker: then "
        "202 `{from, to, table_id, complete: false, job}` until its job has finished; read again then (the same read "
        "follows the same job).",
    )  # fmt: skip
    def get(self, request, catalog):
        found = request_catalog(request, catalog)
        source = request.query_params.get("from")
        if not source or not request.query_params.get("to"):
            raise ApplicationError("invalid_input", "Give ?from=<ref>&to=<ref> (and &table=<database.table>).")
        serializer = self.InputSerializer(data=request.query_params)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        source_ref, target_ref = ref_resolve(catalog=found, ref=source), ref_resolve(catalog=found, ref=data["to"])
        if not data["table"] and not data["table_id"]:
            tables = tables_changed(source=source_ref, target=target_ref)
            for table in tables:
                query = urlencode(
                    {"from": source_ref.commit.id, "to": target_ref.commit.id, "table_id": table["table_id"]}
                )
                table["rows"] = request.build_absolute_uri(f"{request.path}?{query}")
            return Response({"from": source_ref.commit.id, "to": target_ref.commit.id, "tables": tables})
        database, _, table = data["table"].partition(".")
        if data["table"] and not table:
            raise ApplicationError("invalid_input", "Give the table as <database.table>.")
        result = table_diff_read(
            source=source_ref, target=target_ref, database=database, table=table,
            table_id=str(data["table_id"] or ""), user=request.user, page=data["page"], page_size=data["page_size"],
        )  # fmt: skip
        return Response(result, status=status.HTTP_202_ACCEPTED if read_is_pending(result) else status.HTTP_200_OK)


class MergeOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.CharField()
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
    expired_commits = serializers.SerializerMethodField(help_text="Commits it names that retention expired")

    def get_expired_commits(self, merge) -> list[str]:
        return commits_expired([merge.commit_id, merge.source_head, merge.target_head, merge.base])


class MergeListApi(PagedApi):
    class InputSerializer(serializers.Serializer):
        source = serializers.CharField(max_length=255)
        target = serializers.CharField(max_length=255)
        dry_run = serializers.BooleanField(default=False)
        resolution = serializers.DictField(
            required=False,
            help_text='{"default": fail|source_wins|target_wins, "tables": {"db.t": choice | {"choice": choice, '
            '"columns": {column: rule}}}, "keys": {"db.t": {key: choice}}}; a column rule (source_wins, target_wins, '
            'base, greatest, least, sum_of_changes, concat, {"concat": {"separator": s}}) settles the conflicting '
            "cells of that column of a primary-key table",
        )
        expected_heads = serializers.DictField(
            child=serializers.CharField(max_length=32), required=False,
            help_text="{source, target}: the heads the merge was planned on; a moved branch is a 409",
        )  # fmt: skip
        override_checks = serializers.CharField(
            required=False, max_length=1000, help_text="admins: merge through failed checks, for this reason (logged)"
        )

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


class _PickListApi(PagedApi):
    """Reverts and cherry-picks (docs/merge-semantics.md#revert-and-cherry-pick): POST queues one (202 job), GET
    lists their audit logs, kept as merges of their kind (`.../merges/{id}` shows one)."""

    kind = ""

    class InputSerializer(serializers.Serializer):
        branch = serializers.CharField(max_length=255)
        commit = serializers.CharField(max_length=255, required=False, help_text="a commit id (or any ref)")
        resolution = serializers.DictField(required=False, help_text="as a merge's")

    @extend_schema(responses=MergeOutputSerializer(many=True))
    def get(self, request, catalog):
        found = request_catalog(request, catalog)
        return paginated(request, self, merge_list(catalog=found, kind=self.kind), MergeOutputSerializer)

    def post(self, request, catalog):
        data = validated(self.InputSerializer, request.data)
        start, end = data.pop("from", None), data.pop("to", None)
        job = pick_submit(catalog=request_catalog(request, catalog), kind=self.kind, user=request.user, start=start,
                          end=end, **data)  # fmt: skip
        return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class RevertListApi(_PickListApi):
    kind = Merge.Kind.REVERT

    @extend_schema(request=_PickListApi.InputSerializer, responses={202: JobOutputSerializer})
    def post(self, request, catalog):
        return super().post(request, catalog)


class CherryPickListApi(_PickListApi):
    kind = Merge.Kind.CHERRY_PICK

    class InputSerializer(_PickListApi.InputSerializer):
        def get_fields(self):
            fields = super().get_fields()
            fields["from"] = serializers.CharField(max_length=255, required=False, help_text="a range's start")
            fields["to"] = serializers.CharField(max_length=255, required=False, help_text="a range's end")
            return fields

    @extend_schema(request=InputSerializer, responses={202: JobOutputSerializer})
    def post(self, request, catalog):
        return super().post(request, catalog)


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


class RestoreDetailOutputSerializer(RestoreOutputSerializer):
    expired_commits = serializers.SerializerMethodField(help_text="Commits it names that retention expired")

    def get_expired_commits(self, restore) -> list[str]:
        return commits_expired([restore.commit_id, restore.point, restore.head_before])


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
    @extend_schema(responses=RestoreDetailOutputSerializer)
    def get(self, request, catalog, restore_id):
        restore = restore_get(catalog=request_catalog(request, catalog), restore_id=restore_id)
        return Response(RestoreDetailOutputSerializer(restore).data)
