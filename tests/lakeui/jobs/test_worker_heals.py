"""A worker whose Spark JVM died builds a new one for the next job; the job that hit it fails `engine_lost`."""

import os
import signal
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection

from lakeui.jobs.models import Job
from lakeui.jobs.tasks import run_job
from tests.conftest import wait_for_job
from tests.support.worker import Worker


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


@pytest.fixture
def own_worker(transactional_db, tmp_path):
    queue = f"lakeui-heal-{uuid.uuid4().hex[:8]}"
    worker = Worker(db=dict(connection.settings_dict), log_path=tmp_path / "worker.log", concurrency=1,
                    env={"LAKEUI_QUEUE": queue})  # fmt: skip
    worker.start()
    worker.queue = queue
    yield worker
    worker.stop()


def _run(worker: Worker, params: dict) -> Job:
    job = Job.objects.create(kind="test.spark", params=params)
    run_job.apply_async(args=[str(job.id)], queue=worker.queue)
    return wait_for_job(job.id, timeout=180)


def test_next_job_succeeds_after_the_workers_jvm_was_killed(own_worker):
    first = _run(own_worker, {})
    assert first.status == Job.Status.SUCCEEDED, own_worker.log()[-4000:]
    jvm_pid = first.result["jvm_pid"]
    assert jvm_pid in _descendants(own_worker.process.pid)  # the worker's own JVM
    os.kill(jvm_pid, signal.SIGKILL)
    time.sleep(1)
    second = _run(own_worker, {"rows": 7})
    assert second.status == Job.Status.SUCCEEDED, (second.error_message, own_worker.log()[-4000:])
    assert second.result["count"] == 7
    assert second.result["jvm_pid"] != jvm_pid


def test_job_whose_jvm_dies_fails_engine_lost_and_the_next_one_succeeds(own_worker):
    lost = _run(own_worker, {"kill_jvm": True})
    assert (lost.status, lost.error_code) == (Job.Status.FAILED, "engine_lost"), lost.error_message
    assert "java" not in lost.error_message.lower() and "py4j" not in lost.error_message.lower()
    after = _run(own_worker, {"rows": 3})
    assert after.status == Job.Status.SUCCEEDED, (after.error_message, own_worker.log()[-4000:])
    assert after.result["count"] == 3
