from django.urls import path, register_converter

from catalog_app.apis import access, blame, catalogs, changes, data, objects, retention, subscriptions
from catalog_app.models import ObjectKind


class RefConverter:
    """A branch, tag or commit id; branch names may hold '/', so it matches lazily up to the next keyword."""

    regex = r"[A-Za-z0-9_][A-Za-z0-9_./-]*?"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(RefConverter, "ref")

CAT = "catalogs/<str:catalog>"
REF = f"{CAT}/refs/<ref:ref>"
DB = f"{REF}/databases/<str:database>"
TABLE = f"{DB}/tables/<str:table>"


def branch_objects(prefix: str, plural: str, kind: str) -> list:
    return [
        path(f"{prefix}/{plural}", objects.BranchObjectListApi.as_view(
            kind=kind, input_serializer=objects.ViewInputSerializer if kind == ObjectKind.VIEW
            else objects.BranchObjectInputSerializer)),
        path(f"{prefix}/{plural}/<str:name>", objects.BranchObjectDetailApi.as_view(kind=kind)),
    ]  # fmt: skip


urlpatterns = [
    path("catalogs", catalogs.CatalogListApi.as_view()),
    path(CAT, catalogs.CatalogDetailApi.as_view()),
    path(f"{CAT}/branches", catalogs.BranchListApi.as_view()),
    path(f"{CAT}/branches/<path:branch>", catalogs.BranchDetailApi.as_view()),
    path(f"{CAT}/tags", catalogs.TagListApi.as_view()),
    path(f"{CAT}/tags/<path:tag>", catalogs.TagDetailApi.as_view()),
    path(f"{REF}/commits", catalogs.CommitLogApi.as_view()),
    path(f"{REF}/databases", objects.DatabaseListApi.as_view()),
    path(DB, objects.DatabaseDetailApi.as_view()),
    path(f"{DB}/history", objects.ObjectHistoryApi.as_view()),
    path(f"{DB}/tables", objects.TableListApi.as_view()),
    path(TABLE, objects.TableDetailApi.as_view()),
    path(f"{TABLE}/history", objects.ObjectHistoryApi.as_view()),
    path(f"{TABLE}/blame", blame.TableBlameApi.as_view()),
    path(f"{TABLE}/columns", objects.ColumnListApi.as_view()),
    path(f"{TABLE}/columns/<str:column>", objects.ColumnDetailApi.as_view()),
    path(f"{TABLE}/load", data.TableLoadApi.as_view()),
    path(f"{TABLE}/delete", data.TableDeleteApi.as_view()),
    path(f"{TABLE}/update", data.TableUpdateApi.as_view()),
    path(f"{TABLE}/compact", data.TableCompactApi.as_view()),
    path(f"{TABLE}/rows", data.TableRowsApi.as_view()),
    path(f"{TABLE}/scan", data.TableScanApi.as_view()),
    path(f"{TABLE}/staging", data.TableStagingApi.as_view()),
    path(f"{CAT}/gc", data.CatalogGcApi.as_view()),
    path(f"{CAT}/changes", changes.ChangesApi.as_view()),
    path(f"{CAT}/subscriptions", subscriptions.SubscriptionListApi.as_view()),
    path(f"{CAT}/subscriptions/<str:name>", subscriptions.SubscriptionDetailApi.as_view()),
    path(f"{CAT}/subscriptions/<str:name>/changes", subscriptions.SubscriptionChangesApi.as_view()),
    path(f"{CAT}/retention", retention.RetentionApi.as_view()),
    path(f"{CAT}/retention/preview", retention.RetentionPreviewApi.as_view()),
    path(f"{CAT}/retention/expire", retention.RetentionExpireApi.as_view()),
    path(f"{CAT}/storage", retention.StorageApi.as_view()),
    path(f"{CAT}/roles", access.CatalogRoleListApi.as_view()),
    path(f"{CAT}/roles/<str:user>", access.CatalogRoleDetailApi.as_view()),
    path(f"{CAT}/protected-branches", access.ProtectedBranchListApi.as_view()),
    path(f"{CAT}/protected-branches/<int:rule_id>", access.ProtectedBranchDetailApi.as_view()),
    *branch_objects(DB, "views", ObjectKind.VIEW),
    *branch_objects(REF, "shares", ObjectKind.SHARE),
    *branch_objects(REF, "roles", ObjectKind.ROLE),
]
