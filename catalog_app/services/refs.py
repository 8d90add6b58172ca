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


def _ref_insert_sql(model: type[Branch] | type[Tag], column: str) -> str:
    """A ref named `name` at the commit the branch or, if none, the tag named `source` points at, inserted only if
    no branch or tag has the name yet: one statement, which answers whether a branch or a tag has the name and the
    new row (none where one has, or where `source` names no branch or tag)."""
    branches, tags = Branch._meta.db_table, Tag._meta.db_table
    named = "catalog_id = %(catalog)s AND name = %(name)s"
    return f"""
        WITH source AS (
            SELECT head_id AS commit_id, 0 AS rank FROM {branches} WHERE catalog_id = %(catalog)s AND name = %(source)s
            UNION ALL
            SELECT commit_id, 1 FROM {tags} WHERE catalog_id = %(catalog)s AND name = %(source)s
            ORDER BY rank LIMIT 1
        ), taken AS (
            SELECT EXISTS (SELECT 1 FROM {branches} WHERE {named}) AS branch,
                   EXISTS (SELECT 1 FROM {tags} WHERE {named}) AS tag
        ), made AS (
            INSERT INTO {model._meta.db_table} (catalog_id, name, {column}, created_at, created_by_id)
            SELECT %(catalog)s, %(name)s, source.commit_id, now(), %(user)s FROM source, taken
            WHERE NOT taken.branch AND NOT taken.tag
            RETURNING id, {column}, created_at
        )
        SELECT taken.branch, taken.tag, made.id, made.{column}, made.created_at FROM taken LEFT JOIN made ON true
    """


_COLUMNS = {Branch: "head_id", Tag: "commit_id"}  # the commit a ref points at
_INSERTS = {model: _ref_insert_sql(model, column) for model, column in _COLUMNS.items()}


def _ref_insert(model, *, catalog: Catalog, name: str, source: str | None, user: AbstractBaseUser | None):
    """The new ref at the commit of the branch or tag `source`, in one statement, after `catalog_refs_hold` (which
    holds the name: a statement that waited for that lock would not see the other create's row); 409 `ref_exists`
    when a branch or a tag has the name; None when `source` names no branch or tag (a commit id, or nothing:
    `ref_resolve` tells which), or when none is wanted (`source` None: a branch at a time)."""
    sql, column = _INSERTS[model], _COLUMNS[model]
    with connection.cursor() as cursor:
        cursor.execute(sql, {"catalog": catalog.id, "name": name, "source": source, "user": user and user.pk})
        branch, tag, made_id, commit_id, created_at = cursor.fetchone()
    if branch or tag:
        raise ConflictError("ref_exists", f"A {'branch' if branch else 'tag'} named {name!r} already exists.")
    if made_id is None:
        return None
    fields = {"id": made_id, "name": name, column: commit_id, "created_at": created_at, "created_by": user}
    return model(catalog=catalog, **fields)


@transaction.atomic
def branch_create(
    *,
    catalog: Catalog,
    name: str,
    source: str,
    at: datetime | None = None,
    created_by: AbstractBaseUser | None = None,
) -> Branch:
    """A new branch at `source` (a branch head, a tag, a commit) or at `source` as of `at`. O(1): one row, and at a
    branch or a tag, made in one statement after the name's lock."""
    check_ref_name(name, "Branch")
    catalog_refs_hold(catalog=catalog, name=name)  # a new branch's head is never expired; no other ref of its name
    user = _user(created_by)
    branch = _ref_insert(Branch, catalog=catalog, name=name, source=None if at else source, user=user)
    if branch is None:  # the name is free (`_ref_insert` would have refused it), and stays so: it is held
        commit = ref_resolve(catalog=catalog, ref=source, at=at).commit
        branch = Branch.objects.create(catalog=catalog, name=name, head=commit, created_by=user)
    event_emit(catalog=catalog, kind=BRANCH_CREATED, payload={"branch": name, "head": branch.head_id}, actor=created_by)
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
    user = _user(created_by)
    tag = _ref_insert(Tag, catalog=catalog, name=name, source=ref, user=user)
    if tag is None:  # the name is free (`_ref_insert` would have refused it), and stays so: it is held
        tag = Tag.objects.create(catalog=catalog, name=name, commit=ref_resolve(catalog=catalog, ref=ref).commit,
                                 created_by=user)  # fmt: skip
    return tag


@transaction.atomic
def tag_delete(*, catalog: Catalog, name: str) -> None:
    tag_get(catalog=catalog, name=name).delete()
