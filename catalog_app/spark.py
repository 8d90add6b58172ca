"""Django-side access to the engine's SparkSession, configured from settings."""

from django.conf import settings
from pyspark.sql import SparkSession

from catalog_app.engine import session


def spark_config() -> session.SparkConfig:
    return session.SparkConfig(
        master=settings.SPARK_MASTER,
        warehouse=settings.LAKEUI_WAREHOUSE,
        driver_memory=settings.SPARK_DRIVER_MEMORY,
    )


def spark_session() -> SparkSession:
    return session.get_or_create(spark_config())
