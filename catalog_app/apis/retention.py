"""Retention endpoints (docs/retention.md): the rules, a preview of what they remove, and expiry as a job."""

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import request_catalog, validated
from catalog_app.models import Role
from catalog_app.selectors.retention import rules_get, storage_per_branch
from catalog_app.services.retention import MAX_KEEP, MAX_RULES, expire_submit, retention_preview, rules_set
from lakeui.api.strict import ClosedSerializer, StrictCharField, StrictIntegerField
from lakeui.jobs.apis import JobOutputSerializer


class RuleSerializer(ClosedSerializer):
    """A rule as JSON types it: `keep_commits: 1.0`, `keep_days: "3"`, a pattern `5` or an unknown key is a 400."""

    pattern = StrictCharField(max_length=255, help_text="Branch and tag names, shell-style: `scratch/*`")
    keep_days = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_KEEP)
    keep_commits = StrictIntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_KEEP)


class RulesSerializer(ClosedSerializer):
    rules = RuleSerializer(many=True, max_length=MAX_RULES)


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

    class InputSerializer(ClosedSerializer):
        rules = RuleSerializer(
            many=True, required=False, max_length=MAX_RULES, help_text="Proposed rules (default: the saved ones)"
        )

    @extend_schema(request=InputSerializer, responses={200: dict})
    def post(self, request, catalog):
        data = validated(self.InputSerializer, request.data)
        rules = [dict(rule) for rule in data["rules"]] if "rules" in data else None
        return Response(retention_preview(catalog=request_catalog(request, catalog), rules=rules).as_dict())


class RetentionExpireApi(APIView):
    """Expire by the saved rules. The body, if any, is an empty object: rules given here would not be the ones
    applied, so any key is a 400 rather than ignored."""

    required_roles = {"POST": Role.ADMIN}

    class InputSerializer(ClosedSerializer):
        pass

    @extend_schema(request=None, responses={202: JobOutputSerializer})
    def post(self, request, catalog):
        validated(self.InputSerializer, request.data)
        job = expire_submit(catalog=request_catalog(request, catalog), user=request.user)
        return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class StorageApi(APIView):
    """Per branch and table: the bytes of the files live at its head that only it holds, and those shared with
    another branch or tag head (what a branch costs before keeping it)."""

    @extend_schema(responses={200: dict})
    def get(self, request, catalog):
        return Response({"branches": storage_per_branch(catalog=request_catalog(request, catalog))})
