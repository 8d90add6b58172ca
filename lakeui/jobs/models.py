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


class WorkerHeartbeat(models.Model):
    """A process of a worker that runs jobs (a pool process of a Celery worker), as the public health report sees
    it (lakeui.jobs.health): alive while `beat_at` is fresh. Its worker's main process writes the row on a
    timer of its own (every LAKEUI_JOB_RECOVER_EVERY), the process itself records when its Spark started."""

    process = models.CharField(max_length=255, primary_key=True)  # <node>/<run>/<pid>
    node = models.CharField(max_length=255)  # the Celery worker's node name, `jobs@host`
    run = models.CharField(max_length=16)  # the worker's run (lakeui.jobs.tasks.RUN): a restart is a new run
    pid = models.PositiveIntegerField()
    kind = models.CharField(max_length=16)  # jobs | interactive
    hostname = models.CharField(max_length=255)
    started_at = models.DateTimeField(auto_now_add=True)
    beat_at = models.DateTimeField()
    spark_warm = models.BooleanField(default=False)  # its SparkSession started: a job needs not wait for it
    spark_version = models.CharField(max_length=32, blank=True)

    class Meta:
        indexes = [models.Index(fields=["kind", "beat_at"]), models.Index(fields=["node"])]

    def __str__(self) -> str:
        return f"{self.kind} worker process {self.process}"
