"""The Spark engine: the session's configuration, a real job on the worker, and the health report."""

import math
import time

import pyarrow.parquet as pq
import pyspark
import pytest
from pyspark.sql import types as T
from pyspark.testing import assertDataFrameEqual

from catalog_app.engine.session import FIELD_ID_METADATA_KEY
from catalog_app.engine.smoke import spark_roundtrip
from lakeui.jobs.health import SPARK_CHECK
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_create
from tests.conftest import wait_for_job


def _field(name: str, field_id: int, data_type: T.DataType | None = None) -> T.StructField:
    return T.StructField(name, data_type or T.LongType(), True, {FIELD_ID_METADATA_KEY: field_id})


def test_parquet_files_carry_field_ids_and_reads_match_by_id(spark, tmp_path):
    written = T.StructType([_field("id", 1), _field("amount", 2)])
    spark.createDataFrame([(1, 10), (2, 20)], written).write.parquet(str(tmp_path / "seg"))

    file = next((tmp_path / "seg").glob("*.parquet"))
    schema = pq.read_schema(file)
    assert [schema.field(name).metadata[b"PARQUET:field_id"] for name in ("id", "amount")] == [b"1", b"2"]

    # A later schema renamed column 2 and added column 3: the old file still reads by id.
    evolved = T.StructType([_field("id", 1), _field("total", 2), _field("note", 3, T.StringType())])
    read = spark.read.schema(evolved).parquet(str(tmp_path / "seg"))
    assertDataFrameEqual(read, spark.createDataFrame([(1, 10, None), (2, 20, None)], evolved))


def test_segment_stats_from_footers_equal_sparks_own_aggregates(spark, tmp_path):
    """Written segments are described from their Parquet footers, without a pass over the data: the figures must
    be those Spark computes over the same rows, for every type with stats, per file and per partition."""
    from pyspark.sql import functions as F

    from catalog_app.engine.frames import struct_type
    from catalog_app.engine.segment_writes import write_segments
    from catalog_app.engine.segments import Column
    from catalog_app.engine.types import stat_json
    from catalog_app.engine.warehouse import Warehouse

    types = ["int", "long", "float", "double", "string", "date", "timestamp", "boolean", "decimal(10,2)",
             "decimal(30,4)"]  # fmt: skip
    columns = [Column(i + 1, f"c{i}", t) for i, t in enumerate(types)] + [Column(20, "part", "string")]
    rows = spark.sql(
        """SELECT CAST(id AS INT) c0, id * 1000000007 c1, CAST(id / 3 AS FLOAT) c2, IF(id = 5, CAST('NaN' AS DOUBLE),
           id / 7) c3, IF(id % 4 = 0, NULL, CONCAT('s', id)) c4, DATE_ADD(DATE'2024-02-28', CAST(id AS INT)) c5,
           TIMESTAMP'2024-01-01 23:59:59.123456' + MAKE_INTERVAL(0, 0, 0, 0, CAST(id AS INT)) c6, id % 3 = 0 c7,
           CAST(id / 8 AS DECIMAL(10,2)) c8, CAST(NULL AS DECIMAL(30,4)) c9, IF(id < 7, 'a', 'b') part
           FROM range(12)"""
    )
    written = write_segments(Warehouse(str(tmp_path)), "cat/tbl", rows.repartition(3), columns,
                             partition_ids=[20], tag="t1")  # fmt: skip
    assert len(written) >= 2 and {w.partition_values["20"] for w in written} == {"a", "b"}
    read = spark.read.schema(struct_type(columns)).parquet(*[str(tmp_path / w.path) for w in written])
    path = F.regexp_extract("_metadata.file_path", r"(cat/tbl/.*)$", 1).alias("path")
    figures = [F.count(F.lit(1)).alias("rows")]
    for c in columns:
        figures += [F.min(c.name).alias(f"min{c.id}"), F.max(c.name).alias(f"max{c.id}")]
        figures.append(F.sum(F.when(F.col(c.name).isNull(), 1).otherwise(0)).alias(f"nulls{c.id}"))

    def bounded(row, c):  # a file's NaN (or infinity) leaves its column without min/max: they bound nothing
        return not any(isinstance(row[f"{b}{c.id}"], float) and not math.isfinite(row[f"{b}{c.id}"])
                       for b in ("min", "max"))  # fmt: skip

    expected = {
        row["path"]: (row["rows"], {str(c.id): {"min": stat_json(row[f"min{c.id}"]), "max": stat_json(
            row[f"max{c.id}"]), "nulls": row[f"nulls{c.id}"]} for c in columns if bounded(row, c)})
        for row in read.groupBy(path).agg(*figures).collect()
    }  # fmt: skip
    assert any(len(stats) < len(columns) for _, stats in expected.values())  # the file holding the NaN
    assert {w.path: (w.row_count, w.stats) for w in written} == expected
    assert all(w.size_bytes == (tmp_path / w.path).stat().st_size for w in written)


def test_spark_roundtrip_in_process(spark):
    assert spark_roundtrip(spark, rows=100)["sum"] == 4950


@pytest.mark.django_db(transaction=True)
def test_spark_check_job_runs_on_the_worker(celery_worker):
    job = wait_for_job(job_create(kind=SPARK_CHECK, params={"rows": 2000}).id, timeout=240)
    assert job.status == Job.Status.SUCCEEDED, job.error_message
    assert job.result["spark_version"] == pyspark.__version__
    assert job.result["sum"] == 2000 * 1999 // 2


@pytest.mark.django_db(transaction=True)
def test_health_reports_every_part(celery_worker, api_client, user):
    # The public report, from the workers' heartbeats (written again within a recovery round of the test's start).
    deadline = time.monotonic() + 30
    while (response := api_client.get("/api/v1/health")).status_code != 200:
        assert time.monotonic() < deadline, response.json()
        time.sleep(0.5)
    body = response.json()
    assert {name: part["status"] for name, part in body["parts"].items()} == {
        "database": "ok",
        "broker": "ok",
        "jobs_worker": "ok",
        "interactive_worker": "ok",
    }
    # The deep report proves Spark by a real job on the interactive worker: asked again while it runs (202).
    api_client.force_authenticate(user)
    deadline = time.monotonic() + 240
    while (response := api_client.get("/api/v1/health/deep", {"timeout": 5})).status_code == 202:
        assert response.json()["parts"]["spark"]["status"] == "pending"
        assert time.monotonic() < deadline, response.json()
    body = response.json()
    assert response.status_code == 200, body
    assert body["parts"]["spark"]["status"] == "ok"
    assert body["parts"]["spark"]["info"]["spark_version"] == pyspark.__version__
    assert Job.objects.filter(kind=SPARK_CHECK).count() == 1  # every call followed the one check job
