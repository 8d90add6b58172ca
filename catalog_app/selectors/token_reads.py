"""What a read at a ref by API token needs before its view runs, in one query (catalog_app/middleware.py)."""

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from rest_framework.authtoken.models import Token

from catalog_app.models import Branch, Catalog, CatalogRole, Role, Tag
from catalog_app.selectors.access import _admin_of


@dataclass(frozen=True)
class TokenRead:
    user: AbstractBaseUser  # the token's user, active or not
    catalog: Catalog | None  # None: no such catalog
    role: str | None  # the user's role in it (catalog_with_role's rule); None: they may not see it
    commit_id: str | None  # the ref's commit now: a branch's head, else a tag's commit; None: neither


_sql = ""
_user_fields: list[str] = []
_catalog_fields: list[str] = []


def token_read_at_ref(*, key: str, catalog: str, ref: str) -> TokenRead | None:
    """The user of API token `key`, the catalog named `catalog` with their role in it, and the commit of the branch
    or tag `ref` there, in one query (plain SQL, values bound: the ORM would take longer to build it than the
    database to answer). None if there is no such token."""
    with connection.cursor() as cursor:
        cursor.execute(_query(), [ref, ref, catalog, key])
        row = cursor.fetchone()
    if row is None:
        return None
    users, catalogs = len(_user_fields), len(_catalog_fields)
    user = get_user_model().from_db(connection.alias, _user_fields, row[:users])
    found, granted, head, tagged = row[users], *row[users + catalogs :]
    if found is None:
        return TokenRead(user=user, catalog=None, role=None, commit_id=None)
    place = Catalog.from_db(connection.alias, _catalog_fields, row[users : users + catalogs])
    role = Role.ADMIN if _admin_of(user, place) else granted  # as catalog_with_role (selectors/access.py)
    return TokenRead(user=user, catalog=place, role=role, commit_id=head if head is not None else tagged)


def _query() -> str:
    global _sql, _user_fields, _catalog_fields
    if not _sql:
        users, catalogs = get_user_model()._meta.concrete_fields, Catalog._meta.concrete_fields
        quote = connection.ops.quote_name
        columns = [f"u.{quote(field.column)}" for field in users] + [f"c.{quote(field.column)}" for field in catalogs]
        _sql = (
            f"SELECT {', '.join(columns)},"
            f" (SELECT r.role FROM {CatalogRole._meta.db_table} r WHERE r.catalog_id = c.id AND r.user_id = u.id),"
            f" (SELECT b.head_id FROM {Branch._meta.db_table} b WHERE b.catalog_id = c.id AND b.name = %s),"
            f" (SELECT g.commit_id FROM {Tag._meta.db_table} g WHERE g.catalog_id = c.id AND g.name = %s)"
            f" FROM {Token._meta.db_table} t JOIN {get_user_model()._meta.db_table} u ON u.id = t.user_id"
            f" LEFT JOIN {Catalog._meta.db_table} c ON c.name = %s WHERE t.key = %s"
        )
        _user_fields = [field.attname for field in users]
        _catalog_fields = [field.attname for field in catalogs]
    return _sql
