"""Django-side access to the engine's SparkSession, configured from settings."""

import logging
import threading
import time

from celery.signals import worker_process_init
from django.conf import settings
from django.db import connection
from pyspark.sql import SparkSession

from catalog_app.engine import session
from lakeui.jobs.services import worker_spark_started
from lakeui.jobs.tasks import worker_kind, worker_process

logger = logging.getLogger(__name__)


def spark_config() -> session.SparkConfig:
    """This process's Spark settings; on a cluster its share of it, by the kind of worker it is (the interactive
    worker's reads are small: it takes few cores)."""
    interactive = worker_kind() == "interactive"
    return session.SparkConfig(
        master=settings.SPARK_MASTER,
        warehouse=settings.LAKEUI_WAREHOUSE,
        driver_memory=settings.SPARK_DRIVER_MEMORY,
        app_name=f"lakeui-{worker_kind()}",
        dynamic_allocation=settings.LAKEUI_SPARK_DYNAMIC_ALLOCATION,
        executor_idle_timeout=settings.LAKEUI_SPARK_EXECUTOR_IDLE_TIMEOUT,
        cached_idle_timeout=settings.LAKEUI_SPARK_CACHED_IDLE_TIMEOUT,
        executor_cores=settings.LAKEUI_SPARK_EXECUTOR_CORES,
        executor_memory=settings.LAKEUI_SPARK_EXECUTOR_MEMORY,
        max_cores=settings.LAKEUI_SPARK_INTERACTIVE_MAX_CORES if interactive else settings.LAKEUI_SPARK_MAX_CORES,
        extra=dict(settings.LAKEUI_SPARK_CONF),
    )


def spark_session() -> SparkSession:
    """This process's SparkSession; in a worker, one it starts (anew) is recorded in its heartbeat, which the
    health report reads (the process's Spark is warm)."""
    before = session.current()
    spark = session.get_or_create(spark_config())
    if spark is not before:
        _spark_started(spark)
    return spark


def _spark_started(spark: SparkSession) -> None:
    worker = worker_process()
    if worker is None:  # not a worker (the web server, a test's own session)
        return
    try:
        worker_spark_started(node=worker.node, run=worker.run, kind=worker.kind, version=spark.version)
    except Exception:  # a busy database: the health report shows this process's Spark cold until it starts again
        logger.warning("Recording that Spark started failed", exc_info=True)


@worker_process_init.connect
def spark_warm_start(**kwargs) -> None:
    """Start this worker process's Spark (its JVM and SparkContext: 10 to 25 s on a busy machine) as the process
    starts, in the background (LAKEUI_SPARK_WARM), rather than in its first job; a job that arrives meanwhile waits
    for it. A worker restarted after a crash so starts its Spark while it takes the dead worker's job over
    (docs/operations.md#what-survives-a-crash). Prefork pool processes (what `make run` starts): the signal is sent
    in each of them."""
    if settings.LAKEUI_SPARK_WARM:
        threading.Thread(target=_warm, name="spark-warm", daemon=True).start()


def _warm() -> None:
    started = time.monotonic()
    try:
        spark_session()
        logger.info("Spark started in %.1f s", time.monotonic() - started)
    except Exception:  # the first job starts it again, and says what is wrong
        logger.warning("Starting Spark failed", exc_info=True)
    finally:
        connection.close()  # this thread's, if it recorded the start
