"""Uploads, whatever the entry point (the API, the load form; the CLI in tests/clients/test_cli_uploads.py): an
empty file or one that is not the format it is sent as is refused saying what is wrong with the file, and a load's
upload is removed from the warehouse once the load has an outcome, loaded or refused (issues 38 and 41)."""

import io
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.conf import settings
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile

from catalog_app.engine.incoming import upload_problem
from catalog_app.models import Commit
from lakeui.jobs.models import Job
from tests.conftest import wait_for_job
from tests.support.catalogs import head, make_catalog, make_table

pytestmark = pytest.mark.django_db

TABLE = "/api/v1/catalogs/lake/refs/main/databases/sales/tables/orders"
CSV = b"id,amount,region\n1,10,eu\n2,20,us\n"


def _parquet(rows: list[dict]) -> bytes:
    sink = io.BytesIO()
    schema = pa.schema([("id", pa.int64()), ("amount", pa.int32()), ("region", pa.string())])
    pq.write_table(pa.Table.from_pylist(rows, schema), sink)
    return sink.getvalue()


GOOD = {
    "csv": CSV,
    "parquet": _parquet([{"id": 1, "amount": 10, "region": "eu"}, {"id": 2, "amount": 20, "region": "us"}]),
    "json": b'{"id": 1, "amount": 10, "region": "eu"}\n{"id": 2, "amount": 20, "region": "us"}\n',
}
# Each readable as its format, refused by the table: a NULL in the NOT NULL column `id`.
REFUSED = {
    "csv": b"id,amount,region\n,10,eu\n",
    "parquet": _parquet([{"id": None, "amount": 10, "region": "eu"}]),
    "json": b'{"id": null, "amount": 10, "region": "eu"}\n',
}


def _warehouse_files(catalog) -> list[Path]:
    return sorted(p for p in (Path(settings.LAKEUI_WAREHOUSE) / str(catalog.id)).rglob("*") if p.is_file())


def _uploads(catalog) -> list[Path]:
    return [p for p in _warehouse_files(catalog) if "staging" in p.parts]


@pytest.mark.parametrize(
    ("size", "head", "file_format", "code", "words"),
    [
        (0, b"", "csv", "empty_file", "empty (0 bytes)"),
        (0, b"", "parquet", "empty_file", "empty (0 bytes)"),
        (len(CSV), CSV, "parquet", "unreadable_file", "not a Parquet file: it looks like CSV text; send it with format csv"),
        (len(GOOD["json"]), GOOD["json"], "parquet", "unreadable_file", "looks like JSON lines text"),
        (len(GOOD["parquet"]), GOOD["parquet"], "csv", "unreadable_file", "a Parquet file, not csv"),
        (len(CSV), CSV, "json", "unreadable_file", "not JSON lines"),
        (3, b"\n\n\n", "csv", "empty_file", "only blank lines"),
    ],
)  # fmt: skip
def test_an_upload_that_is_empty_or_not_its_format_is_told_apart_before_any_engine_reads_it(
    size, head, file_format, code, words
):
    problem = upload_problem(size=size, head=head, tail=head[-4:], file_format=file_format)
    assert (problem.code, words in problem.message) == (code, True), problem.message


@pytest.mark.parametrize("file_format", sorted(GOOD))
def test_a_good_upload_of_each_format_passes(file_format):
    contents = GOOD[file_format]
    assert upload_problem(size=len(contents), head=contents, tail=contents[-4:], file_format=file_format) is None


@pytest.mark.parametrize(
    ("name", "contents", "code", "words"),
    [
        ("empty.csv", b"", "empty_file", "The file is empty (0 bytes)"),
        ("empty.parquet", b"", "empty_file", "The file is empty (0 bytes)"),
        ("orders.parquet", CSV, "unreadable_file", "it looks like CSV text; send it with format csv"),
    ],
)  # fmt: skip
def test_the_api_refuses_an_empty_or_mislabelled_upload_and_stores_nothing(user_client, name, contents, code, words):
    catalog = make_catalog()
    make_table(catalog)
    before, commits = _warehouse_files(catalog), Commit.objects.count()
    response = user_client.post(
        f"{TABLE}/load", {"strategy": "append_only", "file": SimpleUploadedFile(name, contents)}, format="multipart"
    )
    assert response.status_code == 400, response.content
    assert response.json()["code"] == code and words in response.json()["message"], response.json()
    assert (_warehouse_files(catalog), Commit.objects.count(), Job.objects.count()) == (before, commits, 0)


@pytest.mark.parametrize(
    ("name", "contents", "words"),
    [
        ("empty.csv", b"", "The file is empty (0 bytes)"),
        ("orders.parquet", CSV, "The file is not a Parquet file: it looks like CSV text"),
    ],
)  # fmt: skip
def test_the_load_form_refuses_an_empty_or_mislabelled_upload_with_the_apis_message(
    user, client, name, contents, words
):
    catalog = make_catalog(user=user)
    make_table(catalog)
    client.force_login(user)
    before, main = _warehouse_files(catalog), head(catalog)
    response = client.post(
        "/catalogs/lake/browse/sales/orders/load",
        {"branch": "main", "strategy": "append_only", "file": SimpleUploadedFile(name, contents), "format": ""},
    )
    assert response.status_code == 302
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert any(words in m for m in shown), shown
    assert (_warehouse_files(catalog), head(catalog), Job.objects.count()) == (before, main, 0)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_a_loaded_and_a_refused_upload_of_each_format_leave_no_upload_behind(user_client):
    """The warehouse's files before and after: a refused load leaves exactly the files it found, a successful
    one its data files and no upload."""
    catalog = make_catalog()
    make_table(catalog)
    for file_format in ("csv", "parquet", "json"):
        before = _warehouse_files(catalog)
        refused = user_client.post(
            f"{TABLE}/load",
            {"strategy": "append_only", "file": SimpleUploadedFile(f"bad.{file_format}", REFUSED[file_format])},
            format="multipart",
        )
        assert refused.status_code == 202, refused.content
        job = wait_for_job(refused.json()["id"], timeout=240)
        assert (job.status, job.error_code) == (Job.Status.FAILED, "not_null_violation"), job.error_message
        assert _warehouse_files(catalog) == before, file_format

        loaded = user_client.post(
            f"{TABLE}/load",
            {"strategy": "append_only", "file": SimpleUploadedFile(f"good.{file_format}", GOOD[file_format])},
            format="multipart",
        )
        assert loaded.status_code == 202, loaded.content
        job = wait_for_job(loaded.json()["id"], timeout=240)
        assert job.status == Job.Status.SUCCEEDED, job.error_message
        assert job.result["rows_inserted"] == 2
        assert _uploads(catalog) == [], file_format
        assert len(_warehouse_files(catalog)) > len(before)  # its data files


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_a_parquet_file_damaged_inside_fails_saying_so_without_jvm_names_and_is_removed(user_client):
    """A file that begins and ends as Parquet does but holds garbage passes the upload check; Spark's read fails,
    and the message says the file cannot be read as parquet, without Java classes, JVM call names or paths."""
    catalog = make_catalog()
    make_table(catalog)
    damaged = b"PAR1" + b"not really parquet, " * 50 + b"PAR1"
    response = user_client.post(
        f"{TABLE}/load",
        {"strategy": "append_only", "file": SimpleUploadedFile("x.parquet", damaged)},
        format="multipart",
    )
    assert response.status_code == 202, response.content
    job = wait_for_job(response.json()["id"], timeout=240)
    assert (job.status, job.error_code) == (Job.Status.FAILED, "unreadable_file"), (job.error_code, job.error_message)
    message = job.error_message
    assert message.startswith("The file cannot be read as parquet"), message
    assert not re.search(r"\bo\d+\.\w+|java|scala|org\.apache|An error occurred|/staging/|file:", message), message
    assert _uploads(catalog) == []
