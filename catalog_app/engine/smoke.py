"""A small real Spark job that proves the engine works end to end."""

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def spark_roundtrip(spark: SparkSession, *, rows: int) -> dict[str, Any]:
    total = spark.range(rows).agg(F.sum("id").alias("total")).first()["total"]
    expected = rows * (rows - 1) // 2
    if total != expected:
        raise RuntimeError(f"Spark summed 0..{rows - 1} to {total}, expected {expected}")
    return {"spark_version": spark.version, "master": spark.sparkContext.master, "rows": rows, "sum": total}
