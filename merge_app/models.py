"""Merge audit logs and the SQL console's current branch."""

import json
import uuid
from typing import Any

import zstandard
from django.conf import settings
from django.contrib.postgres.indexes import HashIndex
from django.db import models

from catalog_app.models import Catalog, Commit
from lakeui.fields import json_dumps
from lakeui.jobs.models import Job

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # how a zstd frame begins


class LogField(models.Field):
    """A JSON document written once and read whole, never queried inside (a merge's audit log and the report it
    decided on), kept as zstd-compressed bytes (`bytea`). A merge of 10,000 tables logs some 13 MB
    of JSON inside its commit's transaction: as a `json` column, the server checked and compressed it in 0.15-0.2 s;
    compressed here first (10 ms), it stores 3 MB it does not look into. Rows written before hold the plain JSON
    text; they read the same (`log_loads`)."""

    def get_internal_type(self) -> str:
        return "BinaryField"

    def get_db_prep_value(self, value, connection, prepared=False):
        return None if value is None else log_dumps(value)

    def from_db_value(self, value, expression, connection):
        return None if value is None else log_loads(value)

    def value_to_string(self, obj):
        return self.value_from_object(obj)


def log_dumps(value) -> bytes:
    # Level 1: 13 MB of a log's JSON in 10 ms, to a quarter of its size. A compressor per call: one is not to be
    # shared between threads.
    return zstandard.ZstdCompressor(level=1).compress(json_dumps(value).encode())


def log_loads(stored: bytes | memoryview | str) -> Any:
    return json.loads(log_text(stored))


def log_text(stored: bytes | memoryview | str) -> bytes | str:
    """The JSON text a `LogField`'s column holds: zstd-compressed, or (written before) as it is."""
    if isinstance(stored, str):
        return stored
    stored = bytes(stored)
    return zstandard.ZstdDecompressor().decompress(stored) if stored[:4] == ZSTD_MAGIC else stored


class Merge(models.Model):
    """The audit log of one merge (or dry run) as docs/merge-semantics.md#the-audit-log lists it. Written in the
    transaction of the merge commit; a merge refused for conflicts is logged too, with the conflicts and no commit."""

    class Status(models.TextChoices):
        MERGED = "merged"
        CONFLICT = "conflict"
        UP_TO_DATE = "up_to_date"
        PLANNED = "planned"  # a dry run that would merge
        CHECKS_FAILED = "checks_failed"  # refused: a check guarding the target failed on the merge's result

    class Kind(models.TextChoices):
        MERGE = "merge"
        REVERT = "revert"  # of `source`, a commit: merged from it into its parent (docs/merge-semantics.md)
        CHERRY_PICK = "cherry_pick"  # of `source`, a commit: merged from its parent into the target

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MERGE)
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="merges")
    source = models.CharField(max_length=255)
    target = models.CharField(max_length=255)
    source_head = models.CharField(max_length=32)
    target_head = models.CharField(max_length=32)
    base = models.CharField(max_length=32)
    commit = models.OneToOneField(Commit, null=True, blank=True, on_delete=models.SET_NULL, related_name="merge")
    dry_run = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    report = LogField(default=dict)  # the diff the merge decided on (selectors/diff.py)
    log = LogField(default=dict)  # what the merge did: objects, discarded, schema versions, files
    timings = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        # the merges made at a pair of heads: whether a key comparison is kept (`keys.key_comparisons_expire`)
        indexes = [models.Index(fields=["source_head", "target_head"], name="merge_heads")]


class VirtualBase(models.Model):
    """The virtual merge base of a criss-cross history: the commit its merge bases make once merged into one
    another (docs/merge-semantics.md, "Several merge bases"). A commit no branch points to, made once per set of
    bases by a worker and reused by every diff and merge of heads with those bases."""

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="+")
    bases = models.CharField(max_length=1024)  # the merge bases' ids, sorted, comma-separated
    commit = models.ForeignKey(Commit, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["catalog", "bases"], name="virtual_base_unique")]


class SqlSession(models.Model):
    """`USE BRANCH b` in the SQL endpoint: the user's current branch in a catalog (the default target of MERGE
    BRANCH and the ref statements read)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="+")
    branch = models.CharField(max_length=255)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "catalog"], name="sql_session_unique")]


class Restore(models.Model):
    """The audit log of one RESTORE (docs/merge-semantics.md#restore): what was restored to which point, and what
    changed."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="restores")
    branch = models.CharField(max_length=255)
    database = models.CharField(max_length=63, blank=True)
    table = models.CharField(max_length=63, blank=True)  # empty: the whole branch
    point = models.CharField(max_length=32)  # the commit whose state was restored
    head_before = models.CharField(max_length=32)
    commit = models.OneToOneField(Commit, null=True, blank=True, on_delete=models.SET_NULL, related_name="restore")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    log = models.JSONField(default=dict)  # each object and how it was restored; files added and removed
    timings = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]


class KeyComparison(models.Model):
    """The key-by-key comparison of a primary-key table changed on both sides
    (docs/merge-semantics.md#primary-key-tables), computed on Spark once per (ancestor, source head, target head) and
    shared by the diff, merge requests and the merge."""

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="+")
    table_id = models.UUIDField()
    base = models.CharField(max_length=32)
    source_head = models.CharField(max_length=32)
    target_head = models.CharField(max_length=32)
    counts = models.JSONField(default=dict)  # `conflicts`: how many keys conflict, each a KeyConflict row
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["table_id", "base", "source_head", "target_head"], name="key_comparison_unique"
            )
        ]


class KeyConflict(models.Model):
    """One conflicting key of a key comparison, at its place in the comparison's order: every one is kept, so the
    keys endpoint and a request's resolution preview page through all of them and a cell pick can name any; a diff's
    plan made from the stored comparison reads the first `MAX_LISTED` (`selectors.diff._planned`)."""

    comparison = models.ForeignKey(KeyComparison, on_delete=models.CASCADE, related_name="conflict_rows")
    position = models.IntegerField()
    key_id = models.TextField()  # the key's values as a JSON array: `[9]`
    conflict = models.JSONField()  # key, key_id, changes, base/source/target rows, cells

    class Meta:
        constraints = [models.UniqueConstraint(fields=["comparison", "position"], name="key_conflict_position")]
        # a hash index: a key id has no length bound a B-tree entry would take
        indexes = [HashIndex(fields=["key_id"], name="key_conflict_key_id")]


class MergeRequest(models.Model):
    """A request to merge `source` into `target` (docs/api.md#merge-requests), numbered per catalog.

    `plan` is the merge plan of the latest dry run (see services/merge_requests.py) and `plan_heads` the heads it
    was computed on: the request is stale when the branches' heads differ from them. `resolutions` holds the
    conflict resolutions chosen in the request, each with who chose it and when."""

    class State(models.TextChoices):
        OPEN = "open"
        MERGED = "merged"
        CLOSED = "closed"

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="merge_requests")
    number = models.PositiveIntegerField()
    source = models.CharField(max_length=255)
    target = models.CharField(max_length=255)
    title = models.CharField(max_length=255)
    description = models.TextField(blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    plan = models.JSONField(null=True, blank=True)
    plan_heads = models.JSONField(null=True, blank=True)  # {source, target} the plan was computed on
    plan_merge = models.ForeignKey(Merge, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    plan_job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    plan_job_heads = models.JSONField(null=True, blank=True)  # the heads when plan_job was asked for
    resolutions = models.JSONField(default=dict, blank=True)
    merge_job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    merge = models.OneToOneField(Merge, null=True, blank=True, on_delete=models.SET_NULL, related_name="merge_request")
    merged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    merged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["catalog", "number"], name="merge_request_number_unique")]
        ordering = ["-number"]


class MergeRequestReview(models.Model):
    """One review. It counts only for the source head it was given on: a new source commit dismisses approvals."""

    class Decision(models.TextChoices):
        APPROVE = "approve"
        REQUEST_CHANGES = "request_changes"

    merge_request = models.ForeignKey(MergeRequest, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    decision = models.CharField(max_length=16, choices=Decision.choices)
    comment = models.TextField(blank=True)
    source_head = models.CharField(max_length=32)
    target_head = models.CharField(max_length=32)
    created_at = models.DateTimeField(auto_now_add=True)
    dismissed_at = models.DateTimeField(null=True, blank=True)
    dismissed_reason = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["created_at", "id"]


class MergeRequestEvent(models.Model):
    """The request's timeline: opened, plan_updated, reviewed, approvals_dismissed, resolutions_changed,
    merge_started, merged, closed, reopened, edited."""

    merge_request = models.ForeignKey(MergeRequest, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=32)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]


class QueueEntry(models.Model):
    """A merge request's place in the merge queue of its target branch (docs/merge-queue.md). Entries merge in the
    order they were queued (`id`); each is prepared on the state it will publish: its merge planned onto the result
    of the entries ahead of it (`onto`), written where no branch points (`result`) and judged by the target's SQL
    checks. The branch then moves to that very commit. An entry leaves the queue merged or `removed` with its
    `reason` (a code) and `message`."""

    class State(models.TextChoices):
        QUEUED = "queued"  # waiting to be prepared (again)
        PREPARED = "prepared"  # its checked result is built; it waits for its statuses or its turn
        MERGED = "merged"
        REMOVED = "removed"

    ACTIVE = (State.QUEUED, State.PREPARED)

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="+")
    target = models.CharField(max_length=255)
    merge_request = models.ForeignKey(MergeRequest, on_delete=models.CASCADE, related_name="queue_entries")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    enqueued_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    source_head = models.CharField(max_length=32, blank=True)  # the source head it was prepared with
    onto = models.CharField(max_length=32, blank=True)  # the commit it was prepared on: the head or the entry ahead's
    result = models.ForeignKey(Commit, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    checked_with = models.JSONField(default=list)  # the numbers of the requests ahead whose merges its result holds
    plan_merge = models.ForeignKey(Merge, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    merge = models.ForeignKey(Merge, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    rebuilds = models.PositiveIntegerField(default=0)  # results built again (the branch, a source or the line moved)
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["merge_request"], condition=models.Q(state__in=["queued", "prepared"]),
                name="queue_entry_active_unique",
            )
        ]  # fmt: skip
        indexes = [models.Index(fields=["catalog", "target", "state"], name="queue_entry_line")]


class MergeQueueRunner(models.Model):
    """Who works a branch's queue: at most one job at a time (`job`); `again` asks it for one more pass (something
    changed while it ran: an entry queued or left, a status posted, a head moved)."""

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="+")
    target = models.CharField(max_length=255)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    again = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["catalog", "target"], name="merge_queue_runner_unique")]
