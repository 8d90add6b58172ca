"""A real Celery worker in a subprocess, on the test database and the test queue."""

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

from django.conf import settings

READY_TIMEOUT = 120
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _dies_with_parent(parent: int):
    """A `preexec_fn`: the child gets SIGTERM when the test process that started it ends, however it ends (a killed
    pytest run's workers would otherwise go on taking jobs from its broker database); where prctl is missing (not
    Linux), nothing. The function is looked up before the fork: the child only calls it."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (AttributeError, OSError):
        prctl = None

    def arrange() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the test process ended before the call
            os._exit(1)

    return arrange


def database_url(db: dict) -> str:
    """The URL of `db` (a socket folder as HOST percent-encoded, as django-environ reads it back)."""
    credentials = quote(db.get("USER") or "")
    if db.get("PASSWORD"):
        credentials += ":" + quote(db["PASSWORD"])
    host = f"{credentials}@{quote(db.get('HOST') or 'localhost', safe='')}:{db.get('PORT') or 5432}"
    return f"postgres://{host}/{db['NAME']}"


class Worker:
    def __init__(
        self,
        *,
        db: dict,
        log_path: Path,
        concurrency: int = 2,
        env: dict[str, str] | None = None,
        queue: str | None = None,
    ) -> None:
        """A worker on `queue` (by default its settings' jobs queue, LAKEUI_QUEUE)."""
        self.log_path = log_path
        env = dict(os.environ, **(env or {}))
        env.update(DJANGO_SETTINGS_MODULE="lakeui.settings.test", DATABASE_URL=database_url(db))
        self.command = [sys.executable, "-m", "celery", "-A", "lakeui", "worker", "--loglevel", "INFO"]
        self.command += ["--concurrency", str(concurrency), "--include", "tests.support.jobkinds"]
        self.command += ["-Q", queue] if queue else []
        self.name = f"test-{uuid.uuid4().hex[:6]}"
        self.command += ["--hostname", f"{self.name}@%h", "--without-gossip", "--without-mingle"]
        self.env = env
        self.process: subprocess.Popen | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> "Worker":
        return self.launch().ready()

    def launch(self) -> "Worker":
        """Start the worker's process without waiting for it (`ready` waits): two workers start side by side."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                self.command,
                cwd=settings.BASE_DIR,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: kill() takes its pool and Spark JVM with it
                preexec_fn=_dies_with_parent(os.getpid()),
            )
        return self

    def ready(self) -> "Worker":
        """Wait until the launched worker consumes its queue; a worker that exits or hangs first is an error."""
        deadline = time.monotonic() + READY_TIMEOUT
        while " ready." not in self.log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"The Celery worker did not start:\n{self.log()[-4000:]}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def kill(self) -> None:
        """SIGKILL the worker's whole process group (pool processes and Spark JVM included), as a crash would."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
