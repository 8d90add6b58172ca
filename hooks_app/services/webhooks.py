"""Creating, changing and deleting a catalog's webhooks (admins only: the API and the UI ask for the admin role)."""

import secrets

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from catalog_app.models import Catalog
from hooks_app.models import Webhook
from hooks_app.services.targets import target_check
from lakeui.errors import ApplicationError
from lakeui.events import EVENT_KINDS

ALL_EVENTS = "*"
MIN_SECRET = 16
MAX_SECRET = 256
MESSAGE_EVENTS = "events is a non-empty list of event kinds ({kinds}), or ['*'] for all of them."
MESSAGE_SECRET = f"A webhook secret is {MIN_SECRET} to {MAX_SECRET} characters."


def events_checked(events: object) -> list[str]:
    """The event kinds a webhook listens to, in their canonical order, or ["*"]; 400 `invalid_input` otherwise."""
    if (
        not isinstance(events, list)
        or not events
        or not all(isinstance(kind, str) and (kind in EVENT_KINDS or kind == ALL_EVENTS) for kind in events)
    ):
        message = MESSAGE_EVENTS.format(kinds=", ".join(EVENT_KINDS))
        raise ApplicationError("invalid_input", message, details={"field": "events", "choices": list(EVENT_KINDS)})
    return [ALL_EVENTS] if ALL_EVENTS in events else [kind for kind in EVENT_KINDS if kind in events]


def _secret_checked(secret: str) -> str:
    if not isinstance(secret, str) or not MIN_SECRET <= len(secret) <= MAX_SECRET:
        raise ApplicationError("invalid_input", MESSAGE_SECRET, details={"field": "secret"})
    return secret


@transaction.atomic
def webhook_create(
    *,
    catalog: Catalog,
    url: str,
    events: list[str],
    secret: str | None = None,
    active: bool = True,
    created_by: AbstractBaseUser | None = None,
) -> Webhook:
    """A new webhook; without a secret, one is made (the caller shows it once: it is never shown again)."""
    target_check(url)
    return Webhook.objects.create(
        catalog=catalog,
        url=url,
        events=events_checked(events),
        secret=_secret_checked(secret) if secret is not None else secrets.token_urlsafe(32),
        active=active,
        created_by=created_by if created_by is not None and created_by.is_authenticated else None,
    )


@transaction.atomic
def webhook_update(
    *,
    webhook: Webhook,
    url: str | None = None,
    events: list[str] | None = None,
    secret: str | None = None,
    active: bool | None = None,
) -> Webhook:
    if url is not None:
        target_check(url)
        webhook.url = url
    if events is not None:
        webhook.events = events_checked(events)
    if secret is not None:
        webhook.secret = _secret_checked(secret)
    if active is not None:
        webhook.active = active
    webhook.save()
    return webhook


@transaction.atomic
def webhook_delete(*, webhook: Webhook) -> None:
    """The webhook and its delivery log; a delivery in flight finds it gone and stops."""
    webhook.delete()
