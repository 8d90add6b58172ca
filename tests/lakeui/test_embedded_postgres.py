"""The embedded PostgreSQL server that `make run` and `make test` use when no DATABASE_URL is set: a real server from
the pip-installed binaries, in a folder of the test's own."""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from lakeui import embedded_postgres

ROOT = Path(__file__).resolve().parent.parent.parent


def _start_in_a_process(pgdata: Path) -> str:
    """`start` as a new process of the stack calls it (loading the settings does), printing what it answers."""
    code = "import sys; from pathlib import Path; from lakeui import embedded_postgres as e; print(e.start(Path(sys.argv[1])))"
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    done = subprocess.run([sys.executable, "-c", code, str(pgdata)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_processes_starting_together_start_one_server_with_the_database_and_stop_stops_it(embedded_pgdata):
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(_start_in_a_process, [embedded_pgdata] * 3))
    assert len(set(answers)) == 1  # one socket, one port: one server
    settings = embedded_postgres.start(embedded_pgdata)
    with psycopg.connect(host=settings["HOST"], port=settings["PORT"], user=settings["USER"], dbname="lakeui") as conn:
        assert conn.execute("SHOW server_version").fetchone()[0].startswith(str(embedded_postgres.VERSION))
        assert conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'postmaster'").fetchone()
    assert embedded_postgres.running(embedded_pgdata)

    assert embedded_postgres.stop(embedded_pgdata) is True
    assert not embedded_postgres.running(embedded_pgdata)
    assert embedded_postgres.stop(embedded_pgdata) is False  # stopping a stopped server is no error
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(
            host=settings["HOST"], port=settings["PORT"], user="postgres", dbname="lakeui", connect_timeout=3
        )


def test_a_stopped_server_starts_again_on_its_data(embedded_pgdata):
    settings = embedded_postgres.start(embedded_pgdata)
    with psycopg.connect(host=settings["HOST"], port=settings["PORT"], user="postgres", dbname="lakeui") as conn:
        conn.execute("CREATE TABLE kept (n int)")
        conn.execute("INSERT INTO kept VALUES (7)")
    embedded_postgres.stop(embedded_pgdata)

    settings = embedded_postgres.start(embedded_pgdata)
    with psycopg.connect(host=settings["HOST"], port=settings["PORT"], user="postgres", dbname="lakeui") as conn:
        assert conn.execute("SELECT n FROM kept").fetchall() == [(7,)]
