"""Django-side access to the engine's SparkSession, configured from settings."""

from django.conf import settings
from pyspark.sql import SparkSession

from catalog_app.engine import session
from lakeui.jobs.tasks import worker_kind


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
    return session.get_or_create(spark_config())
