"""Merge checks (docs/merge-semantics.md#merge-checks): the SQL checks a catalog keeps for the branches they guard,
and every judgement of one: an SQL check run on a merge result (or on demand, on a ref), or an external status a CI
system posted for a commit."""

import uuid

from django.conf import settings
from django.db import models

from catalog_app.models import Catalog
from lakeui.jobs.models import Job


class Check(models.Model):
    """A SELECT a merge into a matching branch must pass: it returns no more rows than `max_rows` (0: none) on the
    merge's result. Kept by the catalog, not on a branch, so the writer being checked cannot change it."""

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="checks")
    name = models.CharField(max_length=100)
    branches = models.CharField(max_length=255)  # the target branches it guards, a pattern as protected branches'
    sql = models.TextField()
    tables = models.JSONField(default=list)  # ["db.table", ...] the statement reads, found when it was saved
    max_rows = models.PositiveIntegerField(default=0)
    advisory = models.BooleanField(default=False)  # reports only; a failure does not refuse the merge
    version = models.PositiveIntegerField(default=1)  # raised by every edit of what it judges: older runs don't count
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["catalog", "name"], name="check_name_unique")]


class CheckRun(models.Model):
    """One judgement. An SQL check's run names the commit it read (a merge's result, materialised and not yet
    published, or a ref's head) and, for a merge, the heads it merges; an external status names the source head it
    was posted for. A run of an SQL check whose tables were the same in an earlier run is that run's result again
    (`reused_from`)."""

    class Kind(models.TextChoices):
        SQL = "sql"
        EXTERNAL = "external"

    class State(models.TextChoices):
        PENDING = "pending"
        SUCCESS = "success"
        FAILURE = "failure"
        ERROR = "error"  # the statement could not run (a table dropped, a column renamed): a failure for the merge

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    check_rule = models.ForeignKey(Check, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    check_version = models.PositiveIntegerField(default=0)
    name = models.CharField(max_length=100)
    commit = models.CharField(max_length=32)  # the commit judged
    source_head = models.CharField(max_length=32, blank=True)
    target_head = models.CharField(max_length=32, blank=True)
    fingerprint = models.CharField(max_length=64, blank=True)  # of its statement and the tables it read, at `commit`
    state = models.CharField(max_length=16, choices=State.choices)
    advisory = models.BooleanField(default=False)
    row_count = models.BigIntegerField(null=True, blank=True)
    columns = models.JSONField(default=list)
    failing_rows = models.JSONField(default=list)  # the first rows the statement returned (at most 100)
    message = models.TextField(blank=True)
    url = models.URLField(max_length=2000, blank=True)
    description = models.CharField(max_length=1000, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    reused_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["catalog", "source_head", "target_head"], name="check_run_heads"),
            models.Index(fields=["catalog", "kind", "commit"], name="check_run_commit"),
            models.Index(fields=["check_rule", "check_version", "fingerprint"], name="check_run_reuse"),
        ]
