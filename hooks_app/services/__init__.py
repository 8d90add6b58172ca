from hooks_app.services.deliveries import (
    delivery_attempt,
    delivery_redeliver,
    signature,
    webhook_event_record,
)
from hooks_app.services.webhooks import webhook_create, webhook_delete, webhook_update

__all__ = [
    "delivery_attempt",
    "delivery_redeliver",
    "signature",
    "webhook_create",
    "webhook_delete",
    "webhook_event_record",
    "webhook_update",
]
