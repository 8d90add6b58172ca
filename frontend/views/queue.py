"""The merge queue in the UI (docs/merge-queue.md): "Merge when ready" and leaving on a request's page, and the
Queue page of a branch. Every action calls the queue service the API calls; a refusal is a message on the page."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from catalog_app.models import Role
from catalog_app.selectors.refs import branch_get
from frontend.views.common import get_catalog, refused, ui_view
from lakeui.errors import ApplicationError
from merge_app.models import MergeRequest
from merge_app.selectors.merge_requests import merge_request_get
from merge_app.selectors.queue import queue_entry_of, queue_position, queue_show
from merge_app.services.queue import queue_enqueue, queue_leave


def queue_context(merge_request: MergeRequest) -> dict:
    """What the request's page shows of its place in the queue: its newest entry and its position."""
    entry = queue_entry_of(merge_request)
    return {"queue_entry": entry, "queue_position": queue_position(entry) if entry else None}


@ui_view
@require_POST
def merge_request_queue_view(request: HttpRequest, catalog: str, number: int) -> HttpResponse:
    """POST `action=enqueue` (merge when ready) or `action=leave`."""
    found = get_catalog(request, catalog, Role.EDITOR)
    merge_request = merge_request_get(catalog=found, number=number)
    leave = request.POST.get("action") == "leave"
    try:
        if leave:
            queue_leave(merge_request=merge_request, user=request.user)
        else:
            queue_enqueue(merge_request=merge_request, user=request.user)
    except ApplicationError as error:
        refused(request, error)
    else:
        done = "Taken out of the queue." if leave else f"!{number} will merge into {merge_request.target} when ready."
        messages.success(request, done)
    return redirect(reverse("frontend:merge-request", args=[found.name, number]))


@ui_view
def branch_queue_page(request: HttpRequest, catalog: str, branch: str) -> HttpResponse:
    found = get_catalog(request, catalog)
    branch_get(catalog=found, name=branch)
    return render(request, "frontend/queue.html", {"catalog": found, "branch": branch,
                                                   **queue_show(catalog=found, target=branch)})  # fmt: skip
