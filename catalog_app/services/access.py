"""Roles and protected branches. `branch_write_check` is the one rule for protected branches: `commit_begin`
calls it for every commit, and the submit paths call it before they enqueue a job that would write."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet

from catalog_app.models import Catalog, CatalogRole, ProtectedBranch, Role
from catalog_app.names import CHECK_NAME, check_ref_name
from catalog_app.selectors.access import branch_protection, patterns_matching
from lakeui.errors import ApplicationError, NotFoundError

MESSAGE_PROTECTED = (
    "Branch {branch!r} is protected (rule {patterns}): it takes no direct write; open a merge request instead."
)
MAX_REQUIRED_APPROVALS = 20


def branch_write_check(
    *, catalog: Catalog, branch: str, via_merge_request: int | None = None, patterns: list[str] | None = None
) -> None:
    """Refuse a write to a protected branch (403 `branch_protected`) unless it is the merge of an approved merge
    request (`via_merge_request`: the request's id, set only by the merge request's merge job). `patterns`: the
    catalog's protection patterns, where the caller read them with its lock (`commits.catalog_lock_with_branch`)."""
    if via_merge_request is not None:
        return
    if patterns is None:
        protection = branch_protection(catalog=catalog, branch=branch)
        matched = protection.patterns if protection is not None else []
    else:
        matched = patterns_matching(branch, patterns)
    if matched:
        raise ApplicationError(
            "branch_protected",
            MESSAGE_PROTECTED.format(branch=branch, patterns=", ".join(matched)),
            status=403,
            details={"branch": branch, "patterns": matched},
        )


def _delete(rows: QuerySet, missing: NotFoundError) -> None:
    """Delete the rows; `missing` is raised when there were none."""
    deleted, _ = rows.delete()
    if not deleted:
        raise missing


def _user_named(username: str) -> AbstractBaseUser:
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise NotFoundError("user_not_found", f"There is no active user {username!r}.")
    return user


@transaction.atomic
def catalog_role_grant(*, catalog: Catalog, username: str, role: str, granted_by: AbstractBaseUser) -> CatalogRole:
    if role not in Role.values:
        raise ApplicationError("invalid_role", f"role must be one of {Role.values}.")
    user = _user_named(username)
    granted, _ = CatalogRole.objects.update_or_create(
        catalog=catalog, user=user, defaults={"role": role, "granted_by": granted_by}
    )
    return granted


@transaction.atomic
def catalog_role_revoke(*, catalog: Catalog, username: str) -> None:
    missing = NotFoundError("role_not_found", f"{username!r} has no role in catalog {catalog.name!r}.")
    _delete(CatalogRole.objects.filter(catalog=catalog, user__username=username), missing)


@transaction.atomic
def protected_branch_create(
    *,
    catalog: Catalog,
    pattern: str,
    required_approvals: int = 1,
    required_checks: list[str] | None = None,
    require_queue: bool = False,
    created_by: AbstractBaseUser,
) -> ProtectedBranch:
    check_ref_name(pattern.replace("*", "x").replace("?", "x").replace("[", "x").replace("]", "x"), "Pattern")
    if not 0 <= required_approvals <= MAX_REQUIRED_APPROVALS:
        raise ApplicationError(
            "invalid_input",
            f"required_approvals must be 0 to {MAX_REQUIRED_APPROVALS}.",
            details={"field": "required_approvals"},
        )
    checks = sorted(set(required_checks or []))
    if not all(isinstance(name, str) and CHECK_NAME.fullmatch(name) for name in checks):
        raise ApplicationError(
            "invalid_input", "required_checks are check names (letters, digits, spaces, _ . : / -).",
            details={"field": "required_checks"},
        )  # fmt: skip
    defaults = {"required_approvals": required_approvals, "required_checks": checks, "created_by": created_by,
                "require_queue": bool(require_queue)}  # fmt: skip
    rule, _ = ProtectedBranch.objects.update_or_create(catalog=catalog, pattern=pattern, defaults=defaults)
    return rule


@transaction.atomic
def protected_branch_delete(*, catalog: Catalog, rule_id: int) -> None:
    missing = NotFoundError("protection_not_found", f"There is no protection rule {rule_id} in {catalog.name!r}.")
    _delete(ProtectedBranch.objects.filter(catalog=catalog, id=rule_id), missing)
