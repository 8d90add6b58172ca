"""The one place that builds a SparkSession: one per process, created on first use, reused by every job."""

import contextlib
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from py4j.protocol import Py4JJavaError, Py4JNetworkError
from pyspark import SparkContext
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

# Spark writes each StructField's metadata "parquet.field.id" as the Parquet field id and, on read, matches
# Parquet columns to the requested schema by that id. Column ids therefore survive renames.
FIELD_ID_METADATA_KEY = "parquet.field.id"
# How long the Spark jobs of a read stopped at its time limit are cancelled as they start (see cancelled_on_error).
CANCEL_WATCH_SECONDS = 120.0


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    warehouse: str = "var/warehouse"
    app_name: str = "lakeui"
    driver_memory: str = "2g"
    shuffle_partitions: int = 8
    # On a cluster only (a local master has one JVM and ignores them): how much of the cluster this application
    # takes. See docs/operations.md#sharing-a-spark-cluster.
    dynamic_allocation: bool = True
    executor_idle_timeout: str = "30s"
    cached_idle_timeout: str = "120s"
    executor_cores: int = 1
    executor_memory: str = "1g"
    max_cores: int = 4
    extra: dict[str, str] = field(default_factory=dict)

    def options(self) -> dict[str, str]:
        options = {
            "spark.sql.warehouse.dir": self.warehouse,
            "spark.sql.parquet.fieldId.write.enabled": "true",
            # INT64 microseconds (as Delta and Iceberg write them) carry min/max in the footer; INT96 does not.
            "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
            "spark.sql.parquet.fieldId.read.enabled": "true",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.sql.sources.partitionOverwriteMode": "dynamic",
            "spark.driver.memory": self.driver_memory,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            # A worker's driver lives for thousands of jobs. The status store keeps what it shows of past queries
            # whether or not the UI runs, by default the last 1,000 SQL executions with every plan node's metrics:
            # a long keyed model run filled a 2 GB heap with them (2.5 million SQLPlanMetric) until the collector
            # spun and tasks could not get memory ("Failed to allocate a page").
            "spark.sql.ui.retainedExecutions": "50",
            "spark.ui.retainedJobs": "100",
            "spark.ui.retainedStages": "100",
            "spark.ui.retainedTasks": "10000",
            "spark.ui.dagGraph.retainedRootRDDs": "100",
            "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        }
        if self.master.startswith("local"):
            options["spark.driver.host"] = "127.0.0.1"
            options["spark.driver.bindAddress"] = "127.0.0.1"
        else:
            options.update(self.cluster_options())
        options.update(self.extra)
        return options

    def cluster_options(self) -> dict[str, str]:
        """This application's share of a cluster. Many LakeUI drivers share one cluster, so none may keep cores it
        does not use: executors are asked for while tasks wait and given back when idle (dynamic allocation; shuffle
        tracking keeps an executor while its shuffle files are needed, so no external shuffle service is needed),
        and the application never holds more than `max_cores` (spark.cores.max on standalone, maxExecutors of
        `executor_cores` each on YARN and Kubernetes)."""
        cores = max(1, self.executor_cores)
        executors = max(1, self.max_cores // cores)
        options = {
            "spark.executor.cores": str(cores),
            "spark.executor.memory": self.executor_memory,
            "spark.cores.max": str(executors * cores),
        }
        if self.dynamic_allocation:
            options |= {
                "spark.dynamicAllocation.enabled": "true",
                "spark.dynamicAllocation.shuffleTracking.enabled": "true",
                "spark.dynamicAllocation.minExecutors": "0",
                "spark.dynamicAllocation.initialExecutors": "0",
                "spark.dynamicAllocation.maxExecutors": str(executors),
                "spark.dynamicAllocation.executorIdleTimeout": self.executor_idle_timeout,
                "spark.dynamicAllocation.cachedExecutorIdleTimeout": self.cached_idle_timeout,
                "spark.dynamicAllocation.shuffleTracking.timeout": self.cached_idle_timeout,
            }
        else:
            options["spark.executor.instances"] = str(executors)
        return options


_lock = threading.Lock()
_session: SparkSession | None = None


def get_or_create(config: SparkConfig) -> SparkSession:
    """The process's SparkSession, built from `config` on the first call; later calls ignore `config`."""
    global _session
    with _lock:
        if _session is not None and not _alive(_session):
            logger.warning("The Spark JVM of this process is gone; building a new SparkSession")
            _forget()
        if _session is None or _session.sparkContext._jsc is None:
            # Python workers must run the interpreter (and packages) of this process, e.g. the project's venv.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
            if config.master.startswith("local"):
                os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            builder = SparkSession.builder.master(config.master).appName(config.app_name)
            for key, value in config.options().items():
                builder = builder.config(key, value)
            _session = builder.getOrCreate()
            _session.sparkContext.setLogLevel("WARN")
        return _session


def current() -> SparkSession | None:
    """This process's SparkSession if one was started (get_or_create starts a new one if it died), else None."""
    return _session


def stop() -> None:
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None


def _alive(spark: SparkSession) -> bool:
    """Whether the session's JVM still answers (a cheap call through the py4j gateway)."""
    try:
        spark.sparkContext._jvm.java.lang.System.currentTimeMillis()
        return spark.sparkContext._jsc is not None
    except Exception:
        return False


def _forget() -> None:
    """Drop every reference PySpark keeps to a dead JVM, so the next builder starts a new one. Caller holds _lock."""
    global _session
    gateway = SparkContext._gateway
    with contextlib.suppress(Exception):
        if gateway is not None:
            gateway.shutdown()
    with contextlib.suppress(Exception):
        if gateway is not None and getattr(gateway, "proc", None) is not None:
            gateway.proc.kill()
            gateway.proc.wait(timeout=10)
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    _session = None


@contextlib.contextmanager
def cancelled_on_error(spark: SparkSession) -> Iterator[None]:
    """Spark jobs this thread starts in the block are cancelled if the block ends by an exception (its time limit
    struck, say): the executors stop working for a read nobody waits for any more."""
    group = f"lakeui-{uuid.uuid4().hex}"
    context = spark.sparkContext
    context.setJobGroup(group, "LakeUI read", interruptOnCancel=True)
    try:
        yield
    except BaseException:
        # The JVM goes on with the abandoned call: a job it has not submitted yet (still planning) is cancelled
        # when it starts.
        threading.Thread(target=_cancel_group, args=(context, group), daemon=True, name=f"cancel-{group}").start()
        raise
    finally:
        with contextlib.suppress(Exception):
            context.setLocalProperty("spark.jobGroup.id", None)


def _cancel_group(context: SparkContext, group: str, *, seconds: float = CANCEL_WATCH_SECONDS) -> None:
    """Cancel the group's running jobs now and as they start, for `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            tracker = context.statusTracker()
            running = [i for i in tracker.getJobIdsForGroup(group) if _running(tracker, i)]
            if running:
                context.cancelJobGroup(group)
                logger.info("Cancelled Spark jobs %s of an abandoned read", running)
        except Exception:  # the JVM is gone or going: nothing left to cancel
            return
        time.sleep(0.5)


def _running(tracker, job_id: int) -> bool:
    info = tracker.getJobInfo(job_id)
    return info is not None and info.status == "RUNNING"


def time_zone(spark: SparkSession) -> str:
    """The session's time zone, in which Spark reads timestamp literals."""
    return spark.conf.get("spark.sql.session.timeZone")


# SQLSTATE class 22, "data exception": a value the user supplied or computed (bad cast, division by zero).
DATA_EXCEPTION_SQLSTATE = "22"


class DataRefused(ValueError):
    """Spark refused the data a job gave it (SQLSTATE class 22); `message` is its first line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@contextlib.contextmanager
def data_refusals() -> Iterator[None]:
    """Spark's data exceptions raised in the block as `DataRefused`; any other error as it is."""
    try:
        yield
    except PySparkException as exc:
        if not (exc.getSqlState() or "").startswith(DATA_EXCEPTION_SQLSTATE):
            raise
        raise DataRefused(str(exc).split("\n", 1)[0][:500]) from None


def spark_error(exc: BaseException) -> bool:
    """Whether `exc` is an error Spark raised for the work it was given (a bad value, an unreadable file, a
    function that threw), as opposed to a bug of ours: the user gets its first line, the log its trace."""
    return isinstance(exc, PySparkException | Py4JJavaError)


def engine_lost(exc: BaseException) -> bool:
    """Whether `exc` came from the Spark JVM having died or stopped answering (not from the job's own error).
    Checks the exception chain for a py4j network error, then asks the JVM itself."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, Py4JNetworkError | ConnectionRefusedError | ConnectionResetError | BrokenPipeError):
            return True
        seen = seen.__cause__ or seen.__context__
    with _lock:
        return _session is not None and not _alive(_session)
