"""Provenance (docs/provenance.md): the blame of a table at a ref, and the history of one key."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from catalog_app.apis.common import AT_PARAMETER, read_ref
from catalog_app.selectors.blame import key_history, table_blame
from lakeui.errors import ApplicationError

KEY_HISTORY_PARAMETER = OpenApiParameter(
    "key",
    str,
    description="a table's: that key's versions at the ref instead (`{commit, key, table, versions, "
    "commits}`, docs/provenance.md), a JSON array of the key's values, e.g. [9]",
)


def _whole(value: str | None, name: str, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        raise ApplicationError("invalid_input", f"{name} must be a whole number.") from None


class TableBlameApi(APIView):
    class OutputSerializer(serializers.Serializer):
        count = serializers.IntegerField(help_text="rows (keys) at the ref")
        next = serializers.URLField(allow_null=True)
        previous = serializers.URLField(allow_null=True)
        commit = serializers.CharField(help_text="the commit the ref named")
        table = serializers.DictField(help_text="table, table_id, primary_key, columns")
        results = serializers.ListField(
            child=serializers.DictField(),
            help_text="per row: key, row, and per cell (keyed) or for the row (keyless) the `commit` that wrote it, "
            "the `chain` of merges and picks that brought it to the ref (from the writer to the ref), "
            "`resolution` (a merge made the value itself) and `settled_by` (the resolution that settled the cell in "
            "a merge's conflict: merge, choice, scope, column, chosen_by, chosen_at; or null)",
        )
        commits = serializers.DictField(
            help_text="every commit named, by id: kind (commit, merge, cherry_pick, revert, restore), author, "
            "created_at, message, branch, parents; a merge's merge_request, approved_by and checks; a pick's "
            "picked_from"
        )

    @extend_schema(
        parameters=[
            AT_PARAMETER, OpenApiParameter("page", int), OpenApiParameter("page_size", int),
            OpenApiParameter("key", str, description="only this key: a JSON array of the key's values, e.g. [9]"),
        ],
        responses=OutputSerializer,
        description="Who wrote each value the ref holds: a page of the table's rows (a keyed table's by key), and "
        "per cell (a keyed table) or per row (a keyless one) the commit that wrote it, its author, time and branch, "
        "and the merges (with their merge requests, approvers and checks) and picks that brought it to the ref.",
    )  # fmt: skip
    def get(self, request, catalog, ref, database, table):
        params = request.query_params
        page, page_size = _whole(params.get("page"), "page", 1), _whole(params.get("page_size"), "page_size", 50)
        resolved = read_ref(request, catalog, ref)
        blame = table_blame(
            resolved=resolved, database=database, table=table, page=page, page_size=page_size, key=params.get("key")
        )
        answer = {"count": blame.count, "next": None, "previous": None}
        if params.get("key") is None:
            url = request.build_absolute_uri()
            last = max(1, -(-blame.count // page_size))
            answer["next"] = replace_query_param(url, "page", page + 1) if page < last else None
            answer["previous"] = replace_query_param(url, "page", page - 1) if page > 1 else None
        answer |= {"commit": resolved.commit.id, "table": blame.table, "results": blame.results,
                   "commits": blame.commits}  # fmt: skip
        return Response(answer)


def key_history_answer(request, catalog: str, ref: str, database: str, table: str) -> Response:
    """`.../tables/{t}/history?key=[9]`: the key's versions at the ref (ObjectHistoryApi hands such a read here)."""
    resolved = read_ref(request, catalog, ref)
    answer = key_history(resolved=resolved, database=database, table=table, key=request.query_params["key"])
    return Response({"commit": resolved.commit.id, **answer})
