"""Subscriptions to a branch's change feed (docs/changes.md#subscriptions; the model's docstring says how the
cursor and batches work): create, delete, hand out the batch since the cursor, acknowledge it."""

import re
import uuid
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from catalog_app.models import Branch, Catalog, Commit, Subscription
from catalog_app.selectors.refs import ResolvedRef, commit_unexpired, ref_resolve
from lakeui.errors import ApplicationError, ConflictError, NotFoundError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
TABLE = re.compile(r"[^.\s]{1,255}\.[^.\s]{1,255}")
MAX_TABLES = 100

MESSAGE_NAME = "A subscription's name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit."
MESSAGE_TABLES = f"`tables` is a list of up to {MAX_TABLES} names `db.table`."
MESSAGE_EXISTS = "The catalog has a subscription {name!r} already."
MESSAGE_NOT_FOUND = "The catalog has no subscription {name!r}."
MESSAGE_NOT_A_BRANCH = "A subscription follows a branch; {ref!r} is not one."
MESSAGE_STALE_ACK = (
    "The token acknowledges no batch handed out now: the batch was acknowledged already (by this consumer or "
    "another) or never handed out. Read the subscription's changes again."
)
MESSAGE_EXPIRED = (
    "The subscription's cursor {cursor} was removed from time travel by the catalog's retention rules; the oldest "
    "point it can resume from is named in `resume_from` (recreate the subscription from there)."
)


@dataclass(frozen=True)
class Batch:
    """The changes a subscription hands out: from the cursor's state to the batch end's, acknowledged by `token`."""

    subscription: Subscription
    start: ResolvedRef
    end: ResolvedRef
    token: uuid.UUID


def subscription_create(*, catalog: Catalog, name: str, branch: str, tables: list[str], user) -> Subscription:
    """A subscription to `branch`'s changes of `tables` (all, if empty), its cursor at the branch's head now."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ApplicationError("invalid_name", MESSAGE_NAME)
    if len(tables) > MAX_TABLES or not all(isinstance(t, str) and TABLE.fullmatch(t) for t in tables):
        raise ApplicationError("invalid_tables", MESSAGE_TABLES)
    head = _branch(catalog, branch).head
    try:
        with transaction.atomic():
            return Subscription.objects.create(catalog=catalog, name=name, branch=branch, tables=sorted(set(tables)),
                                               cursor=head, created_by=user)  # fmt: skip
    except IntegrityError:
        raise ConflictError("subscription_exists", MESSAGE_EXISTS.format(name=name)) from None


def subscription_delete(*, catalog: Catalog, name: str) -> None:
    if not Subscription.objects.filter(catalog=catalog, name=name).delete()[0]:
        raise NotFoundError("subscription_not_found", MESSAGE_NOT_FOUND.format(name=name))


@transaction.atomic
def subscription_batch(*, catalog: Catalog, name: str) -> Batch:
    """The batch the subscription hands out: the one handed out before if it is not acknowledged yet (a consumer
    that crashed before acknowledging gets the same changes again), else a new one up to the branch's head now."""
    subscription = _locked(catalog, name)
    start = _unexpired(subscription, subscription.cursor)
    if subscription.batch_token is None:
        subscription.batch_end = _branch(catalog, subscription.branch).head
        subscription.batch_token = uuid.uuid4()
        subscription.save(update_fields=["batch_end", "batch_token"])
    end = _unexpired(subscription, subscription.batch_end)
    return Batch(subscription, start, end, subscription.batch_token)


@transaction.atomic
def subscription_ack(*, catalog: Catalog, name: str, token: str) -> Subscription:
    """Move the cursor to the end of the batch `token` names; a 409 for any other token (two consumers of one
    subscription cannot both acknowledge one batch)."""
    subscription = _locked(catalog, name)
    if subscription.batch_token is None or str(subscription.batch_token) != str(token):
        raise ConflictError("stale_ack", MESSAGE_STALE_ACK, details={"cursor": subscription.cursor_id})
    subscription.cursor, subscription.batch_end, subscription.batch_token = subscription.batch_end, None, None
    subscription.acknowledged_at = timezone.now()
    subscription.save(update_fields=["cursor", "batch_end", "batch_token", "acknowledged_at"])
    return subscription


def _locked(catalog: Catalog, name: str) -> Subscription:
    found = Subscription.objects.select_for_update().filter(catalog=catalog, name=name).first()
    if found is None:
        raise NotFoundError("subscription_not_found", MESSAGE_NOT_FOUND.format(name=name))
    return found


def _branch(catalog: Catalog, name: str) -> Branch:
    resolved = ref_resolve(catalog=catalog, ref=name)
    if resolved.kind != "branch":
        raise ApplicationError("not_a_branch", MESSAGE_NOT_A_BRANCH.format(ref=name))
    return resolved.branch


def _unexpired(subscription: Subscription, commit: Commit) -> ResolvedRef:
    """The commit as a ref the change feed reads; `410 cursor_expired` if retention removed it (only a forced
    expiry can: retention keeps what a subscription holds, `selectors.retention`)."""
    try:
        commit_unexpired(commit, None)
    except ApplicationError as expired:
        if expired.code != "history_expired":
            raise
        details = {"cursor": commit.id, "resume_from": expired.details["oldest_kept"]}
        message = MESSAGE_EXPIRED.format(cursor=commit.id)
        raise ApplicationError("cursor_expired", message, status=410, details=details) from None
    return ref_resolve(catalog=subscription.catalog, ref=commit.id)
