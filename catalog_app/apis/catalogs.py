"""Catalogs, branches, tags and the commit log."""

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import (
    AT_PARAMETER,
    CommitOutputSerializer,
    UserField,
    created,
    parse_at,
    read_ref,
    request_catalog,
    validated,
)
from catalog_app.models import Role
from catalog_app.selectors.access import catalogs_visible
from catalog_app.selectors.refs import CommitLog, branch_get, branch_list, catalog_list, tag_get, tag_list
from catalog_app.selectors.token_reads import BRANCH, BRANCHES, CATALOG, CATALOGS, TAG, TAGS, catalog_state
from catalog_app.services.refs import (
    branch_create,
    branch_delete,
    catalog_create,
    catalog_delete,
    tag_create,
    tag_delete,
)
from lakeui.api.conditional import state_read
from lakeui.api.pagination import PagedApi, paginated


class CatalogOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField()
    default_branch = serializers.CharField()
    created_at = serializers.DateTimeField()
    created_by = UserField(allow_null=True)


class CatalogListApi(PagedApi):
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=63)
        description = serializers.CharField(required=False, allow_blank=True, default="")

    @extend_schema(responses=CatalogOutputSerializer(many=True))
    def get(self, request):
        state_read(request, lambda: catalog_state(user=request.user, kind=CATALOGS))  # a 304 or kept answer now
        visible = catalogs_visible(user=request.user, catalogs=catalog_list())
        return paginated(request, self, visible, CatalogOutputSerializer)

    @extend_schema(request=InputSerializer, responses={201: CatalogOutputSerializer})
    def post(self, request):
        catalog = catalog_create(**validated(self.InputSerializer, request.data), created_by=request.user)
        return created(catalog, CatalogOutputSerializer)


class CatalogDetailApi(APIView):
    required_roles = {"DELETE": Role.ADMIN}

    @extend_schema(responses=CatalogOutputSerializer)
    def get(self, request, catalog):
        state_read(request, lambda: catalog_state(user=request.user, kind=CATALOG, catalog=catalog))
        return Response(CatalogOutputSerializer(request_catalog(request, catalog)).data)

    @extend_schema(responses={204: None})
    def delete(self, request, catalog):
        catalog_delete(catalog=request_catalog(request, catalog))
        return Response(status=status.HTTP_204_NO_CONTENT)


class BranchOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    head = serializers.CharField(source="head_id")
    created_at = serializers.DateTimeField()
    created_by = UserField(allow_null=True)


class BranchListApi(PagedApi):
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=255)
        source = serializers.CharField(
            max_length=255, required=False, help_text="Branch, tag or commit to start from (default: main)"
        )
        at = serializers.CharField(required=False, help_text="ISO 8601 timestamp: the source as it was then")

        def to_internal_value(self, data):
            # `from` is the documented field name; it is a Python keyword, so it is read by hand.
            if isinstance(data, dict) and "from" in data and "source" not in data:
                data = {**data, "source": data["from"]}
            return super().to_internal_value(data)

    @extend_schema(responses=BranchOutputSerializer(many=True))
    def get(self, request, catalog):
        state_read(request, lambda: catalog_state(user=request.user, kind=BRANCHES, catalog=catalog))
        return paginated(request, self, branch_list(catalog=request_catalog(request, catalog)), BranchOutputSerializer)

    @extend_schema(request=InputSerializer, responses={201: BranchOutputSerializer})
    def post(self, request, catalog):
        data, found = validated(self.InputSerializer, request.data), request_catalog(request, catalog)
        branch = branch_create(
            catalog=found,
            name=data["name"],
            source=data.get("source", found.default_branch),
            at=parse_at(data.get("at")),
            created_by=request.user,
        )
        return created(branch, BranchOutputSerializer)


class BranchDetailApi(APIView):
    @extend_schema(responses=BranchOutputSerializer)
    def get(self, request, catalog, branch):
        if settings.LAKEUI_READ_CARRY:
            state_read(request, lambda: catalog_state(user=request.user, kind=BRANCH, catalog=catalog, name=branch))
        return Response(BranchOutputSerializer(branch_get(catalog=request_catalog(request, catalog), name=branch)).data)

    @extend_schema(responses={204: None})
    def delete(self, request, catalog, branch):
        branch_delete(catalog=request_catalog(request, catalog), name=branch)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TagOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    commit = serializers.CharField(source="commit_id")
    created_at = serializers.DateTimeField()
    created_by = UserField(allow_null=True)


class TagListApi(PagedApi):
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=255)
        ref = serializers.CharField(max_length=255)

    @extend_schema(responses=TagOutputSerializer(many=True))
    def get(self, request, catalog):
        state_read(request, lambda: catalog_state(user=request.user, kind=TAGS, catalog=catalog))
        return paginated(request, self, tag_list(catalog=request_catalog(request, catalog)), TagOutputSerializer)

    @extend_schema(request=InputSerializer, responses={201: TagOutputSerializer})
    def post(self, request, catalog):
        data = validated(self.InputSerializer, request.data)
        tag = tag_create(catalog=request_catalog(request, catalog), **data, created_by=request.user)
        return created(tag, TagOutputSerializer)


class TagDetailApi(APIView):
    @extend_schema(responses=TagOutputSerializer)
    def get(self, request, catalog, tag):
        if settings.LAKEUI_READ_CARRY:
            state_read(request, lambda: catalog_state(user=request.user, kind=TAG, catalog=catalog, name=tag))
        return Response(TagOutputSerializer(tag_get(catalog=request_catalog(request, catalog), name=tag)).data)

    @extend_schema(responses={204: None})
    def delete(self, request, catalog, tag):
        tag_delete(catalog=request_catalog(request, catalog), name=tag)
        return Response(status=status.HTTP_204_NO_CONTENT)


class CommitLogApi(PagedApi):
    @extend_schema(parameters=[AT_PARAMETER], responses=CommitOutputSerializer(many=True))
    def get(self, request, catalog, ref):
        return paginated(request, self, CommitLog(read_ref(request, catalog, ref).chain), CommitOutputSerializer)
