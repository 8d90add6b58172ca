"""The `lakeui` command: exit 0 on success, 1 when LakeUI refused (the message says why), 2 on a usage error."""

import json
import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from lakeui_client.client import Client
from lakeui_client.errors import LakeUIError

err = Console(stderr=True)


def config_path() -> Path:
    return Path(click.get_app_dir("lakeui")) / "config.json"


def make_client() -> Client:
    url, token = os.environ.get("LAKEUI_URL"), os.environ.get("LAKEUI_TOKEN")
    if not url and config_path().exists():
        saved = json.loads(config_path().read_text())
        url, token = saved.get("url"), token or saved.get("token")
    return Client(url=url, token=token)


def emit(ctx: click.Context, data, columns: list[str]) -> None:
    if ctx.obj["json"]:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    rows = data if isinstance(data, list) else [data]
    table = Table(*columns)
    for row in rows:
        table.add_row(*(str(row.get(c, "")) for c in columns))
    Console().print(table)


@click.group()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output")
@click.pass_context
def cli(ctx: click.Context, as_json: bool) -> None:
    ctx.obj = {"json": as_json}


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


@cli.group()
def branch() -> None:
    """Branches of a catalog."""


@branch.command("list")
@click.argument("catalog")
@click.pass_context
def branch_list(ctx, catalog):
    emit(ctx, make_client().branches(catalog), ["name", "head", "created_at"])


@branch.command("create")
@click.argument("catalog")
@click.argument("name")
@click.option("--from", "source", default=None)
@click.pass_context
def branch_create(ctx, catalog, name, source):
    emit(ctx, make_client().branch_create(catalog, name, source=source), ["name", "head"])


@branch.command("delete")
@click.argument("catalog")
@click.argument("name")
def branch_delete(catalog, name):
    make_client().branch_delete(catalog, name)


@cli.group()
def tag() -> None:
    """Tags of a catalog."""


@tag.command("list")
@click.argument("catalog")
@click.pass_context
def tag_list(ctx, catalog):
    emit(ctx, make_client().tags(catalog), ["name", "commit", "created_at"])


@tag.command("create")
@click.argument("catalog")
@click.argument("name")
@click.argument("ref")
@click.pass_context
def tag_create(ctx, catalog, name, ref):
    emit(ctx, make_client().tag_create(catalog, name, ref), ["name", "commit"])


@tag.command("delete")
@click.argument("catalog")
@click.argument("name")
def tag_delete(catalog, name):
    make_client().tag_delete(catalog, name)


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
    emit(ctx, make_client().wait(job_id), ["id", "kind", "status", "result"])


def waiting(ctx: click.Context, submit) -> dict:
    """Run a job-returning call with a progress bar fed by the job's progress (none with --json)."""
    if ctx.obj["json"]:
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
    emit(ctx, job, ["id", "status", "result"])


@cli.command()
@click.argument("catalog")
@click.argument("source")
@click.option("--into", "target", required=True)
@click.option("--dry-run", is_flag=True)
@click.option("--source-wins", "strategy", flag_value="source_wins")
@click.option("--target-wins", "strategy", flag_value="target_wins")
@click.pass_context
def merge(ctx, catalog, source, target, dry_run, strategy):
    """Merge SOURCE into the branch --into."""
    fields = {"resolution": {"default": strategy}} if strategy else {}
    job = waiting(
        ctx, lambda show: make_client().merge(catalog, source, target, dry_run=dry_run, progress=show, **fields)
    )
    emit(ctx, job, ["id", "status", "result"])


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
    Console().print(table)


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.UsageError as error:  # also click.BadParameter, NoSuchOption
        error.show()
        sys.exit(2)
    except click.Abort:
        sys.exit(1)
    except LakeUIError as error:
        err.print(f"[red]error:[/red] {error}")
        sys.exit(1)
