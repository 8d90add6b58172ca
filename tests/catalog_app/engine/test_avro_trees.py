"""pyiceberg builds a tree of readers or writers, and converts a schema for the header, for every Avro file it opens;
LakeUI keeps them per process (catalog_app/engine/iceberg_incoming.py). Manifests of different partition types,
written and read in turns, each read back exactly what was written in them, and a second round builds nothing."""

import json

from pyiceberg.avro.file import _SCHEMA_KEY, AvroFile
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
    read_manifest_list,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

from catalog_app.engine import iceberg_incoming

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "region", StringType()))
SPECS = {
    "by_id": (PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "id"), spec_id=1), Record(7)),
    "by_region": (PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"), spec_id=2), Record("eu")),
    "none": (PartitionSpec(spec_id=0), Record()),
}


def manifest_written(io, folder, name: str, spec: PartitionSpec, partition: Record) -> tuple[str, object]:
    path = f"{folder}/{name}.avro"
    data_file = DataFile.from_args(
        content=DataFileContent.DATA, file_path=f"{folder}/{name}.parquet", file_format=FileFormat.PARQUET,
        partition=partition, record_count=3, file_size_in_bytes=100,
    )  # fmt: skip
    with ManifestWriterV2(spec, SCHEMA, io.new_output(path), 1, "deflate") as writer:
        writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=1, data_file=data_file))
    return path, writer.to_manifest_file()


def test_manifests_of_three_partition_types_written_and_read_in_turns_read_back_what_was_written(tmp_path):
    io = PyArrowFileIO()
    for round_ in range(2):
        if round_ == 1:
            trees = dict(iceberg_incoming._trees)
        manifests = []
        for name, (spec, partition) in SPECS.items():
            path, manifest = manifest_written(io, tmp_path, f"{name}-{round_}", spec, partition)
            manifests.append(manifest)
            [entry] = manifest.fetch_manifest_entry(io, discard_deleted=False)
            assert entry.data_file.file_path == f"{tmp_path}/{name}-{round_}.parquet"
            assert entry.data_file.partition == partition, name
            with AvroFile(io.new_input(path)) as read:  # the header's schema, as pyiceberg itself converts it
                expected = AvroSchemaConversion().iceberg_to_avro(read.schema, schema_name="manifest_entry")
                assert json.loads(read.header.meta[_SCHEMA_KEY]) == expected
        listed = f"{tmp_path}/list-{round_}.avro"
        with write_manifest_list(2, io.new_output(listed), 1, None, 1, "deflate") as writer:
            writer.add_manifests(manifests)
        assert [m.manifest_path for m in read_manifest_list(io.new_input(listed))] == [
            m.manifest_path for m in manifests
        ]
    assert iceberg_incoming._trees.keys() == trees.keys()  # the second round made no tree nor schema again
    assert all(iceberg_incoming._trees[key][1] is trees[key][1] for key in trees)


def test_a_file_whose_header_schema_is_too_long_to_keep_keeps_no_reader_tree(tmp_path, monkeypatch):
    """A header schema longer than `SCHEMA_KEPT_CHARS` (an engine may write any) is converted each time, and the
    reader tree made from it is not kept either: a stream of such files fills no cache."""
    io = PyArrowFileIO()
    spec, partition = SPECS["by_region"]
    _, manifest = manifest_written(io, tmp_path, "long", spec, partition)
    monkeypatch.setattr(iceberg_incoming, "SCHEMA_KEPT_CHARS", 10)
    iceberg_incoming._trees.clear()
    for _ in range(3):
        entries = manifest.fetch_manifest_entry(io, discard_deleted=False)
        assert [entry.data_file.partition for entry in entries] == [partition]
    assert not [key for key in iceberg_incoming._trees if key[0] == "reader"]
