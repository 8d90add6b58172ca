from django.urls import path

from hooks_app.apis import (
    DeliveryDetailApi,
    DeliveryListApi,
    DeliveryRedeliverApi,
    WebhookDetailApi,
    WebhookListApi,
)

HOOK = "catalogs/<str:catalog>/webhooks/<int:webhook_id>"

urlpatterns = [
    path("catalogs/<str:catalog>/webhooks", WebhookListApi.as_view()),
    path(HOOK, WebhookDetailApi.as_view()),
    path(f"{HOOK}/deliveries", DeliveryListApi.as_view()),
    path(f"{HOOK}/deliveries/<uuid:delivery_id>", DeliveryDetailApi.as_view()),
    path(f"{HOOK}/deliveries/<uuid:delivery_id>/redeliver", DeliveryRedeliverApi.as_view()),
]
