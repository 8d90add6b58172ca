"""Subscriptions to a branch's change feed (docs/changes.md#subscriptions): a consumer's durable cursor.

The cursor is the commit whose state the consumer has consumed. A read of its changes hands out one batch, the
changes from the cursor to the branch's head as it was then, with a token; the same batch is handed out again until
the token acknowledges it, which moves the cursor to the batch's end. Each acknowledged change is so consumed once,
in commit order, whatever crashes between reading and acknowledging. Retention keeps both commits (the cursor and
the batch's end) as long as the subscription holds them.
"""

from django.conf import settings
from django.db import models

from catalog_app.models.catalog import Catalog, Commit


class Subscription(models.Model):
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="subscriptions")
    name = models.CharField(max_length=64)
    branch = models.CharField(max_length=255)
    tables = models.JSONField(default=list)  # `db.table` names; empty: every table of the branch
    cursor = models.ForeignKey(Commit, on_delete=models.RESTRICT, related_name="+")
    batch_end = models.ForeignKey(Commit, null=True, blank=True, on_delete=models.RESTRICT, related_name="+")
    batch_token = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    acknowledged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["catalog", "name"], name="subscription_name_unique")]
        ordering = ["name"]
