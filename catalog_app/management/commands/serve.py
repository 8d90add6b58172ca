"""Run the web server and the Celery workers together (one for jobs, one for the interactive reads a person waits
for). A process that exits on its own (a worker killed, out of memory, crashed) is started again after a back-off,
with the reason logged, while the others keep serving; Ctrl-C or SIGTERM stops them all, and then the embedded
PostgreSQL server when the settings use it (no DATABASE_URL: lakeui/embedded_postgres.py). The web server is gunicorn
as the Docker image runs it (lakeui/gunicorn_conf.py: gthread workers sized from the cores, each on its own
listening socket)."""

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connections

from lakeui import embedded_postgres

GUNICORN = ["--config", "python:lakeui.gunicorn_conf"]
# A process that exits is started again after 1 s, then 2, 4, ... up to this; one that ran this long counts as
# healthy again (its next exit waits 1 s).
MAX_BACKOFF = 60.0
HEALTHY_AFTER = 60.0
STOP_TIMEOUT = 30.0

logger = logging.getLogger("lakeui.serve")


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def exit_reason(returncode: int) -> str:
    """How a process ended, in words: its exit code or the signal that killed it."""
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-returncode).name}"
        return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


@dataclass
class Supervised:
    """One process of the stack, in a process group of its own: when it dies, whatever it left (a Celery worker's
    pool processes, its Spark JVM) is killed with it before it is started again."""

    name: str
    command: list[str]
    process: subprocess.Popen | None = None
    started: float = 0.0
    failures: int = 0
    restart_at: float | None = None
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, start_new_session=True, env={**os.environ, **self.env})
        self.started, self.restart_at = time.monotonic(), None
        logger.info("Started %s (pid %d)", self.name, self.process.pid)

    def check(self, now: float) -> None:
        """Start the process again if it exited and its back-off has passed."""
        if self.restart_at is not None:
            if now >= self.restart_at:
                self.start()
            return
        if self.process is None or self.process.poll() is None:
            return
        self._kill_group()
        self.failures = 1 if now - self.started >= HEALTHY_AFTER else self.failures + 1
        delay = min(MAX_BACKOFF, 2.0 ** (self.failures - 1))
        self.restart_at = now + delay
        logger.error(
            "%s (pid %d) %s; starting it again in %.0f s (the other processes keep serving)",
            self.name, self.process.pid, exit_reason(self.process.returncode), delay,
        )  # fmt: skip

    def terminate(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # a Celery worker's warm shutdown, gunicorn's graceful stop

    def wait(self, deadline: float) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._kill_group()

    def _kill_group(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)


class Command(BaseCommand):
    help = (
        "Start the web server on ADDRPORT, a jobs worker and an interactive worker; start again any that dies; stop "
        "them all on Ctrl-C or SIGTERM."
    )

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")

    def handle(self, *args, addrport, **options):
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        python = sys.executable
        worker = [python, "-m", "celery", "-A", "lakeui", "worker", "--loglevel", "INFO"]
        processes = [
            Supervised(
                "jobs worker",
                [*worker, "-Q", settings.CELERY_TASK_DEFAULT_QUEUE, "-n", "jobs@%h",
                 "--concurrency", str(settings.CELERY_WORKER_CONCURRENCY)],
                env={"LAKEUI_WORKER_KIND": "jobs"},
            ),
            Supervised(
                "interactive worker",
                [*worker, "-Q", settings.LAKEUI_INTERACTIVE_QUEUE, "-n", "interactive@%h",
                 "--concurrency", str(settings.LAKEUI_INTERACTIVE_CONCURRENCY)],
                env={"LAKEUI_WORKER_KIND": "interactive"},
            ),
            Supervised("web server", [python, "-m", "gunicorn", "lakeui.wsgi", *GUNICORN, "--bind", addrport]),
        ]  # fmt: skip
        # Both stop the stack, whatever was inherited: a shell running `make run` from a script (in the background)
        # starts it with SIGINT ignored, and Python then leaves SIGINT ignored instead of raising KeyboardInterrupt.
        for stop in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop, _interrupt)
        try:
            for process in processes:
                process.start()
            while True:
                time.sleep(0.5)
                now = time.monotonic()
                for process in processes:
                    process.check(now)
        except KeyboardInterrupt:
            self.stdout.write("Stopping the web server and the workers...")
        finally:
            for stop in (signal.SIGINT, signal.SIGTERM):  # a second signal must not cut the stopping short
                signal.signal(stop, signal.SIG_IGN)
            for process in processes:
                process.terminate()
            deadline = time.monotonic() + STOP_TIMEOUT
            for process in processes:
                process.wait(deadline)
            if settings.EMBEDDED_PGDATA is not None:
                connections.close_all()
                embedded_postgres.stop(settings.EMBEDDED_PGDATA)
                self.stdout.write("Stopped the embedded PostgreSQL server.")
