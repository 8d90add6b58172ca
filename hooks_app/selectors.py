from django.db.models import QuerySet

from catalog_app.models import Catalog
from hooks_app.models import Delivery, Webhook
from lakeui.errors import NotFoundError
from lakeui.events import NAMED_ONLY


def webhook_list(*, catalog: Catalog) -> QuerySet[Webhook]:
    return Webhook.objects.filter(catalog=catalog).select_related("created_by")


def webhook_get(*, catalog: Catalog, webhook_id: int) -> Webhook:
    webhook = webhook_list(catalog=catalog).filter(id=webhook_id).first()
    if webhook is None:
        raise NotFoundError("webhook_not_found", f"There is no webhook {webhook_id} in catalog {catalog.name!r}.")
    return webhook


def webhooks_listening(*, catalog_id: object, kind: str) -> list[Webhook]:
    """The catalog's active webhooks that listen to `kind` (a catalog has a handful: filtered here, which works the
    same on every database's JSON). Plain SQL: every commit asks, and usually there is none."""
    sql = f"SELECT * FROM {Webhook._meta.db_table} WHERE catalog_id = %s AND active"
    hooks = Webhook.objects.raw(sql, [catalog_id])
    return [hook for hook in hooks if kind in hook.events or ("*" in hook.events and kind not in NAMED_ONLY)]


def delivery_list(*, webhook: Webhook) -> QuerySet[Delivery]:
    """Newest first."""
    return Delivery.objects.filter(webhook=webhook).defer("payload")


def delivery_get(*, webhook: Webhook, delivery_id: str) -> Delivery:
    delivery = Delivery.objects.filter(webhook=webhook, id=delivery_id).first()
    if delivery is None:
        raise NotFoundError("delivery_not_found", f"There is no delivery {delivery_id} of webhook {webhook.id}.")
    return delivery


def delivery_for_attempt(*, delivery_id: str) -> Delivery | None:
    """A delivery with its webhook, or None if it is gone (deleted with its webhook)."""
    return Delivery.objects.select_related("webhook").filter(id=delivery_id).first()
