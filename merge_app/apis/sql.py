from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import request_catalog, validated
from catalog_app.models import Role
from merge_app.services.sql import sql_execute, sql_reads_only


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
        responses=OpenApiTypes.OBJECT,
        description="SELECT answers {kind: select, ref, commit, columns, rows, truncated}; CREATE BRANCH, USE BRANCH "
        "and MERGE BRANCH answer {kind, branch | source and target, commit, ...}.",
    )
    def post(self, request, catalog):
        data = validated(self.InputSerializer, request.data)
        result = sql_execute(
            catalog=request_catalog(request, catalog), statement=data["statement"], ref=data.get("branch"),
            user=request.user, limit=data["limit"],
        )  # fmt: skip
        return Response(result)
