"""manage.py lakeui_check: a sound catalog passes; each kind of corruption, made by hand, is found."""

from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from catalog_app.models import Branch, Commit, DataFile, ObjectKind, ObjectVersion
from catalog_app.services.refs import branch_create, tag_create
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.check import assert_consistent
from tests.support.data import files_at, run_in_process

pytestmark = pytest.mark.django_db

ROWS = [{"id": i, "amount": i, "region": "eu"} for i in range(1, 5)]


@pytest.fixture
def catalog(spark):
    """A catalog with a loaded table, a delete file, a branch and a tag."""
    catalog = make_catalog()
    make_table(catalog)
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": ROWS})
    run_in_process(spark, catalog, {"where": "id = 4"}, kind="table_delete")
    branch_create(catalog=catalog, name="dev", source="main")
    tag_create(catalog=catalog, name="v1", ref="main")
    return catalog


def check(*args) -> tuple[int, str]:
    from io import StringIO

    out = StringIO()
    try:
        call_command("lakeui_check", *args, stdout=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue()
    return 0, out.getvalue()


def test_a_sound_catalog_with_data_passes(catalog):
    make_catalog(name="other")
    assert check() == (0, "OK: 2 catalog(s) consistent.\n")
    assert check("--catalog", "lake") == (0, "OK: 1 catalog(s) consistent.\n")
    assert_consistent()


def test_a_branch_head_that_is_no_commit_is_found(catalog):
    dev = Branch.objects.get(catalog=catalog, name="dev")
    Branch.objects.filter(id=dev.id).update(head_id="0" * 32)
    code, out = check("--catalog", "lake")
    Branch.objects.filter(id=dev.id).update(head_id=dev.head_id)  # the test database checks its keys at teardown
    assert code == 1
    assert "dangling_ref: branch 'dev'" in out


def test_a_missing_parent_is_found(catalog):
    commit = Commit.objects.get(id=head(catalog))
    Commit.objects.filter(id=commit.id).update(parent_id="f" * 32)
    code, out = check()
    Commit.objects.filter(id=commit.id).update(parent_id=commit.parent_id)  # the test database checks its keys
    assert code == 1 and "missing_parent" in out


def test_a_missing_file_and_a_file_of_another_size_are_found(catalog):
    segment = files_at(catalog).segments[0]
    delta = files_at(catalog).deltas[segment.id][0]
    warehouse = Path(settings.LAKEUI_WAREHOUSE)
    (warehouse / segment.path).unlink()
    with open(warehouse / delta.path, "ab") as file:
        file.write(b"x")
    code, out = check()
    assert code == 1
    assert f"segment {segment.path} is not in the warehouse" in out
    assert f"delta {delta.path} holds {delta.size_bytes + 1} bytes, the catalog says {delta.size_bytes}" in out


def test_a_delete_position_beyond_its_segment_is_found(catalog):
    segment = files_at(catalog).segments[0]
    DataFile.objects.filter(id=segment.id).update(row_count=2)  # the delete file lists position 3
    code, out = check()
    assert code == 1 and "delete_out_of_range" in out


def test_a_merge_commit_without_its_merge_log_is_found(catalog):
    commit = Commit.objects.get(id=head(catalog))
    Commit.objects.filter(id=commit.id).update(merge_parent=commit.parent_id)
    code, out = check()
    assert code == 1 and f"merge_without_log: merge commit {commit.id}" in out


def test_a_name_held_twice_is_found(catalog):
    make_table(catalog, table="other")
    ObjectVersion.objects.filter(catalog=catalog, kind=ObjectKind.TABLE, name="other").update(name="orders")
    code, out = check()
    assert code == 1 and "duplicate_name: branch 'main': table sales.orders is held by 2 live objects" in out
