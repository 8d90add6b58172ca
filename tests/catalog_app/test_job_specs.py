"""The typed specs of the data jobs: built from a request once, stored in the job's params, read back by the
worker as the same spec; shape errors are the 400s the API answered before the specs."""

import dataclasses

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from catalog_app.apis.data import TableLoadApi
from catalog_app.job_specs import (
    LOAD_FIELDS,
    LOAD_STRATEGIES,
    TABLE_JOB_SPECS,
    CatalogGcSpec,
    CompactSpec,
    DeleteSpec,
    FileUpload,
    LoadSpec,
    Query,
    Rows,
    RowsPageSpec,
    Staging,
    StoredFiles,
    TableTarget,
    UpdateSpec,
)
from catalog_app.models import Commit
from lakeui.errors import ApplicationError
from tests.support.catalogs import make_catalog, make_table
from tests.support.data import run_in_process

ROWS = [{"id": 1, "amount": 10, "region": "eu"}]
LOADS = [
    {"strategy": "append_only", "rows": ROWS},
    {"strategy": "full_refresh", "rows": ROWS, "partitions": [{"region": "eu"}]},
    {"strategy": "upsert", "key_columns": ["id"], "query": "SELECT * FROM sales.staging"},
    {"strategy": "incremental", "key_columns": ["id"], "watermark": "at", "upload": {"path": "c/t/x.csv", "format": "csv"}},
    {"strategy": "scd2", "key_columns": ["id"], "valid_from_column": "vf", "valid_to_column": "vt", "rows": ROWS},
    {"strategy": "snapshot", "partition_column": "region", "upload": {"path": "c/s", "format": "parquet", "staged": True}},
]  # fmt: skip


@pytest.mark.parametrize("request_data", LOADS, ids=lambda d: d["strategy"])
def test_a_load_spec_round_trips_through_the_jobs_params(request_data):
    spec = LoadSpec.from_request(request_data)
    params = spec.to_params()
    assert params == request_data  # the job's params are what they were before the specs
    assert LoadSpec.from_params(params) == spec
    assert LoadSpec.from_params({**params, "catalog_id": "c", "branch": "main", "message": ""}) == spec


def test_a_load_keeps_only_the_fields_its_strategy_takes():
    spec = LoadSpec.from_request({"strategy": "append_only", "rows": ROWS, "key_columns": ["id"], "watermark": "w"})
    assert (spec.key_columns, spec.watermark) == (None, None)
    assert spec.to_params() == {"strategy": "append_only", "rows": ROWS}
    upsert = LoadSpec.from_request({"strategy": "upsert", "rows": ROWS, "key_columns": ["id"], "watermark": "w"})
    assert (upsert.key_columns, upsert.watermark, upsert.source) == (("id",), None, Rows(tuple(ROWS)))


def test_the_sources_of_a_request():
    upload = SimpleUploadedFile("Rows.CSV", b"id\n1\n")
    assert LoadSpec.from_request({"strategy": "append_only", "file": upload}).source == FileUpload(upload, "csv")
    given = LoadSpec.from_request({"strategy": "append_only", "file": upload, "format": "JSON"}).source
    assert given.format == "json"
    staged = LoadSpec.from_request({"strategy": "append_only", "staged": "a" * 32}).source
    assert staged == Staging("a" * 32)
    assert LoadSpec.from_request({"strategy": "append_only", "query": "SELECT 1"}).source == Query("SELECT 1")
    for unstored in (FileUpload(upload, "csv"), Staging("a" * 32)):
        with pytest.raises(TypeError):  # stored by the submit service before the job is created
            LoadSpec(strategy="append_only", source=unstored).to_params()


REFUSED = [
    ({"strategy": "append_only", "rows": ROWS, "query": "SELECT 1"}, "invalid_input", "Give the incoming data"),
    ({"strategy": "append_only"}, "invalid_input", "Give the incoming data"),
    ({"strategy": "append_only", "file": "f", "staged": "a" * 32}, "invalid_input", "either an uploaded file"),
    ({"strategy": "append_only", "staged": "../../etc"}, "invalid_staging", "staged must be the id"),
    ({"strategy": "append_only", "query": "  "}, "invalid_input", "query must be a SELECT"),
    ({"strategy": "append_only", "rows": {"id": 1}}, "invalid_rows", "rows must be a list"),
    ({"strategy": "merge", "rows": ROWS}, "invalid_strategy", "strategy must be one of"),
    ({"strategy": "upsert", "rows": ROWS}, "missing_key_columns", "Strategy 'upsert' needs key_columns"),
    ({"strategy": "upsert", "rows": ROWS, "key_columns": ["id", "id"]}, "invalid_input", "distinct column names"),
    ({"strategy": "incremental", "rows": ROWS, "key_columns": ["id"]}, "missing_watermark", "needs watermark"),
    ({"strategy": "incremental", "rows": ROWS, "key_columns": ["id"], "watermark": 3}, "invalid_input", "a column name"),
    ({"strategy": "scd2", "rows": ROWS, "key_columns": ["id"], "valid_from_column": "v"}, "missing_validity_columns",
     "needs valid_to_column"),
    ({"strategy": "scd2", "rows": ROWS, "key_columns": ["id"], "valid_from_column": "id", "valid_to_column": "vt"},
     "invalid_input", "apart from the keys"),
    ({"strategy": "snapshot", "rows": ROWS}, "missing_partition_column", "needs partition_column"),
    ({"strategy": "upsert", "key_columns": ["id"], "rows": ROWS, "partitions": [{"region": "eu"}]}, "invalid_input",
     "partitions are for full_refresh"),
    ({"strategy": "full_refresh", "rows": ROWS, "partitions": []}, "invalid_input", "non-empty list"),
]  # fmt: skip


@pytest.mark.parametrize(("request_data", "code", "message"), REFUSED)
def test_a_malformed_load_is_refused_when_its_spec_is_built(request_data, code, message):
    with pytest.raises(ApplicationError) as refused:
        LoadSpec.from_request(request_data)
    assert (refused.value.status, refused.value.code) == (400, code)
    assert message in refused.value.message


def test_the_api_serializer_takes_the_strategy_fields_from_the_spec():
    fields = TableLoadApi.InputSerializer().fields
    assert {f.name for f in LOAD_FIELDS} <= set(fields)
    assert {f.name for f in LOAD_FIELDS} == {f.name for f in dataclasses.fields(LoadSpec)} - {"strategy", "source"}
    assert all(set(f.metadata["strategies"]) <= set(LOAD_STRATEGIES) for f in LOAD_FIELDS)
    assert fields["key_columns"].help_text == "Key strategies: the columns that identify a row"


def test_the_other_specs_round_trip():
    target = TableTarget(catalog_id="c", branch="main", table_id="t", database="sales", table="orders", message="m")
    for spec, params in [
        (DeleteSpec.from_request({"where": "id = 1"}), {"where": "id = 1"}),
        (UpdateSpec.from_request({"set": {"amount": "amount + 1"}}), {"where": "TRUE", "set": {"amount": "amount + 1"}}),
        (CompactSpec.from_request({}), {}),
    ]:  # fmt: skip
        job_params = target.to_params() | spec.to_params()
        assert spec.to_params() == params
        assert TABLE_JOB_SPECS[spec.KIND].from_params(job_params) == spec
        assert TableTarget.from_params(job_params) == target
    rows_page = RowsPageSpec(commit="abc", table_id="t", page=2, page_size=50)
    assert RowsPageSpec.from_params(rows_page.to_params()) == rows_page
    gc = CatalogGcSpec.from_request(catalog_id="c", grace_hours=0.5)
    assert gc.to_params() == {"catalog_id": "c", "grace_seconds": 1800}
    assert CatalogGcSpec.from_params(gc.to_params()) == gc
    with pytest.raises(ApplicationError) as refused:
        CatalogGcSpec.from_request(catalog_id="c", grace_hours=0.0001)
    assert refused.value.code == "invalid_grace_period"


def test_a_stored_upload_round_trips():
    spec = LoadSpec(strategy="append_only", source=StoredFiles(path="c/t/staging/x.parquet", format="parquet"))
    assert spec.to_params() == {
        "strategy": "append_only",
        "upload": {"path": "c/t/staging/x.parquet", "format": "parquet"},
    }
    assert LoadSpec.from_params(spec.to_params()) == spec


@pytest.mark.django_db
def test_the_worker_runs_each_table_job_from_its_spec_with_its_default_message(spark):
    """The worker reads the target and the spec back from the job's params; a job given no message commits
    as "<verb> database.table"."""
    catalog = make_catalog()
    make_table(catalog)
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": ROWS})
    run_in_process(spark, catalog, {"set": {"amount": "amount + 1"}}, kind="table_update")
    run_in_process(spark, catalog, {"where": "id = 1"}, kind="table_delete")
    messages = Commit.objects.filter(catalog=catalog).order_by("-seq").values_list("message", flat=True)[:3]
    assert list(messages) == ["Delete from sales.orders", "Update sales.orders", "Load sales.orders"]
