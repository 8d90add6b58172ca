import uuid

from django.db.models import QuerySet

from catalog_app.models import Catalog
from lakeui.errors import NotFoundError
from merge_app.models import Merge, Restore


def merge_list(*, catalog: Catalog) -> QuerySet[Merge]:
    return Merge.objects.filter(catalog=catalog).select_related("requested_by").defer("report", "log")


def merge_get(*, catalog: Catalog, merge_id: uuid.UUID) -> Merge:
    merge = Merge.objects.filter(catalog=catalog, id=merge_id).select_related("requested_by").first()
    if merge is None:
        raise NotFoundError("merge_not_found", f"There is no merge {merge_id} in catalog {catalog.name!r}.")
    return merge


def restore_list(*, catalog: Catalog) -> QuerySet[Restore]:
    return Restore.objects.filter(catalog=catalog).select_related("requested_by")


def restore_get(*, catalog: Catalog, restore_id: uuid.UUID) -> Restore:
    restore = restore_list(catalog=catalog).filter(id=restore_id).first()
    if restore is None:
        raise NotFoundError("restore_not_found", f"There is no restore {restore_id} in catalog {catalog.name!r}.")
    return restore
