"""A merge's fill by an expression, computed when a segment written without its column is read in Arrow
(`reads.projected_arrow`; docs/merge-semantics.md#schema-conflicts-in-a-resolution): from the segment's own values
of the columns the fill reads, matched by id; rows the Arrow evaluator cannot compute as Spark does are handed on as
a read this process cannot do (a worker reads them on Spark)."""

import math

import pyarrow as pa
import pytest

from catalog_app.engine.reads import READ_ERRORS, projected_arrow
from catalog_app.engine.segments import Column, Fill

WRITTEN = (Column(1, "id", "long", False), Column(2, "amount", "int"), Column(3, "price", "double"))
ROWS = pa.table({"id": pa.array([1, 2], pa.int64()), "amount": pa.array([10, None], pa.int32()),
                 "price": pa.array([1.5, math.nan])})  # fmt: skip


def test_a_fill_reads_the_segment_s_values_by_column_id_whatever_the_columns_are_named_now():
    reads = (Column(1, "id", "long", False), Column(2, "amount", "int"))
    qty = Column(4, "qty", "long", True, None, Fill("id * 10 + amount", reads))
    renamed = (Column(1, "key", "long", False), Column(2, "amt", "int"), qty)  # amount renamed since the merge
    assert projected_arrow(ROWS, WRITTEN, renamed).to_pylist() == [
        {"key": 1, "amt": 10, "qty": 20}, {"key": 2, "amt": None, "qty": None}
    ]  # fmt: skip


def test_rows_a_fill_needs_spark_for_are_left_to_a_worker():
    big = Column(4, "big", "boolean", True, None, Fill("price > 1", (Column(3, "price", "double"),)))
    with pytest.raises(READ_ERRORS) as handed_on:  # a NaN among compared values: Spark orders it, Arrow here does not
        projected_arrow(ROWS, WRITTEN, (*WRITTEN, big))
    assert "needs Spark" in str(handed_on.value)
