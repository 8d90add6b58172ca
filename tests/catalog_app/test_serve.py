"""`manage.py serve` (what `make run` starts) keeps serving when a worker dies: the dead worker is started again and
finishes the job it held, while the web server answers throughout."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from catalog_app.management.commands.serve import exit_reason
from lakeui.jobs.models import Job
from tests.conftest import wait_for_job
from tests.support.catalogs import make_catalog, make_table
from tests.support.worker import database_url

ROOT = Path(__file__).resolve().parents[2]


def test_exit_reasons_are_words():
    assert exit_reason(-9) == "killed by SIGKILL"
    assert exit_reason(1) == "exited with code 1"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _children(pid: int) -> dict[int, str]:
    """{pid: command line} of the processes whose parent is `pid`."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == pid:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
    return found


class Prober(threading.Thread):
    """Asks the web server for the catalog list every 0.2 s and keeps each answer's status (0: no answer)."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__(daemon=True)
        self.request = urllib.request.Request(url, headers={"Authorization": f"Token {token}"})
        self.statuses: list[int] = []
        self.stopped = threading.Event()

    def answer(self) -> int:
        try:
            with urllib.request.urlopen(self.request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code
        except OSError:
            return 0

    def run(self) -> None:
        while not self.stopped.wait(0.2):
            self.statuses.append(self.answer())


@pytest.mark.django_db(transaction=True)
def test_a_killed_jobs_worker_is_started_again_and_finishes_its_job_while_the_web_answers(user, tmp_path):
    catalog = make_catalog()
    make_table(catalog)
    token = Token.objects.get_or_create(user=user)[0].key
    port, queue = _free_port(), f"serve-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "lakeui.settings.test",
        "DATABASE_URL": database_url(dict(connection.settings_dict)),
        "LAKEUI_QUEUE": queue,  # not the session workers' queues: only serve's workers take these jobs
        "LAKEUI_INTERACTIVE_QUEUE": f"{queue}-interactive",
        "LAKEUI_JOB_STALE_AFTER": "4",  # the dead worker's job is sent again within about 6 s
        "WEB_CONCURRENCY": "1",
        "LAKEUI_WEB_THREADS": "2",
    }
    log = tmp_path / "serve.log"
    with log.open("w") as output:
        serve = subprocess.Popen(
            [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}"], cwd=ROOT, env=env,
            stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}/api/v1"
    prober = Prober(f"{base}/catalogs", token)
    try:
        deadline = time.monotonic() + 90
        while prober.answer() != 200 or log.read_text().count(" ready.") < 2:
            assert serve.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
        prober.start()
        load = urllib.request.Request(
            f"{base}/catalogs/{catalog.name}/refs/main/databases/sales/tables/orders/load",
            data=json.dumps({"strategy": "append_only", "rows": [{"id": 1, "amount": 10, "region": "eu"}]}).encode(),
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(load, timeout=30) as response:
            job_id = json.loads(response.read())["id"]
        while Job.objects.get(id=job_id).status != Job.Status.RUNNING:  # the worker holds it (starting Spark)
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        (jobs_worker,) = [pid for pid, command in _children(serve.pid).items() if "jobs@" in command]
        os.kill(jobs_worker, signal.SIGKILL)

        job = wait_for_job(job_id, timeout=180)
        assert job.status == Job.Status.SUCCEEDED, (job.error_code, job.error_message, log.read_text()[-3000:])
        assert job.attempts == 2  # the killed worker's attempt, then the new worker's
        assert job.result["rows_inserted"] == 1
        assert f"jobs worker (pid {jobs_worker}) killed by SIGKILL; starting it again" in log.read_text()
        assert serve.poll() is None
        new_worker = [pid for pid, command in _children(serve.pid).items() if "jobs@" in command]
        assert new_worker and new_worker != [jobs_worker]
    finally:
        prober.stopped.set()
        groups = set(_children(serve.pid))  # each process serve started leads a process group of its own
        os.kill(serve.pid, signal.SIGTERM)
        serve.wait(timeout=60)
    assert prober.statuses and set(prober.statuses) == {200}, prober.statuses  # answered throughout
    assert len(groups) == 3 and not _in_groups(groups)  # SIGTERM stopped every process, pools and Spark JVMs too


def _in_groups(groups: set[int]) -> list[int]:
    """The live processes (not zombies) of these process groups."""
    alive = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) in groups:
            alive.append(int(entry.name))
    return alive


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_serve_started_with_sigint_ignored_stops_its_processes_on_sigint_or_sigterm(db, tmp_path, stop):
    """A script that runs `make run` in the background starts it with SIGINT ignored (as a non-interactive shell
    does): SIGINT stops it all the same, as SIGTERM does, and every process it started goes with it."""
    port, queue = _free_port(), f"serve-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ, "DJANGO_SETTINGS_MODULE": "lakeui.settings.test",
        "DATABASE_URL": database_url(dict(connection.settings_dict)), "LAKEUI_QUEUE": queue,
        "LAKEUI_INTERACTIVE_QUEUE": f"{queue}-interactive", "WEB_CONCURRENCY": "1", "LAKEUI_WEB_THREADS": "1",
    }  # fmt: skip
    log = tmp_path / "serve.log"
    with log.open("w") as output:
        serve = subprocess.Popen(
            [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}"], cwd=ROOT, env=env, stdout=output,
            stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while log.read_text().count(" ready.") < 2 or len(_children(serve.pid)) < 3:
            assert serve.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
        groups = set(_children(serve.pid))
        os.kill(serve.pid, stop)
        assert serve.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        for group in {serve.pid, *_children(serve.pid)} if serve.poll() is None else ():  # each its own group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
    assert "Stopping the web server and the workers" in log.read_text()
    assert len(groups) == 3 and not _in_groups(groups)
