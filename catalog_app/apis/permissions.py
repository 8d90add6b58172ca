"""The API's one permission rule (the default of REST_FRAMEWORK, so every endpoint has it unless it opts out):
a signed-in user, and on every endpoint under `/catalogs/{catalog}` the role the view needs for the method.

A view states what it needs with `required_roles` ({method: role}); without it, reads (GET, HEAD, OPTIONS) need
`viewer` and everything else `editor`. A view whose need depends on the request body defines
`required_role(request) -> str` instead. A user with no role in the catalog gets the same 404 as for a catalog
that does not exist, so catalogs one may not see stay invisible.
"""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from catalog_app.models import Catalog, Role
from catalog_app.selectors.access import catalog_with_role, role_at_least
from lakeui.errors import ApplicationError, NotFoundError

CHECKED_CATALOG = "lakeui_catalog"  # the request attribute holding the catalog checked, for the view to use
MESSAGE_ROLE = "This needs the {wanted} role in catalog {catalog!r}; you have {role}."


def required_role(view, request) -> str:
    hook = getattr(view, "required_role", None)
    if callable(hook):
        return hook(request)
    roles = getattr(view, "required_roles", None) or {}
    method = request.method.upper()
    if method in roles:
        return roles[method]
    return Role.VIEWER if method in SAFE_METHODS else Role.EDITOR


def catalog_access(*, user, name: str, wanted: str) -> tuple[Catalog, str]:
    """The catalog `name` and the user's role in it, if that is at least the role `wanted` (one query). No
    catalog, or no role in it: 404 `catalog_not_found` (a catalog one may not see stays invisible); a lesser
    role: 403 `role_required`. The one rule for the API (below) and the browser UI (frontend/views/common.py)."""
    catalog, role = catalog_with_role(user=user, name=name)
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


class CatalogRolePermission(BasePermission):
    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False  # DRF answers 401 (token auth names itself in WWW-Authenticate)
        name = getattr(view, "kwargs", {}).get("catalog")
        if name is not None:
            catalog, _ = catalog_access(user=request.user, name=name, wanted=required_role(view, request))
            setattr(request, CHECKED_CATALOG, catalog)  # the view's catalog (catalog_app/apis/common.py)
        return True
