"""Table data: immutable Parquet files and which commits added or removed them.

A **segment** holds rows; a **delta file** lists deleted row positions of one segment. Files are written once
under `<warehouse>/<catalog id>/<table id>/` and registered only by the commit that makes them live, so a job
that fails leaves no row here (its files are orphans for garbage collection). Which files a table has at a
commit is the newest `FileEntry` of each file along the commit's first-parent chain, like object versions.
"""

import uuid

from django.db import models

from catalog_app.models.catalog import Catalog, Commit, Line, SchemaVersion
from lakeui.fields import JSONField


class DataFile(models.Model):
    class Kind(models.TextChoices):
        SEGMENT = "segment"
        DELTA = "delta"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="+")
    table_id = models.UUIDField()
    kind = models.CharField(max_length=8, choices=Kind.choices)
    # Relative to the warehouse root, built by the code from ids: `<catalog id>/<table id>/...`.
    path = models.CharField(max_length=1024, unique=True)
    row_count = models.BigIntegerField()
    size_bytes = models.BigIntegerField()
    # Segments: partition values by column id, per-column statistics {column id: {min, max, nulls}}, and the schema
    # version the file was written with (visible on the branch that wrote it; see
    # docs/merge-semantics.md#schema-versions).
    partition_values = JSONField(default=dict)
    stats = JSONField(default=dict)
    schema_version = models.ForeignKey(SchemaVersion, null=True, blank=True, on_delete=models.PROTECT)
    schema_visible = models.BooleanField(default=True)
    # Delta files: the segment whose rows they delete.
    segment = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="deltas")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["table_id", "kind"])]


class FileEntry(models.Model):
    """A file becoming live in (or removed from) a table in one commit."""

    # The commit, its catalog and line (copied for the indexes) have no database constraint: a commit's rows are
    # written only with it, by CommitDraft.commit, in its transaction (a merge of 10,000 tables writes as many
    # entries, and each key checked costs at COMMIT). The file's and the schema version's keys, rows that outlive
    # any one commit, are checked.
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    table_id = models.UUIDField()
    file = models.ForeignKey(DataFile, on_delete=models.CASCADE, related_name="entries", db_index=False)
    commit = models.ForeignKey(
        Commit, on_delete=models.CASCADE, related_name="file_entries", db_constraint=False, db_index=False
    )
    line = models.ForeignKey(Line, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    seq = models.BigIntegerField()
    removed = models.BooleanField(default=False)
    # A segment taken over by a merge reads, on the target's line, with the target's copy of the schema version
    # it was written with (invisible unless it is also in the visible history; docs/merge-semantics.md#schema-versions).
    # Null: the file's own schema version, as written.
    schema_version = models.ForeignKey(SchemaVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    schema_visible = models.BooleanField(null=True, blank=True)

    class Meta:
        # Each key is looked up through one index only, as ObjectVersion's: a file's entries by (file, seq), a
        # commit's by a plain index.
        indexes = [
            models.Index(fields=["table_id", "line", "seq"]),
            models.Index(fields=["file", "seq"]),
            models.Index(fields=["commit"], name="catalog_fe_commit_idx"),
        ]
