"""Catalogs, refs, commits and versioned objects.

Commits form a DAG (first parent, plus the merged source head for merges). A branch's state at a commit is the
latest version of each object along the commit's first-parent chain: merges write the merged state of every
object they change as new versions on the target, so the first-parent chain alone holds a branch's state.

To read that chain without walking it commit by commit, commits are grouped in **lines**: a line is a run of
consecutive first-parent commits made by one branch. A commit appends to its parent's line when the parent is
the line's tip and the line belongs to the committing branch; otherwise it starts a new line forked from the
parent. The chain of a commit is then a handful of (line, up-to-seq) pairs, one per fork, and "the objects at
commit C" is one indexed query. Creating a branch writes one row and copies nothing.
"""

import uuid

from django.conf import settings
from django.db import models

from lakeui.fields import JSONField


def new_commit_id() -> str:
    return uuid.uuid4().hex


class Catalog(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=63, unique=True)
    description = models.TextField(blank=True)
    default_branch = models.CharField(max_length=255, default="main")
    # The catalog-wide commit sequence. Incremented under a row lock by every commit: commits of one catalog
    # are serialised (they are short metadata transactions), which gives one total order of commit times.
    last_seq = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Line(models.Model):
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="lines")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="forks")
    # The last seq of the parent line that belongs to this line's history (the fork point).
    fork_seq = models.BigIntegerField(null=True, blank=True)
    tip_seq = models.BigIntegerField()
    branch = models.ForeignKey("Branch", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")


class Commit(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=new_commit_id, editable=False)
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="commits")
    seq = models.BigIntegerField()
    line = models.ForeignKey(Line, on_delete=models.CASCADE, related_name="commits")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    merge_parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="merged_into"
    )
    created_at = models.DateTimeField()
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    message = models.TextField(blank=True)
    # The job that made this commit: a job delivered again after its commit finds it here and does not redo it.
    job = models.OneToOneField("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="commit")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["catalog", "seq"], name="commit_seq_unique")]
        indexes = [models.Index(fields=["line", "seq"]), models.Index(fields=["line", "created_at"])]

    def __str__(self) -> str:
        return self.id[:12]


class Branch(models.Model):
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="branches")
    name = models.CharField(max_length=255)
    head = models.ForeignKey(Commit, on_delete=models.RESTRICT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["catalog", "name"], name="branch_name_unique")]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Tag(models.Model):
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="tags")
    name = models.CharField(max_length=255)
    commit = models.ForeignKey(Commit, on_delete=models.RESTRICT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["catalog", "name"], name="tag_name_unique")]
        ordering = ["name"]


class ObjectKind(models.TextChoices):
    DATABASE = "database"
    TABLE = "table"
    VIEW = "view"
    SHARE = "share"
    ROLE = "role"


class ObjectVersion(models.Model):
    """The state of one object as of one commit. `object_id` is the object's stable id (survives renames and
    merges); `parent_id` is the database of a table or view."""

    # The commit, its catalog and line (copied for the indexes), without database constraints, as FileEntry's: a
    # commit's rows are written only with it (CommitDraft.commit). Each key is looked up through one index only
    # (below), so that every commit maintains no more than it reads by: a merge of 10,000 tables writes as many
    # versions.
    catalog = models.ForeignKey(
        Catalog, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    object_id = models.UUIDField()
    kind = models.CharField(max_length=16, choices=ObjectKind.choices)
    parent_id = models.UUIDField(null=True, blank=True)
    name = models.CharField(max_length=63)
    commit = models.ForeignKey(
        Commit, on_delete=models.CASCADE, related_name="object_versions", db_constraint=False, db_index=False
    )
    line = models.ForeignKey(Line, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False)
    seq = models.BigIntegerField()
    dropped = models.BooleanField(default=False)
    state = JSONField(default=dict)

    class Meta:
        indexes = [
            models.Index(fields=["line", "seq"]),
            models.Index(fields=["object_id", "seq"]),
            # Name look-ups (a ref's object by name, the names a merge takes): the versions of one name are few,
            # a line's are as many as its commits.
            models.Index(fields=["catalog", "name"]),
            # A commit's versions; a plain index (a foreign key to the commit's text id would add a second, for LIKE,
            # which nothing asks of these rows).
            models.Index(fields=["commit"], name="catalog_ov_commit_idx"),
        ]


class Operation(models.Model):
    """One operation of docs/README.md#operations on one object in one commit: what the merge engine replays."""

    class Op(models.TextChoices):
        CREATE = "create"
        DROP = "drop"
        MODIFY_NAME = "modify_name"
        SET_PROPERTIES = "set_properties"
        UNSET_PROPERTIES = "unset_properties"
        ALTER_NAME = "alter_name"
        ALTER_PROPERTIES = "alter_properties"
        ALTER_COLUMN = "alter_column"
        ALTER_PARTITION = "alter_partition"
        INSERT = "insert"
        DELETE = "delete"
        UPDATE = "update"
        OVERWRITE = "overwrite"
        COMPACTION = "compaction"
        # A merge's table choice `source_wins`: the target operations it superseded by taking the source's version
        # of the files they changed (merge_app.plan.resolutions.source_wins_scope); never replayed itself.
        RESOLVE = "resolve"

    # Without a database constraint, as ObjectVersion's: written only with its commit.
    commit = models.ForeignKey(
        Commit, on_delete=models.CASCADE, related_name="operations", db_constraint=False, db_index=False
    )
    position = models.PositiveIntegerField()
    object_id = models.UUIDField()
    object_kind = models.CharField(max_length=16, choices=ObjectKind.choices)
    op = models.CharField(max_length=32, choices=Op.choices)
    details = JSONField(default=dict)

    class Meta:
        ordering = ["commit", "position"]
        # A commit's operations: a plain index, as ObjectVersion's.
        indexes = [models.Index(fields=["object_id"]), models.Index(fields=["commit"], name="catalog_op_commit_idx")]


class SchemaVersion(models.Model):
    """A table schema. Visible versions are the ones users committed on a branch; invisible ones were brought in
    by a merge because merged data was written with them (docs/merge-semantics.md#schema-versions)."""

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="+")
    table_id = models.UUIDField()
    columns = JSONField()
    commit = models.ForeignKey(Commit, on_delete=models.CASCADE, related_name="schema_versions")
    line = models.ForeignKey(Line, on_delete=models.CASCADE, related_name="+")
    seq = models.BigIntegerField()
    visible = models.BooleanField(default=True)
    # For an invisible version: the version on the source branch it was copied from.
    copied_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        indexes = [models.Index(fields=["table_id", "seq"])]
