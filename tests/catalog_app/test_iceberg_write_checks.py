"""The pure parts of Iceberg writes, without a server: a createTable body as LakeUI columns, and the engine's
checks and row matching on real Parquet files (catalog_app/iceberg/commits.py, catalog_app/engine/iceberg_incoming.py)."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from catalog_app.engine.iceberg_incoming import FileRefused, data_file_checked, rewrite_matched
from catalog_app.engine.segments import Column, SegmentRead
from catalog_app.engine.warehouse import Warehouse
from catalog_app.iceberg.commits import table_spec
from lakeui.errors import ApplicationError

COLUMNS = (Column(1, "id", "long", False), Column(2, "region", "string"))


def body(fields, **extra) -> dict:
    return {"name": "t", "schema": {"type": "struct", "fields": fields, **extra.pop("schema", {})}, **extra}


def test_a_create_table_body_as_lakeui_columns():
    spec = table_spec(body(
        [{"id": 1, "name": "id", "type": "long", "required": True},
         {"id": 2, "name": "price", "type": "decimal(10, 2)", "required": False},
         {"id": 3, "name": "at", "type": "timestamptz", "required": False}],
        schema={"identifier-field-ids": [1]},
        **{"partition-spec": {"fields": [{"source-id": 3, "field-id": 1000, "name": "at", "transform": "identity"}]},
           "properties": {"owner": "data", "format-version": "2"}},
    ))  # fmt: skip
    assert [(c["name"], c["type"], c["nullable"]) for c in spec.columns] == [
        ("id", "long", False), ("price", "decimal(10,2)", True), ("at", "timestamp", True)]  # fmt: skip
    assert (spec.primary_key, spec.partition_by, spec.properties) == (["id"], ["at"], {"owner": "data"})


@pytest.mark.parametrize(
    ("fields", "extra", "says"),
    [
        ([{"id": 1, "name": "n", "type": {"type": "list", "element": "int"}}], {}, "is not one LakeUI tables hold"),
        ([{"id": 1, "name": "at", "type": "timestamp"}], {}, "use timestamptz"),
        ([{"id": 1, "name": "d", "type": "decimal(123, 1)"}], {}, "is not one LakeUI tables hold"),
        ([{"id": 1, "name": "id", "type": "long"}],
         {"partition-spec": {"fields": [{"source-id": 1, "name": "b", "transform": "bucket[4]"}]}}, "identity"),
        ([{"id": 1, "name": "id", "type": "long"}], {"location": "/elsewhere"}, "chooses table locations"),
        ([{"id": 1, "name": "id", "type": "long"}], {"properties": {"write.data.path": "/x"}}, "LakeUI's to set"),
    ],
)  # fmt: skip
def test_what_a_lakeui_table_cannot_hold_is_refused(fields, extra, says):
    with pytest.raises(ApplicationError, match=says):
        table_spec(body(fields, **extra))


def write(tmp_path, name: str, table: pa.Table, ids=(1, 2)) -> str:
    schema = pa.schema(
        [f.with_metadata({b"PARQUET:field_id": str(i).encode()}) for f, i in zip(table.schema, ids, strict=True)]
    )
    pq.write_table(table.cast(schema), tmp_path / name)
    return name


def test_data_files_checked_against_the_schema(tmp_path):
    warehouse = Warehouse(str(tmp_path))
    good = write(tmp_path, "good.parquet", pa.table({"id": pa.array([1, 2], pa.int64()), "region": ["eu", None]}))
    described = data_file_checked(warehouse, good, COLUMNS, (), 2)
    assert (described.row_count, described.stats["1"]) == (2, {"min": 1, "max": 2, "nulls": 0})
    refusals = {
        "holds int32": write(tmp_path, "int.parquet", pa.table({"id": pa.array([1], pa.int32())}), ids=(1,)),
        "nulls in the NOT NULL": write(tmp_path, "null.parquet", pa.table({"id": pa.array([None], pa.int64())}), (1,)),
        "is no column": write(
            tmp_path, "extra.parquet", pa.table({"id": pa.array([1], pa.int64()), "x": [1]}), ids=(1, 9)
        ),
        "is named": write(tmp_path, "named.parquet", pa.table({"key": pa.array([1], pa.int64())}), ids=(1,)),
        "lacks the NOT NULL": write(tmp_path, "lacks.parquet", pa.table({"region": ["eu"]}), ids=(2,)),
    }
    for says, path in refusals.items():
        with pytest.raises(FileRefused, match=says):
            data_file_checked(warehouse, path, COLUMNS, (), 1)
    (tmp_path / "junk.parquet").write_text("no")
    with pytest.raises(FileRefused, match="not a Parquet file"):
        data_file_checked(warehouse, "junk.parquet", COLUMNS, (), 1)
    with pytest.raises(FileRefused, match="holds 2 rows, not 3"):
        data_file_checked(warehouse, good, COLUMNS, (), 3)


def test_a_rewrite_is_matched_row_by_row(tmp_path):
    """A file replaced by a rewrite of itself less 2 rows, plus one new row: 2 positions lost, 1 row new."""
    warehouse = Warehouse(str(tmp_path))
    old = write(tmp_path, "old.parquet", pa.table({"id": pa.array([1, 2, 3, 3], pa.int64()), "region": ["a"] * 4}))
    new = write(tmp_path, "new.parquet", pa.table({"id": pa.array([3, 9, 1], pa.int64()), "region": ["a"] * 3}))
    segment = SegmentRead(id="s", path=old, columns=COLUMNS)
    matched = rewrite_matched(warehouse, [segment], [new], COLUMNS)
    assert sorted(matched.lost["s"]) in ([1, 2], [1, 3])  # key 2, and one of the two rows of key 3
    assert matched.new_rows == {new: [1]}
    assert rewrite_matched(warehouse, [], [new], COLUMNS).new_rows == {new: None}  # an append reads no rows


def test_spark_reads_registered_segments_among_many(spark, tmp_path):
    """A read of more than SMALL_READ segments finds each row's segment from its file's path: a segment registered
    where another catalog wrote it (outside `<catalog>/<table>/`) is found too, with its delta file applied."""
    from catalog_app.engine.iceberg_incoming import positions_write
    from catalog_app.engine.reads import SMALL_READ, read_segments
    from catalog_app.engine.segments import SEGMENT_ID

    warehouse, base = Warehouse(str(tmp_path)), "cat/table"
    segments = []
    for i in range(SMALL_READ + 2):
        folder = f"{base}/data/t{i}" if i % 2 else f"external/other/shop/t/data/p={i}"
        (tmp_path / folder).mkdir(parents=True)
        path = write(tmp_path, f"{folder}/part-{i}.parquet",
                     pa.table({"id": pa.array([10 * i, 10 * i + 1], pa.int64()), "region": [f"r{i}"] * 2}))  # fmt: skip
        deltas = ()
        if i == 4:  # a registered segment's deletes live in the table's own folder
            deltas = (positions_write(warehouse, f"{base}/deltas/x", f"s{i}", [1]).path,)
        segments.append(SegmentRead(id=f"s{i}", path=path, columns=COLUMNS, deltas=deltas, order=i))
    frame = read_segments(spark, warehouse, base, list(COLUMNS), segments, positions=True)
    got = sorted((r["id"], r[SEGMENT_ID]) for r in frame.collect())
    wanted = sorted((10 * i + p, f"s{i}") for i in range(SMALL_READ + 2) for p in (0, 1) if (i, p) != (4, 1))
    assert got == wanted
