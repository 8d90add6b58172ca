"""A catalog's settings for its admins: user roles and protected branch patterns. Anyone who may see the catalog
may read them (who can approve, which branches are protected); only admins change them."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import UserField, created, request_catalog, validated
from catalog_app.models import Role
from catalog_app.selectors.access import catalog_role_list, protected_branch_list
from catalog_app.services.access import (
    catalog_role_grant,
    catalog_role_revoke,
    protected_branch_create,
    protected_branch_delete,
)
from lakeui.api.pagination import PagedApi, paginated

ADMIN_WRITES = {"POST": Role.ADMIN, "DELETE": Role.ADMIN}


class RoleOutputSerializer(serializers.Serializer):
    user = UserField()
    role = serializers.CharField()
    granted_by = UserField(allow_null=True)
    granted_at = serializers.DateTimeField()


class CatalogRoleListApi(PagedApi):
    required_roles = ADMIN_WRITES

    class InputSerializer(serializers.Serializer):
        user = serializers.CharField(max_length=150, help_text="username")
        role = serializers.ChoiceField(choices=Role.values)

    @extend_schema(responses=RoleOutputSerializer(many=True))
    def get(self, request, catalog):
        return paginated(
            request, self, catalog_role_list(catalog=request_catalog(request, catalog)), RoleOutputSerializer
        )

    @extend_schema(request=InputSerializer, responses={201: RoleOutputSerializer})
    def post(self, request, catalog):
        data = validated(self.InputSerializer, request.data)
        granted = catalog_role_grant(
            catalog=request_catalog(request, catalog), username=data["user"], role=data["role"], granted_by=request.user
        )
        return created(granted, RoleOutputSerializer)


class CatalogRoleDetailApi(APIView):
    required_roles = ADMIN_WRITES

    @extend_schema(responses={204: None})
    def delete(self, request, catalog, user):
        catalog_role_revoke(catalog=request_catalog(request, catalog), username=user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ProtectedBranchOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    pattern = serializers.CharField()
    required_approvals = serializers.IntegerField()
    required_checks = serializers.ListField(child=serializers.CharField())
    require_queue = serializers.BooleanField()
    created_by = UserField(allow_null=True)
    created_at = serializers.DateTimeField()


class ProtectedBranchListApi(PagedApi):
    required_roles = ADMIN_WRITES

    class InputSerializer(serializers.Serializer):
        pattern = serializers.CharField(max_length=255, help_text="fnmatch-style: main, release/*")
        required_approvals = serializers.IntegerField(required=False, default=1, min_value=0, max_value=20)
        required_checks = serializers.ListField(
            child=serializers.CharField(max_length=100), required=False, default=list, max_length=50,
            help_text="external checks (by name) that must succeed on a merge request's source head",
        )  # fmt: skip
        require_queue = serializers.BooleanField(
            required=False, default=False, help_text="merge requests merge only through the branch's merge queue"
        )

    @extend_schema(responses=ProtectedBranchOutputSerializer(many=True))
    def get(self, request, catalog):
        rules = protected_branch_list(catalog=request_catalog(request, catalog))
        return paginated(request, self, rules, ProtectedBranchOutputSerializer)

    @extend_schema(request=InputSerializer, responses={201: ProtectedBranchOutputSerializer})
    def post(self, request, catalog):
        data = validated(self.InputSerializer, request.data)
        rule = protected_branch_create(catalog=request_catalog(request, catalog), created_by=request.user, **data)
        return created(rule, ProtectedBranchOutputSerializer)


class ProtectedBranchDetailApi(APIView):
    required_roles = ADMIN_WRITES

    @extend_schema(responses={204: None})
    def delete(self, request, catalog, rule_id):
        protected_branch_delete(catalog=request_catalog(request, catalog), rule_id=rule_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
