"""The production job kinds. Each is glue: plain values in, a service or engine call, a JSON result out."""

from typing import Any

from catalog_app.engine import checks
from catalog_app.jobs.registry import Progress, job_kind
from catalog_app.spark import spark_session

SPARK_CHECK = "spark_check"


@job_kind(SPARK_CHECK)
def spark_check(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    progress.report(10, "Starting Spark")
    spark = spark_session()
    progress.report(50, "Running a Spark job")
    return checks.spark_roundtrip(spark, rows=int(params.get("rows", 1000)))
