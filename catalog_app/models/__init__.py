from catalog_app.models.access import ROLE_ORDER, CatalogRole, ProtectedBranch, Role
from catalog_app.models.catalog import (
    Branch,
    Catalog,
    Commit,
    Line,
    ObjectKind,
    ObjectVersion,
    Operation,
    SchemaVersion,
    Tag,
)
from catalog_app.models.data import DataFile, FileEntry
from catalog_app.models.lookups import AnyOf  # noqa: F401  (registers `__any`)
from catalog_app.models.retention import ExpiredCommit, ReclaimedFile, RetentionRule
from catalog_app.models.subscriptions import Subscription

__all__ = [
    "ROLE_ORDER",
    "Branch",
    "Catalog",
    "CatalogRole",
    "Commit",
    "DataFile",
    "ExpiredCommit",
    "FileEntry",
    "Line",
    "ObjectKind",
    "ObjectVersion",
    "Operation",
    "ProtectedBranch",
    "ReclaimedFile",
    "RetentionRule",
    "Role",
    "SchemaVersion",
    "Subscription",
    "Tag",
]
