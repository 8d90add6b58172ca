"""Job kinds that exist only for the tests. The worker the suite starts loads this module (`--include`)."""

import os
import signal
import time
from pathlib import Path
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from lakeui.errors import ApplicationError
from lakeui.jobs.registry import Progress, job_kind, job_upkeep


@job_upkeep
def slow_upkeep() -> None:
    """A round of upkeep that lasts LAKEUI_TEST_SLOW_UPKEEP seconds (unset: no time), as on a busy database."""
    time.sleep(float(os.environ.get("LAKEUI_TEST_SLOW_UPKEEP", "0")))


@job_kind("test.echo")
def echo(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    progress.report(50, "halfway")
    time.sleep(params.get("sleep", 0))
    return {"echo": params}


@job_kind("test.count")
def count(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Appends one line per run to a file, so a test can count how often the work was really done."""
    with Path(params["path"]).open("a") as marker:
        marker.write(f"run {progress.job_id}\n")
    time.sleep(params.get("sleep", 0))
    return {"runs": Path(params["path"]).read_text().count("run ")}


@job_kind("test.fail")
def fail(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    raise ApplicationError("test_refused", "The test job was asked to fail.", details={"why": params.get("why")})


@job_kind("test.crash")
def crash(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    return {"value": 1 / params.get("divisor", 0)}


@job_kind("test.limit_swallowed")
def limit_swallowed(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Its soft time limit strikes (the signal billiard sends, at once) inside a call that answers with an error of
    its own, raised after its handler and naming the limit nowhere: as py4j answers a call into the JVM."""
    struck = False
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(5)
    except SoftTimeLimitExceeded:
        struck = True
    if struck:
        raise RuntimeError("An error occurred while calling o42.collectToPython")
    return {"struck": False}


@job_kind("test.until_cancelled")
def until_cancelled(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    deadline = time.monotonic() + params.get("max_seconds", 60)
    step = 0
    while time.monotonic() < deadline:
        step += 1
        progress.report(min(step, 99), f"step {step}")
        time.sleep(0.2)
    return {"steps": step}


@job_kind("test.merge_then_die")
def merge_then_die(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """A merge whose worker dies on its first attempt after writing the merge commit, before it commits the
    transaction; later attempts run the real merge job."""
    import os

    from django.db import transaction

    from catalog_app.models import Catalog
    from lakeui.jobs.models import Job
    from merge_app.job_kinds import merge_job
    from merge_app.services.merges import branch_merge

    job = Job.objects.get(id=progress.job_id)
    if job.attempts == 1:
        with transaction.atomic():
            catalog = Catalog.objects.get(id=params["catalog_id"])
            branch_merge(catalog=catalog, source=params["source"], target=params["target"], job=job)
            os._exit(1)
    return merge_job(params, progress)


@job_kind("test.spark")
def spark_count(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """A small Spark job on the worker's session; `kill_jvm` kills that session's JVM first, as an OOM would;
    `sql` runs a statement first."""
    import os
    import signal

    from pyspark import SparkContext

    from catalog_app.spark import spark_session

    spark = spark_session()
    jvm_pid = SparkContext._gateway.proc.pid
    if params.get("kill_jvm"):
        os.kill(jvm_pid, signal.SIGKILL)
        time.sleep(1)
    if params.get("sql"):  # a statement that may throw in Spark
        spark.sql(params["sql"]).collect()
    return {"count": spark.range(params.get("rows", 10)).count(), "jvm_pid": jvm_pid}
