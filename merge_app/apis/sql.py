from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.selectors.refs import catalog_get
from merge_app.services.sql import sql_execute


class SqlApi(APIView):
    class InputSerializer(serializers.Serializer):
        statement = serializers.CharField(trim_whitespace=False)
        branch = serializers.CharField(required=False, help_text="The ref to read (default: the default branch)")
        limit = serializers.IntegerField(required=False, min_value=1, max_value=10_000, default=1000)

    class OutputSerializer(serializers.Serializer):
        kind = serializers.CharField()
        ref = serializers.CharField()
        commit = serializers.CharField()
        columns = serializers.ListField(child=serializers.DictField())
        rows = serializers.ListField(child=serializers.ListField())
        truncated = serializers.BooleanField()

    @extend_schema(request=InputSerializer, responses=OutputSerializer)
    def post(self, request, catalog):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = sql_execute(
            catalog=catalog_get(name=catalog), statement=data.validated_data["statement"],
            ref=data.validated_data.get("branch"), user=request.user, limit=data.validated_data["limit"],
        )  # fmt: skip
        return Response(result)
