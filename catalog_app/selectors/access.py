"""Reading roles and branch protection. Every permission decision of the API and the UI goes through
`catalog_with_role` and every write through `branch_protection` (see services/access.py `branch_write_check`)."""

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q, QuerySet

from catalog_app.models import ROLE_ORDER, Catalog, CatalogRole, ProtectedBranch, Role
from lakeui.errors import ApplicationError, NotFoundError

MESSAGE_ROLE = "This needs the {wanted} role in catalog {catalog!r}; you have {role}."


def role_at_least(role: str | None, wanted: str) -> bool:
    return role is not None and ROLE_ORDER.index(role) >= ROLE_ORDER.index(wanted)


def catalog_access(
    *, user, name: str, wanted: str, known: tuple[Catalog | None, str | None] | None = None
) -> tuple[Catalog, str]:
    """The catalog `name` and the user's role in it, if that is at least the role `wanted` (one query, none with
    `known`: that catalog and role as catalog_with_role read them already). No catalog, or no role in it: 404
    `catalog_not_found` (a catalog one may not see stays invisible); a lesser role: 403 `role_required`. The one
    rule for the API (apis/permissions.py) and the browser UI (frontend/views/common.py)."""
    catalog, role = known if known is not None else catalog_with_role(user=user, name=name)
    if catalog is None or role is None:
        raise NotFoundError("catalog_not_found", f"There is no catalog {name!r}.")
    if not role_at_least(role, wanted):
        raise ApplicationError(
            "role_required",
            MESSAGE_ROLE.format(wanted=wanted, catalog=name, role=role),
            status=403,
            details={"required": wanted, "role": role},
        )
    return catalog, role


def catalog_with_role(*, user: AbstractBaseUser, name: str) -> tuple[Catalog | None, str | None]:
    """The catalog `name` and the user's role in it, in one query: what every permission check needs. The role is
    None if they may not see it; staff and superusers are admin everywhere, the catalog's creator is its admin.
    (None, None) if there is no such catalog."""
    roles = CatalogRole._meta.db_table
    sql = (
        f"SELECT c.*, (SELECT r.role FROM {roles} r WHERE r.catalog_id = c.id AND r.user_id = %s) AS granted_role"
        f" FROM {Catalog._meta.db_table} c WHERE c.name = %s"
    )  # plain SQL: the ORM takes 2-3 ms to build this query, the database a tenth of that to answer it
    catalog = next(iter(Catalog.objects.raw(sql, [user.pk, name])), None)
    if catalog is None:
        return None, None
    if not user.is_authenticated:
        return catalog, None
    return catalog, Role.ADMIN if _admin_of(user, catalog) else catalog.granted_role


def _admin_of(user: AbstractBaseUser, catalog: Catalog) -> bool:
    return (
        user.is_staff or user.is_superuser or (catalog.created_by_id is not None and catalog.created_by_id == user.pk)
    )


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
    """The rules protecting one branch: the patterns it matches, the approvals a merge into it needs (the most any
    matching rule asks for) and the external checks it needs (those any matching rule names)."""

    branch: str
    patterns: list[str]
    required_approvals: int
    required_checks: list[str]  # external checks (checks_app) that must succeed on a merge request's source head
    require_queue: bool = False  # merge requests merge only through the branch's merge queue (any rule asks it)


def patterns_matching(branch: str, patterns: Iterable[str]) -> list[str]:
    """The protection patterns (fnmatch-style) that name `branch`, in their order."""
    return [pattern for pattern in patterns if fnmatch.fnmatchcase(branch, pattern)]


def branch_protection(*, catalog: Catalog, branch: str) -> Protection | None:
    rules = protected_branch_list(catalog=catalog)
    matched = set(patterns_matching(branch, [rule.pattern for rule in rules]))
    rules = [rule for rule in rules if rule.pattern in matched]
    if not rules:
        return None
    return Protection(
        branch=branch,
        patterns=[rule.pattern for rule in rules],
        required_approvals=max(rule.required_approvals for rule in rules),
        required_checks=sorted({name for rule in rules for name in rule.required_checks or []}),
        require_queue=any(rule.require_queue for rule in rules),
    )


def queue_required_branches(*, catalog: Catalog, branches: list[str]) -> set[str]:
    """The branches among `branches` that a rule makes merge only through their merge queue (one read of the
    rules, matched as `branch_protection` matches them)."""
    patterns = [rule.pattern for rule in protected_branch_list(catalog=catalog) if rule.require_queue]
    return {name for name in branches if patterns_matching(name, patterns)}
