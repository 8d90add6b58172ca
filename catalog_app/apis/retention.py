"""Retention endpoints (docs/retention.md): the rules, a preview of what they remove, and expiry as a job."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import request_catalog, validated
from catalog_app.models import Role
from catalog_app.selectors.retention import rules_get, storage_per_branch
from catalog_app.services.retention import expire_submit, retention_preview, rules_set
from lakeui.jobs.apis import JobOutputSerializer


class RuleSerializer(serializers.Serializer):
    pattern = serializers.CharField(max_length=255, help_text="Branch and tag names, shell-style: `scratch/*`")
    keep_days = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    keep_commits = serializers.IntegerField(required=False, allow_null=True, min_value=1)


class RulesSerializer(serializers.Serializer):
    rules = RuleSerializer(many=True)


def _rules_answer(rules) -> Response:
    return Response({"rules": [rule.as_dict() for rule in rules]})


class RetentionApi(APIView):
    required_roles = {"GET": Role.ADMIN, "PUT": Role.ADMIN}

    @extend_schema(responses=RulesSerializer)
    def get(self, request, catalog):
        return _rules_answer(rules_get(catalog=request_catalog(request, catalog)))

    @extend_schema(request=RulesSerializer, responses=RulesSerializer)
    def put(self, request, catalog):
        data = validated(RulesSerializer, request.data)
        rules = [dict(rule) for rule in data["rules"]]
        return _rules_answer(rules_set(catalog=request_catalog(request, catalog), rules=rules))


class RetentionPreviewApi(APIView):
    """What an expiry by the saved (or the given) rules would remove now, per ref. Changes nothing."""

    required_roles = {"POST": Role.ADMIN}

    class InputSerializer(serializers.Serializer):
        rules = RuleSerializer(many=True, required=False, help_text="Proposed rules (default: the saved ones)")

    @extend_schema(request=InputSerializer, responses={200: dict})
    def post(self, request, catalog):
        data = validated(self.InputSerializer, request.data)
        rules = [dict(rule) for rule in data["rules"]] if "rules" in data else None
        return Response(retention_preview(catalog=request_catalog(request, catalog), rules=rules).as_dict())


class RetentionExpireApi(APIView):
    required_roles = {"POST": Role.ADMIN}

    @extend_schema(request=None, responses={202: JobOutputSerializer})
    def post(self, request, catalog):
        job = expire_submit(catalog=request_catalog(request, catalog), user=request.user)
        return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class StorageApi(APIView):
    """Per branch and table: the bytes of the files live at its head that only it holds, and those shared with
    another branch or tag head (what a branch costs before keeping it)."""

    @extend_schema(responses={200: dict})
    def get(self, request, catalog):
        return Response({"branches": storage_per_branch(catalog=request_catalog(request, catalog))})
