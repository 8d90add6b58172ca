"""Catalogs, branches and tags. A branch or a tag is one row pointing at a commit: creating one copies nothing."""

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction

from catalog_app.models import Branch, Catalog, Line, Tag
from catalog_app.names import check_identifier, check_ref_name
from catalog_app.selectors.refs import branch_get, ref_resolve, tag_get
from catalog_app.services.access import branch_write_check
from catalog_app.services.commits import catalog_initial_commit, catalog_refs_hold
from lakeui.errors import ApplicationError, ConflictError
from lakeui.events import BRANCH_CREATED, BRANCH_DELETED, event_emit


def _user(user: AbstractBaseUser | None) -> AbstractBaseUser | None:
    return user if user is not None and user.is_authenticated else None


@transaction.atomic
def catalog_create(*, name: str, description: str = "", created_by: AbstractBaseUser | None = None) -> Catalog:
    check_identifier(name, "Catalog")
    if Catalog.objects.filter(name=name).exists():
        raise ConflictError("name_exists", f"A catalog named {name!r} already exists.")
    catalog = Catalog.objects.create(name=name, description=description, created_by=_user(created_by))
    root = catalog_initial_commit(catalog=catalog, author=created_by)
    main = Branch.objects.create(catalog=catalog, name=catalog.default_branch, head=root, created_by=_user(created_by))
    Line.objects.filter(id=root.line_id).update(branch=main)
    return catalog


@transaction.atomic
def catalog_delete(*, catalog: Catalog) -> None:
    """Deletes the catalog's metadata; its data files become orphans for garbage collection."""
    Catalog.objects.filter(id=catalog.id).delete()


_NAME_TAKEN = (
    f"SELECT EXISTS (SELECT 1 FROM {Branch._meta.db_table} WHERE catalog_id = %s AND name = %s),"
    f" EXISTS (SELECT 1 FROM {Tag._meta.db_table} WHERE catalog_id = %s AND name = %s)"
)


def _check_ref_name_free(*, catalog: Catalog, name: str) -> None:
    """409 `ref_exists` when a branch or a tag has the name (one query)."""
    with connection.cursor() as cursor:
        cursor.execute(_NAME_TAKEN, [catalog.id, name, catalog.id, name])
        branch, tag = cursor.fetchone()
    if branch or tag:
        raise ConflictError("ref_exists", f"A {'branch' if branch else 'tag'} named {name!r} already exists.")


@transaction.atomic
def branch_create(
    *,
    catalog: Catalog,
    name: str,
    source: str,
    at: datetime | None = None,
    created_by: AbstractBaseUser | None = None,
) -> Branch:
    """A new branch at `source` (a branch head, a tag, a commit) or at `source` as of `at`. O(1): one row."""
    check_ref_name(name, "Branch")
    catalog_refs_hold(catalog=catalog, name=name)  # a new branch's head is never expired; no other ref of its name
    _check_ref_name_free(catalog=catalog, name=name)
    commit = ref_resolve(catalog=catalog, ref=source, at=at).commit
    branch = Branch.objects.create(catalog=catalog, name=name, head=commit, created_by=_user(created_by))
    event_emit(catalog=catalog, kind=BRANCH_CREATED, payload={"branch": name, "head": commit.id}, actor=created_by)
    return branch


@transaction.atomic
def branch_delete(*, catalog: Catalog, name: str) -> None:
    """Removes the pointer only: commits stay, and every commit another ref reaches stays reachable."""
    branch = branch_get(catalog=catalog, name=name)
    if branch.name == catalog.default_branch:
        raise ApplicationError("default_branch", f"{name!r} is the catalog's default branch and cannot be deleted.")
    branch_write_check(catalog=catalog, branch=branch.name)
    branch.delete()
    event_emit(catalog=catalog, kind=BRANCH_DELETED, payload={"branch": name, "head": branch.head_id})


@transaction.atomic
def tag_create(*, catalog: Catalog, name: str, ref: str, created_by: AbstractBaseUser | None = None) -> Tag:
    check_ref_name(name, "Tag")
    catalog_refs_hold(catalog=catalog, name=name)  # a tagged commit is never expired; no other ref of its name
    _check_ref_name_free(catalog=catalog, name=name)
    commit = ref_resolve(catalog=catalog, ref=ref).commit
    return Tag.objects.create(catalog=catalog, name=name, commit=commit, created_by=_user(created_by))


@transaction.atomic
def tag_delete(*, catalog: Catalog, name: str) -> None:
    tag_get(catalog=catalog, name=name).delete()
