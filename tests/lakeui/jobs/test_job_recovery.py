"""Jobs whose worker died or whose message was lost: found by the workers' recovery loop and run again."""

import os
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from catalog_app.models import Commit
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_recover, job_recover_restarted
from lakeui.jobs.tasks import run_job
from tests.conftest import wait_for_job
from tests.support.worker import Worker

worker_db = pytest.mark.django_db(transaction=True)


def _stale(settings) -> timezone.datetime:
    return timezone.now() - timedelta(seconds=settings.LAKEUI_JOB_STALE_AFTER + 5)


def _sent_again(job: Job) -> bool:
    """Whether a recovery sends the job again: this call, or the session workers' own recovery loop (every
    LAKEUI_JOB_RECOVER_EVERY seconds) just before it, which leaves it fresh, or has already run it again (another
    attempt: under load the loop's run can finish before this call). The callers check that it ran once."""
    if str(job.id) in job_recover():
        return True
    job.refresh_from_db()
    fresh = job.heartbeat_at is not None and job.heartbeat_at > _stale(settings) + timedelta(seconds=5)
    return fresh or job.attempts > 1


@worker_db
def test_running_job_of_a_dead_worker_is_sent_again_and_runs_once(celery_worker, settings, tmp_path):
    marker = tmp_path / "runs.txt"
    job = Job.objects.create(kind="test.count", params={"path": str(marker)}, status=Job.Status.RUNNING,
                             heartbeat_at=_stale(settings), worker="dead/abc", attempts=1)  # fmt: skip
    assert _sent_again(job)
    job = wait_for_job(job.id, timeout=60)
    assert (job.status, job.attempts, job.result) == (Job.Status.SUCCEEDED, 2, {"runs": 1})
    assert marker.read_text().count("run ") == 1


@worker_db
def test_queued_job_whose_message_was_lost_is_sent_again(celery_worker, settings, tmp_path):
    marker = tmp_path / "runs.txt"
    job = Job.objects.create(kind="test.count", params={"path": str(marker)})  # never sent: a lost message
    Job.objects.filter(id=job.id).update(created_at=_stale(settings))
    assert _sent_again(job)
    assert str(job.id) not in job_recover()  # just sent: not sent again before another LAKEUI_JOB_STALE_AFTER
    job = wait_for_job(job.id, timeout=60)
    assert job.status == Job.Status.SUCCEEDED
    assert marker.read_text().count("run ") == 1


@worker_db
def test_a_restarted_worker_takes_back_at_once_the_jobs_its_earlier_run_held(celery_worker, tmp_path):
    """A worker node that starts again (a supervisor restarting it under its name) sends again the running jobs
    its earlier run claimed, however fresh their heartbeat: that run is dead. Its own run's jobs, and other nodes'
    (a name that merely begins alike too), are left alone."""
    marker = tmp_path / "runs.txt"
    fresh = {"status": Job.Status.RUNNING, "heartbeat_at": timezone.now(), "attempts": 1}
    earlier = Job.objects.create(kind="test.count", params={"path": str(marker)}, worker="jobs@vm/run1/abc", **fresh)
    current = Job.objects.create(kind="test.echo", worker="jobs@vm/run2/def", **fresh)
    others = [Job.objects.create(kind="test.echo", worker=name, **fresh) for name in ("jobs@vm2/run1/x", "web/y")]
    assert job_recover_restarted(node="jobs@vm", run="run2") == [str(earlier.id)]
    assert job_recover_restarted(node="jobs@vm", run="run2") == []  # sent once
    job = wait_for_job(earlier.id, timeout=60)
    assert (job.status, job.attempts, job.result) == (Job.Status.SUCCEEDED, 2, {"runs": 1})
    for left in (current, *others):
        left.refresh_from_db()
        assert left.status == Job.Status.RUNNING and left.attempts == 1
    Job.objects.filter(id__in=[current.id, *(other.id for other in others)]).update(status=Job.Status.CANCELLED)


@pytest.mark.django_db
def test_job_whose_worker_died_too_often_fails_worker_lost(settings):
    job = Job.objects.create(kind="test.echo", status=Job.Status.RUNNING, heartbeat_at=_stale(settings),
                             worker="dead/abc", attempts=settings.LAKEUI_JOB_MAX_ATTEMPTS)  # fmt: skip
    assert job_recover() == []
    job.refresh_from_db()
    assert (job.status, job.error_code) == (Job.Status.FAILED, "worker_lost")
    assert job.finished_at is not None


@pytest.mark.django_db
def test_live_and_young_jobs_are_left_alone(settings):
    running = Job.objects.create(kind="test.echo", status=Job.Status.RUNNING, heartbeat_at=timezone.now(),
                                 worker="live/abc", attempts=1)  # fmt: skip
    queued = Job.objects.create(kind="test.echo")
    cancelled = Job.objects.create(kind="test.echo", status=Job.Status.CANCELLED, heartbeat_at=_stale(settings))
    assert job_recover() == []
    for job, status in ((running, Job.Status.RUNNING), (queued, Job.Status.QUEUED), (cancelled, "cancelled")):
        job.refresh_from_db()
        assert job.status == status
    assert running.worker == "live/abc"


@pytest.mark.django_db
def test_only_the_run_that_holds_the_claim_saves_a_checkpoint():
    """A checkpoint is saved under the claim: a run whose job another delivery took over saves nothing."""
    from django.db import transaction

    from lakeui.jobs.registry import ClaimLost
    from lakeui.jobs.services import job_checkpoint_save

    job = Job.objects.create(kind="test.echo", status=Job.Status.RUNNING, heartbeat_at=timezone.now(),
                             worker="live/run2/b", attempts=2)  # fmt: skip
    with transaction.atomic():
        job_checkpoint_save(job=job, checkpoint={"step": 1})
    taken_over = Job.objects.get(id=job.id)
    taken_over.worker = "live/run1/a"  # the earlier run, whose claim the current one took over
    with pytest.raises(ClaimLost), transaction.atomic():
        job_checkpoint_save(job=taken_over, checkpoint={"step": 2})
    assert Job.objects.get(id=job.id).checkpoint == {"step": 1}


@pytest.mark.django_db
def test_cancel_of_a_job_whose_worker_is_gone_ends_it_at_once(settings, user, user_client):
    job = Job.objects.create(kind="test.echo", status=Job.Status.RUNNING, heartbeat_at=_stale(settings),
                             worker="dead/abc", attempts=1, requested_by=user)  # fmt: skip
    response = user_client.post(f"/api/v1/jobs/{job.id}/cancel")
    assert response.status_code == 202
    assert response.json()["status"] == "cancelled"
    job.refresh_from_db()
    assert (job.status, job.error_code) == (Job.Status.CANCELLED, "cancelled")


@pytest.mark.django_db
def test_cancel_of_a_job_whose_worker_is_alive_waits_for_the_worker(user, user_client):
    job = Job.objects.create(kind="test.echo", status=Job.Status.RUNNING, heartbeat_at=timezone.now(),
                             worker="live/abc", attempts=1, requested_by=user)  # fmt: skip
    assert user_client.post(f"/api/v1/jobs/{job.id}/cancel").status_code == 202
    job.refresh_from_db()
    assert (job.status, job.cancel_requested) == (Job.Status.RUNNING, True)


@worker_db
def test_job_of_a_worker_killed_by_sigkill_finishes_on_a_new_worker(tmp_path):
    """A real worker (its own queue, so the suite's worker cannot take the job) is SIGKILLed with its whole
    process group while the job runs; a new worker's recovery loop runs the job again."""
    env = {"LAKEUI_QUEUE": f"lakeui-crash-{uuid.uuid4().hex[:8]}"}
    db = dict(connection.settings_dict)
    marker = tmp_path / "runs.txt"
    first = Worker(db=db, log_path=tmp_path / "first.log", concurrency=1, env=env).start()
    try:
        job = Job.objects.create(kind="test.count", params={"path": str(marker), "sleep": 60})
        run_job.apply_async(args=[str(job.id)], queue=env["LAKEUI_QUEUE"])
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert time.monotonic() < deadline, first.log()[-4000:]
            time.sleep(0.1)
    finally:
        first.kill()
    Job.objects.filter(id=job.id).update(params={"path": str(marker), "sleep": 0})  # the second run is quick
    killed_at = time.monotonic()
    second = Worker(db=db, log_path=tmp_path / "second.log", concurrency=1, env=env).start()
    try:
        job = wait_for_job(job.id, timeout=settings.LAKEUI_JOB_STALE_AFTER * 2 + 60)
        assert job.status == Job.Status.SUCCEEDED, second.log()[-4000:]
        assert time.monotonic() - killed_at < settings.LAKEUI_JOB_STALE_AFTER * 2 + 60
        assert job.attempts == 2
        assert Path(marker).read_text().count("run ") == 2  # the killed run and the one that finished
    finally:
        second.stop()


ROWS = [{"id": i, "amount": i % 100, "region": f"r{i % 7}"} for i in range(3000)]
ALL_IDS = list(range(3000))


def _load(spark, catalog):
    """A load of ROWS: each of them once."""
    from catalog_app.services.data_submit import table_data_submit
    from tests.support.catalogs import on

    params = {"strategy": "append_only", "rows": ROWS}
    return lambda: table_data_submit(target=on(catalog), database="sales", table="orders", kind="table_load",
                                     params=params), ALL_IDS  # fmt: skip


def _delete(spark, catalog, mode="merge-on-read"):
    """A delete of a third of ROWS (loaded in this process): the other two thirds. Merge-on-read writes its delta
    files with pyarrow on the worker, copy-on-write the rows it keeps with Spark."""
    from catalog_app.services.data_submit import table_data_submit
    from catalog_app.services.tables import table_update
    from tests.support.catalogs import on
    from tests.support.data import run_in_process

    table_update(target=on(catalog), database="sales", name="orders", set_properties={"write.mode": mode})
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": ROWS})
    params = {"where": "id % 3 = 0"}
    return lambda: table_data_submit(target=on(catalog), database="sales", table="orders", kind="table_delete",
                                     params=params), [i for i in ALL_IDS if i % 3]  # fmt: skip


def _merge(spark, catalog):
    """A merge of a branch that loaded ROWS: each of them once on main."""
    from catalog_app.services.refs import branch_create
    from merge_app.services.merges import merge_submit
    from tests.support.data import run_in_process

    branch_create(catalog=catalog, name="dev", source="main")
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": ROWS}, branch="dev")
    return lambda: merge_submit(catalog=catalog, source="dev", target="main"), ALL_IDS


def _restore(spark, catalog):
    """A restore of main to before a delete: every row of ROWS back, once."""
    from merge_app.services.restores import restore_submit
    from tests.support.catalogs import head
    from tests.support.data import run_in_process

    run_in_process(spark, catalog, {"strategy": "append_only", "rows": ROWS})
    point = head(catalog)
    run_in_process(spark, catalog, {"where": "id % 2 = 0"}, kind="table_delete")
    return lambda: restore_submit(catalog=catalog, branch="main", commit=point), ALL_IDS


CHANGES = {"load": _load, "delete": _delete, "cow_delete": lambda spark, catalog: _delete(spark, catalog, "copy-on-write"),
           "merge": _merge, "restore": _restore}  # fmt: skip
# A load and a copy-on-write delete write with Spark (`while_writing`: killed from outside once Spark's output folder
# appears);
# a merge without keys and a restore write no data file, only their commit. The points are in
# lakeui.jobs.registry.crash_point.
# The default run kills each kind of change once, where its files or its commit are half made; the other points
# (each about 20 s) run with LAKEUI_LONG_TESTS=1.
CRASHES = [("load", "while_writing"), ("cow_delete", "while_writing"), ("delete", "before_commit")]
CRASHES += [("merge", "before_commit"), ("restore", "before_commit")]
if os.environ.get("LAKEUI_LONG_TESTS") == "1":
    CRASHES += [("load", "before_run"), ("load", "before_commit"), ("load", "after_run"), ("delete", "after_run")]
    CRASHES += [("merge", "after_run"), ("restore", "after_run")]


def _kill_while_spark_writes(worker: Worker, catalog, timeout: float = 240) -> None:
    """SIGKILL the worker once a Spark write's `_temporary` folder appears under the catalog's folder."""
    root = Path(settings.LAKEUI_WAREHOUSE) / str(catalog.id)
    deadline = time.monotonic() + timeout
    while not any("_temporary" in dirs for _, dirs, _ in os.walk(root)):
        assert worker.process.poll() is None and time.monotonic() < deadline, worker.log()[-4000:]
        time.sleep(0.002)
    worker.kill()


def _killed_and_recovered(submit, crash_at: str, env: dict, tmp_path, catalog, *, timeout: float, started=None,
                          restarted: bool = False):  # fmt: skip
    """Submit a job (`submit`, in a transaction) to a worker that dies at `crash_at` (its process group SIGKILLed),
    start a new worker (`restarted`: under the dead one's node name, as a supervisor restarts it), and wait for the
    job to end: the job, the seconds from the kill to its end, and the new worker's log. `started` (a list) gets the
    seconds from the kill to the job's second start."""
    from django.db import transaction

    db = dict(connection.settings_dict)
    first = Worker(db=db, log_path=tmp_path / "first.log", concurrency=1, env={**env, "LAKEUI_JOB_CRASH_AT": crash_at})
    first.start()
    try:
        with transaction.atomic():
            job = submit()
        if crash_at == "while_writing":
            _kill_while_spark_writes(first, catalog)
        first.process.wait(timeout=240)  # the crash hook kills it
    finally:
        first.kill()
    assert Job.objects.get(id=job.id).status == Job.Status.RUNNING, first.log()[-4000:]
    killed_at = time.monotonic()
    second = Worker(db=db, log_path=tmp_path / "second.log", concurrency=1, env=env)
    if restarted:
        named = second.command.index("--hostname") + 1
        second.command[named] = first.command[named]
    second.start()
    try:
        deadline = time.monotonic() + timeout
        while started is not None and not started and time.monotonic() < deadline:
            if Job.objects.filter(id=job.id).filter(Q(attempts__gte=2) | Q(status__in=Job.FINISHED)).exists():
                started.append(time.monotonic() - killed_at)
            time.sleep(0.1)
        job = wait_for_job(job.id, timeout=max(0.0, deadline - time.monotonic()))
        return job, time.monotonic() - killed_at, second.log()
    finally:
        second.stop()


@pytest.mark.parametrize(("change", "crash_at"), CRASHES, ids=[f"{c}-{at}" for c, at in CRASHES])
def test_change_whose_worker_is_killed_ends_once_with_exactly_its_rows(
    change, crash_at, transactional_db, spark, tmp_path, monkeypatch
):
    """The worker (its process group, Spark JVM included) is SIGKILLed at a point of the change; a new worker
    finishes it: one new commit (the job's), each row once, every referenced file there, and the dead attempt's
    files orphans that GC removes (killed while Spark writes, the dead attempt may not have written a file yet)."""

    from lakeui.jobs.registry import job_kind_get
    from tests.support.catalogs import head, make_catalog, make_table
    from tests.support.check import assert_consistent
    from tests.support.data import Progress, read

    env = {"LAKEUI_QUEUE": f"lakeui-crash-{uuid.uuid4().hex[:8]}"}
    # Every submit's message goes to this test's workers only: the suite's worker (running for earlier tests) must
    # not take the job, or the crash never happens. (The set-up's jobs, run in this process, are not claimable.)
    monkeypatch.setattr(settings, "CELERY_TASK_DEFAULT_QUEUE", env["LAKEUI_QUEUE"])
    catalog = make_catalog()
    make_table(catalog)
    submit, expected_ids = CHANGES[change](spark, catalog)
    before = head(catalog)
    job, ended, log = _killed_and_recovered(submit, crash_at, env, tmp_path, catalog,
                                            timeout=settings.LAKEUI_JOB_STALE_AFTER * 2 + 180)  # fmt: skip
    assert job.status == Job.Status.SUCCEEDED, (job.error_code, job.error_message, log[-4000:])
    assert ended < settings.LAKEUI_JOB_STALE_AFTER * 2 + 180
    assert job.attempts == 2
    new_head = Commit.objects.get(id=head(catalog))
    assert (new_head.parent_id, new_head.job_id) == (before, job.id)  # exactly one new commit, the job's
    assert_consistent(catalog.name)
    time.sleep(1.1)
    gc = Job.objects.create(kind="catalog_gc", params={"catalog_id": str(catalog.id), "grace_seconds": 1})
    removed = job_kind_get("catalog_gc").handler(gc.params, Progress(str(gc.id)))["removed"]
    if crash_at == "before_commit" and change in ("load", "delete"):
        assert [path for path in removed if path.endswith(".parquet")], removed  # the dead attempt's files
    assert_consistent(catalog.name)  # GC removed no file a commit references
    got = read(spark, catalog).orderBy("id").collect()
    assert [r["id"] for r in got] == expected_ids


RECOVERY_BOUND = 120  # seconds from the kill to the job's end (docs/performance.md#recovery-within-two-minutes)
OVERLOADED = 4  # load average per core past which a merge run again from the start may not hold the bound
KEYED_CRASHES = ["before_commit", "while_writing"]


@pytest.mark.parametrize("crash_at", KEYED_CRASHES)
def test_a_keyed_merge_whose_worker_is_killed_ends_within_two_minutes(
    crash_at, transactional_db, spark, tmp_path, monkeypatch
):
    """A merge of a primary-key table that both branches changed (a row-level merge by key, its rows written by
    Spark) is SIGKILLed with its worker, and the worker is started again under its name, as a supervisor restarts
    it (`make run`, Docker's restart policy); it takes the job back as it becomes ready (its heartbeat need not go
    stale first). Killed after the merge prepared its result, before publishing it (`before_commit`), the new run
    publishes that result as it is, with no plan and no Spark job: the merge ends within two minutes of the kill
    whatever its size, with exactly the merged rows. Killed while Spark writes the merged rows (`while_writing`),
    nothing was prepared: the new run merges again from the start, so the time is a whole merge's."""

    from merge_app.models import Merge
    from merge_app.services.merges import merge_submit
    from merge_app.services.pipeline import PREPARED
    from tests.support.catalogs import head
    from tests.support.check import assert_consistent
    from tests.support.data import read
    from tests.support.merges import keyed_both_changed, keyed_merged

    env = {"LAKEUI_QUEUE": f"lakeui-crash-{uuid.uuid4().hex[:8]}"}
    monkeypatch.setattr(settings, "CELERY_TASK_DEFAULT_QUEUE", env["LAKEUI_QUEUE"])
    catalog = keyed_both_changed(spark, ROWS)
    before = head(catalog)
    submit = lambda: merge_submit(catalog=catalog, source="dev", target="main")  # noqa: E731
    started: list[float] = []
    job, ended, log = _killed_and_recovered(submit, crash_at, env, tmp_path, catalog,
                                            timeout=RECOVERY_BOUND + 120, started=started, restarted=True)  # fmt: skip
    assert job.status in (Job.Status.SUCCEEDED, Job.Status.FAILED), (job.status, log[-4000:])
    # Taken back as the restarted worker is ready (its start: at most a minute on a busy machine), whatever the
    # job's size; the bound is the one of a worker of another name, which waits for the heartbeat to go stale.
    pickup = settings.LAKEUI_JOB_STALE_AFTER + settings.LAKEUI_JOB_RECOVER_EVERY + 60
    assert started and started[0] < pickup, (started, log[-4000:])
    if job.status == Job.Status.FAILED:
        assert head(catalog) == before  # cleanly failed: main as it was
    else:
        new_head = Commit.objects.get(id=head(catalog))
        assert (new_head.parent_id, new_head.job_id) == (before, job.id)  # exactly one new commit, the merge's
        got = [(r["id"], r["amount"], r["region"]) for r in read(spark, catalog).orderBy("id").collect()]
        assert got == keyed_merged(ROWS)
        merge = Merge.objects.get(job=job)
        if crash_at == "before_commit":  # the result the killed run prepared, published by the new run as it was
            assert new_head.id == (job.checkpoint or {}).get(PREPARED, {}).get("result"), log[-4000:]
            assert "resumed_ms" in merge.timings, merge.timings
    assert_consistent(catalog.name)
    load = os.getloadavg()[0]
    if crash_at == "while_writing" and ended >= RECOVERY_BOUND and load > OVERLOADED * (os.cpu_count() or 1):
        pytest.xfail(f"killed before it prepared its result, the merge ran again from the start and ended {ended:.0f} "
                     f"s after the kill ({started[0]:.0f} s to its second start) at a load average of {load:.0f} on "
                     f"{os.cpu_count()} cores")  # fmt: skip
    assert ended < RECOVERY_BOUND, (ended, started, load, log[-4000:])
