"""A catalog's SQL checks and their runs. Anyone who may see the catalog reads them (what guards a branch, and why a
merge was refused); only admins add, change, delete or run them."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import UserField, request_catalog, validated
from catalog_app.models import Role
from checks_app.models import Check
from checks_app.selectors import check_get, check_list, check_run_dict, check_run_get, check_runs
from checks_app.services.checks import check_create, check_delete, check_run_submit, check_update
from lakeui.api.pagination import PagedApi, paginated
from lakeui.jobs.apis import JobOutputSerializer
from lakeui.jobs.models import Job

ADMIN_WRITES = {"POST": Role.ADMIN, "PATCH": Role.ADMIN, "DELETE": Role.ADMIN}


class CheckOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    branches = serializers.CharField(help_text="the target branches it guards: a name or a pattern (release/*)")
    sql = serializers.CharField()
    tables = serializers.ListField(child=serializers.CharField())
    max_rows = serializers.IntegerField()
    advisory = serializers.BooleanField()
    version = serializers.IntegerField()
    created_by = UserField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class CheckRunSerializer(serializers.Serializer):
    """A run as `check_run_dict` shows it."""

    def to_representation(self, instance):
        return check_run_dict(instance)


STATEMENT_PARSED = (
    "A statement in the quick subset (a SELECT of one table) is checked at once: {saved}. Any other is parsed by "
    "Spark on a worker: 202 with that job, which saves the check once the statement is found good (its `result` "
    "names it: `check`, the id) or fails with the 400 the statement deserves (`invalid_query`, `table_not_found`), "
    "saving nothing. Every other field is checked at once (400, 409)."
)


def _saved(saved: Check | Job, done: int) -> Response:
    if isinstance(saved, Job):
        return Response(JobOutputSerializer(saved).data, status=status.HTTP_202_ACCEPTED)
    return Response(CheckOutputSerializer(saved).data, status=done)


class CheckListApi(PagedApi):
    required_roles = ADMIN_WRITES

    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=100)
        branches = serializers.CharField(max_length=255, help_text="fnmatch-style: main, release/*")
        sql = serializers.CharField(max_length=100_000, help_text="one SELECT over the catalog's tables")
        max_rows = serializers.IntegerField(required=False, default=0, min_value=0, max_value=1_000_000_000)
        advisory = serializers.BooleanField(required=False, default=False)

    @extend_schema(responses=CheckOutputSerializer(many=True))
    def get(self, request, catalog):
        return paginated(request, self, check_list(catalog=request_catalog(request, catalog)), CheckOutputSerializer)

    @extend_schema(
        request=InputSerializer,
        responses={201: CheckOutputSerializer, 202: JobOutputSerializer},
        description=STATEMENT_PARSED.format(saved="201 with the check"),
    )
    def post(self, request, catalog):
        data = validated(self.InputSerializer, request.data)
        saved = check_create(catalog=request_catalog(request, catalog), created_by=request.user, **data)
        return _saved(saved, status.HTTP_201_CREATED)


class CheckDetailApi(APIView):
    required_roles = ADMIN_WRITES

    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=100, required=False)
        branches = serializers.CharField(max_length=255, required=False)
        sql = serializers.CharField(max_length=100_000, required=False)
        max_rows = serializers.IntegerField(required=False, min_value=0, max_value=1_000_000_000)
        advisory = serializers.BooleanField(required=False)

    @extend_schema(responses=CheckOutputSerializer)
    def get(self, request, catalog, check_id):
        check = check_get(catalog=request_catalog(request, catalog), check_id=check_id)
        return Response(CheckOutputSerializer(check).data)

    @extend_schema(
        request=InputSerializer,
        responses={200: CheckOutputSerializer, 202: JobOutputSerializer},
        description=STATEMENT_PARSED.format(saved="200 with the check"),
    )
    def patch(self, request, catalog, check_id):
        data = validated(self.InputSerializer, request.data)
        check = check_get(catalog=request_catalog(request, catalog), check_id=check_id)
        return _saved(check_update(check=check, user=request.user, **data), status.HTTP_200_OK)

    @extend_schema(responses={204: None})
    def delete(self, request, catalog, check_id):
        check_delete(check=check_get(catalog=request_catalog(request, catalog), check_id=check_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class CheckRunListApi(PagedApi):
    required_roles = ADMIN_WRITES

    class InputSerializer(serializers.Serializer):
        ref = serializers.CharField(max_length=255, help_text="a branch, a tag or a commit id to run the check on")

    @extend_schema(responses=CheckRunSerializer(many=True))
    def get(self, request, catalog, check_id):
        check = check_get(catalog=request_catalog(request, catalog), check_id=check_id)
        return paginated(request, self, check_runs(check=check), CheckRunSerializer)

    @extend_schema(request=InputSerializer, responses={202: JobOutputSerializer})
    def post(self, request, catalog, check_id):
        data = validated(self.InputSerializer, request.data)
        check = check_get(catalog=request_catalog(request, catalog), check_id=check_id)
        job = check_run_submit(check=check, ref=data["ref"], user=request.user)
        return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class CheckRunDetailApi(APIView):
    @extend_schema(responses=CheckRunSerializer)
    def get(self, request, catalog, run_id):
        run = check_run_get(catalog=request_catalog(request, catalog), run_id=run_id)
        return Response(check_run_dict(run, rows=True))
