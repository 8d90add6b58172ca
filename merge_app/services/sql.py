"""The SQL endpoint: a statement is dispatched by its kind. SELECT (and WITH ... SELECT) over the tables of a ref is
answered here when `quick_select` answers it exactly, else runs as a job on a worker, parsed by Spark's parser; the
branch commands are parsed here by a small grammar:

    CREATE BRANCH name [FROM ref] [AT TIMESTAMP '...' | AT '...']
    USE BRANCH name
    MERGE BRANCH source [TO target] [DRY RUN]
    RESTORE TABLE db.table [ON BRANCH b] TO TIMESTAMP '...' | TO COMMIT '...'
    RESTORE BRANCH b TO TIMESTAMP '...' | TO COMMIT '...'
    REVERT COMMIT 'id' [ON BRANCH b]
    CHERRY-PICK COMMIT 'id' | 'from'..'to' [ON BRANCH b]

Names are branch, tag or commit names (letters, digits, `_ . / -`) or `quoted` with backticks. A statement that
does not parse is a 400 `syntax_error` with the position (0-based character offset) where it goes wrong.

A SELECT Spark answers, MERGE BRANCH, RESTORE, REVERT COMMIT and CHERRY-PICK COMMIT run as jobs: they are answered
at once with the job (`Submitted`), whose result is the statement's once it has finished (`sql_job_result`); nothing
here waits for it.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from catalog_app.engine import sql
from catalog_app.models import Catalog
from catalog_app.selectors.refs import branch_get, commit_chain, ref_resolve, timestamp_parse
from catalog_app.selectors.table_rows import quick_select
from catalog_app.services.refs import branch_create
from lakeui.errors import ApplicationError
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_create
from merge_app.job_specs import MergeSpec, PickSpec, RestoreSpec
from merge_app.models import SqlSession
from merge_app.services.merges import merge_submit
from merge_app.services.picks import pick_submit
from merge_app.services.restores import restore_submit

SELECT_JOB = "sql_select"  # a SELECT on the interactive worker's Spark (catalog_app/job_kinds.py)
QUERY = re.compile(r"\s*(\(\s*)*(SELECT|WITH|VALUES)\b", re.IGNORECASE)
MAX_STATEMENT = 100_000
TOKEN = re.compile(
    r"\s*(?:(?P<quoted>`[^`]*`)|(?P<string>'[^']*')|(?P<word>[A-Za-z0-9_./:-]+)|(?P<end>;?\s*$)|(?P<bad>.))"
)


@dataclass(frozen=True)
class Token:
    kind: str  # word | quoted | string | end | bad
    text: str
    position: int

    @property
    def value(self) -> str:
        return self.text[1:-1] if self.kind in ("quoted", "string") else self.text


def _tokens(statement: str) -> list[Token]:
    tokens, position = [], 0
    while True:
        match = TOKEN.match(statement, position)
        kind = match.lastgroup
        start = match.start(kind)
        tokens.append(Token(kind, match.group(kind), start))
        if kind in ("end", "bad"):
            return tokens
        position = match.end()


class _Parser:
    def __init__(self, statement: str) -> None:
        self.tokens, self.index = _tokens(statement), 0

    def peek(self) -> Token:
        return self.tokens[self.index]

    def error(self, expected: str) -> ApplicationError:
        token = self.peek()
        found = "the end of the statement" if token.kind == "end" else repr(token.text)
        return ApplicationError(
            "syntax_error", f"Expected {expected} at position {token.position}, found {found}.",
            details={"position": token.position},
        )  # fmt: skip

    def keyword(self, *words: str) -> bool:
        """Consume the keywords if they come next."""
        ahead = self.tokens[self.index : self.index + len(words)]
        if len(ahead) == len(words) and all(
            t.kind == "word" and t.text.upper() == w for t, w in zip(ahead, words, strict=True)
        ):
            self.index += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.keyword(*words):
            raise self.error(" ".join(words))

    def name(self, what: str) -> str:
        token = self.peek()
        if token.kind not in ("word", "quoted") or not token.value:
            raise self.error(what)
        self.index += 1
        return token.value

    def string(self, what: str) -> str:
        token = self.peek()
        if token.kind != "string":
            raise self.error(what)
        self.index += 1
        return token.value

    def end(self) -> None:
        if self.peek().kind != "end":
            raise self.error("the end of the statement")


@dataclass(frozen=True)
class Submitted:
    """A statement that runs as a job, answered at once: the job, and what the statement asked for (`kind` and its
    refs). Its result, once the job has finished, is `statement` with the job's result (`sql_job_result`)."""

    job: Job
    statement: dict[str, Any]


@dataclass(frozen=True)
class Context:
    catalog: Catalog
    user: AbstractBaseUser
    branch: str | None  # the ref the request names, if any


def current_branch(context: Context) -> str:
    """The request's branch, else the user's `USE BRANCH`, else the catalog's default branch."""
    if context.branch:
        return context.branch
    if context.user is not None and context.user.is_authenticated:
        session = SqlSession.objects.filter(user=context.user, catalog=context.catalog).first()
        if session is not None:
            return session.branch
    return context.catalog.default_branch


def _create_branch(parser: _Parser, context: Context) -> dict:
    name = parser.name("a branch name")
    source = parser.name("a ref") if parser.keyword("FROM") else current_branch(context)
    at = None
    if parser.keyword("AT"):
        parser.keyword("TIMESTAMP")
        at = timestamp_parse(parser.string("a timestamp in quotes"))
    parser.end()
    branch = branch_create(catalog=context.catalog, name=name, source=source, at=at, created_by=context.user)
    return {"kind": "create_branch", "branch": branch.name, "commit": branch.head_id}


def _use_branch(parser: _Parser, context: Context) -> dict:
    name = parser.name("a branch name")
    parser.end()
    branch = branch_get(catalog=context.catalog, name=name)
    if context.user is None or not context.user.is_authenticated:
        raise ApplicationError("not_authenticated", "USE BRANCH needs a signed-in user.", status=401)
    SqlSession.objects.update_or_create(user=context.user, catalog=context.catalog, defaults={"branch": branch.name})
    return {"kind": "use_branch", "branch": branch.name, "commit": branch.head_id}


def _merge_branch(parser: _Parser, context: Context) -> Submitted:
    source = parser.name("the source branch")
    target = parser.name("the target branch") if parser.keyword("TO") else current_branch(context)
    dry_run = parser.keyword("DRY", "RUN")
    parser.end()
    job = merge_submit(catalog=context.catalog, source=source, target=target, dry_run=dry_run, user=context.user)
    return Submitted(job, {"kind": "merge_branch", "source": source, "target": target})


def _point(parser: _Parser) -> dict:
    parser.expect("TO")
    if parser.keyword("TIMESTAMP"):
        return {"timestamp": parser.string("a timestamp in quotes")}
    if parser.keyword("COMMIT"):
        return {"commit": parser.string("a commit id in quotes")}
    raise parser.error("TIMESTAMP or COMMIT")


def _restore(context: Context, **params) -> Submitted:
    job = restore_submit(catalog=context.catalog, user=context.user, **params)
    return Submitted(job, {"kind": "restore", **{k: v for k, v in params.items() if v}})


def _restore_table(parser: _Parser, context: Context) -> Submitted:
    position = parser.peek().position
    database, _, table = parser.name("a table as database.table").partition(".")
    if not table or "." in table:
        raise ApplicationError(
            "syntax_error", f"Expected a table as database.table at position {position}.",
            details={"position": position},
        )  # fmt: skip
    branch = parser.name("a branch name") if parser.keyword("ON", "BRANCH") else current_branch(context)
    point = _point(parser)
    parser.end()
    return _restore(context, branch=branch, database=database, table=table, **point)


def _restore_branch(parser: _Parser, context: Context) -> Submitted:
    branch = parser.name("a branch name")
    point = _point(parser)
    parser.end()
    return _restore(context, branch=branch, **point)


def _pick(kind: str) -> Callable[[_Parser, Context], Submitted]:
    """REVERT COMMIT / CHERRY-PICK COMMIT: one commit (a cherry-pick also a range 'from'..'to') onto a branch."""

    def command(parser: _Parser, context: Context) -> Submitted:
        commit, start, end = parser.string("a commit id in quotes"), None, None
        if kind == "cherry_pick" and parser.keyword(".."):
            start, commit, end = commit, None, parser.string("the range's last commit in quotes")
        branch = parser.name("a branch name") if parser.keyword("ON", "BRANCH") else current_branch(context)
        parser.end()
        job = pick_submit(catalog=context.catalog, kind=kind, branch=branch, commit=commit, start=start, end=end,
                          user=context.user)  # fmt: skip
        picked = {"commit": commit} if commit else {"from": start, "to": end}
        return Submitted(job, {"kind": kind, "branch": branch, **picked})

    return command


COMMANDS: dict[tuple[str, str], Callable[[_Parser, Context], dict | Submitted]] = {
    ("CREATE", "BRANCH"): _create_branch,
    ("USE", "BRANCH"): _use_branch,
    ("MERGE", "BRANCH"): _merge_branch,
    ("RESTORE", "TABLE"): _restore_table,
    ("RESTORE", "BRANCH"): _restore_branch,
    ("REVERT", "COMMIT"): _pick("revert"),
    ("CHERRY-PICK", "COMMIT"): _pick("cherry_pick"),
}


READ_ONLY = re.compile(r"\s*USE\s+BRANCH\b", re.IGNORECASE)


def sql_reads_only(statement: str) -> bool:
    """Whether a statement only reads (SELECT, USE BRANCH): what the API's role check needs to know."""
    return bool(QUERY.match(statement) or READ_ONLY.match(statement))


def sql_execute(*, catalog: Catalog, statement: str, ref: str | None, user, limit: int = 1000) -> dict | Submitted:
    """A statement's result; a command that runs as a job is answered with it at once (`Submitted`)."""
    if not statement.strip() or len(statement) > MAX_STATEMENT:
        raise ApplicationError("invalid_query", f"The statement must be 1 to {MAX_STATEMENT} characters.")
    context = Context(catalog=catalog, user=user, branch=ref)
    if QUERY.match(statement):
        return _select(context, statement, limit)
    parser = _Parser(statement)
    for words, command in COMMANDS.items():
        if parser.keyword(*words):
            return command(parser, context)
    first = parser.peek()
    raise ApplicationError(
        "unsupported_statement",
        f"{first.text.upper()!r} is not a statement here: use SELECT, CREATE BRANCH, USE BRANCH, MERGE BRANCH, "
        "RESTORE, REVERT COMMIT or CHERRY-PICK COMMIT.",
        details={"position": first.position},
    )


def sql_job_result(job: Job) -> dict[str, Any]:
    """What a statement run as a job answers once the job has finished, as the statement's job (a SELECT Spark
    answers, merge, restore, revert or cherry-pick) names it: the statement's kind and refs, then the job's result.
    For the SQL console, which follows the job it submitted."""
    params = job.params or {}
    if job.kind == SELECT_JOB:
        statement = {"kind": "select", "ref": params.get("ref"), "commit": params.get("commit")}
    elif job.kind == MergeSpec.KIND:
        merge = MergeSpec.from_params(params)
        statement = {"kind": "merge_branch", "source": merge.source, "target": merge.target}
    elif job.kind == RestoreSpec.KIND:
        restore = RestoreSpec.from_params(params)
        statement = {"kind": "restore", "branch": restore.branch, "database": restore.database, "table": restore.table}
    elif job.kind == PickSpec.KIND:
        pick = PickSpec.from_params(params)
        statement = {"kind": pick.kind, "branch": pick.branch, "commits": list(pick.commits)}
    else:
        raise ApplicationError("invalid_input", f"Job {job.id} is not one a SQL statement runs.")
    return {**{k: v for k, v in statement.items() if v is not None}, **(job.result or {})}


def _select(context: Context, statement: str, limit: int) -> dict:
    """A SELECT's first `limit` rows: answered here when the statement is one `quick_select` answers exactly
    (a small table, a statement in its subset), else by Spark on the interactive worker: submitted, answered at once
    with its job (`Submitted`), whose result is the rows once it has finished."""
    resolved = ref_resolve(catalog=context.catalog, ref=current_branch(context))
    here = quick_select(chain=commit_chain(resolved.commit), statement=statement)
    if here is not None:
        rows = here.rows[: min(limit, sql.MAX_SELECT_ROWS)]
        return {"kind": "select", "ref": resolved.name, "commit": resolved.commit.id, "columns": here.columns,
                "rows": rows, "truncated": len(here.rows) > len(rows)}  # fmt: skip
    params = {"commit": resolved.commit.id, "statement": statement, "limit": limit, "ref": resolved.name}
    job = job_create(kind=SELECT_JOB, params=params, requested_by=context.user)
    return Submitted(job, {"kind": "select", "ref": resolved.name, "commit": resolved.commit.id})
