"""Who may do what in a catalog: roles per user, and protected branch patterns
(docs/api.md#roles-and-protected-branches)."""

from django.conf import settings
from django.db import models

from catalog_app.models.catalog import Catalog


class Role(models.TextChoices):
    """Ordered: each role can do everything the ones before it can."""

    VIEWER = "viewer"  # read
    EDITOR = "editor"  # write on unprotected branches, open merge requests
    APPROVER = "approver"  # review merge requests
    ADMIN = "admin"  # settings, protection rules, roles


ROLE_ORDER = [Role.VIEWER, Role.EDITOR, Role.APPROVER, Role.ADMIN]


class CatalogRole(models.Model):
    """A user's role in one catalog. The catalog's creator is its admin without a row; staff are admin everywhere."""

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="roles")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="catalog_roles")
    role = models.CharField(max_length=16, choices=Role.choices)
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    granted_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["catalog", "user"], name="catalog_role_unique")]
        ordering = ["catalog", "user__username"]


class ProtectedBranch(models.Model):
    """A branch name pattern (fnmatch-style: `main`, `release/*`). Matching branches take no direct write and no
    merge but through an approved merge request with `required_approvals` approvals."""

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="protected_branches")
    pattern = models.CharField(max_length=255)
    required_approvals = models.PositiveSmallIntegerField(default=1)
    # External checks (checks_app) a merge request into the branch needs, by name, succeeded on its source head.
    required_checks = models.JSONField(default=list, blank=True)
    # Merge requests into the branch merge only through its merge queue (merge_app QueueEntry, docs/merge-queue.md).
    require_queue = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["catalog", "pattern"], name="protected_branch_unique")]
        ordering = ["catalog", "pattern"]
