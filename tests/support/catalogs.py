"""Plain helpers that build catalog state through the public services (our factories)."""

from catalog_app.models import Catalog
from catalog_app.selectors.refs import branch_get
from catalog_app.services.commits import WriteTarget
from catalog_app.services.databases import database_create
from catalog_app.services.refs import catalog_create
from catalog_app.services.tables import table_create

COLUMNS = [
    {"name": "id", "type": "long", "nullable": False},
    {"name": "amount", "type": "int"},
    {"name": "region", "type": "string"},
]


def make_catalog(name: str = "lake", user=None) -> Catalog:
    return catalog_create(name=name, description="test catalog", created_by=user)


def on(catalog: Catalog, branch: str = "main", **kwargs) -> WriteTarget:
    return WriteTarget(catalog=catalog, branch=branch, **kwargs)


def make_table(catalog: Catalog, *, branch: str = "main", database: str = "sales", table: str = "orders", **kwargs):
    if not _database_exists(catalog, branch, database):
        database_create(target=on(catalog, branch), name=database)
    return table_create(target=on(catalog, branch), database=database, name=table, columns=COLUMNS, **kwargs)


def _database_exists(catalog: Catalog, branch: str, database: str) -> bool:
    from catalog_app.selectors.objects import object_find
    from catalog_app.selectors.refs import commit_chain

    chain = commit_chain(branch_get(catalog=catalog, name=branch).head)
    return object_find(chain, kind="database", name=database) is not None


def head(catalog: Catalog, branch: str = "main") -> str:
    return branch_get(catalog=catalog, name=branch).head_id
