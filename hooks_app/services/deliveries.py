"""Deliveries: recording an event for the webhooks that listen to it, one attempt to send it, redelivery.

An event's deliveries are recorded in the transaction of the change (a merge that rolls back sends nothing) and
their messages sent when it commits; a worker sends them (`hooks_app.tasks.webhook_deliver`), never the web thread,
and the action that emitted the event neither waits for them nor fails with them. Delivery is at least once: a
worker lost mid-attempt sends again, and the body's `id` lets a receiver drop the duplicate.
"""

import hashlib
import hmac
import http.client
import json
import logging
import time
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from hooks_app.models import Delivery
from hooks_app.selectors import delivery_for_attempt, webhooks_listening
from hooks_app.services.sending import post
from hooks_app.services.targets import target_check
from lakeui.celery import app as celery_app
from lakeui.errors import ApplicationError, ConflictError
from lakeui.events import OPENLINEAGE_RUN

logger = logging.getLogger(__name__)

DELIVER_TASK = "hooks_app.tasks.webhook_deliver"  # sent by name: the task module imports this one
SIGNATURE_HEADER = "X-LakeUI-Signature"
USER_AGENT = "LakeUI-Webhooks/1"
MESSAGE_INACTIVE = "Webhook {id} is inactive: it sends nothing until it is made active again."


def signature(*, secret: str, body: bytes) -> str:
    """The value of X-LakeUI-Signature: `sha256=` and the hex HMAC-SHA256 of the body with the webhook's secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def body_of(delivery: Delivery) -> bytes:
    return json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True).encode()


def _send_on_commit(delivery_id: uuid.UUID) -> None:
    send = partial(celery_app.send_task, DELIVER_TASK, args=[str(delivery_id)], queue=settings.LAKEUI_WEBHOOK_QUEUE)
    transaction.on_commit(send, robust=True)  # a broker that is down fails no action; the delivery stays pending


def webhook_event_record(*, catalog: Any, kind: str, payload: dict[str, Any], actor: Any = None) -> list[Delivery]:
    """The listener of lakeui/events.py: one delivery per active webhook of the catalog that listens to `kind`. With
    none (the usual case), one indexed query and nothing else."""
    hooks = webhooks_listening(catalog_id=catalog.id, kind=kind)
    if not hooks:
        return []
    event_id = str(uuid.uuid4())
    if kind == OPENLINEAGE_RUN:  # the body is the OpenLineage RunEvent as it is (its run names the LakeUI run)
        body = payload
    else:
        body = {
            "id": event_id,
            "event": kind,
            "created_at": timezone.now().isoformat(),
            "catalog": catalog.name,
            "actor": getattr(actor, "username", None) if getattr(actor, "is_authenticated", False) else None,
            "data": payload,
        }
    with transaction.atomic():  # a savepoint: should this fail, the caller's transaction goes on unharmed
        deliveries = Delivery.objects.bulk_create(
            [Delivery(webhook=hook, event_id=event_id, kind=kind, payload=body) for hook in hooks]
        )
    for delivery in deliveries:
        _send_on_commit(delivery.id)
    return deliveries


@transaction.atomic
def delivery_redeliver(*, delivery: Delivery) -> Delivery:
    """Send a delivery's event again, as a new delivery (same event id and body, a new delivery id); 409
    `webhook_inactive` for an inactive webhook."""
    if not delivery.webhook.active:
        raise ConflictError("webhook_inactive", MESSAGE_INACTIVE.format(id=delivery.webhook_id))
    again = Delivery.objects.create(
        webhook=delivery.webhook,
        event_id=delivery.event_id,
        kind=delivery.kind,
        payload=delivery.payload,
        redelivery_of=delivery,
    )
    _send_on_commit(again.id)
    return again


@dataclass(frozen=True)
class Attempted:
    """What one attempt leaves to do: retry after `retry_in` seconds, or nothing (None)."""

    retry_in: float | None = None


def delivery_attempt(*, delivery_id: str) -> Attempted:
    """Try once to send a pending delivery, and log the attempt. A 2xx answer succeeds; any other answer, a timeout
    or a connection error is retried after the next of LAKEUI_WEBHOOK_RETRY_DELAYS, and fails when none is left; a
    target refused now (services/targets.py, e.g. a name that resolves elsewhere since) or a webhook made inactive
    since fails at once, without sending.

    Not atomic: no transaction is held open while the target answers."""
    delivery = delivery_for_attempt(delivery_id=delivery_id)
    if delivery is None or delivery.status != Delivery.Status.PENDING:
        return Attempted()  # deleted with its webhook, or finished (this message came twice)
    webhook = delivery.webhook
    body = body_of(delivery)
    started = time.monotonic()
    status, excerpt, error = None, "", ""
    try:
        if not webhook.active:
            raise ApplicationError("webhook_inactive", MESSAGE_INACTIVE.format(id=webhook.id))
        target = target_check(webhook.url)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-LakeUI-Event": delivery.kind,
            "X-LakeUI-Delivery": str(delivery.id),
            SIGNATURE_HEADER: signature(secret=webhook.secret, body=body),
        }
        status, excerpt = post(target=target, body=body, headers=headers, timeout=settings.LAKEUI_WEBHOOK_TIMEOUT)
    except ApplicationError as refused:
        error, retry = refused.message, False
    except (OSError, http.client.HTTPException) as failed:
        error, retry = (f"{type(failed).__name__}: {failed}" if str(failed) else type(failed).__name__), True
    else:
        retry = not 200 <= status < 300
        error = "" if not retry else f"HTTP {status}"
    return _attempt_log(delivery, status=status, error=error, excerpt=excerpt, retry=retry, started=started)


def _attempt_log(delivery: Delivery, *, status, error: str, excerpt: str, retry: bool, started: float) -> Attempted:
    duration = round((time.monotonic() - started) * 1000)
    now = timezone.now()
    entry = {"at": now.isoformat(), "status": status, "duration_ms": duration, "error": error[:500]}
    attempts = delivery.attempts + 1
    delays = settings.LAKEUI_WEBHOOK_RETRY_DELAYS
    retry_in = delays[attempts - 1] if retry and attempts <= len(delays) else None
    if not error:
        state = Delivery.Status.SUCCEEDED
    else:
        state = Delivery.Status.PENDING if retry_in is not None else Delivery.Status.FAILED
    # An update, not save(): the webhook (and so this delivery) may have been deleted while the target answered.
    Delivery.objects.filter(id=delivery.id).update(
        attempts=attempts, status=state, response_status=status, duration_ms=duration, error=error[:500],
        delivered_at=now, attempts_log=[*delivery.attempts_log, {**entry, "response": excerpt}],
    )  # fmt: skip
    return Attempted(retry_in=retry_in)
