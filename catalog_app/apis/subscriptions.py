"""Subscriptions to a branch's change feed (docs/changes.md#subscriptions): list and create, read and delete one,
read its changes since the cursor and acknowledge them."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog_app.apis.changes import ChangesApi, feed_page
from catalog_app.apis.common import request_catalog, validated
from catalog_app.models import Role
from catalog_app.selectors.changes import changes_between
from catalog_app.selectors.subscriptions import subscription_describe, subscription_get, subscription_list
from catalog_app.services.subscriptions import (
    MAX_TABLES,
    MESSAGE_NOT_FOUND,
    subscription_ack,
    subscription_batch,
    subscription_create,
    subscription_delete,
)
from lakeui.api.pagination import PagedApi
from lakeui.errors import NotFoundError


class SubscriptionSerializer(serializers.Serializer):
    name = serializers.CharField()
    branch = serializers.CharField()
    tables = serializers.ListField(child=serializers.CharField())
    cursor = serializers.CharField(help_text="the commit whose state the consumer has acknowledged")
    cursor_at = serializers.DateTimeField()
    pending_batch = serializers.BooleanField(help_text="a batch was handed out and is not acknowledged yet")
    lag_commits = serializers.IntegerField(allow_null=True, help_text="commits on the branch after the cursor")
    created_at = serializers.DateTimeField()
    acknowledged_at = serializers.DateTimeField(allow_null=True)
    created_by = serializers.CharField(allow_null=True)


class SubscriptionListSerializer(serializers.Serializer):
    results = SubscriptionSerializer(many=True)


class SubscriptionListApi(APIView):
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=64)
        branch = serializers.CharField(max_length=255)
        tables = serializers.ListField(child=serializers.CharField(max_length=511), required=False, default=list,
                                       max_length=MAX_TABLES)  # fmt: skip

    @extend_schema(responses=SubscriptionListSerializer, operation_id="catalogs_subscriptions_list")
    def get(self, request, catalog):
        found = subscription_list(catalog=request_catalog(request, catalog))
        return Response({"results": [subscription_describe(s) for s in found]})

    @extend_schema(request=InputSerializer, responses={201: SubscriptionSerializer})
    def post(self, request, catalog):
        data = validated(self.InputSerializer, request.data)
        made = subscription_create(catalog=request_catalog(request, catalog), user=request.user, **data)
        return Response(subscription_describe(made), status=status.HTTP_201_CREATED)


class SubscriptionDetailApi(APIView):
    @extend_schema(responses=SubscriptionSerializer)
    def get(self, request, catalog, name):
        found = subscription_get(catalog=request_catalog(request, catalog), name=name)
        if found is None:
            raise NotFoundError("subscription_not_found", MESSAGE_NOT_FOUND.format(name=name))
        return Response(subscription_describe(found))

    @extend_schema(responses={204: None})
    def delete(self, request, catalog, name):
        subscription_delete(catalog=request_catalog(request, catalog), name=name)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SubscriptionChangesApi(PagedApi):
    """A consumer reads and acknowledges with read access: consuming a feed changes no data."""

    required_roles = {"POST": Role.VIEWER}

    class AckSerializer(serializers.Serializer):
        ack = serializers.UUIDField(help_text="the token of the batch read")

    @extend_schema(
        parameters=[OpenApiParameter("page", int), OpenApiParameter("page_size", int)],
        responses=ChangesApi.OutputSerializer,
        description="The changes since the cursor, as `GET .../changes` answers them, with `ack`: the token that "
        "acknowledges them. Until it does, every read answers the same batch (its pages), whatever the branch did "
        "since. `410 cursor_expired` if a forced expiry removed the cursor.",
    )
    def get(self, request, catalog, name):
        batch = subscription_batch(catalog=request_catalog(request, catalog), name=name)
        feed = changes_between(source=batch.start, target=batch.end, among=batch.subscription.tables)
        return feed_page(request, self, feed, ack=str(batch.token))

    @extend_schema(
        request=AckSerializer,
        responses=SubscriptionSerializer,
        description="Acknowledge the batch read: the cursor moves to its end. 409 `stale_ack` for a token that names "
        "no batch handed out now (acknowledged already, by this consumer or another).",
    )
    def post(self, request, catalog, name):
        data = validated(self.AckSerializer, request.data)
        done = subscription_ack(catalog=request_catalog(request, catalog), name=name, token=data["ack"])
        return Response(subscription_describe(done))
