from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import request_catalog, validated
from catalog_app.models import Role
from lakeui.jobs.apis import JobOutputSerializer
from merge_app.services.sql import Submitted, sql_execute, sql_reads_only


class SqlApi(APIView):
    def required_role(self, request) -> str:
        """SELECT and USE BRANCH read; CREATE BRANCH and MERGE BRANCH write."""
        statement = request.data.get("statement") if isinstance(request.data, dict) else None
        return Role.VIEWER if isinstance(statement, str) and sql_reads_only(statement) else Role.EDITOR

    class InputSerializer(serializers.Serializer):
        statement = serializers.CharField(trim_whitespace=False)
        branch = serializers.CharField(
            required=False, help_text="The ref to read and merge into (default: USE BRANCH's, else the default branch)"
        )
        limit = serializers.IntegerField(required=False, min_value=1, max_value=10_000, default=1000)

    @extend_schema(
        request=InputSerializer,
        responses={200: OpenApiTypes.OBJECT, 202: JobOutputSerializer},
        description="SELECT answers {kind: select, ref, commit, columns, rows, truncated} when it is answered without "
        "Spark (a small table, a statement in the quick subset); CREATE BRANCH and USE BRANCH answer {kind, branch, "
        "commit}. A SELECT that Spark answers, MERGE BRANCH, RESTORE, REVERT COMMIT and CHERRY-PICK COMMIT run as "
        "jobs: 202 with the job (as POST .../merges answers) and `sql`, what the statement asked for ({kind, ref and "
        "commit | source and target | branch, ...}); the statement's result is `sql` with the job's `result` once "
        "it has finished (GET /api/v1/jobs/{id}). No request waits for a job.",
    )  # fmt: skip
    def post(self, request, catalog):
        data = validated(self.InputSerializer, request.data)
        result = sql_execute(
            catalog=request_catalog(request, catalog), statement=data["statement"], ref=data.get("branch"),
            user=request.user, limit=data["limit"],
        )  # fmt: skip
        if isinstance(result, Submitted):
            body = {**JobOutputSerializer(result.job).data, "sql": result.statement}
            return Response(body, status=status.HTTP_202_ACCEPTED)
        return Response(result)
