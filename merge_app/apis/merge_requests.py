"""Merge requests, their reviews and their merge. A GET reads only: it starts no job and writes no row. A request
whose branches moved since its plan is answered with that plan and `status.moved` (the blocker `plan_stale`); the
job workers' upkeep plans it again and dismisses approvals of an older source head within seconds, and a merge plans
on the current heads first: see services/merge_requests.py."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import UserField, created, request_catalog, validated
from catalog_app.models import Role
from checks_app.selectors import check_run_dict
from lakeui.api.pagination import PagedApi, paginated
from lakeui.jobs.apis import JobOutputSerializer
from merge_app.models import MergeRequest, MergeRequestReview
from merge_app.plan.rules import CHOICES
from merge_app.selectors.merge_requests import (
    merge_request_events,
    merge_request_get,
    merge_request_list,
    merge_request_reviews,
    merge_request_status,
    resolution_of,
    resolution_preview,
)
from merge_app.services.merge_requests import (
    merge_request_merge,
    merge_request_open,
    merge_request_review,
    merge_request_status_post,
    merge_request_update,
)
from merge_app.services.queue import queue_status_posted


class JobBriefSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.CharField()
    error_code = serializers.CharField(allow_null=True)


class ReviewOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    reviewer = UserField()
    decision = serializers.CharField()
    comment = serializers.CharField()
    source_head = serializers.CharField()
    created_at = serializers.DateTimeField()
    dismissed_at = serializers.DateTimeField(allow_null=True)
    dismissed_reason = serializers.CharField()


class EventOutputSerializer(serializers.Serializer):
    kind = serializers.CharField()
    actor = UserField(allow_null=True)
    details = serializers.DictField()
    created_at = serializers.DateTimeField()


class MergeRequestOutputSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    source = serializers.CharField()
    target = serializers.CharField()
    title = serializers.CharField()
    description = serializers.CharField()
    author = UserField(allow_null=True)
    state = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    closed_at = serializers.DateTimeField(allow_null=True)
    merged_at = serializers.DateTimeField(allow_null=True)
    merged_by = UserField(allow_null=True)
    merge = serializers.UUIDField(source="merge_id", allow_null=True, help_text="The merge's audit log id")


class MergeRequestCheckSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=["sql", "external"])
    name = serializers.CharField()
    state = serializers.CharField()
    advisory = serializers.BooleanField()
    commit = serializers.CharField(help_text="the commit judged: the merge's result, or the source head")
    row_count = serializers.IntegerField(allow_null=True)
    message = serializers.CharField()
    url = serializers.CharField(allow_null=True)
    description = serializers.CharField()
    duration_ms = serializers.IntegerField(allow_null=True)


class MergeRequestDetailOutputSerializer(MergeRequestOutputSerializer):
    merge_url = serializers.SerializerMethodField()
    merge_commit = serializers.SerializerMethodField()
    plan = serializers.DictField(allow_null=True)
    plan_heads = serializers.DictField(allow_null=True)
    plan_job = JobBriefSerializer(allow_null=True)
    merge_job = JobBriefSerializer(allow_null=True)
    resolutions = serializers.DictField()
    status = serializers.SerializerMethodField()
    reviews = serializers.SerializerMethodField()
    events = serializers.SerializerMethodField()

    def get_merge_url(self, obj) -> str | None:
        return f"/api/v1/catalogs/{obj.catalog.name}/merges/{obj.merge_id}" if obj.merge_id else None

    def get_merge_commit(self, obj) -> str | None:
        return obj.merge.commit_id if obj.merge_id else None

    def get_status(self, obj) -> dict:
        found = merge_request_status(obj)
        return {
            "heads": found.heads, "stale": found.stale, "moved": found.moved, "planning": found.planning,
            "protected": found.protected,
            "required_approvals": found.required_approvals, "approved_by": found.approved_by,
            "changes_requested_by": found.changes_requested_by, "conflicts": found.conflicts,
            "unresolved_conflicts": found.unresolved_conflicts, "checks": found.checks, "mergeable": found.mergeable,
            "blockers": [{"code": b["code"], "message": b["message"]} for b in found.blockers],
        }  # fmt: skip

    def get_reviews(self, obj) -> list:
        return ReviewOutputSerializer(merge_request_reviews(obj), many=True).data

    def get_events(self, obj) -> list:
        return EventOutputSerializer(merge_request_events(obj), many=True).data


def _detail(merge_request: MergeRequest) -> dict:
    return MergeRequestDetailOutputSerializer(merge_request).data


class MergeRequestListApi(PagedApi):
    class InputSerializer(serializers.Serializer):
        source = serializers.CharField(max_length=255)
        target = serializers.CharField(max_length=255)
        title = serializers.CharField(max_length=255)
        description = serializers.CharField(required=False, allow_blank=True, default="")

    @extend_schema(
        parameters=[OpenApiParameter("state", str, enum=MergeRequest.State.values)],
        responses=MergeRequestOutputSerializer(many=True),
    )
    def get(self, request, catalog):
        requests = merge_request_list(
            catalog=request_catalog(request, catalog), state=request.query_params.get("state")
        )
        return paginated(request, self, requests, MergeRequestOutputSerializer)

    @extend_schema(request=InputSerializer, responses={201: MergeRequestDetailOutputSerializer})
    def post(self, request, catalog):
        data = validated(self.InputSerializer, request.data)
        opened = merge_request_open(catalog=request_catalog(request, catalog), author=request.user, **data)
        found = merge_request_get(catalog=opened.catalog, number=opened.number)
        return Response(_detail(found), status=status.HTTP_201_CREATED)


class MergeRequestDetailApi(APIView):
    class InputSerializer(serializers.Serializer):
        title = serializers.CharField(max_length=255, required=False)
        description = serializers.CharField(required=False, allow_blank=True)
        state = serializers.ChoiceField(choices=["open", "closed"], required=False, help_text="close or reopen")
        resolutions = serializers.JSONField(
            required=False,
            help_text=f'{{"default": choice, "tables": {{"db.t": choice | {{"choice": choice, "columns": {{column: '
            f'rule | null}}}}}}, "keys": {{"db.t": {{key: choice}}}}}}, choice one of {CHOICES}; column rules as a '
            "merge's",
        )

    @extend_schema(responses=MergeRequestDetailOutputSerializer)
    def get(self, request, catalog, number):
        found = merge_request_get(catalog=request_catalog(request, catalog), number=number)
        return Response(_detail(found))

    @extend_schema(request=InputSerializer, responses=MergeRequestDetailOutputSerializer)
    def patch(self, request, catalog, number):
        data = validated(self.InputSerializer, request.data)
        found = merge_request_get(catalog=request_catalog(request, catalog), number=number)
        merge_request_update(merge_request=found, user=request.user, **data)
        return Response(_detail(merge_request_get(catalog=found.catalog, number=number)))


def _resolution(merge_request: MergeRequest, *, table: str | None = None, offset: int = 0, limit: int = 50) -> dict:
    """The request's resolution, where its plan stands, and a page of the merged cells it would produce in `table`
    (by default the first primary-key table in conflict)."""
    found = merge_request_status(merge_request)
    plan = merge_request.plan or {}
    tables = [
        {"name": obj["name"], "conflicts": obj["keys"].get("conflicts", 0),
         "unresolved": obj["keys"].get("unresolved", 0), "stale_picks": len(obj["keys"].get("stale_picks", []))}
        for obj in plan.get("objects", []) if obj.get("keys") and obj["keys"].get("conflicts")
    ]  # fmt: skip
    table = table or (tables[0]["name"] if tables else None)
    return {
        "resolution": resolution_of(merge_request), "chosen": merge_request.resolutions.get("chosen", []),
        "heads": found.heads, "plan_heads": merge_request.plan_heads, "current": not found.stale,
        "planning": found.planning, "tables": tables,
        "preview": resolution_preview(merge_request, table=table, offset=offset, limit=limit) if table else None,
    }  # fmt: skip


class ResolutionOutputSerializer(serializers.Serializer):
    resolution = serializers.DictField(help_text="default, tables, keys, columns, cells (each pick with its inputs)")
    chosen = serializers.ListField(child=serializers.DictField(), help_text="every choice made, with who and when")
    heads = serializers.DictField()
    plan_heads = serializers.DictField(allow_null=True)
    current = serializers.BooleanField(help_text="the plan is for the current heads and this resolution")
    planning = serializers.BooleanField()
    tables = serializers.ListField(child=serializers.DictField(), help_text="primary-key tables in conflict")
    preview = serializers.DictField(allow_null=True, help_text="a page of a table's conflicting keys, merged cells")


class MergeRequestResolutionApi(APIView):
    """The request's resolution (docs/api.md#merge-request-resolution): choices, column rules and cell picks, and the
    preview of the merged cells the plan computed with them (`current` false while a plan for the heads and this
    resolution is being made: ask again)."""

    class ParamsSerializer(serializers.Serializer):
        table = serializers.RegexField(r"^[A-Za-z_][A-Za-z0-9_]{0,62}\.[A-Za-z_][A-Za-z0-9_]{0,62}$", required=False)
        offset = serializers.IntegerField(min_value=0, default=0)
        limit = serializers.IntegerField(min_value=1, max_value=500, default=50)

    class InputSerializer(serializers.Serializer):
        default = serializers.JSONField(required=False)
        tables = serializers.JSONField(required=False)
        keys = serializers.JSONField(required=False)
        columns = serializers.JSONField(required=False)
        cells = serializers.JSONField(
            required=False, help_text='{"db.t": {key id: {column: {"pick": "base" | "source" | "target"} | '
            '{"value": v} | null}}}: a reviewer\'s value for each conflicting cell (null takes a pick back)',
        )  # fmt: skip

    @extend_schema(parameters=[ParamsSerializer], responses=ResolutionOutputSerializer)
    def get(self, request, catalog, number):
        params = validated(self.ParamsSerializer, request.query_params)
        found = merge_request_get(catalog=request_catalog(request, catalog), number=number)
        return Response(_resolution(found, **params))

    @extend_schema(request=InputSerializer, responses=ResolutionOutputSerializer)
    def put(self, request, catalog, number):
        data = validated(self.InputSerializer, request.data)
        found = merge_request_get(catalog=request_catalog(request, catalog), number=number)
        merge_request_update(merge_request=found, user=request.user, resolutions=data)
        return Response(_resolution(merge_request_get(catalog=found.catalog, number=number), table=None))


class MergeRequestReviewApi(APIView):
    required_roles = {"POST": Role.APPROVER}

    class InputSerializer(serializers.Serializer):
        decision = serializers.ChoiceField(choices=MergeRequestReview.Decision.values)
        comment = serializers.CharField(required=False, allow_blank=True, default="", max_length=10_000)

    @extend_schema(request=InputSerializer, responses={201: ReviewOutputSerializer})
    def post(self, request, catalog, number):
        data = validated(self.InputSerializer, request.data)
        found = merge_request_get(catalog=request_catalog(request, catalog), number=number)
        review = merge_request_review(merge_request=found, reviewer=request.user, **data)
        return created(review, ReviewOutputSerializer)


class MergeRequestMergeApi(APIView):
    class InputSerializer(serializers.Serializer):
        override_checks = serializers.CharField(
            required=False, max_length=1000, help_text="admins: merge through failed checks, for this reason (logged)"
        )

    @extend_schema(request=InputSerializer, responses={202: JobOutputSerializer})
    def post(self, request, catalog, number):
        data = validated(self.InputSerializer, request.data or {})
        found = merge_request_get(catalog=request_catalog(request, catalog), number=number)
        job = merge_request_merge(merge_request=found, user=request.user, **data)
        return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class MergeRequestChecksApi(APIView):
    """A request's checks on its current heads; a CI system (a user with the approver role, not the request's
    author) posts an external check's status for the source head it tested."""

    required_roles = {"POST": Role.APPROVER}

    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=100)
        state = serializers.ChoiceField(choices=["pending", "success", "failure", "error"])
        url = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)
        description = serializers.CharField(required=False, allow_blank=True, default="", max_length=1000)
        head = serializers.CharField(max_length=32, help_text="the source head the status is for; a 409 if it moved")

    @extend_schema(responses=MergeRequestCheckSerializer(many=True))
    def get(self, request, catalog, number):
        found = merge_request_get(catalog=request_catalog(request, catalog), number=number)
        return Response(merge_request_status(found).checks)

    @extend_schema(request=InputSerializer, responses={201: MergeRequestCheckSerializer})
    def post(self, request, catalog, number):
        data = validated(self.InputSerializer, request.data)
        found = merge_request_get(catalog=request_catalog(request, catalog), number=number)
        run = merge_request_status_post(merge_request=found, user=request.user, **data)
        queue_status_posted(merge_request=found)
        return Response(check_run_dict(run), status=status.HTTP_201_CREATED)
