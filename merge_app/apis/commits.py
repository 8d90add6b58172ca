"""One commit: its parents, author, message, operations with the objects they touched and their row counts, the
URLs of the rows each table changed, and for a merge commit its audit log."""

from urllib.parse import urlencode

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import CommitOutputSerializer, request_catalog
from catalog_app.selectors.commits import commit_detail
from merge_app.selectors.merges import merge_of_commit


class CommitDetailApi(APIView):
    class OperationSerializer(serializers.Serializer):
        position = serializers.IntegerField()
        op = serializers.CharField()
        object_kind = serializers.CharField()
        object_id = serializers.UUIDField()
        object = serializers.CharField(source="object_name", help_text="db.table for a table or view")
        rows = serializers.DictField(child=serializers.IntegerField(), help_text="rows_inserted, _updated, _deleted")
        details = serializers.DictField()

    class TableSerializer(serializers.Serializer):
        table = serializers.CharField()
        table_id = serializers.UUIDField()
        rows = serializers.URLField(allow_null=True, help_text="its changed rows (vs the first parent), paged")

    class MergeSerializer(serializers.Serializer):
        id = serializers.UUIDField()
        url = serializers.URLField()

    class OutputSerializer(CommitOutputSerializer):
        """The commit's fields (CommitOutputSerializer), and what the page shows of it."""

        parents = serializers.ListField(child=serializers.CharField(), help_text="first parent, then merged head")
        operations = serializers.ListField(child=serializers.DictField())
        tables = serializers.ListField(child=serializers.DictField(), help_text="TableSerializer items")
        merge = serializers.DictField(allow_null=True, help_text="a merge commit's audit log: id and url")

    @extend_schema(responses=OutputSerializer)
    def get(self, request, catalog, commit_id):
        found = request_catalog(request, catalog)
        detail = commit_detail(catalog=found, commit_id=commit_id)
        commit = detail.commit
        tables = []
        for op in detail.tables:
            rows = None
            if commit.parent_id:
                query = urlencode({"from": commit.parent_id, "to": commit.id, "table_id": op.object_id})
                rows = request.build_absolute_uri(f"/api/v1/catalogs/{found.name}/diff/rows?{query}")
            tables.append({"table": op.object_name, "table_id": str(op.object_id), "rows": rows})
        merge = merge_of_commit(commit=commit)
        payload = {
            **CommitOutputSerializer(commit).data,
            "parents": detail.parents,
            "operations": self.OperationSerializer(detail.operations, many=True).data,
            "tables": tables,
            "merge": None
            if merge is None
            else {
                "id": str(merge.id),
                "url": request.build_absolute_uri(f"/api/v1/catalogs/{found.name}/merges/{merge.id}"),
            },
        }
        return Response(payload)
