"""Retention (docs/retention.md): the rules a catalog keeps history by, and what expiry removed.

Expiry deletes no commit row: the commit graph stays whole (merge bases, audit logs, the log all still name every
commit). An expired commit is one with an `ExpiredCommit` row: reads at it answer `410 history_expired`. A file
no kept commit references gets a `ReclaimedFile` row, and garbage collection then removes it from the warehouse.
"""

from django.db import models

from catalog_app.models.catalog import Catalog, Commit
from catalog_app.models.data import DataFile


class RetentionRule(models.Model):
    """For branches and tags whose name matches `pattern` (shell-style, `scratch/*`): keep time travel for
    `keep_days` days and/or the newest `keep_commits` commits of their history. Neither: keep everything. The first
    rule (by position) whose pattern matches a ref decides; a ref no rule matches keeps everything."""

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()
    pattern = models.CharField(max_length=255)
    keep_days = models.PositiveIntegerField(null=True, blank=True)
    keep_commits = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["catalog", "position"]
        constraints = [models.UniqueConstraint(fields=["catalog", "position"], name="retention_rule_position_unique")]


class ExpiredCommit(models.Model):
    """A commit removed from time travel by an expiry run."""

    commit = models.OneToOneField(Commit, primary_key=True, on_delete=models.CASCADE, related_name="+")
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    expired_at = models.DateTimeField(auto_now_add=True)


class ReclaimedFile(models.Model):
    """A data file no kept commit referenced when an expiry ran (the catalog's last commit was `upto_seq`): garbage
    collection removes it, unless a commit made since references it again (a restore that read an old point before
    the expiry and committed after it)."""

    file = models.OneToOneField(DataFile, primary_key=True, on_delete=models.CASCADE, related_name="+")
    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    upto_seq = models.BigIntegerField()
    reclaimed_at = models.DateTimeField(auto_now_add=True)
