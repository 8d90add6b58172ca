"""A catalog's subscriptions with how far each is behind its branch (docs/changes.md#subscriptions)."""

from typing import Any

from catalog_app.models import Branch, Catalog, Commit, Subscription
from catalog_app.selectors.changes import ChangeFeed, changes_between
from catalog_app.selectors.refs import commit_chain, ref_resolve


def subscription_list(*, catalog: Catalog) -> list[Subscription]:
    return list(Subscription.objects.filter(catalog=catalog).select_related("cursor", "created_by"))


def subscription_get(*, catalog: Catalog, name: str) -> Subscription | None:
    return Subscription.objects.filter(catalog=catalog, name=name).select_related("cursor", "created_by").first()


def subscription_describe(subscription: Subscription) -> dict[str, Any]:
    """The subscription as the API answers it, with its lag: the commits of the branch's first-parent history made
    after the cursor (None when the branch is gone)."""
    branch = Branch.objects.filter(catalog_id=subscription.catalog_id, name=subscription.branch).first()
    lag = None
    if branch is not None:
        chain = commit_chain(branch.head)
        lag = Commit.objects.filter(chain.q(), seq__gt=subscription.cursor.seq).count()
    return {
        "name": subscription.name, "branch": subscription.branch, "tables": subscription.tables,
        "cursor": subscription.cursor_id, "cursor_at": subscription.cursor.created_at,
        "pending_batch": subscription.batch_token is not None, "lag_commits": lag,
        "created_at": subscription.created_at, "acknowledged_at": subscription.acknowledged_at,
        "created_by": subscription.created_by.username if subscription.created_by else None,
    }  # fmt: skip


def subscription_behind(subscription: Subscription) -> ChangeFeed | None:
    """The changes the subscription has not acknowledged: from its cursor to its branch's head now, of its tables
    (None when the branch is gone). Reads the changed files, as the change feed does (its errors: 410
    `history_expired` for a cursor retention removed, 503 `changes_unreadable`)."""
    branch = Branch.objects.filter(catalog_id=subscription.catalog_id, name=subscription.branch).first()
    if branch is None:
        return None
    start, end = (ref_resolve(catalog=subscription.catalog, ref=c) for c in (subscription.cursor_id, branch.head_id))
    return changes_between(source=start, target=end, among=subscription.tables)
