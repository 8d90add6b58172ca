"""A catalog's webhooks and every delivery made to them (docs/api.md#webhooks)."""

import uuid

from django.conf import settings
from django.db import models

from catalog_app.models import Catalog


class Webhook(models.Model):
    """An HTTP endpoint told of a catalog's events. The secret signs each body (HMAC-SHA256); it is kept in clear
    because it must sign, and never shown again after creation."""

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="webhooks")
    url = models.CharField(max_length=2000)
    events = models.JSONField(default=list)  # event kinds of lakeui/events.py
    secret = models.CharField(max_length=256)
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]


class Delivery(models.Model):
    """One event sent to one webhook, with every attempt (`attempts_log`). Retries of a delivery keep its id (the
    `X-LakeUI-Delivery` header); a redelivery is a new delivery of the same event (same `id` in the body)."""

    class Status(models.TextChoices):
        PENDING = "pending"  # waiting for its first attempt or a retry
        SUCCEEDED = "succeeded"  # a 2xx answer
        FAILED = "failed"  # every attempt failed, or the target was refused

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.UUIDField()
    kind = models.CharField(max_length=64)
    payload = models.JSONField()  # the whole body that is sent
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    redelivery_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    attempts = models.PositiveSmallIntegerField(default=0)
    # The last attempt's answer: HTTP status (None: no answer), how long it took, and why it failed if it did.
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    # Every attempt: [{"at", "status", "duration_ms", "error"}], oldest first.
    attempts_log = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)  # the last attempt's time

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["webhook", "-created_at"])]
