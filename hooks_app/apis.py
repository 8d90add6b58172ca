"""A catalog's webhooks and their deliveries. Admins only, reads included: a webhook's URL and its deliveries' bodies
are the catalog's settings and events, and its secret is never shown after creation (write-only)."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.common import UserField, request_catalog, validated
from catalog_app.models import Role
from hooks_app.selectors import delivery_get, delivery_list, webhook_get, webhook_list
from hooks_app.services import delivery_redeliver, webhook_create, webhook_delete, webhook_update
from lakeui.api.pagination import PagedApi, paginated
from lakeui.events import EVENT_KINDS

ADMIN_ONLY = {method: Role.ADMIN for method in ("GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE")}
EVENTS_HELP = "event kinds, or ['*'] for all: " + ", ".join(EVENT_KINDS)


class WebhookOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField()
    events = serializers.ListField(child=serializers.CharField())
    active = serializers.BooleanField()
    created_by = UserField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class WebhookCreatedSerializer(WebhookOutputSerializer):
    secret = serializers.CharField(required=False, help_text="only when LakeUI made it: shown this once")


class DeliveryOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    event_id = serializers.UUIDField()
    event = serializers.CharField(source="kind")
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    response_status = serializers.IntegerField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    error = serializers.CharField()
    redelivery_of = serializers.UUIDField(source="redelivery_of_id", allow_null=True)
    created_at = serializers.DateTimeField()
    delivered_at = serializers.DateTimeField(allow_null=True)


class DeliveryDetailSerializer(DeliveryOutputSerializer):
    payload = serializers.JSONField()
    attempts_log = serializers.JSONField()


def _webhook(request, catalog: str, webhook_id: int):
    return webhook_get(catalog=request_catalog(request, catalog), webhook_id=webhook_id)


class WebhookListApi(PagedApi):
    required_roles = ADMIN_ONLY

    class InputSerializer(serializers.Serializer):
        url = serializers.CharField(max_length=2000)
        events = serializers.ListField(child=serializers.CharField(max_length=64), help_text=EVENTS_HELP)
        secret = serializers.CharField(required=False, max_length=256, help_text="write-only; made if not given")
        active = serializers.BooleanField(required=False, default=True)

    @extend_schema(responses=WebhookOutputSerializer(many=True))
    def get(self, request, catalog):
        return paginated(
            request, self, webhook_list(catalog=request_catalog(request, catalog)), WebhookOutputSerializer
        )

    @extend_schema(request=InputSerializer, responses={201: WebhookCreatedSerializer})
    def post(self, request, catalog):
        data = validated(self.InputSerializer, request.data)
        webhook = webhook_create(catalog=request_catalog(request, catalog), created_by=request.user, **data)
        answer = WebhookOutputSerializer(webhook).data
        if "secret" not in data:
            answer["secret"] = webhook.secret
        return Response(answer, status=status.HTTP_201_CREATED)


class WebhookDetailApi(APIView):
    required_roles = ADMIN_ONLY

    class InputSerializer(serializers.Serializer):
        url = serializers.CharField(required=False, max_length=2000)
        events = serializers.ListField(
            required=False, child=serializers.CharField(max_length=64), help_text=EVENTS_HELP
        )
        secret = serializers.CharField(required=False, max_length=256, help_text="write-only")
        active = serializers.BooleanField(required=False)

    @extend_schema(responses=WebhookOutputSerializer)
    def get(self, request, catalog, webhook_id):
        return Response(WebhookOutputSerializer(_webhook(request, catalog, webhook_id)).data)

    @extend_schema(request=InputSerializer, responses=WebhookOutputSerializer)
    def patch(self, request, catalog, webhook_id):
        data = validated(self.InputSerializer, request.data)
        webhook = webhook_update(webhook=_webhook(request, catalog, webhook_id), **data)
        return Response(WebhookOutputSerializer(webhook).data)

    @extend_schema(responses={204: None})
    def delete(self, request, catalog, webhook_id):
        webhook_delete(webhook=_webhook(request, catalog, webhook_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeliveryListApi(PagedApi):
    required_roles = ADMIN_ONLY

    @extend_schema(responses=DeliveryOutputSerializer(many=True))
    def get(self, request, catalog, webhook_id):
        deliveries = delivery_list(webhook=_webhook(request, catalog, webhook_id))
        return paginated(request, self, deliveries, DeliveryOutputSerializer)


class DeliveryDetailApi(APIView):
    required_roles = ADMIN_ONLY

    @extend_schema(responses=DeliveryDetailSerializer)
    def get(self, request, catalog, webhook_id, delivery_id):
        delivery = delivery_get(webhook=_webhook(request, catalog, webhook_id), delivery_id=delivery_id)
        return Response(DeliveryDetailSerializer(delivery).data)


class DeliveryRedeliverApi(APIView):
    required_roles = ADMIN_ONLY

    @extend_schema(request=None, responses={202: DeliveryOutputSerializer})
    def post(self, request, catalog, webhook_id, delivery_id):
        delivery = delivery_get(webhook=_webhook(request, catalog, webhook_id), delivery_id=delivery_id)
        again = delivery_redeliver(delivery=delivery)
        return Response(DeliveryOutputSerializer(again).data, status=status.HTTP_202_ACCEPTED)
