"""Uploaded files are checked against the column types as strictly as JSON rows are."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from catalog_app.engine.incoming import IncomingError, file_frame, rows_frame
from catalog_app.engine.segment_writes import write_segments
from catalog_app.engine.segments import Column
from catalog_app.engine.warehouse import Warehouse

COLUMNS = [Column(1, "id", "long", False), Column(2, "region", "string")]


def _parquet(tmp_path, table: pa.Table) -> str:
    path = tmp_path / "upload.parquet"
    pq.write_table(table, path)
    return str(path)


@pytest.mark.parametrize(
    "region",
    [
        pa.array([7, 8], pa.int64()),
        pa.array([{"a": 1}, {"a": 2}]),
        pa.array([1.5, 2.5], pa.float64()),
        pa.array([True, False]),
        pa.array([["x"], ["y"]]),
    ],
    ids=["int64", "struct", "double", "boolean", "array"],
)
def test_a_typed_parquet_column_into_a_string_column_is_refused(spark, tmp_path, region):
    uri = _parquet(tmp_path, pa.table({"id": pa.array([1, 2], pa.int64()), "region": region}))
    with pytest.raises(IncomingError) as refused:
        file_frame(spark, uri, "parquet", COLUMNS)
    assert refused.value.code == "type_mismatch"
    assert "'region'" in refused.value.message
    with pytest.raises(IncomingError):  # as JSON rows with the same values are
        rows_frame(spark, [{"id": 1, "region": region[0].as_py()}], COLUMNS)


@pytest.mark.parametrize(
    "ids", [pa.array([1.5, 2.0], pa.float64()), pa.array([True, False]), pa.array([{"a": 1}, {"a": 2}])]
)
def test_a_fraction_boolean_or_struct_into_a_long_column_is_refused(spark, tmp_path, ids):
    uri = _parquet(tmp_path, pa.table({"id": ids, "region": ["eu", "us"]}))
    with pytest.raises(IncomingError) as refused:
        file_frame(spark, uri, "parquet", COLUMNS)
    assert refused.value.code == "type_mismatch" and "'id'" in refused.value.message


def test_fitting_files_still_load(spark, tmp_path):
    uri = _parquet(tmp_path, pa.table({"id": pa.array([1, 2], pa.int32()), "region": ["eu", None]}))
    assert [tuple(row) for row in file_frame(spark, uri, "parquet", COLUMNS).collect()] == [(1, "eu"), (2, None)]
    csv = tmp_path / "upload.csv"
    csv.write_text("id,region\n3,eu\n4,us\n")
    assert [tuple(row) for row in file_frame(spark, str(csv), "csv", COLUMNS).collect()] == [(3, "eu"), (4, "us")]


@pytest.mark.parametrize("partitioned", [False, True])
def test_a_write_of_no_rows_leaves_no_file(spark, tmp_path, partitioned):
    warehouse = Warehouse(str(tmp_path / "warehouse"))
    empty = rows_frame(spark, [], COLUMNS)
    written = write_segments(warehouse, "1/2", empty, COLUMNS, partition_ids=[2] if partitioned else [], tag="t1")
    assert written == []
    assert not (tmp_path / "warehouse" / "1" / "2" / "data" / "t1").exists()
    some = write_segments(warehouse, "1/2", rows_frame(spark, [{"id": 1, "region": "eu"}], COLUMNS), COLUMNS, tag="t2")
    files = [p for p in (tmp_path / "warehouse" / "1" / "2" / "data" / "t2").rglob("*.parquet")]
    assert [w.row_count for w in some] == [1] and len(files) == 1
