"""Reading roles and branch protection. Every permission decision of the API goes through `catalog_role_of` and
every write through `branch_protection` (see services/access.py `branch_write_check`)."""

import fnmatch
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q, QuerySet

from catalog_app.models import ROLE_ORDER, Catalog, CatalogRole, ProtectedBranch, Role


def role_at_least(role: str | None, wanted: str) -> bool:
    return role is not None and ROLE_ORDER.index(role) >= ROLE_ORDER.index(wanted)


def catalog_role_of(*, user: AbstractBaseUser | None, catalog: Catalog) -> str | None:
    """The user's role in the catalog, or None if they may not see it. Staff and superusers are admin everywhere,
    the catalog's creator is its admin."""
    if user is None or not user.is_authenticated:
        return None
    if user.is_staff or user.is_superuser or (catalog.created_by_id is not None and catalog.created_by_id == user.pk):
        return Role.ADMIN
    return CatalogRole.objects.filter(catalog=catalog, user=user).values_list("role", flat=True).first()


def catalogs_visible(*, user: AbstractBaseUser, catalogs: QuerySet[Catalog]) -> QuerySet[Catalog]:
    if user.is_staff or user.is_superuser:
        return catalogs
    return catalogs.filter(Q(created_by=user) | Q(roles__user=user)).distinct()


def catalog_role_list(*, catalog: Catalog) -> QuerySet[CatalogRole]:
    return CatalogRole.objects.filter(catalog=catalog).select_related("user", "granted_by")


def protected_branch_list(*, catalog: Catalog) -> QuerySet[ProtectedBranch]:
    return ProtectedBranch.objects.filter(catalog=catalog).select_related("created_by")


@dataclass(frozen=True)
class Protection:
    """The rules protecting one branch: the patterns it matches and the approvals a merge into it needs (the most
    any matching rule asks for)."""

    branch: str
    patterns: list[str]
    required_approvals: int


def branch_protection(*, catalog: Catalog, branch: str) -> Protection | None:
    rules = [rule for rule in protected_branch_list(catalog=catalog) if fnmatch.fnmatchcase(branch, rule.pattern)]
    if not rules:
        return None
    return Protection(
        branch=branch,
        patterns=[rule.pattern for rule in rules],
        required_approvals=max(rule.required_approvals for rule in rules),
    )
