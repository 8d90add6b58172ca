"""The check job kinds: parsing a check's statement and saving the check (interactive: a person follows it) and
running a check on demand."""

from typing import Any

from catalog_app.engine import sql
from catalog_app.selectors.refs import catalog_by_id, ref_resolve
from catalog_app.spark import spark_session
from checks_app.selectors import check_get
from checks_app.services.checks import (
    RUN_JOB,
    STATEMENT_JOB,
    check_run_dict,
    check_statement_save,
    checks_run,
    tables_checked,
)
from lakeui.errors import ApplicationError
from lakeui.jobs.registry import Progress, job_kind
from lakeui.jobs.selectors import job_of_run


@job_kind(STATEMENT_JOB, interactive=True)
def check_statement(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """The tables a check's SELECT reads (`db.table`), refused as the SQL console refuses a statement, or if it
    travels in time (a check judges the merge's result) or names a table that no branch it guards (nor the default
    branch) has; then the check created or changed as its request asked (`save`), named in the result (`check`)."""
    catalog = catalog_by_id(params["catalog_id"])
    try:
        references = sql.table_references(spark_session(), params["statement"])
    except sql.SqlError as exc:
        raise ApplicationError("invalid_query", exc.message, details={"position": exc.position}) from None
    if any(ref.timestamp is not None or ref.version is not None for ref in references):
        raise ApplicationError("invalid_query", "A check reads the merge's result: it cannot travel in time.")
    tables = tables_checked(catalog=catalog, tables={f"{ref.database}.{ref.table}" for ref in references},
                            branches=params["branches"])  # fmt: skip
    if not params.get("save"):
        return {"tables": tables}
    user = job_of_run(progress.job_id).requested_by
    check = check_statement_save(catalog=catalog, tables=tables, save=params["save"], user=user)
    return {"tables": tables, "check": check.id, "version": check.version}


@job_kind(RUN_JOB)
def check_run(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Run one check on a ref's commit now (an admin trying it): the run, with its failing rows."""
    job = job_of_run(progress.job_id)
    catalog = catalog_by_id(params["catalog_id"])
    check = check_get(catalog=catalog, check_id=params["check_id"])
    commit = ref_resolve(catalog=catalog, ref=params["ref"]).commit
    progress.report(20, f"Running {check.name}")
    (run,) = checks_run(spark_session, catalog=catalog, checks=[check], commit=commit, job=job,
                        user=job.requested_by)  # fmt: skip
    return check_run_dict(run)
