"""The `lakeui` command: exit 0 on success, 1 when LakeUI refused (the message says why), 2 on a usage error."""

import json
import os
import sys
import warnings

import click
import httpx
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from lakeui_client.client import Client, config_path
from lakeui_client.errors import ApiError, LakeUIError

MODE = {"json": False}
# Without a terminal (a pipe, a file, a script), tables are as wide as their values: no id or name is cut with "…".
UNCUT = None if sys.stdout.isatty() else 100_000
err = Console(stderr=True, highlight=False)
out = Console(highlight=False, width=UNCUT)  # colors say what they say in the UI, not rich's guesses at numbers


def make_client() -> Client:
    return Client()  # LAKEUI_URL and LAKEUI_TOKEN, else the saved login


NULL = "null"  # as the UI shows a null value


def cell(value: object, null: str = NULL) -> str:
    """A value as a table cell: JSON values as JSON (`false`, `{"dry_run": false}`), a null as the UI shows it
    (or as `null` says, e.g. a dash where a null means "not yet" or "does not apply")."""
    if value is None:
        return null
    if isinstance(value, dict | list | tuple | bool):
        return json.dumps(value, default=str)
    return str(value)


def emit(ctx: click.Context, data, columns: list[str], null: str = NULL) -> None:
    if ctx.obj["json"]:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    rows = data if isinstance(data, list) else [data]
    table = Table(*columns)
    for row in rows:
        table.add_row(*(cell(row[c], null) if c in row else "" for c in columns))
    out.print(table)


JOB_STATES = {"succeeded": "green", "failed": "bold red", "cancelled": "yellow"}


def summary(value: object) -> str:
    """A job result's value on one line: `objects 1, conflicts 0` for a mapping, items joined for a list."""
    if isinstance(value, dict):
        return ", ".join(f"{key} {summary(item)}" for key, item in value.items()) or "-"
    if isinstance(value, list | tuple):
        return ", ".join(summary(item) for item in value) or "-"
    return cell(value)


def show_job(ctx: click.Context, job: dict) -> None:
    """A finished job: its id, kind and state on one line, then its result one field a line (`--json`: the job as
    the API gives it)."""
    if ctx.obj["json"]:
        click.echo(json.dumps(job, indent=2, default=str))
        return
    state = painted(job["status"], JOB_STATES.get(job["status"]))
    out.print(Text.assemble(f"job {job['id']} ({job['kind']}): ", state))
    if job.get("error_code"):
        out.print(painted(f"  {job['error_code']}: {job.get('error_message') or ''}", "red"))
    for key, value in (job.get("result") or {}).items():
        out.print(Text(f"  {key}: {summary(value)}"))


@click.group()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output")
@click.pass_context
def cli(ctx: click.Context, as_json: bool) -> None:
    ctx.obj = {"json": as_json}
    MODE["json"] = as_json  # main() reports a refusal after the context is gone


@cli.command()
@click.argument("url")
@click.option("--token", prompt=True, hide_input=True)
def login(url: str, token: str) -> None:
    """Save URL and token in the user's config directory (readable by the user only)."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"url": url, "token": token}, handle)
    os.chmod(path, 0o600)
    click.echo(f"saved to {path}")


def ref_commands(group: click.Group, *, listed, deleted, pointer: str) -> None:
    """The `list` and `delete` commands branches and tags share; `create` differs (a branch starts --from a ref,
    a tag names the ref it points at)."""

    @group.command("list")
    @click.argument("catalog")
    @click.pass_context
    def ref_list(ctx, catalog):
        emit(ctx, listed(make_client(), catalog), ["name", pointer, "created_at"])

    @group.command("delete")
    @click.argument("catalog")
    @click.argument("name")
    def ref_delete(catalog, name):
        deleted(make_client(), catalog, name)


@cli.group()
def branch() -> None:
    """Branches of a catalog."""


@branch.command("create")
@click.argument("catalog")
@click.argument("name")
@click.option("--from", "source", default=None)
@click.pass_context
def branch_create(ctx, catalog, name, source):
    emit(ctx, make_client().branch_create(catalog, name, source=source), ["name", "head"])


PROTECTION_COLUMNS = ["id", "pattern", "required_approvals", "required_checks", "require_queue"]


@branch.command("protect")
@click.argument("catalog")
@click.argument("pattern")
@click.option("--approvals", "required_approvals", type=int, default=1, show_default=True,
              help="Approvals a merge request into a matching branch needs")  # fmt: skip
@click.option("--required-check", "required_checks", multiple=True,
              help="An external check (e.g. ci/build) that must succeed on the source head; repeatable")  # fmt: skip
@click.option("--require-queue", is_flag=True, help="Merge requests merge only through the branch's merge queue")
@click.pass_context
def branch_protect(ctx, catalog, pattern, required_approvals, required_checks, require_queue):
    """Protect the branches matching PATTERN (main, release/*): written only by approved merge requests (admins)."""
    rule = make_client().branch_protect(catalog, pattern, required_approvals, list(required_checks),
                                        require_queue=require_queue)  # fmt: skip
    emit(ctx, rule, PROTECTION_COLUMNS)


@branch.command("protections")
@click.argument("catalog")
@click.pass_context
def branch_protections(ctx, catalog):
    """The catalog's protected-branch rules."""
    emit(ctx, make_client().protected_branches(catalog), PROTECTION_COLUMNS)


@branch.command("unprotect")
@click.argument("catalog")
@click.argument("rule_id", type=int)
def branch_unprotect(catalog, rule_id):
    """Remove a protected-branch rule (admins)."""
    make_client().branch_unprotect(catalog, rule_id)


@cli.group()
def tag() -> None:
    """Tags of a catalog."""


@tag.command("create")
@click.argument("catalog")
@click.argument("name")
@click.argument("ref")
@click.pass_context
def tag_create(ctx, catalog, name, ref):
    emit(ctx, make_client().tag_create(catalog, name, ref), ["name", "commit"])


ref_commands(branch, listed=Client.branches, deleted=Client.branch_delete, pointer="head")
ref_commands(tag, listed=Client.tags, deleted=Client.tag_delete, pointer="commit")


@cli.command()
@click.argument("catalog")
@click.argument("ref")
@click.pass_context
def log(ctx, catalog, ref):
    """Commits of a ref, newest first."""
    emit(ctx, make_client().commits(catalog, ref), ["id", "message", "created_at"])


@cli.group()
def job() -> None:
    """Jobs."""


@job.command("wait")
@click.argument("job_id")
@click.pass_context
def job_wait(ctx, job_id):
    show_job(ctx, make_client().wait(job_id))


def waiting(ctx: click.Context, submit) -> dict:
    """Run a job-returning call with a progress bar fed by the job's progress (none with --json, nor without a
    terminal: a bar drawn to a pipe leaves a blank line before an error)."""
    if ctx.obj["json"] or not err.is_terminal:
        return submit(None)
    with Progress(console=err, transient=True) as bar:
        task = bar.add_task("queued", total=100)

        def show(job: dict) -> None:
            bar.update(
                task, completed=job.get("progress") or 0, description=job.get("progress_message") or job["status"]
            )

        return submit(show)


@cli.command()
@click.argument("catalog")
@click.argument("branch")
@click.argument("table")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--strategy", default="append_only", show_default=True)
@click.option("--key", "keys", multiple=True, help="Key column (repeat for several)")
@click.option("--format", "file_format", type=click.Choice(["parquet", "csv", "json"]), default=None)
@click.pass_context
def load(ctx, catalog, branch, table, file, strategy, keys, file_format):
    """Load a Parquet, CSV or JSON-lines FILE into db.table on BRANCH."""
    fields = {"strategy": strategy, **({"key_columns": list(keys)} if keys else {})}
    fields |= {"format": file_format} if file_format else {}
    job = waiting(ctx, lambda show: make_client().load(catalog, branch, table, file=file, progress=show, **fields))
    show_job(ctx, job)


override_option = click.option(
    "--override-checks", metavar="REASON", default=None,
    help="Admins: merge through failed checks, for this reason (kept in the audit log)",
)  # fmt: skip


def resolution_options(command):
    command = click.option(
        "--resolution", "resolution_json", metavar="JSON", default=None,
        help='The whole resolution as JSON (see "Merging branches"); --source-wins, --target-wins, --column add to it',
    )(command)  # fmt: skip
    command = click.option(
        "--column", "columns", metavar="[DB.TABLE.]COLUMN=RULE", multiple=True,
        help="Settle a primary-key table's conflicting cells of COLUMN by RULE: source_wins, target_wins, base, "
        "greatest, least, sum_of_changes, concat, concat:SEPARATOR or expr:SQL over base., source. and target. "
        "columns (repeatable; the table from --table if not named)",
    )(command)  # fmt: skip
    command = click.option("--table", "rules_table", metavar="DB.TABLE", default=None,
                           help="The table --column COLUMN=RULE names")(command)  # fmt: skip
    command = click.option("--target-wins", is_flag=True, help="Settle data conflicts by keeping the target's")(command)
    return click.option("--source-wins", is_flag=True, help="Settle data conflicts with the source's")(command)


def column_rule(spec: str, table: str | None) -> tuple[str, str, object]:
    """`[db.table.]column=rule` (rule `concat:SEP` for a separator of its own, `expr:SQL` for an expression, e.g.
    `amount=expr:greatest(source.amount, target.amount) + 1`) as (table, column, rule)."""
    name, equals, rule = spec.partition("=")
    if not equals or not name or not rule:
        raise click.UsageError(f"--column takes [DB.TABLE.]COLUMN=RULE, not {spec!r}")
    parts = name.split(".")
    if len(parts) == 3:
        table, column = f"{parts[0]}.{parts[1]}", parts[2]
    elif len(parts) == 1 and table:
        column = parts[0]
    else:
        raise click.UsageError(f"--column {spec!r}: name the table as DB.TABLE.COLUMN, or give --table")
    if rule.startswith("concat:"):
        return table, column, {"concat": {"separator": rule[len("concat:") :]}}
    if rule.startswith("expr:"):
        return table, column, {"expression": rule[len("expr:") :]}
    return table, column, rule


@cli.command()
@click.argument("catalog")
@click.argument("source")
@click.option("--into", "target", required=True)
@click.option("--dry-run", is_flag=True)
@resolution_options
@override_option
@click.pass_context
def merge(
    ctx, catalog, source, target, dry_run, source_wins, target_wins, rules_table, columns, resolution_json,
    override_checks,
):  # fmt: skip
    """Merge SOURCE into the branch --into, waiting for the job; a conflict is refused (exit 1) unless
    --source-wins or --target-wins settles it (the resolution's `default`, see "Merging branches"), and so is a
    merge a check guarding --into fails (`checks_failed`) unless an admin gives --override-checks. Conflicting
    cells of a primary-key table can be settled per column: --column sales.orders.amount=greatest, or by an
    expression: --column "sales.orders.amount=expr:target.amount + source.amount - base.amount"."""
    fields = _resolution(source_wins, target_wins, columns, rules_table, resolution_json)
    fields |= {"override_checks": override_checks}
    job = waiting(
        ctx, lambda show: make_client().merge(catalog, source, target, dry_run=dry_run, progress=show, **fields)
    )
    show_job(ctx, job)


def _resolution(
    source_wins: bool, target_wins: bool, columns=(), rules_table: str | None = None, resolution_json: str | None = None
) -> dict:
    """The `resolution` field of --resolution JSON, --source-wins / --target-wins (at most one: the default) and
    each --column rule (the table's `columns`)."""
    if source_wins and target_wins:
        raise click.UsageError("give at most one of --source-wins and --target-wins")
    try:
        resolution = json.loads(resolution_json) if resolution_json else {}
    except json.JSONDecodeError as bad:
        raise click.UsageError(f"--resolution is not JSON: {bad}") from None
    if not isinstance(resolution, dict):
        raise click.UsageError("--resolution is a JSON object")
    strategy = "source_wins" if source_wins else "target_wins" if target_wins else None
    if strategy:
        resolution["default"] = strategy
    for spec in columns:
        table, column, rule = column_rule(spec, rules_table)
        tables = resolution.setdefault("tables", {})
        given = tables.get(table)
        given = {"choice": given} if isinstance(given, str) else dict(given or {})
        given["columns"] = {**given.get("columns", {}), column: rule}
        tables[table] = given
    return {"resolution": resolution} if resolution else {}


@cli.command()
@click.argument("catalog")
@click.argument("commit")
@click.option("--on", "branch", required=True, help="The branch whose history holds COMMIT")
@resolution_options
@click.pass_context
def revert(ctx, catalog, commit, branch, source_wins, target_wins, rules_table, columns, resolution_json):
    """Undo COMMIT on the branch --on (a merge commit: what the merge brought): one new commit, or nothing. A
    later change of what COMMIT wrote is a conflict (exit 1) unless --source-wins or --target-wins settles it."""
    fields = _resolution(source_wins, target_wins, columns, rules_table, resolution_json)
    job = waiting(ctx, lambda show: make_client().revert(catalog, branch, commit, progress=show, **fields))
    show_job(ctx, job)


@cli.command("cherry-pick")
@click.argument("catalog")
@click.argument("commits")
@click.option("--on", "branch", required=True, help="The branch to apply the commit(s) to")
@resolution_options
@click.pass_context
def cherry_pick(ctx, catalog, commits, branch, source_wins, target_wins, rules_table, columns, resolution_json):
    """Apply COMMITS (one commit of any ref, or a range FROM..TO) onto the branch --on: one new commit per
    commit, all or none."""
    start, dots, end = commits.partition("..")
    picked = {"start": start, "end": end} if dots else {"commit": commits}
    if dots and not (start and end):
        raise click.UsageError("a range is FROM..TO")
    fields = _resolution(source_wins, target_wins, columns, rules_table, resolution_json) | picked
    job = waiting(ctx, lambda show: make_client().cherry_pick(catalog, branch, progress=show, **fields))
    show_job(ctx, job)


@cli.command()
@click.argument("catalog")
@click.argument("statement")
@click.option("--branch", default=None)
@click.pass_context
def sql(ctx, catalog, statement, branch):
    """Run a SQL statement (SELECT, CREATE/USE/MERGE BRANCH)."""
    result = make_client().sql(catalog, statement, branch=branch)
    if ctx.obj["json"] or result.get("kind") != "select":
        click.echo(json.dumps(result, indent=2, default=str))
        return
    columns = [c["name"] if isinstance(c, dict) else str(c) for c in result["columns"]]
    table = Table(*columns)
    for row in result["rows"]:
        values = row.values() if isinstance(row, dict) else row
        table.add_row(*(str(v) for v in values))
    out.print(table)


# The colors of the UI's diff page (frontend/static/frontend/app.css): ok green, conflict red, conditional or
# discarded amber. A pair is "conditional" when a note (A1-A6, a starred cell) decided it rather than a plain cell.
SHADES = {"ok": "green", "conflict": "bold red", "conditional": "yellow", "discarded": "yellow"}
# The rule tables by the section numbers the API names them with (docs/merge-semantics.md#databases and
# #tables-without-a-primary-key).
RULE_TABLES = {"database": "4.2 (databases)", "table": "4.3 (tables)"}
CHANGES = {"insert": "green", "delete": "red", "update": "yellow"}
CHANGE_LABELS = {"insert": "added", "delete": "deleted", "update": "changed"}  # the review pages' words


def shade(pair: dict) -> str:
    if pair["verdict"] in ("conflict", "discarded"):
        return pair["verdict"]
    return "ok" if pair["cell"] == "ok" else "conditional"


def painted(text: object, style: str | None) -> Text:
    return Text(cell(text), style=style or "")


@cli.command()
@click.argument("catalog")
@click.argument("source")
@click.argument("other", required=False)
@click.option("--into", "target", default=None, help="The target branch (default: the catalog's default branch)")
@click.option("--table", default=None, help="db.table: the rows that differ instead of the objects")
@click.option("--rows", is_flag=True, help="The changed rows of every table from SOURCE to OTHER (any two refs)")
@click.option("--page", default=1, show_default=True, help="With --table: the page of changed rows")
@click.pass_context
def diff(ctx, catalog, source, other, target, table, rows, page):
    """What merging SOURCE into --into would do: the changed objects and, for each pair of operations of the two
    sides, the rule cell that decides it, colored as in the UI. With --table, the table's data diff; with --rows,
    `lakeui diff --rows CATALOG A B` compares any two refs (branches, tags, commit ids) row by row, every table."""
    client = make_client()
    target = other or target or client.catalog(catalog)["default_branch"]
    if table or rows:
        # Two refs: from the first to the second. A merge (--into): what the source changed since the common
        # ancestor, i.e. what merging it brings to the target (its rows "added" to it), as the review pages show it.
        start, end = (source, target) if other else (client.diff(catalog, source, target)["base"], source)
    if table:
        found = client.data_diff(catalog, start, end, table, page=page)
        if ctx.obj["json"]:
            return click.echo(json.dumps(found, indent=2, default=str))
        return show_data_diff(found, source if other else "the ancestor", end, table)
    if rows:
        tables = client.diff_rows(catalog, start, end)
        if ctx.obj["json"]:
            return click.echo(json.dumps(tables, indent=2, default=str))
        if other:
            out.print(f"from [bold]{source}[/bold] to [bold]{target}[/bold]: {len(tables)} changed table(s)")
        else:
            out.print(
                f"merging [bold]{source}[/bold] into [bold]{target}[/bold]: the rows {source} changed since the common "
                f"ancestor {start[:12]}, {len(tables)} changed table(s)"
            )
        for found in tables:
            if "rows" not in found or isinstance(found["rows"], str):
                out.print(f"[bold]{found['table']}[/bold] {found['change']}")
                continue
            show_data_diff(found, source if other else "the ancestor", end, found["table"])
        return None
    if other:
        raise click.UsageError("a second ref is for --rows (any two refs); a merge diff takes --into BRANCH")
    found = client.diff(catalog, source, target)
    if ctx.obj["json"]:
        return click.echo(json.dumps(found, indent=2, default=str))
    show_diff(found)


@cli.command()
@click.argument("catalog")
@click.option("--from", "source", required=True, help="The ref the changes are against (branch, tag or commit)")
@click.option("--to", "target", required=True, help="The ref whose state they lead to")
@click.option("--table", default=None, help="db.table: only this table")
@click.option("--limit", default=None, type=int, help="At most this many records")
@click.pass_context
def changes(ctx, catalog, source, target, table, limit):
    """The row changes of --to's state against --from's (any two refs), every changed table or --table: one record
    per changed key (a table without a key: its inserted and deleted rows), with the commit that made each and the
    merge and merge request that brought it. --json prints the records as JSON lines, one per record."""
    client = make_client()
    records = client.changes(catalog, source, target, table=table)
    if limit is not None:
        records = (record for _, record in zip(range(limit), records, strict=False))
    show_changes(ctx, records, source, target)


def show_changes(ctx: click.Context, records, source: str, target: str) -> None:
    """Change records as a table under a line naming the two refs (`--json`: one JSON record a line)."""
    if ctx.obj["json"]:
        for record in records:
            click.echo(json.dumps(record, default=str))
        return
    listed = Table("table", "change", "key", "before", "after", "changed", "commit", "merge")
    count = 0
    for record in records:
        count += 1
        style = CHANGES.get(record["change"])
        merge = record["merge"][:12] if record["merge"] else ""
        if record["merge_request"] is not None:
            merge += f" (!{record['merge_request']})"
        listed.add_row(
            record["table"], painted(CHANGE_LABELS.get(record["change"], record["change"]), style),
            *(cell(record[side]) if record[side] is not None else "" for side in ("key", "before", "after")),
            ", ".join(record["changed"]),
            (record["commit"] or "")[:12], merge,
        )  # fmt: skip
    out.print(f"from [bold]{source}[/bold] to [bold]{target}[/bold]: {count} change(s)")
    if count:
        out.print(listed)


@cli.group()
def subscription() -> None:
    """Named cursors on a branch's changes: read the batch since the cursor, then acknowledge it."""


@subscription.command("create")
@click.argument("catalog")
@click.argument("name")
@click.option("--branch", required=True)
@click.option("--table", "tables", multiple=True, help="db.table (repeat for several; none: every table)")
@click.pass_context
def subscription_create(ctx, catalog, name, branch, tables):
    emit(ctx, make_client().subscription_create(catalog, name, branch, tables=tables), SUBSCRIPTION_COLUMNS)


SUBSCRIPTION_COLUMNS = ["name", "branch", "tables", "cursor", "lag_commits", "pending_batch"]


@subscription.command("list")
@click.argument("catalog")
@click.pass_context
def subscription_list(ctx, catalog):
    emit(ctx, make_client().subscriptions(catalog), SUBSCRIPTION_COLUMNS)


@subscription.command("read")
@click.argument("catalog")
@click.argument("name")
@click.option("--ack", "acknowledge", is_flag=True, help="Acknowledge the batch once printed")
@click.pass_context
def subscription_read(ctx, catalog, name, acknowledge):
    """The batch of changes since the subscription's cursor (the same batch until acknowledged), then its token:
    `lakeui subscription ack CATALOG NAME TOKEN` once applied, or --ack to acknowledge it as soon as printed."""
    client = make_client()
    batch = client.subscription_batch(catalog, name)
    show_changes(ctx, batch["records"], batch["source"][:12], batch["target"][:12])
    if acknowledge:
        client.subscription_ack(catalog, name, batch["ack"])
    elif not ctx.obj["json"]:
        out.print(f"acknowledge with: lakeui subscription ack {catalog} {name} {batch['ack']}")


@subscription.command("ack")
@click.argument("catalog")
@click.argument("name")
@click.argument("token")
@click.pass_context
def subscription_ack(ctx, catalog, name, token):
    emit(ctx, make_client().subscription_ack(catalog, name, token), SUBSCRIPTION_COLUMNS)


@subscription.command("delete")
@click.argument("catalog")
@click.argument("name")
def subscription_delete(catalog, name):
    make_client().subscription_delete(catalog, name)


@cli.command()
@click.argument("catalog")
@click.argument("ref")
@click.argument("table")
@click.option("--key", default=None, help="One key: a JSON array of its values ([9]), or a one-column key's value")
@click.option("--history", is_flag=True, help="Every version of --key at the ref, newest first")
@click.option("--page", default=1, type=int)
@click.option("--page-size", default=50, type=int)
@click.pass_context
def blame(ctx, catalog, ref, table, key, history, page, page_size):
    """Who wrote the values TABLE (db.table) holds at REF: per key and cell (a table without a key: per row), the
    commit that wrote it, its branch and author, and the merges (with their merge requests and approvers) and picks
    that brought it to REF. With --key --history, every version of that key."""
    client = make_client()
    wanted = None
    if key is not None:
        try:
            wanted = json.loads(key)
        except ValueError:
            wanted = key  # a bare string key
    if history:
        if wanted is None:
            raise click.UsageError("--history needs --key")
        found = client.key_history(catalog, ref, table, wanted)
        if ctx.obj["json"]:
            return click.echo(json.dumps(found, indent=2, default=str))
        listed = Table("change", "row", "changed", "commit", "branch", "author", "brought by")
        for version in found["versions"]:
            listed.add_row(
                version["change"], cell(version["row"]), ", ".join(version["changed"]),
                *_blamed(version, found["commits"]),
            )  # fmt: skip
        out.print(f"[bold]{table}[/bold] key {cell(found['key'])} at [bold]{ref}[/bold] ({found['commit'][:12]})")
        return out.print(listed)
    found = client.blame(catalog, ref, table, key=wanted, page=page, page_size=page_size)
    if ctx.obj["json"]:
        return click.echo(json.dumps(found, indent=2, default=str))
    keyed = bool(found["table"]["primary_key"])
    listed = Table("key" if keyed else "row", "column" if keyed else "", "value" if keyed else "", "commit", "branch",
                   "author", "brought by")  # fmt: skip
    for result in found["results"]:
        if keyed:
            for name, writer in result["cells"].items():
                listed.add_row(cell(result["key"]), name, cell(result["row"][name]), *_blamed(writer, found["commits"]))
        else:
            listed.add_row(cell(result["row"]), "", "", *_blamed(result, found["commits"]))
    out.print(f"[bold]{table}[/bold] at [bold]{ref}[/bold] ({found['commit'][:12]}): {found['count']} row(s)")
    out.print(listed)


def _blamed(writer: dict, commits: dict) -> list[str]:
    """A writer as table cells: its commit, branch and author, and each merge or pick that brought it."""
    made = commits.get(writer["commit"] or "", {})
    steps = []
    for step in writer["chain"]:
        link = commits.get(step, {})
        text = f"{link.get('kind', 'merge')} {step[:12]}"
        if link.get("merge_request") is not None:
            text += f" !{link['merge_request']}"
        if link.get("approved_by"):
            text += f" approved by {', '.join(link['approved_by'])}"
        steps.append(text)
    if writer.get("resolution"):
        steps.insert(0, "resolved by the merge")
    kept = [("kept by", k) for k in writer.get("kept_by") or []]  # a key's history: resolutions that kept a version
    for verb, settled in [("settled by", writer.get("settled_by")), *kept]:
        if settled:
            rule = settled["choice"] if isinstance(settled["choice"], str) else json.dumps(settled["choice"])
            scope = settled["scope"] + (f" {settled['column']}" if settled.get("column") else "")
            steps.append(f"{verb} {rule} ({scope}) in {settled['merge'][:12]}, chosen by {settled.get('chosen_by')}")
    kind = made.get("kind", "")
    commit = (writer["commit"] or "")[:12] + (f" ({kind})" if kind not in ("", "commit") else "")
    return [commit, made.get("branch") or "", made.get("author") or "", "; ".join(steps)]


def show_diff(found: dict) -> None:
    source, target, counts = found["source"], found["target"], found["counts"]
    out.print(
        f"[bold]{source['ref']}[/bold] ({source['head'][:12]}) into [bold]{target['ref']}[/bold] "
        f"({target['head'][:12]}), base {found['base'][:12]}"
    )
    if found.get("up_to_date"):
        out.print("[green]up to date: nothing to merge[/green]")
    mergeable = "[green]mergeable[/green]" if found["mergeable"] else f"[bold red]{counts['conflicts']} conflict(s)[/]"
    out.print(f"{counts['objects']} changed object(s), {mergeable}")
    if not found["objects"]:
        return
    objects = Table("kind", "name", "change", "verdict", "source ops", "target ops")
    for obj in found["objects"]:
        objects.add_row(
            obj["kind"], obj["name"], obj["change"], painted(obj["verdict"], SHADES.get(obj["verdict"])),
            ", ".join(op["op"] for op in obj["source_operations"]) or "-",
            ", ".join(op["op"] for op in obj["target_operations"]) or "-",
        )  # fmt: skip
    out.print(objects)
    for obj in found["objects"]:
        if not obj["pairs"] and not obj["conflicts"]:
            continue
        cells = Table(
            "src \\ dest",
            "cell",
            "verdict",
            "note",
            "reason",
            title=f"{obj['name']}: rule table {RULE_TABLES.get(obj['rule_table'], '-')}",
        )
        for pair in obj["pairs"]:
            style = SHADES[shade(pair)]
            verdict = pair["verdict"] + (" (resolved)" if pair.get("resolved") else "")
            cells.add_row(
                f"{pair['row']} x {pair['column']}", painted(pair["cell"], style), painted(verdict, style),
                pair["note"] if pair["note"] != pair["cell"] else "", pair["reason"],
            )  # fmt: skip
        if obj["pairs"]:
            out.print(cells)
        for conflict in obj["conflicts"]:
            out.print(painted(f"  conflict ({conflict['note']}): {conflict['reason']}", "red"))


def show_data_diff(found: dict, source: str, target: str, table: str) -> None:
    counts = found["counts"]
    out.print(
        f"[bold]{table}[/bold] from {source} to {target}: [green]{counts['insert']} added[/green], "
        f"[red]{counts['delete']} deleted[/red], [yellow]{counts['update']} changed[/yellow]"
    )
    names = [c["name"] for c in found["columns"]]
    rows = Table("change", *names)
    for row in found["rows"]:
        style = CHANGES.get(row["change"])
        cells = []
        for i, name in enumerate(names):
            before = None if row["before"] is None else row["before"][i]
            after = None if row["after"] is None else row["after"][i]
            if name in row["cells"]:
                cells.append(painted(f"{cell(before)} -> {cell(after)}", "bold yellow"))
            else:
                cells.append(painted(before if row["after"] is None else after, style))
        rows.add_row(painted(CHANGE_LABELS.get(row["change"], row["change"]), style), *cells)
    if found["rows"]:
        out.print(rows)
    if found.get("pages", 1) > 1:
        out.print(f"page {found['page']} of {found['pages']} ({found['total']} changed rows; --page N for more)")


@cli.command()
@click.argument("catalog")
@click.argument("branch")
@click.option("--table", default=None, help="db.table: restore only this table")
@click.option("--commit", default=None, help="A commit id (or a prefix of 8+ hex digits)")
@click.option("--at", "timestamp", default=None, help="ISO 8601: the branch as it was then")
@click.pass_context
def restore(ctx, catalog, branch, table, commit, timestamp):
    """Restore BRANCH (or one --table on it) to --commit or --at: one new commit."""
    if (commit is None) == (timestamp is None):
        raise click.UsageError("give exactly one of --commit and --at")
    job = waiting(
        ctx,
        lambda show: make_client().restore(catalog, branch, table=table, commit=commit, at=timestamp, progress=show),
    )
    show_job(ctx, job)


@cli.group()
def mr() -> None:
    """Merge requests and their reviews."""


MR_COLUMNS = ["number", "source", "target", "title", "state", "author"]


def check_line(run: dict) -> str:
    """One check of a merge request: a SQL check's verdict and row count, a CI status's description and link."""
    advisory = " (advisory)" if run.get("advisory") else ""
    if run.get("kind") == "sql":
        count = "" if run.get("row_count") is None else f", {run['row_count']} row(s)"
        return f"{run['name']}: {run['state']}{advisory}{count}"
    return " ".join(filter(None, [f"{run['name']}: {run['state']}", run.get("description"), run.get("url")]))


def show_merge_request(ctx: click.Context, found: dict) -> None:
    if ctx.obj["json"]:
        return click.echo(json.dumps(found, indent=2, default=str))
    out.print(
        f"[bold]!{found['number']}[/bold] {found['title']} ({found['source']} into {found['target']}): {found['state']}"
    )
    if found["state"] == "merged":
        commit = (found.get("merge_commit") or "")[:12]
        out.print(
            f"merged by {found.get('merged_by') or '-'} at {found.get('merged_at') or '-'}, commit {commit or '-'}"
        )
    elif found["state"] == "closed":
        out.print(f"closed at {found.get('closed_at') or '-'}")
    status = found.get("status") or {}
    if status and found["state"] == "open":  # what blocks a merge is said of an open request only
        verdict = "[green]mergeable[/green]" if status["mergeable"] else "[red]not mergeable[/red]"
        approvals = (
            f"approved by {', '.join(status['approved_by']) or 'nobody'} ({status['required_approvals']} required)"
        )
        conflicts = f"{len(status['conflicts'])} conflicting object(s)"
        out.print(f"{verdict}, {approvals}, {conflicts}")
        for blocker in status["blockers"]:
            out.print(painted(f"  {blocker['code']}: {blocker['message']}", "red"))
        for check in status.get("checks") or []:
            out.print(painted(f"  check {check_line(check)}", STATES.get(check["state"])))
    for review in found.get("reviews", []):
        style = "green" if review["decision"] == "approve" else "yellow"
        dismissed = " (dismissed)" if review["dismissed_at"] else ""
        out.print(painted(f"  {review['reviewer']}: {review['decision']}{dismissed} {review['comment']}", style))


@mr.command("open")
@click.argument("catalog")
@click.argument("source")
@click.option("--into", "target", required=True)
@click.option("--title", required=True)
@click.option("--description", default="")
@click.pass_context
def mr_open(ctx, catalog, source, target, title, description):
    """Open a request to merge SOURCE into --into; waits for its merge plan."""
    found = waiting(
        ctx, lambda show: make_client().merge_request_open(catalog, source, target, title, description, progress=show)
    )
    show_merge_request(ctx, found)


@mr.command("list")
@click.argument("catalog")
@click.option("--state", type=click.Choice(["open", "merged", "closed"]), default=None)
@click.pass_context
def mr_list(ctx, catalog, state):
    emit(ctx, make_client().merge_requests(catalog, state=state), MR_COLUMNS)


@mr.command("show")
@click.argument("catalog")
@click.argument("number", type=int)
@click.pass_context
def mr_show(ctx, catalog, number):
    """The request, whether it can merge (and what blocks it) and its reviews."""
    show_merge_request(ctx, make_client().merge_request(catalog, number))


def review_command(name: str, decision: str) -> None:
    @mr.command(name)
    @click.argument("catalog")
    @click.argument("number", type=int)
    @click.option("--comment", default="")
    @click.pass_context
    def review(ctx, catalog, number, comment):
        found = make_client().merge_request_review(catalog, number, decision, comment)
        emit(ctx, found, ["id", "reviewer", "decision", "comment"])


review_command("approve", "approve")
review_command("request-changes", "request_changes")


@mr.command("merge")
@click.argument("catalog")
@click.argument("number", type=int)
@override_option
@click.pass_context
def mr_merge(ctx, catalog, number, override_checks):
    """Merge the request, waiting for the merge job; refused (exit 1) while a blocker stands. An admin's
    --override-checks lifts `checks_failed` (not `checks_pending`)."""
    job = waiting(
        ctx,
        lambda show: make_client().merge_request_merge(catalog, number, override_checks=override_checks, progress=show),
    )
    show_job(ctx, job)


def cell_pick(spec: str, table: str | None) -> tuple[str, str, str, dict]:
    """`[DB.TABLE]KEY.COLUMN=VALUE`, KEY the key's values as a JSON list (`[9]`, `["eu",9]`), VALUE JSON (a string
    if it is not JSON) or `pick:base|source|target`, as (table, key id, column, pick)."""
    name, equals, value = spec.partition("=")
    start = name.find("[")
    end = name.rfind("]")
    if not equals or start < 0 or end < start or not name[end + 1 :].startswith("."):
        raise click.UsageError(f"--cell takes [DB.TABLE]KEY.COLUMN=VALUE with KEY a JSON list, not {spec!r}")
    table = name[:start] or table
    if not table:
        raise click.UsageError(f"--cell {spec!r}: name the table as DB.TABLE[KEY].COLUMN, or give --table")
    try:
        key = json.loads(name[start : end + 1])
    except json.JSONDecodeError:
        raise click.UsageError(f"--cell {spec!r}: the key {name[start : end + 1]} is not a JSON list") from None
    key_id = json.dumps(key, separators=(",", ":"))
    column = name[end + 2 :]
    if value.startswith("pick:"):
        return table, key_id, column, {"pick": value[len("pick:") :]}
    try:
        return table, key_id, column, {"value": json.loads(value)}
    except json.JSONDecodeError:
        return table, key_id, column, {"value": value}


@mr.command("resolve")
@click.argument("catalog")
@click.argument("number", type=int)
@resolution_options
@click.option(
    "--cell", "cells", metavar="[DB.TABLE]KEY.COLUMN=VALUE", multiple=True,
    help="Settle one conflicting cell: KEY the key's values as a JSON list, VALUE a JSON value (or text), or "
    "pick:base, pick:source, pick:target (repeatable; the table from --table if not named)",
)  # fmt: skip
@click.pass_context
def mr_resolve(ctx, catalog, number, source_wins, target_wins, rules_table, columns, resolution_json, cells):
    """Choose how the request's conflicts are settled: --source-wins / --target-wins (the default), --column
    [DB.TABLE.]COLUMN=RULE per column of a primary-key table (`COLUMN=` with --table; a rule of `null` takes a
    column's rule back only through --resolution), --cell '[9].amount=12' per conflicting cell, or the whole
    --resolution JSON. Each choice is kept with who made it; one that changes the merge, and any cell picked,
    dismisses the approvals given. `lakeui mr resolution` previews the merged cells."""
    fields = _resolution(source_wins, target_wins, columns, rules_table, resolution_json)
    for spec in cells:
        table, key_id, column, pick = cell_pick(spec, rules_table)
        picks = fields.setdefault("resolution", {}).setdefault("cells", {}).setdefault(table, {})
        picks.setdefault(key_id, {})[column] = pick
    if not fields:
        raise click.UsageError("give --source-wins, --target-wins, --column, --cell or --resolution")
    show_merge_request(ctx, make_client().merge_request_resolve(catalog, number, fields["resolution"]))


PREVIEW_COLUMNS = ["key", "column", "base", "source", "target", "result", "rule", "by"]


def _rule_shown(cell: dict) -> str:
    stale = cell.get("stale_pick")
    return f"stands (stale pick: {stale})" if stale else cell["rule"]


@mr.command("resolution")
@click.argument("catalog")
@click.argument("number", type=int)
@click.option("--table", default=None, help="DB.TABLE (default: the first primary-key table in conflict)")
@click.option("--offset", type=int, default=0)
@click.option("--limit", type=int, default=50)
@click.pass_context
def mr_resolution(ctx, catalog, number, table, offset, limit):
    """The merged cells the request's resolution would produce, per conflicting key and cell: base, source, target,
    the result and the rule (or pick) that made it; `stands` where nothing settles a cell."""
    found = make_client().merge_request_resolution(catalog, number, table=table, offset=offset, limit=limit)
    if ctx.obj["json"]:
        click.echo(json.dumps(found, indent=2, default=str))
        return
    preview = found["preview"] or {"keys": [], "table": None, "count": 0}
    if not found["current"]:
        out.print("[yellow]The plan for the current heads and resolution is being made: ask again.[/]")
    out.print(f"{preview['table'] or 'no table in conflict'}: {preview['count']} conflicting key(s)")
    rows = [{"key": key["key_id"], "column": column, **values, "rule": _rule_shown(values)}
            for key in preview["keys"] for column, values in key["cells"].items()]  # fmt: skip
    emit(ctx, rows, PREVIEW_COLUMNS)


MR_CHECK_COLUMNS = ["kind", "name", "state", "advisory", "row_count", "commit", "url", "description", "message"]


@mr.command("checks")
@click.argument("catalog")
@click.argument("number", type=int)
@click.pass_context
def mr_checks(ctx, catalog, number):
    """The request's checks on its current heads: each SQL check's newest run and each external status."""
    show_runs(ctx, make_client().merge_request_checks(catalog, number), MR_CHECK_COLUMNS)


@mr.command("check")
@click.argument("catalog")
@click.argument("number", type=int)
@click.option("--name", required=True, help="The external check's name, e.g. ci/build")
@click.option("--state", required=True, type=click.Choice(["pending", "success", "failure", "error"]))
@click.option("--url", default="", help="Where the check's details are (http or https)")
@click.option("--description", default="")
@click.option("--head", required=True, help="The source head the status is for (what CI tested): refused if it moved")
@click.pass_context
def mr_check(ctx, catalog, number, name, state, url, description, head):
    """Post an external check's status for the source head it tested (what a CI system does; approvers, not the
    request's author)."""
    posted = make_client().merge_request_check_post(catalog, number, name, state, url, description, head=head)
    emit(ctx, posted, ["name", "state", "commit", "url", "description"])


QUEUE_COLUMNS = ["position", "number", "title", "source", "state", "rebuilds", "reason", "message"]


def queue_rows(entries: list[dict]) -> list[dict]:
    return [{**entry, "number": entry["merge_request"]["number"], "title": entry["merge_request"]["title"],
             "source": entry["merge_request"]["source"]} for entry in entries]  # fmt: skip


@mr.command("queue")
@click.argument("catalog")
@click.argument("number", type=int, required=False)
@click.option("--leave", is_flag=True, help="Take the request out of the queue (its author or an admin)")
@click.option("--branch", default=None, help="Show this branch's queue instead")
@click.pass_context
def mr_queue(ctx, catalog, number, leave, branch):
    """Merge when ready: put request NUMBER in its target's merge queue (or take it out with --leave); with
    --branch, show that branch's queue: each entry's position, state and, once it left, its reason."""
    client = make_client()
    if branch is not None:
        shown = client.branch_queue(catalog, branch)
        return emit(ctx, queue_rows(shown["entries"] + shown["recent"]), QUEUE_COLUMNS, null="-")
    if number is None:
        raise click.UsageError("Give a merge request NUMBER, or --branch to show a queue.")
    entry = client.merge_request_dequeue(catalog, number) if leave else client.merge_request_queue(catalog, number)
    emit(ctx, queue_rows([entry])[0], QUEUE_COLUMNS, null="-")


@cli.group()
def webhook() -> None:
    """A catalog's webhooks and their deliveries (admins only)."""


WEBHOOK_COLUMNS = ["id", "url", "events", "active", "created_by"]
DELIVERY_COLUMNS = ["id", "event", "status", "attempts", "response_status", "duration_ms", "error", "created_at"]
SECRET_HELP = "the signing secret (16+ characters); or set LAKEUI_WEBHOOK_SECRET, which no process list shows"


@webhook.command("list")
@click.argument("catalog")
@click.pass_context
def webhook_list(ctx, catalog):
    emit(ctx, make_client().webhooks(catalog), WEBHOOK_COLUMNS)


@webhook.command("show")
@click.argument("catalog")
@click.argument("webhook_id", type=int)
@click.pass_context
def webhook_show(ctx, catalog, webhook_id):
    emit(ctx, make_client().webhook(catalog, webhook_id), WEBHOOK_COLUMNS)


@webhook.command("create")
@click.argument("catalog")
@click.argument("url")
@click.option("--event", "events", multiple=True, default=["*"], show_default=True, help="an event kind, repeatable")
@click.option("--secret", envvar="LAKEUI_WEBHOOK_SECRET", default=None, help=SECRET_HELP + "; made if not given")
@click.option("--inactive", is_flag=True, help="add it switched off")
@click.pass_context
def webhook_create(ctx, catalog, url, events, secret, inactive):
    """Add a webhook sending EVENTs to URL; a secret LakeUI makes is printed this once."""
    created = make_client().webhook_create(catalog, url, list(events), secret, active=not inactive)
    emit(ctx, created, WEBHOOK_COLUMNS + (["secret"] if "secret" in created else []))


@webhook.command("update")
@click.argument("catalog")
@click.argument("webhook_id", type=int)
@click.option("--url", default=None)
@click.option("--event", "events", multiple=True, help="an event kind, repeatable: replaces the list")
@click.option("--secret", envvar="LAKEUI_WEBHOOK_SECRET", default=None, help=SECRET_HELP)
@click.option("--active/--inactive", default=None)
@click.pass_context
def webhook_update(ctx, catalog, webhook_id, url, events, secret, active):
    fields = {"url": url, "events": list(events) or None, "secret": secret, "active": active}
    changed = make_client().webhook_update(catalog, webhook_id, **{k: v for k, v in fields.items() if v is not None})
    emit(ctx, changed, WEBHOOK_COLUMNS)


@webhook.command("delete")
@click.argument("catalog")
@click.argument("webhook_id", type=int)
def webhook_delete(catalog, webhook_id):
    make_client().webhook_delete(catalog, webhook_id)


@webhook.command("deliveries")
@click.argument("catalog")
@click.argument("webhook_id", type=int)
@click.pass_context
def webhook_deliveries(ctx, catalog, webhook_id):
    """The webhook's deliveries, newest first, with the last answer of each."""
    emit(ctx, make_client().webhook_deliveries(catalog, webhook_id), DELIVERY_COLUMNS)


@webhook.command("delivery")
@click.argument("catalog")
@click.argument("webhook_id", type=int)
@click.argument("delivery_id")
@click.pass_context
def webhook_delivery(ctx, catalog, webhook_id, delivery_id):
    """One delivery: its body and every attempt."""
    emit(ctx, make_client().webhook_delivery(catalog, webhook_id, delivery_id), [*DELIVERY_COLUMNS, "attempts_log"])


@webhook.command("redeliver")
@click.argument("catalog")
@click.argument("webhook_id", type=int)
@click.argument("delivery_id")
@click.pass_context
def webhook_redeliver(ctx, catalog, webhook_id, delivery_id):
    """Send a delivery's event again (a new delivery, same event id)."""
    emit(ctx, make_client().webhook_redeliver(catalog, webhook_id, delivery_id), DELIVERY_COLUMNS)


@cli.group()
def check() -> None:
    """A catalog's SQL checks, which merges into the branches they guard must pass (admins change and run them)."""


CHECK_COLUMNS = ["id", "name", "branches", "max_rows", "advisory", "version", "tables", "sql"]
RUN_COLUMNS = ["id", "state", "advisory", "row_count", "commit", "duration_ms", "reused_from", "created_at", "message"]
STATES = {"success": "green", "failure": "bold red", "error": "bold red", "pending": "yellow"}


def show_runs(ctx: click.Context, runs: list[dict], columns: list[str]) -> None:
    """Check runs as a table, their state coloured (`--json`: as the API gives them)."""
    if ctx.obj["json"]:
        click.echo(json.dumps(runs, indent=2, default=str))
        return
    table = Table(*columns)
    for run in runs:
        style = STATES.get(run["state"])
        table.add_row(
            *(painted("" if run.get(c) is None else run[c], style if c == "state" else None) for c in columns)
        )
    out.print(table)


def show_run(ctx: click.Context, run: dict) -> None:
    """A run: its verdict and, when it found rows, the first of them as a table."""
    if ctx.obj["json"]:
        return click.echo(json.dumps(run, indent=2, default=str))
    style = STATES.get(run["state"])
    count = "" if run.get("row_count") is None else f", {run['row_count']} row(s)"
    out.print(Text.assemble((run["name"], "bold"), ": ", (run["state"], style or ""),
                            f"{count} on {run['commit']}"))  # fmt: skip
    if run.get("message"):
        out.print(painted(run["message"], style))
    if run.get("reused_from"):
        out.print(f"the result of run {run['reused_from']} (its tables did not change)")
    rows = run.get("failing_rows") or []
    if rows:
        names = [c["name"] if isinstance(c, dict) else str(c) for c in run.get("columns") or []]
        table = Table(*names, title="rows found" if run["state"] == "success" else "failing rows")
        for row in rows:
            values = row.values() if isinstance(row, dict) else row
            table.add_row(*(str(v) for v in values))
        out.print(table)
        if run.get("row_count") and run["row_count"] > len(rows):
            out.print(f"the first {len(rows)} of {run['row_count']} rows")


def emit_checks(ctx: click.Context, found) -> None:
    """Checks as a table, each one's tables named plainly (`sales.orders, sales.refunds`)."""
    if ctx.obj["json"]:
        return emit(ctx, found, CHECK_COLUMNS)
    rows = found if isinstance(found, list) else [found]
    emit(ctx, [{**row, "tables": ", ".join(row.get("tables") or [])} for row in rows], CHECK_COLUMNS)


@check.command("list")
@click.argument("catalog")
@click.pass_context
def check_list(ctx, catalog):
    emit_checks(ctx, make_client().checks(catalog))


@check.command("show")
@click.argument("catalog")
@click.argument("check_id", type=int)
@click.pass_context
def check_show(ctx, catalog, check_id):
    emit_checks(ctx, make_client().check(catalog, check_id))


@check.command("create")
@click.argument("catalog")
@click.argument("name")
@click.option("--branches", required=True, help="The target branches it guards: a name or a pattern (release/*)")
@click.option("--sql", required=True, help="One SELECT over database.table names")
@click.option("--max-rows", type=click.IntRange(min=0), default=0, show_default=True, help="The rows it may return")
@click.option("--advisory", is_flag=True, help="Report only: never refuse a merge")
@click.pass_context
def check_create(ctx, catalog, name, branches, sql, max_rows, advisory):
    """Add a check NAME: merges into --branches pass only if --sql returns at most --max-rows rows."""
    emit_checks(ctx, make_client().check_create(catalog, name, branches, sql, max_rows=max_rows, advisory=advisory))


@check.command("update")
@click.argument("catalog")
@click.argument("check_id", type=int)
@click.option("--name", default=None)
@click.option("--branches", default=None)
@click.option("--sql", default=None, help="A new statement: a new version of the check")
@click.option("--max-rows", type=click.IntRange(min=0), default=None)
@click.option("--advisory/--blocking", default=None, help="Report only, or refuse merges it fails")
@click.pass_context
def check_update(ctx, catalog, check_id, name, branches, sql, max_rows, advisory):
    fields = {"name": name, "branches": branches, "sql": sql, "max_rows": max_rows, "advisory": advisory}
    changes = {k: v for k, v in fields.items() if v is not None}
    if not changes:
        raise click.UsageError("nothing to change: give --name, --branches, --sql, --max-rows or --advisory/--blocking")
    emit_checks(ctx, make_client().check_update(catalog, check_id, **changes))


@check.command("delete")
@click.argument("catalog")
@click.argument("check_id", type=int)
def check_delete(catalog, check_id):
    make_client().check_delete(catalog, check_id)


@check.command("run")
@click.argument("catalog")
@click.argument("check_id", type=int)
@click.option("--ref", required=True, help="A branch, tag or commit id to run the check on")
@click.pass_context
def check_run(ctx, catalog, check_id, ref):
    """Run a check on --ref now, waiting for it: its verdict and the rows it found. A failing check is a
    result, not an error (exit 0; its `state` says failure)."""
    show_run(ctx, waiting(ctx, lambda show: make_client().check_run(catalog, check_id, ref, progress=show)))


@check.command("runs")
@click.argument("catalog")
@click.argument("check_id", type=int)
@click.pass_context
def check_runs(ctx, catalog, check_id):
    """The check's runs, newest first (a merge's, a merge request's and those run by hand)."""
    show_runs(ctx, make_client().check_runs(catalog, check_id), RUN_COLUMNS)


@check.command("run-show")
@click.argument("catalog")
@click.argument("run_id")
@click.pass_context
def check_run_show(ctx, catalog, run_id):
    """One run with its first failing rows (a refused merge names its runs' ids)."""
    show_run(ctx, make_client().check_run_get(catalog, run_id))


@cli.group()
def retention() -> None:
    """Retention rules: how long branches and tags keep time travel (admins)."""


RULE_COLUMNS = ["pattern", "keep_days", "keep_commits"]
PLAN_COLUMNS = ["ref", "kind", "rule", "commits_expiring", "oldest_kept", "files_reclaimed", "bytes_reclaimed",
                "must_keep", "kept_for_other_refs"]  # fmt: skip


def rule_parse(spec: str) -> dict:
    """`PATTERN`, `PATTERN=3d`, `PATTERN=50c` or `PATTERN=3d,50c`: keep everything, 3 days, 50 commits, or both."""
    pattern, _, keep = spec.rpartition("=") if "=" in spec else (spec, "", "")
    rule: dict = {"pattern": pattern}
    for part in filter(None, keep.split(",")):
        number, unit = part[:-1], part[-1:]
        if not number.isdigit() or unit not in ("d", "c"):
            raise click.BadParameter(f"{spec!r}: keep is like 3d (days), 50c (commits) or 3d,50c", param_hint="RULE")
        rule["keep_days" if unit == "d" else "keep_commits"] = int(number)
    if not pattern:
        raise click.BadParameter(f"{spec!r}: the rule needs a pattern (scratch/*=3d)", param_hint="RULE")
    return rule


@retention.command("show")
@click.argument("catalog")
@click.pass_context
def retention_show(ctx, catalog):
    emit(ctx, make_client().retention(catalog), RULE_COLUMNS)


@retention.command("set")
@click.argument("catalog")
@click.argument("rules", nargs=-1)
@click.pass_context
def retention_set(ctx, catalog, rules):
    """Replace the rules with RULES, first match wins: `'scratch/*=3d' 'release/*=50c' main` (none: keep all)."""
    emit(ctx, make_client().retention_set(catalog, [rule_parse(r) for r in rules]), RULE_COLUMNS)


def show_plan(ctx: click.Context, plan: dict) -> None:
    if ctx.obj["json"]:
        return emit(ctx, plan, [])
    rows = [{**ref, "rule": (ref["rule"] or {}).get("pattern", "(keep all)"),
             "oldest_kept": (ref["oldest_kept"] or {}).get("created_at", ""), "must_keep": len(ref["must_keep"])}
            for ref in plan["refs"]]  # fmt: skip
    emit(ctx, rows, PLAN_COLUMNS)
    out.print(f"{plan['commits_expiring']} commits expire; {plan['files_reclaimed']} files, "
              f"{plan['bytes_reclaimed']} bytes reclaimed by GC after it")  # fmt: skip


@retention.command("preview")
@click.argument("catalog")
@click.argument("rules", nargs=-1)
@click.pass_context
def retention_preview(ctx, catalog, rules):
    """What an expiry would remove now, per branch and tag: by RULES if given, else by the saved rules."""
    proposed = [rule_parse(r) for r in rules] if rules else None
    show_plan(ctx, make_client().retention_preview(catalog, proposed))


@retention.command("expire")
@click.argument("catalog")
@click.pass_context
def retention_expire(ctx, catalog):
    """Expire by the saved rules now (a job), then show what went; run `gc` to reclaim the files."""
    show_plan(ctx, waiting(ctx, lambda show: make_client().retention_expire(catalog, progress=show))["result"])


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    err.print(f"[yellow]warning:[/yellow] {message}", highlight=False)


def show_refusing_checks(error: LakeUIError) -> None:
    """Under a `checks_failed` / `checks_pending` refusal, each check that stopped it, with the run to look at."""
    details = getattr(error, "details", None)
    if getattr(error, "code", None) not in ("checks_failed", "checks_pending") or not isinstance(details, dict):
        return
    for run in details.get("checks") or []:
        if run.get("advisory") or run.get("state") == "success":
            continue
        count = "" if run.get("row_count") is None else f", {run['row_count']} row(s)"
        where = f", run {run['id']} (lakeui check run-show)" if run.get("kind") == "sql" and run.get("id") else ""
        err.print(painted(f"  {run['name']}: {run['state']}{count}{where}", STATES.get(run.get("state"))))


def field_errors(details: object, path: str = "") -> list[str]:
    """A refusal's per-field details (`invalid_input`: `{field: [messages]}`, nested for nested fields) as lines."""
    if isinstance(details, dict):
        nested = ((value, f"{path}.{key}" if path else str(key)) for key, value in details.items())
        return [line for value, where in nested for line in field_errors(value, where)]
    if isinstance(details, list) and all(isinstance(item, str) for item in details):
        return [f"{path or 'request'}: {item}" for item in details]
    if isinstance(details, list):
        return [line for i, item in enumerate(details) for line in field_errors(item, f"{path}[{i}]")]
    return [f"{path or 'request'}: {details}"]


def show_field_errors(error: LakeUIError) -> None:
    """Under an `invalid_input` refusal ("see details for each field"), each field and what is wrong with it."""
    if getattr(error, "code", None) == "invalid_input" and getattr(error, "details", None):
        for line in field_errors(error.details):
            err.print(Text(f"  {line}"))


def main() -> None:
    warnings.showwarning = show_warning
    try:
        cli.main(standalone_mode=False)
    except click.UsageError as error:  # also click.BadParameter, NoSuchOption
        error.show()
        sys.exit(2)
    except click.Abort:
        sys.exit(1)
    except LakeUIError as error:  # the API's code first: "error: merge_conflict: ..."
        if MODE["json"] and isinstance(error, ApiError):  # scripts read the API's error object on stderr
            refusal = {"code": error.code, "message": error.message, "details": error.details, "status": error.status}
            click.echo(json.dumps(refusal, indent=2, default=str), err=True)
        else:
            err.print(Text.assemble(("error: ", "red"), str(error)))
            show_field_errors(error)
            show_refusing_checks(error)
        sys.exit(1)
    except httpx.HTTPError as error:
        err.print(Text.assemble(("error: ", "red"), f"cannot reach LakeUI: {error}"))
        sys.exit(1)
