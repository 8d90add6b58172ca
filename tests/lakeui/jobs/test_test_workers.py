"""The tests' own Celery workers end with the test process that started them, however it ends: a killed run's
workers would otherwise go on taking jobs from its broker database, which the next run on it shares."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from django.conf import settings
from django.db import connection

STARTER = """
import json, sys, time
import django
django.setup()
from pathlib import Path
from tests.support.worker import Worker
worker = Worker(db=json.loads(sys.argv[1]), log_path=Path(sys.argv[2]), concurrency=1, env={"LAKEUI_QUEUE": sys.argv[3]})
worker.start()
print(worker.process.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent's death signal is Linux's prctl")
def test_a_worker_stops_when_the_test_process_that_started_it_is_killed(tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "lakeui.settings.test"}
    db = json.dumps({k: v for k, v in connection.settings_dict.items() if k in ("NAME", "USER", "PASSWORD", "HOST",
                                                                              "PORT")})  # fmt: skip
    queue = f"lakeui-orphan-{uuid.uuid4().hex[:8]}"
    starter = subprocess.Popen([sys.executable, "-c", STARTER, db, str(tmp_path / "worker.log"), queue],
                               cwd=settings.BASE_DIR, env=env, stdout=subprocess.PIPE, text=True)  # fmt: skip
    worker = int(starter.stdout.readline())
    assert _alive(worker)
    starter.kill()  # as a timeout or a user kills a pytest run: no cleanup runs
    starter.wait()
    deadline = time.monotonic() + 60
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(worker):
        os.kill(worker, signal.SIGKILL)
        pytest.fail(f"the worker {worker} outlived the process that started it")
