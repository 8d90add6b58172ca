import uuid

from django.conf import settings
from django.db import models


class Job(models.Model):
    """One queued unit of work run by a Celery worker: a data write, merge, restore, diff, compaction, GC."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=64)
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)
    progress_message = models.CharField(max_length=255, blank=True)
    result = models.JSONField(null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    # The HTTP status the refusal maps to (4xx for the user's errors), for APIs that wait on the job.
    error_status = models.PositiveSmallIntegerField(null=True, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Written by the running worker every few seconds: tells a live duplicate delivery from a dead worker.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=255, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)
    # What a run left for a later run of the same job, should its worker die (`job_checkpoint_save`): a merge's
    # result, prepared and recorded before its commit, which the next run publishes instead of merging again.
    checkpoint = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "catalog_app_job"  # the table it had when catalog_app held it (moved by state only)
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "created_at"]),
            models.Index(fields=["kind", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED
