"""The one place that builds a SparkSession: one per process, created on first use, reused by every job."""

import os
import sys
import threading
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

# Spark writes each StructField's metadata "parquet.field.id" as the Parquet field id and, on read, matches
# Parquet columns to the requested schema by that id. Column ids therefore survive renames.
FIELD_ID_METADATA_KEY = "parquet.field.id"


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    warehouse: str = "var/warehouse"
    app_name: str = "lakeui"
    driver_memory: str = "2g"
    shuffle_partitions: int = 8
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
            "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        }
        if self.master.startswith("local"):
            options["spark.driver.host"] = "127.0.0.1"
            options["spark.driver.bindAddress"] = "127.0.0.1"
        options.update(self.extra)
        return options


_lock = threading.Lock()
_session: SparkSession | None = None


def get_or_create(config: SparkConfig) -> SparkSession:
    """The process's SparkSession, built from `config` on the first call; later calls ignore `config`."""
    global _session
    with _lock:
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


def stop() -> None:
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None
