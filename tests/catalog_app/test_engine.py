"""The Spark engine: the session's configuration, a real job on the worker, and the health report."""

import pyarrow.parquet as pq
import pyspark
import pytest
from pyspark.sql import types as T
from pyspark.testing import assertDataFrameEqual

from catalog_app.engine.checks import spark_roundtrip
from catalog_app.engine.session import FIELD_ID_METADATA_KEY
from catalog_app.jobs.kinds import SPARK_CHECK
from catalog_app.models import Job
from catalog_app.services import job_create
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


def test_spark_roundtrip_in_process(spark):
    assert spark_roundtrip(spark, rows=100)["sum"] == 4950


@pytest.mark.django_db(transaction=True)
def test_spark_check_job_runs_on_the_worker(celery_worker):
    job = wait_for_job(job_create(kind=SPARK_CHECK, params={"rows": 2000}).id, timeout=240)
    assert job.status == Job.Status.SUCCEEDED, job.error_message
    assert job.result["spark_version"] == pyspark.__version__
    assert job.result["sum"] == 2000 * 1999 // 2


@pytest.mark.django_db(transaction=True)
def test_health_reports_every_part(celery_worker, api_client):
    response = api_client.get("/api/v1/health?timeout=120")
    body = response.json()
    assert response.status_code == 200, body
    assert {name: part["status"] for name, part in body["parts"].items()} == {
        "database": "ok",
        "broker": "ok",
        "worker": "ok",
        "spark": "ok",
    }
    assert body["parts"]["spark"]["info"]["spark_version"] == pyspark.__version__


@pytest.mark.django_db
def test_health_shares_a_pending_check_and_reports_a_missing_worker(api_client):
    # A check enqueued moments ago that no worker has taken (in this test's transaction, it never reaches the
    # broker): health waits on that job instead of enqueueing another, and says the worker is missing.
    pending = Job.objects.create(kind=SPARK_CHECK, params={"rows": 1000})
    response = api_client.get("/api/v1/health?timeout=1")
    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "error"
    assert body["parts"]["database"]["status"] == "ok"
    assert body["parts"]["worker"]["status"] == "unavailable"
    assert str(pending.id) in body["parts"]["worker"]["detail"]
    assert Job.objects.count() == 1
