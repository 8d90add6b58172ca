"""The SQL endpoint: a statement is dispatched by its kind. SELECT (and WITH ... SELECT) runs on a worker over
the tables of a ref; the branch commands (CREATE BRANCH, USE BRANCH, MERGE BRANCH, RESTORE) are parsed here
as they are added."""

import re

from django.conf import settings

from catalog_app.models import Catalog
from catalog_app.selectors.refs import ref_resolve
from catalog_app.services.jobs import job_run_sync
from lakeui.errors import ApplicationError

QUERY = re.compile(r"\s*(\(\s*)*(SELECT|WITH|VALUES)\b", re.IGNORECASE)
MAX_STATEMENT = 100_000


def sql_execute(*, catalog: Catalog, statement: str, ref: str | None, user, limit: int = 1000) -> dict:
    if not statement.strip() or len(statement) > MAX_STATEMENT:
        raise ApplicationError("invalid_query", f"The statement must be 1 to {MAX_STATEMENT} characters.")
    if not QUERY.match(statement):
        first = statement.strip().split(None, 1)[0].upper()
        raise ApplicationError(
            "unsupported_statement",
            f"{first} statements are not supported here yet; run a SELECT over tables of the ref.",
            details={"position": len(statement) - len(statement.lstrip())},
        )
    resolved = ref_resolve(catalog=catalog, ref=ref or catalog.default_branch)
    params = {"commit": resolved.commit.id, "statement": statement, "limit": limit}
    result = job_run_sync(kind="sql_select", params=params, requested_by=user, timeout=settings.LAKEUI_READ_TIMEOUT)
    return {"kind": "select", "ref": resolved.name, "commit": resolved.commit.id, **result}
