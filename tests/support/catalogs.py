"""Plain helpers that build catalog state through the public services (our factories)."""

from catalog_app.models import Catalog
from catalog_app.selectors.refs import branch_get
from catalog_app.services.commits import WriteTarget
from catalog_app.services.databases import database_create
from catalog_app.services.refs import catalog_create
from catalog_app.services.tables import table_create

DEFAULT_OWNER = "alice"
COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "amount", "type": "int"},
    {"name": "region", "type": "string"},
]


def make_catalog(name: str = "lake", user=None) -> Catalog:
    """A catalog created by `user`, by default by alice (the `user` fixture), who is therefore its admin."""
    return catalog_create(name=name, description="test catalog", created_by=user or default_owner())


def default_owner():
    from django.contrib.auth import get_user_model

    owner, _ = get_user_model().objects.get_or_create(username=DEFAULT_OWNER)
    return owner


def on(catalog: Catalog, branch: str = "main", **kwargs) -> WriteTarget:
    return WriteTarget(catalog=catalog, branch=branch, **kwargs)


def make_table(
    catalog: Catalog, *, branch: str = "main", database: str = "sales", table: str = "orders", columns=COLUMNS, **kwargs
):
    if not _database_exists(catalog, branch, database):
        database_create(target=on(catalog, branch), name=database)
    return table_create(target=on(catalog, branch), database=database, name=table, columns=columns, **kwargs)


def _database_exists(catalog: Catalog, branch: str, database: str) -> bool:
    from catalog_app.selectors.objects import object_find
    from catalog_app.selectors.refs import commit_chain

    chain = commit_chain(branch_get(catalog=catalog, name=branch).head)
    return object_find(chain, kind="database", name=database) is not None


def head(catalog: Catalog, branch: str = "main") -> str:
    return branch_get(catalog=catalog, name=branch).head_id
