"""Many LakeUI drivers share one Spark cluster: a standalone master and one 2-core worker started from the pyspark
wheel, the jobs worker (two processes, two drivers) and the interactive worker (a third driver) on it at once. Each
driver takes only its share and gives idle executors back, so two loads, a merge and previews all finish.

Slow (a cluster and three drivers start): run with LAKEUI_CLUSTER_TESTS=1 (docs/operations.md#sharing-a-spark-cluster)."""

import json
import os
import socket
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pyspark
import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings

from catalog_app.services.refs import branch_create
from lakeui.jobs.models import Job
from tests.conftest import wait_for_job
from tests.support.catalogs import make_catalog, make_table
from tests.support.sql import sql_answer
from tests.support.worker import Worker

pytestmark = [
    pytest.mark.skipif(os.environ.get("LAKEUI_CLUSTER_TESTS") != "1", reason="set LAKEUI_CLUSTER_TESTS=1"),
    pytest.mark.django_db(transaction=True),
]

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
TABLE = "/api/v1/catalogs/lake/refs/{ref}/databases/sales/tables/{table}"


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for probe in sockets:
        probe.bind(("127.0.0.1", 0))
    ports = [probe.getsockname()[1] for probe in sockets]
    for probe in sockets:
        probe.close()
    return ports


def _master_state(webui: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=10) as answer:
        return json.loads(answer.read())


@pytest.fixture
def cluster(tmp_path):
    """A standalone master and one worker of 2 cores; yields (master URL, master web UI port). Stops the two
    processes it started, by pid."""
    port, webui, worker_webui = _free_ports(3)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    master_command = [str(SPARK_CLASS), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                      "--port", str(port), "--webui-port", str(webui)]  # fmt: skip
    worker_command = [str(SPARK_CLASS), "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                      "--cores", "2", "--memory", "3g", "--host", "127.0.0.1", "--webui-port", str(worker_webui),
                      "--work-dir", str(tmp_path / "work")]  # fmt: skip
    started = []
    try:
        with (tmp_path / "master.log").open("w") as log:
            started.append(subprocess.Popen(master_command, env=env, stdout=log, stderr=subprocess.STDOUT))
        with (tmp_path / "worker.log").open("w") as log:
            started.append(subprocess.Popen(worker_command, env=env, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 120
        while True:
            try:
                if _master_state(webui)["cores"] == 2:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-3000:]
            time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}", webui
    finally:
        for process in reversed(started):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def workers(cluster, tmp_path):
    """The jobs worker (2 processes) and the interactive worker, as `make run` starts them, on the cluster and on
    queues of their own."""
    master, _ = cluster
    queue = f"cluster-{uuid.uuid4().hex[:8]}"
    env = {"SPARK_MASTER": master, "SPARK_LOCAL_IP": "127.0.0.1", "LAKEUI_SPARK_EXECUTOR_IDLE_TIMEOUT": "3s",
           "SPARK_DRIVER_MEMORY": "1g", "LAKEUI_SPARK_EXECUTOR_MEMORY": "768m",
           "LAKEUI_QUEUE": queue, "LAKEUI_INTERACTIVE_QUEUE": f"{queue}-interactive"}  # fmt: skip
    db = dict(connection.settings_dict)
    jobs = Worker(db=db, log_path=tmp_path / "jobs.log", concurrency=2, env=env, queue=queue)
    interactive = Worker(db=db, log_path=tmp_path / "interactive.log", concurrency=1, env=env,
                         queue=f"{queue}-interactive")  # fmt: skip
    try:
        jobs.start()
        interactive.start()
        with override_settings(CELERY_TASK_DEFAULT_QUEUE=queue, LAKEUI_INTERACTIVE_QUEUE=f"{queue}-interactive"):
            yield jobs, interactive
    finally:
        interactive.stop()
        jobs.stop()


def _load(client, table: str, ids, ref: str = "main") -> str:
    rows = [{"id": i, "amount": i, "region": "eu"} for i in ids]
    response = client.post(TABLE.format(ref=ref, table=table) + "/load", {"strategy": "append_only", "rows": rows},
                           format="json")  # fmt: skip
    assert response.status_code == 202, response.json()
    return response.json()["id"]


def test_jobs_and_interactive_drivers_share_a_two_core_cluster(user_client, cluster, workers):
    _, webui = cluster
    catalog = make_catalog()
    make_table(catalog, table="orders")
    make_table(catalog, table="returns")
    branch_create(catalog=catalog, name="dev", source="main")
    began = time.monotonic()
    loads = [_load(user_client, "orders", range(1, 101)), _load(user_client, "returns", range(1, 51))]
    dev_load = _load(user_client, "orders", range(1000, 1010), ref="dev")
    previews = []
    for _ in range(3):  # while the loads run: SELECTs on the interactive worker's own driver
        started = time.monotonic()
        response = sql_answer(user_client, catalog, "SELECT count(*) AS n FROM sales.returns")  # its job followed
        assert response.status_code == 200, response.json()
        previews.append(time.monotonic() - started)
    for job_id in [*loads, dev_load]:
        job = wait_for_job(job_id, timeout=300)
        assert job.status == Job.Status.SUCCEEDED, (job.error_code, job.error_message)
    loaded = time.monotonic() - began
    merge = user_client.post(f"/api/v1/catalogs/{catalog.name}/merges", {"source": "dev", "target": "main"},
                             format="json")  # fmt: skip
    assert merge.status_code == 202, merge.json()
    job = wait_for_job(merge.json()["id"], timeout=300)
    assert job.status == Job.Status.SUCCEEDED, (job.error_code, job.error_message)
    response = sql_answer(user_client, catalog, "SELECT count(*) AS n FROM sales.orders")
    assert response.status_code == 200, response.json()
    assert response.json()["rows"] == [{"n": 110}] or response.json()["rows"] == [[110]], response.json()
    state = _master_state(webui)
    applications = state["activeapps"] + state["completedapps"]
    names = sorted(app["name"] for app in applications)
    assert names == ["lakeui-interactive", "lakeui-jobs", "lakeui-jobs"], names  # three drivers on the cluster
    for app in applications:  # each capped: the interactive one small
        interactive = app["name"] == "lakeui-interactive"
        cap = settings.LAKEUI_SPARK_INTERACTIVE_MAX_CORES if interactive else settings.LAKEUI_SPARK_MAX_CORES
        assert app["cores"] <= cap, app
    print(f"\ncluster: loads {loaded:.1f} s, previews {', '.join(f'{p:.1f}' for p in previews)} s, "
          f"all {time.monotonic() - began:.1f} s")  # fmt: skip
