"""What every UI view shares: resolving the catalog and ref from the URL, time travel, and turning a service's
ApplicationError into a message on the page (never a stack trace)."""

import functools
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme

from catalog_app.models import Catalog, Role
from catalog_app.selectors.access import catalog_access, role_at_least
from catalog_app.selectors.refs import ResolvedRef, ref_resolve, timestamp_parse
from lakeui.errors import ApplicationError


@dataclass(frozen=True)
class RefContext:
    """The ref a page reads: `?ref=` (default: the catalog's default branch) and `?at=` (time travel)."""

    catalog: Catalog
    ref: str
    at: datetime | None
    at_text: str
    resolved: ResolvedRef

    @property
    def query(self) -> str:
        params = {"ref": self.ref}
        if self.at_text:
            params["at"] = self.at_text
        return urlencode(params)

    @property
    def writable(self) -> bool:
        return self.resolved.kind == "branch" and self.at is None


def ref_context(request: HttpRequest, catalog: Catalog) -> RefContext:
    ref = (request.GET.get("ref") or catalog.default_branch).strip()
    at_text = (request.GET.get("at") or "").strip()
    at = timestamp_parse(at_text)
    return RefContext(
        catalog=catalog, ref=ref, at=at, at_text=at_text, resolved=ref_resolve(catalog=catalog, ref=ref, at=at)
    )


def error_page(request: HttpRequest, error: ApplicationError) -> HttpResponse:
    status = error.status if 400 <= error.status < 600 else 400
    return render(request, "frontend/error.html", {"error": error}, status=status)


def ui_view(view):
    """Login required; an ApplicationError is an error page with its message and status, except that a form
    refused for the user's role (403 `role_required`) goes back to the page it was on with the message."""

    @login_required
    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except ApplicationError as error:
            referer = request.META.get("HTTP_REFERER") or ""
            if (
                request.method == "POST" and error.code == "role_required" and referer
                and url_has_allowed_host_and_scheme(referer, allowed_hosts={request.get_host()})
            ):  # fmt: skip
                refused(request, error)
                return redirect(referer)
            return error_page(request, error)

    return wrapper


def back(request: HttpRequest, fallback: str) -> HttpResponse:
    """Redirect to the form's `next` (a local URL) or the fallback."""
    target = request.POST.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return redirect(target)
    return redirect(fallback)


def refused(request: HttpRequest, error: ApplicationError) -> None:
    messages.error(request, f"{error.message} ({error.code})")


def page_number(request: HttpRequest) -> int:
    """The `page` a list asks for: 1 when it names none or no number."""
    try:
        return max(1, int(request.GET.get("page") or 1))
    except ValueError:
        return 1


def url_with(path: str, **params: str) -> str:
    return f"{path}?{urlencode(params)}"


def get_catalog(request: HttpRequest, name: str, wanted: str = Role.VIEWER) -> Catalog:
    """The catalog of the URL if the signed-in user has the role `wanted` in it: the API's rule
    (`catalog_app.selectors.access.catalog_access`): no role is a 404 as for a catalog that does not exist, a lesser
    role a 403 `role_required`. The role is kept on the request for the templates (`request.catalog_role`)."""
    catalog, role = catalog_access(user=request.user, name=name, wanted=wanted)
    request.catalog_role = CatalogRoleView(
        role=role, can_write=role_at_least(role, Role.EDITOR), can_review=role_at_least(role, Role.APPROVER)
    )
    return catalog


@dataclass(frozen=True)
class CatalogRoleView:
    """What the user's role in the page's catalog allows; templates read it as `request.catalog_role`, to leave out
    the forms the role may not submit (the views check the role again)."""

    role: str
    can_write: bool
    can_review: bool
