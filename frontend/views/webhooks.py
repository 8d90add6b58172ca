"""A catalog's webhooks, for its admins: add, change, delete, and each one's delivery log with a redeliver button
(docs/api.md#webhooks). Every view asks for the admin role, reads included, as the API does."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from catalog_app.models import Role
from frontend.views.common import get_catalog, refused, ui_view
from hooks_app.selectors import delivery_get, delivery_list, webhook_get, webhook_list
from hooks_app.services import delivery_redeliver, webhook_create, webhook_delete, webhook_update
from lakeui.errors import ApplicationError
from lakeui.events import EVENT_KINDS

PAGE_SIZE = 50
ALL = "*"


def _form(request: HttpRequest) -> dict:
    """The form's fields as the services take them: the events ticked (or all), the secret only if one was typed."""
    events = request.POST.getlist("events")
    fields = {
        "url": request.POST.get("url", "").strip(),
        "events": [ALL] if ALL in events else events,
        "active": request.POST.get("active") == "on",
    }
    if request.POST.get("secret"):
        fields["secret"] = request.POST["secret"]
    return fields


def _page(request, template: str, context: dict, status: int = 200) -> HttpResponse:
    return render(request, f"frontend/{template}", {"event_kinds": EVENT_KINDS, **context}, status=status)


@ui_view
def webhook_index(request: HttpRequest, catalog: str) -> HttpResponse:
    found = get_catalog(request, catalog, Role.ADMIN)
    context = {"catalog": found, "webhooks": webhook_list(catalog=found), "form": {"events": [ALL], "active": True}}
    if request.method != "POST":
        return _page(request, "webhooks.html", context)
    fields = _form(request)
    try:
        webhook = webhook_create(catalog=found, created_by=request.user, **fields)
    except ApplicationError as error:
        refused(request, error)
        return _page(request, "webhooks.html", {**context, "form": fields}, status=400)
    if "secret" in fields:
        messages.success(request, f"Webhook {webhook.id} added.")
    else:  # a secret LakeUI made is shown once, on the page redirected to; kept in the session (stored
        # server-side), not in a message, which a cookie may carry
        request.session[_NEW_SECRET.format(id=webhook.id)] = webhook.secret
    return redirect("frontend:webhook", catalog=found.name, webhook_id=webhook.id)  # the new webhook's own URL


_NEW_SECRET = "new-webhook-secret-{id}"


def _detail(request: HttpRequest, catalog, webhook, *, status: int = 200) -> HttpResponse:
    new_secret = request.session.pop(_NEW_SECRET.format(id=webhook.id), "")
    page = Paginator(delivery_list(webhook=webhook), PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"catalog": catalog, "webhook": webhook, "page": page, "new_secret": new_secret}
    return _page(request, "webhook.html", context, status=status)


@ui_view
def webhook_detail(request: HttpRequest, catalog: str, webhook_id: int) -> HttpResponse:
    found = get_catalog(request, catalog, Role.ADMIN)
    webhook = webhook_get(catalog=found, webhook_id=webhook_id)
    if request.method != "POST":
        return _detail(request, found, webhook)
    try:
        webhook_update(webhook=webhook, **_form(request))
    except ApplicationError as error:
        refused(request, error)
        return _detail(request, found, webhook_get(catalog=found, webhook_id=webhook_id), status=400)
    messages.success(request, f"Webhook {webhook.id} saved.")
    return redirect("frontend:webhook", catalog=found.name, webhook_id=webhook.id)


@ui_view
@require_POST
def webhook_delete_view(request: HttpRequest, catalog: str, webhook_id: int) -> HttpResponse:
    found = get_catalog(request, catalog, Role.ADMIN)
    webhook_delete(webhook=webhook_get(catalog=found, webhook_id=webhook_id))
    messages.success(request, f"Webhook {webhook_id} deleted.")
    return redirect("frontend:webhooks", catalog=found.name)


@ui_view
@require_POST
def delivery_redeliver_view(request: HttpRequest, catalog: str, webhook_id: int, delivery_id) -> HttpResponse:
    found = get_catalog(request, catalog, Role.ADMIN)
    webhook = webhook_get(catalog=found, webhook_id=webhook_id)
    try:
        again = delivery_redeliver(delivery=delivery_get(webhook=webhook, delivery_id=delivery_id))
    except ApplicationError as error:  # an inactive webhook
        refused(request, error)
    else:
        messages.success(request, f"Delivery {again.id} queued: the {again.kind} event is sent again.")
    return redirect("frontend:webhook", catalog=found.name, webhook_id=webhook.id)
