"""The API's one permission rule (the default of REST_FRAMEWORK, so every endpoint has it unless it opts out):
a signed-in user, and on every endpoint under `/catalogs/{catalog}` the role the view needs for the method.

A view states what it needs with `required_roles` ({method: role}); without it, reads (GET, HEAD, OPTIONS) need
`viewer` and everything else `editor`. A view whose need depends on the request body defines
`required_role(request) -> str` instead. A user with no role in the catalog gets the same 404 as for a catalog
that does not exist, so catalogs one may not see stay invisible.
"""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from catalog_app.models import Role
from catalog_app.selectors.access import catalog_access
from lakeui.api.conditional import KNOWN_ACCESS

CHECKED_CATALOG = "lakeui_catalog"  # the request attribute holding the catalog checked, for the view to use


def required_role(view, request) -> str:
    hook = getattr(view, "required_role", None)
    if callable(hook):
        return hook(request)
    roles = getattr(view, "required_roles", None) or {}
    method = request.method.upper()
    if method in roles:
        return roles[method]
    return Role.VIEWER if method in SAFE_METHODS else Role.EDITOR


class CatalogRolePermission(BasePermission):
    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False  # DRF answers 401 (token auth names itself in WWW-Authenticate)
        name = getattr(view, "kwargs", {}).get("catalog")
        if name is not None:
            known = getattr(request, "_request", request).__dict__.pop(KNOWN_ACCESS, None)  # catalog_app/middleware.py
            if known is not None and (known[0] != request.user.pk or known[1] is None or known[1].name != name):
                known = None
            wanted = required_role(view, request)
            catalog, _ = catalog_access(user=request.user, name=name, wanted=wanted, known=known and known[1:])
            setattr(request, CHECKED_CATALOG, catalog)  # the view's catalog (catalog_app/apis/common.py)
        return True
