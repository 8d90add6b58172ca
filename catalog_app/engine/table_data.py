"""A table's data as one job reads and writes it: where its files live, its columns, how it is partitioned. The
service builds it from the catalog (plain values); `read` and `write` are `reads.read_segments` and
`writes.write_segments` bound to it."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from catalog_app.engine.reads import read_segments
from catalog_app.engine.segment_writes import write_segments
from catalog_app.engine.segments import Column, SegmentRead, WrittenFile
from catalog_app.engine.strategies import GROUP
from catalog_app.engine.warehouse import Warehouse


@dataclass(frozen=True)
class TableData:
    warehouse: Warehouse
    base: str  # `<catalog id>/<table id>`: the folder of the table's files
    columns: tuple[Column, ...]
    partition_ids: tuple[int, ...] = ()
    key_ids: tuple[int, ...] = ()  # a keyed table's: a small segment's catalog row keeps their values

    def read(
        self,
        spark: SparkSession,
        segments: Sequence[SegmentRead],
        *,
        positions: bool = False,
        dropped: Mapping[str, pa.Array] | None = None,
    ) -> DataFrame:
        return read_segments(
            spark, self.warehouse, self.base, list(self.columns), segments, positions=positions, dropped=dropped
        )

    def write(self, rows: DataFrame, tag: str, *, grouped: bool = False, few: bool = False) -> list[WrittenFile]:
        """Write `rows` as new segments; `grouped` rows carry GROUP, and each group gets files of its own."""
        return write_segments(
            self.warehouse, self.base, rows, list(self.columns), partition_ids=list(self.partition_ids), tag=tag,
            group_column=GROUP if grouped else None, few=few, key_ids=self.key_ids,
        )  # fmt: skip
