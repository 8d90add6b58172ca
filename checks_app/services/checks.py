"""Merge checks (docs/merge-semantics.md#merge-checks): keeping them, judging a commit with them, external statuses,
and the verdict a merge goes by.

An SQL check is judged on a worker against one commit: for a merge, its result, materialised as a commit no branch
points to (merge_app/services/merges.py); the branch then moves to that very commit, so what was checked is what is
published. A check whose tables are the same as in an earlier run of the same version of it (the same files, the
same schema) is not run again: the earlier result is recorded again, as `reused_from`.
"""

import fnmatch
import hashlib
import json
import re
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from catalog_app.engine import quick_sql, sql
from catalog_app.engine.warehouse import Warehouse
from catalog_app.models import Catalog, Commit, ObjectKind
from catalog_app.names import CHECK_NAME, check_ref_name
from catalog_app.selectors.objects import object_find
from catalog_app.selectors.refs import Chain, branch_list, commit_chain, ref_resolve
from catalog_app.selectors.table_files import table_files
from catalog_app.selectors.table_rows import quick_select, select_frame
from checks_app.models import Check, CheckRun
from checks_app.selectors import check_get, check_run_dict
from lakeui.errors import ApplicationError, ConflictError
from lakeui.events import CHECK_FINISHED, event_emit
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_answered_by_caller, job_create

STATEMENT_JOB = "check_statement"  # parses a check's SELECT on the interactive worker, then saves it (job_kinds.py)
RUN_JOB = "check_run"  # runs a check on a ref, on demand
FAILING_ROWS = 100  # the rows of a failed check that are kept
MAX_ROWS_BOUND = 1_000_000_000
STATES = {"pending", "success", "failure", "error"}
MESSAGE_NAME = "A check's name is 1 to 100 letters, digits, spaces and _ . : / - , starting with a letter or digit."
MESSAGE_EXISTS = "Catalog {catalog!r} already has a check named {name!r}."
MESSAGE_NOT_SELECT = "A check is one SELECT (or WITH ... SELECT) over the catalog's tables."
MESSAGE_FAILED = "{name}: {count} row(s), at most {bound} allowed."


# --- keeping checks ---------------------------------------------------------------------------------------------


def _name_checked(name: object) -> str:
    if not isinstance(name, str) or not CHECK_NAME.fullmatch(name):
        raise ApplicationError("invalid_name", MESSAGE_NAME, details={"field": "name"})
    return name


def _pattern_checked(pattern: object) -> str:
    """A branch pattern, as protected branches take it (`main`, `release/*`)."""
    if not isinstance(pattern, str):
        raise ApplicationError("invalid_name", "branches is a branch name or pattern.", details={"field": "branches"})
    check_ref_name(re.sub(r"[*?\[\]]", "x", pattern), "Branch pattern")
    return pattern


def _bound_checked(max_rows: object) -> int:
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or not 0 <= max_rows <= MAX_ROWS_BOUND:
        raise ApplicationError(
            "invalid_input", f"max_rows is a whole number from 0 to {MAX_ROWS_BOUND}.", details={"field": "max_rows"}
        )
    return max_rows


def _statement_tables(*, catalog: Catalog, statement: object, branches: str) -> list[str] | None:
    """The tables a check's statement reads when that is known here, without Spark: a statement in quick_sql's
    subset (a SELECT of one table, with nothing the console refuses); None when only Spark's parser can tell
    (STATEMENT_JOB). What is wrong at once is a 400 now: not a SELECT, or a table no branch it guards has."""
    if not isinstance(statement, str) or not sql_reads_a_query(statement):
        raise ApplicationError("invalid_query", MESSAGE_NOT_SELECT, details={"field": "sql"})
    query = quick_sql.parse(statement)
    if query is not None and all(sql.IDENTIFIER.fullmatch(name) for name in (query.database, query.table)):
        return tables_checked(catalog=catalog, tables={f"{query.database}.{query.table}"}, branches=branches)
    return None


def _statement_submit(*, catalog: Catalog, statement: str, branches: str, save: dict[str, Any], user) -> Job:
    """The statement job (STATEMENT_JOB) that parses a check's statement with Spark on the interactive worker and
    then saves the check as `save` says (`check_statement_save`): answered with at once, never waited for."""
    params = {"catalog_id": str(catalog.id), "statement": statement, "branches": branches, "save": save}
    return job_create(kind=STATEMENT_JOB, params=params, requested_by=user)


def check_statement_save(*, catalog: Catalog, tables: list[str], save: dict[str, Any], user) -> Check:
    """The statement job's second step, once Spark found the statement good: the check created (`save["create"]`:
    check_create's fields) or changed (`save["update"]`: the check's id, `save["changes"]`) with these tables, each
    field checked again as it is now (a check of that name made meanwhile is a 409, as at once). Idempotent on
    redelivery: a job delivered again after it saved the check finds that very check (its name and statement)."""
    if "create" in save:
        fields = save["create"]
        saved = Check.objects.filter(catalog=catalog, name=fields["name"], sql=fields["sql"]).first()
        return saved or check_create(catalog=catalog, created_by=user, tables=tables, **fields)
    check = check_get(catalog=catalog, check_id=save["update"])
    return check_update(check=check, user=user, tables=tables, **save["changes"])


def tables_checked(*, catalog: Catalog, tables: set[str], branches: str) -> list[str]:
    """The tables (`db.table`) a check's statement reads, sorted; `table_not_found` if one is on no branch the
    check guards (nor on the default branch)."""
    heads = [
        branch.head for branch in branch_list(catalog=catalog)
        if branch.name == catalog.default_branch or fnmatch.fnmatchcase(branch.name, branches)
    ]  # fmt: skip
    chains = [commit_chain(head) for head in heads]
    for name in sorted(tables):
        database, _, table = name.partition(".")
        if not any(_table_exists(chain, database, table) for chain in chains):
            raise ApplicationError("table_not_found", f"No branch the check guards has a table {name!r}.")
    return sorted(tables)


def _table_exists(chain, database: str, table: str) -> bool:
    db = object_find(chain, kind=ObjectKind.DATABASE, name=database)
    version = db and object_find(chain, kind=ObjectKind.TABLE, name=table, parent_id=db.object_id)
    return bool(version) and not version.dropped


def sql_reads_a_query(statement: str) -> bool:
    return bool(re.match(r"\s*(\(\s*)*(SELECT|WITH)\b", statement, re.IGNORECASE))


def check_create(
    *,
    catalog: Catalog,
    name: str,
    branches: str,
    sql: str,
    max_rows: int = 0,
    advisory: bool = False,
    created_by: AbstractBaseUser,
    tables: list[str] | None = None,
) -> Check | Job:
    """Add a check, answered at once: saved now when its statement is known good here (`_statement_tables`), else
    the statement job that parses it with Spark and then saves it (its result names the check), or fails with the
    400 the statement deserves and saves nothing. Every other field is checked now (400, 409). `tables`: the
    statement's tables as that job found them (the job's own call)."""
    name, branches, max_rows = _name_checked(name), _pattern_checked(branches), _bound_checked(max_rows)
    if Check.objects.filter(catalog=catalog, name=name).exists():
        raise ConflictError("check_exists", MESSAGE_EXISTS.format(catalog=catalog.name, name=name))
    if tables is None:
        tables = _statement_tables(catalog=catalog, statement=sql, branches=branches)
    if tables is None:
        save = {"create": {"name": name, "branches": branches, "sql": sql, "max_rows": max_rows,
                           "advisory": bool(advisory)}}  # fmt: skip
        return _statement_submit(catalog=catalog, statement=sql, branches=branches, save=save, user=created_by)
    try:
        with transaction.atomic():
            return Check.objects.create(
                catalog=catalog, name=name, branches=branches, sql=sql, tables=tables, max_rows=max_rows,
                advisory=bool(advisory), created_by=created_by,
            )  # fmt: skip
    except IntegrityError:
        raise ConflictError("check_exists", MESSAGE_EXISTS.format(catalog=catalog.name, name=name)) from None


def check_update(
    *, check: Check, user: AbstractBaseUser, tables: list[str] | None = None, **changes: Any
) -> Check | Job:
    """Change a check, answered at once as check_create is: a new statement only Spark can parse is the statement
    job, which makes every change of the request once the statement is found good (none if it is not); the other
    fields are checked now. A change of what it judges (its statement or bound) makes it a new version: runs of
    the old one no longer count for any merge. `tables`: the new statement's tables as the job found them."""
    if "name" in changes and changes["name"] != check.name:
        check.name = _name_checked(changes["name"])
        if Check.objects.filter(catalog=check.catalog, name=check.name).exclude(id=check.id).exists():
            raise ConflictError("check_exists", MESSAGE_EXISTS.format(catalog=check.catalog.name, name=check.name))
    if "branches" in changes:
        check.branches = _pattern_checked(changes["branches"])
    if "advisory" in changes:
        check.advisory = bool(changes["advisory"])
    judged = False
    if "max_rows" in changes and changes["max_rows"] != check.max_rows:
        check.max_rows, judged = _bound_checked(changes["max_rows"]), True
    if "sql" in changes and changes["sql"] != check.sql:
        if tables is None:
            tables = _statement_tables(catalog=check.catalog, statement=changes["sql"], branches=check.branches)
        if tables is None:
            save = {"update": check.id, "changes": changes}
            return _statement_submit(catalog=check.catalog, statement=changes["sql"], branches=check.branches,
                                     save=save, user=user)  # fmt: skip
        check.tables, check.sql, judged = tables, changes["sql"], True
    if judged:
        check.version += 1
    try:
        check.save()
    except IntegrityError:
        exists = MESSAGE_EXISTS.format(catalog=check.catalog.name, name=check.name)
        raise ConflictError("check_exists", exists) from None
    return check


@transaction.atomic
def check_delete(*, check: Check) -> None:
    check.delete()


def check_run_submit(*, check: Check, ref: str, user: AbstractBaseUser) -> Job:
    """Run `check` on a ref's commit (an admin trying it out); the ref is resolved now. A run that needs no Spark
    (an earlier run of the same version on the same files, or a small table whose statement `quick_select` answers
    exactly) is judged here, in the request, and recorded with a job already finished; any other is queued for a
    worker. Either way the caller follows the job."""
    catalog = check.catalog
    commit = ref_resolve(catalog=catalog, ref=ref).commit
    params = {"catalog_id": str(check.catalog_id), "check_id": check.id, "ref": commit.id}
    chain = commit_chain(commit)
    fingerprint = run_fingerprint(chain, check)
    judged = _verdict(None, catalog=catalog, chain=chain, check=check, fingerprint=fingerprint)
    if judged is None:
        return job_create(kind=RUN_JOB, params=params, requested_by=user)

    def record(job: Job) -> dict[str, Any]:
        run = _run_record(catalog=catalog, check=check, commit=commit, fingerprint=fingerprint, judged=judged,
                          job=job, user=user)  # fmt: skip
        return check_run_dict(run)

    return job_answered_by_caller(kind=RUN_JOB, params=params, requested_by=user, answer=record)


# --- judging a commit -------------------------------------------------------------------------------------------


def run_fingerprint(chain: Chain, check: Check) -> str:
    """What a run of `check` judges, at a commit: its statement and bound as they are (so two edits racing to the
    same version never share a result), and each of its tables' identity, state (its schema) and live files, or
    that it is absent."""
    digest = hashlib.sha256(json.dumps([check.sql, check.max_rows]).encode())
    tables = check.tables
    for name in sorted(tables):
        database, _, table = name.partition(".")
        db = object_find(chain, kind=ObjectKind.DATABASE, name=database)
        version = db and object_find(chain, kind=ObjectKind.TABLE, name=table, parent_id=db.object_id)
        if not version or version.dropped:
            digest.update(f"{name}:absent;".encode())
            continue
        files = sorted(table_files(chain, table_id=version.object_id).by_id())
        state = json.dumps(version.state, sort_keys=True)  # not the version's id: each merge commit writes a new one
        digest.update(f"{name}:{version.object_id}:{state}:{','.join(files)};".encode())
    return digest.hexdigest()


def checks_run(
    spark: Callable[[], Any],
    *,
    catalog: Catalog,
    checks: list[Check],
    commit: Commit,
    source_head: str = "",
    target_head: str = "",
    job=None,
    user: AbstractBaseUser | None = None,
) -> list[CheckRun]:
    """Judge `commit` with each check (on a worker: `spark` gives its session, called only for a check that
    `quick_select` cannot answer: a worker whose Spark has not started does not start it for a small table), record
    each run, and tell listeners (`check.finished`)."""
    chain = commit_chain(commit)
    runs = []
    for check in checks:
        fingerprint = run_fingerprint(chain, check)
        judged = _verdict(spark, catalog=catalog, chain=chain, check=check, fingerprint=fingerprint)
        runs.append(
            _run_record(catalog=catalog, check=check, commit=commit, fingerprint=fingerprint, judged=judged,
                        source_head=source_head, target_head=target_head, job=job, user=user)
        )  # fmt: skip
    return runs


@transaction.atomic
def _run_record(
    *,
    catalog: Catalog,
    check: Check,
    commit: Commit,
    fingerprint: str,
    judged: dict[str, Any],
    source_head: str = "",
    target_head: str = "",
    job=None,
    user: AbstractBaseUser | None = None,
) -> CheckRun:
    run = CheckRun.objects.create(
        catalog=catalog, kind=CheckRun.Kind.SQL, check_rule=check, check_version=check.version, name=check.name,
        commit=commit.id, source_head=source_head, target_head=target_head, fingerprint=fingerprint,
        advisory=check.advisory, job=job, created_by=_author(user), **judged,
    )  # fmt: skip
    event_emit(catalog=catalog, kind=CHECK_FINISHED, payload=check_run_dict(run), actor=user)
    return run


def _verdict(
    spark: Callable[[], Any] | None, *, catalog: Catalog, chain: Chain, check: Check, fingerprint: str
) -> dict[str, Any] | None:
    """A run's outcome: an earlier run's of the same version on the same files, else the check judged now (by
    Spark if `quick_select` cannot answer it; without `spark`, None then)."""
    earlier = (
        CheckRun.objects.filter(check_rule=check, check_version=check.version, fingerprint=fingerprint,
                                reused_from=None, state__in=(CheckRun.State.SUCCESS, CheckRun.State.FAILURE))
        .order_by("-created_at").first()
    )  # fmt: skip
    if earlier is None:
        return _judge(spark, catalog=catalog, chain=chain, check=check)
    return {
        "state": earlier.state, "row_count": earlier.row_count, "columns": earlier.columns,
        "failing_rows": earlier.failing_rows, "message": earlier.message, "duration_ms": 0, "reused_from": earlier,
    }  # fmt: skip


def _judge(spark: Callable[[], Any] | None, *, catalog: Catalog, chain: Chain, check: Check) -> dict[str, Any] | None:
    """Run a check's statement at a commit: success when it returns at most `max_rows` rows; else the first rows.
    None if only Spark can run it and `spark` is None."""
    started = time.monotonic()
    here = quick_select(chain=chain, statement=check.sql)
    if here is not None:  # a small table, a statement quick_sql answers exactly: no Spark job
        count = len(here.rows)
        shown = {"columns": here.columns, "rows": here.rows[:FAILING_ROWS]} if count > check.max_rows else None
        return _judged(check, count, shown, started)
    if spark is None:
        return None
    try:
        frame = select_frame(spark(), catalog=catalog, chain=chain, statement=check.sql,
                             warehouse=Warehouse(settings.LAKEUI_WAREHOUSE))  # fmt: skip
        count = frame.count()
        shown = sql.selected_rows(frame.limit(FAILING_ROWS + 1), FAILING_ROWS) if count > check.max_rows else None
    except ApplicationError as exc:  # the statement no longer fits the tables (a table dropped, a column renamed)
        return {"state": CheckRun.State.ERROR, "message": exc.message, "duration_ms": _ms(started)}
    except Exception as exc:
        return {"state": CheckRun.State.ERROR, "message": sql.error_message(exc), "duration_ms": _ms(started)}
    return _judged(check, count, shown, started)


def _judged(check: Check, count: int, shown: dict | None, started: float) -> dict[str, Any]:
    if shown is None:
        return {"state": CheckRun.State.SUCCESS, "row_count": count, "duration_ms": _ms(started)}
    return {
        "state": CheckRun.State.FAILURE, "row_count": count, "columns": shown["columns"],
        "failing_rows": _storable(shown["rows"]), "duration_ms": _ms(started),
        "message": MESSAGE_FAILED.format(name=check.name, count=count, bound=check.max_rows),
    }  # fmt: skip


def _storable(value: Any) -> Any:
    """JSON values without NUL characters (PostgreSQL's JSON holds none): each shown as U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [_storable(item) for item in value]
    return value


def _author(user: AbstractBaseUser | None) -> AbstractBaseUser | None:
    return user if user is not None and user.is_authenticated else None


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


# --- external statuses ------------------------------------------------------------------------------------------


@transaction.atomic
def status_post(
    *,
    catalog: Catalog,
    commit: str,
    name: str,
    state: str,
    url: str = "",
    description: str = "",
    user: AbstractBaseUser | None = None,
) -> CheckRun:
    """An external check's status for a commit, as a CI system reports it: the newest of a name counts."""
    name = _name_checked(name)
    if state not in STATES:
        raise ApplicationError("invalid_input", f"state is one of {', '.join(sorted(STATES))}.",
                               details={"field": "state"})  # fmt: skip
    if url and not re.match(r"https?://", url):
        raise ApplicationError("invalid_input", "url is an http(s) address.", details={"field": "url"})
    run = CheckRun.objects.create(
        catalog=catalog, kind=CheckRun.Kind.EXTERNAL, name=name, commit=commit, source_head=commit, state=state,
        url=url, description=description[:1000], created_by=_author(user),
    )  # fmt: skip
    event_emit(catalog=catalog, kind=CHECK_FINISHED, payload=check_run_dict(run), actor=user)
    return run


# --- a refusal ------------------------------------------------------------------------------------------------


def checks_error(*, failed: list[str], pending: list[str], runs: list[dict], target: str,
                 details: dict[str, Any] | None = None) -> ConflictError:  # fmt: skip
    """The refusal of a merge the checks stop: 409 `checks_failed`, else 409 `checks_pending`; `runs` as
    `check_run_dict` shows them."""
    if failed:
        message = f"The merge into {target!r} fails its check(s): {', '.join(failed)}; nothing was merged."
        return ConflictError("checks_failed", message, details={**(details or {}), "checks": runs})
    message = f"The merge into {target!r} waits for its required check(s): {', '.join(pending)}."
    return ConflictError("checks_pending", message, details={**(details or {}), "checks": runs})
