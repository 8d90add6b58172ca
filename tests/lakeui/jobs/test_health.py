"""The health reports (docs/operations.md#health): the public one answers at once from the workers' heartbeats,
whatever the workers do; the deep one runs a shared Spark check job for signed-in users and holds no web thread
for long."""

import itertools
import json
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from datetime import timedelta

import pyspark
import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.authtoken.models import Token

from lakeui.jobs import health
from lakeui.jobs.health import DEEP_WAIT_MAX, SPARK_CHECK
from lakeui.jobs.models import Job, WorkerHeartbeat
from tests.support.worker import Worker

HEALTH, DEEP = "/api/v1/health", "/api/v1/health/deep"
# Ten anonymous clients at once (the test server queues at most ten connections), each calling again after a pause:
# a monitor's pace, not a flood (a flood of any request takes the server's CPU, which no design of health prevents).
CALLS, CALLERS, PAUSE = 50, 10, 0.2


def _get(url: str, token: str | None = None) -> tuple[int, dict, float]:
    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}"} if token else {})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    return status, json.loads(body), time.monotonic() - started


# CALLERS threads, CALLS // CALLERS calls each: [status, body, seconds] per call, as JSON on stdout.
ANONYMOUS = f"""
import json, sys, threading, time, urllib.error, urllib.request
answers = []
def call():
    for _ in range({CALLS // CALLERS}):
        started = time.monotonic()
        try:
            with urllib.request.urlopen(sys.argv[1], timeout=60) as response:
                status, body = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, body = error.code, error.read()
        answers.append([status, json.loads(body), time.monotonic() - started])
        time.sleep({PAUSE})
threads = [threading.Thread(target=call) for _ in range({CALLERS})]
print("ready", flush=True)
sys.stdin.readline()
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps(answers))
"""


@pytest.fixture(autouse=True)
def _fresh_report():
    """Each test sees its own state, not the public report another test's request made in the last second."""
    health._public_last.clear()


def _no_interactive_worker(settings) -> None:
    """Jobs for the interactive worker go to a queue no worker serves (the session's workers, if other tests started
    them, beat on: the public report may find them alive, and waits for none of them either way)."""
    settings.LAKEUI_INTERACTIVE_QUEUE = f"nobody-{uuid.uuid4().hex[:8]}"


def test_anonymous_health_calls_answer_at_once_and_do_not_slow_other_reads(live_server, user, settings):
    _no_interactive_worker(settings)
    token = Token.objects.get_or_create(user=user)[0].key
    read = f"{live_server.url}/api/v1/catalogs"
    for _ in range(3):  # warm: the first requests open connections (and the first health call its broker's)
        assert _get(read, token)[0] == 200
    assert _get(f"{live_server.url}{HEALTH}")[0] in (200, 503)
    idle = statistics.median(_get(read, token)[2] for _ in range(15))

    # The anonymous clients in a process of their own, as they would be: they share no interpreter with the server.
    callers = subprocess.Popen([sys.executable, "-c", ANONYMOUS, f"{live_server.url}{HEALTH}"], text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    assert callers.stdout.readline() == "ready\n"
    callers.stdin.write("go\n")
    callers.stdin.flush()
    meanwhile = []
    while callers.poll() is None or len(meanwhile) < 5:
        status, _, took = _get(read, token)
        assert status == 200
        meanwhile.append(took)
    answers = json.loads(callers.stdout.read())
    callers.wait()
    assert len(answers) == CALLS
    slowest = max(took for _, _, took in answers)
    assert slowest < 1.0, (
        f"a public health call took {slowest:.2f} s: {sorted(round(t, 3) for _, _, t in answers)}, meanwhile {meanwhile}, idle {idle}"
    )
    for status, body, _ in answers:
        assert (status, body["status"]) in ((200, "ok"), (503, "error")), body
        assert body["parts"]["database"]["status"] == body["parts"]["broker"]["status"] == "ok"
        assert {"jobs_worker", "interactive_worker"} <= set(body["parts"])
    # Idle measured again after: on a shared machine its load drifts; the slower of the two idle figures counts.
    idle = max(idle, statistics.median(_get(read, token)[2] for _ in range(15)))
    assert statistics.median(meanwhile) <= 2 * idle, (idle, meanwhile)
    assert not Job.objects.filter(kind=SPARK_CHECK).exists()  # the public report runs nothing

    # The deep check is for signed-in users, and answers within its wait even though no worker takes its job.
    assert _get(f"{live_server.url}{DEEP}")[0] == 401
    status, body, took = _get(f"{live_server.url}{DEEP}?timeout=1", token)
    assert took < 1 + 2, took
    assert status in (202, 503) and body["parts"]["spark"]["status"] == "pending", body
    assert _get(f"{live_server.url}{DEEP}?timeout=60", token)[0] == 400  # never longer than DEEP_WAIT_MAX


@pytest.mark.django_db
def test_health_says_clearly_that_no_worker_is_alive_and_shares_one_pending_check(api_client, user):
    # Workers of other tests may be running: their heartbeats, as this test's transaction sees them, are old.
    WorkerHeartbeat.objects.update(beat_at=timezone.now() - timedelta(hours=1))
    public = api_client.get(HEALTH)
    body = public.json()
    assert public.status_code == 503 and body["status"] == "error"
    assert set(body["parts"]) == {"database", "broker", "jobs_worker", "interactive_worker"}
    for kind in ("jobs", "interactive"):
        part = body["parts"][f"{kind}_worker"]
        assert part["status"] == "unavailable" and part["info"]["alive"] is False
        assert part["detail"].startswith(f"no {kind} worker is alive"), part

    # A check enqueued moments ago that no worker has taken (in this test's transaction, it never reaches the
    # broker): the deep check reuses it rather than enqueueing another, and says it is pending.
    pending = Job.objects.create(kind=SPARK_CHECK, params={"rows": 1000})
    assert api_client.get(DEEP).status_code == 401
    api_client.force_authenticate(user)
    started = time.monotonic()
    deep = api_client.get(DEEP, {"timeout": 0.5})
    assert time.monotonic() - started < DEEP_WAIT_MAX
    spark = deep.json()["parts"]["spark"]
    assert deep.status_code == 503 and spark["status"] == "pending"
    assert spark["info"]["job"] == str(pending.id) and str(pending.id) in spark["detail"]
    assert Job.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_fresh_worker_shows_up_in_health_with_its_spark_and_goes_when_stopped(api_client, user, tmp_path, settings):
    queue = f"health-{uuid.uuid4().hex[:8]}"
    worker = Worker(db=dict(connection.settings_dict), log_path=tmp_path / "worker.log", concurrency=1, queue=queue,
                    env={"LAKEUI_WORKER_KIND": "interactive", "LAKEUI_INTERACTIVE_QUEUE": queue})  # fmt: skip
    settings.LAKEUI_INTERACTIVE_QUEUE = queue  # the deep check's job goes to this worker
    api_client.force_authenticate(user)

    def deep(timeout: float = 0) -> tuple[int, dict]:
        response = api_client.get(DEEP, {"timeout": timeout})
        return response.status_code, response.json()

    def mine() -> list[dict]:
        processes = deep()[1]["parts"]["interactive_worker"]["info"].get("processes", [])
        return [p for p in processes if p["node"].startswith(f"{worker.name}@")]

    try:
        worker.start()
        deadline = time.monotonic() + 10
        while not mine():
            assert time.monotonic() < deadline, f"the worker's heartbeat did not show:\n{worker.log()[-3000:]}"
            time.sleep(0.2)
        [process] = mine()
        assert process["pid"] and process["hostname"]
        health._public_last.clear()
        public = api_client.get(HEALTH).json()["parts"]["interactive_worker"]
        assert public["status"] == "ok" and public["info"]["alive"] is True
        assert "processes" not in public["info"] and process["hostname"] not in public["detail"]  # for anyone
        # Its Spark starts as the process starts (LAKEUI_SPARK_WARM), and health says so.
        deadline = time.monotonic() + 180
        while not mine()[0]["spark_warm"]:
            assert time.monotonic() < deadline, f"Spark did not show as warm:\n{worker.log()[-3000:]}"
            time.sleep(0.5)
        assert mine()[0]["spark_version"] == pyspark.__version__
        # The deep check's Spark job ran on it meanwhile (one job, however often asked). (The answer is a 200 only
        # if the jobs worker is alive too: the session's is, if another test started it.)
        deadline = time.monotonic() + 120
        while (answer := deep(DEEP_WAIT_MAX))[1]["parts"]["spark"]["status"] == "pending":
            assert answer[0] in (202, 503) and time.monotonic() < deadline, answer
        spark = answer[1]["parts"]["spark"]
        assert spark["status"] == "ok" and spark["info"]["spark_version"] == pyspark.__version__, answer
        assert f"on {worker.name}@" in spark["detail"]
        assert answer[0] == (200 if answer[1]["parts"]["jobs_worker"]["status"] == "ok" else 503)
        # One job however often asked: another only once the last success is older than REUSE_SUCCESS_FOR (the
        # waits above ask every half second; a slow Spark start outlasts it, CI met two jobs 10 s apart).
        made = list(Job.objects.filter(kind=SPARK_CHECK).order_by("created_at").values_list("created_at", flat=True))
        assert made and all(b - a >= health.REUSE_SUCCESS_FOR for a, b in itertools.pairwise(made)), made
        # Its beats keep coming (the recovery timer, every LAKEUI_JOB_RECOVER_EVERY).
        first = mine()[0]["beat_at"]
        deadline = time.monotonic() + 4 * settings.LAKEUI_JOB_RECOVER_EVERY + 5
        while mine()[0]["beat_at"] == first:
            assert time.monotonic() < deadline, "the heartbeat was not renewed"
            time.sleep(0.2)
    finally:
        worker.stop()
    assert not mine()  # a worker that stops removes its heartbeat: it is not alive a moment longer


@pytest.mark.django_db(transaction=True)
def test_a_worker_whose_upkeep_is_slow_stays_alive(api_client, settings, tmp_path):
    """The heartbeat has a timer of its own: a round of upkeep that outlasts LAKEUI_JOB_STALE_AFTER (a busy
    database) does not make a live worker look dead (CI met a 503 while the interactive worker was alive)."""
    queue = f"slow-{uuid.uuid4().hex[:8]}"
    slow = settings.LAKEUI_JOB_STALE_AFTER + settings.LAKEUI_JOB_RECOVER_EVERY  # past the age of a dead worker
    worker = Worker(db=dict(connection.settings_dict), log_path=tmp_path / "worker.log", concurrency=1, queue=queue,
                    env={"LAKEUI_WORKER_KIND": "interactive", "LAKEUI_TEST_SLOW_UPKEEP": str(slow),
                         "LAKEUI_SPARK_WARM": "false"})  # fmt: skip

    def beats() -> list:
        return list(
            WorkerHeartbeat.objects.filter(node__startswith=f"{worker.name}@").values_list("beat_at", flat=True)
        )

    try:
        worker.start()
        deadline = time.monotonic() + 10
        while not beats():  # written as the worker becomes ready
            assert time.monotonic() < deadline, f"the worker's heartbeat did not show:\n{worker.log()[-3000:]}"
            time.sleep(0.2)
        seen, deadline = set(), time.monotonic() + slow + settings.LAKEUI_JOB_RECOVER_EVERY * 2
        while time.monotonic() < deadline:  # through the first slow round and into the second
            [beat] = beats() or [None]
            assert beat is not None and timezone.now() - beat < timedelta(seconds=settings.LAKEUI_JOB_STALE_AFTER), (
                f"the heartbeat went stale during a slow upkeep:\n{worker.log()[-3000:]}"
            )
            seen.add(beat)
            time.sleep(0.5)
        assert len(seen) >= slow / settings.LAKEUI_JOB_RECOVER_EVERY  # renewed every round of its own timer
    finally:
        worker.stop()
