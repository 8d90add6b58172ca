"""Reading a table's segments: with Spark (`read_segments`, `read_page`), or for a page of rows in this process
with pyarrow (`read_page_arrow`); the positions their delta files delete.

A segment is read with the schema it was written with and projected onto the current schema by column id
(renamed columns keep their data, added ones read as their default, widened ones are cast up, and ones a merge
gave another type cast to it: every value was checked to fit, `first_misfit`), and the union of its delta files'
positions is subtracted.
"""

import re
from collections.abc import Collection, Mapping, Sequence
from functools import lru_cache, reduce
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from catalog_app.engine.frames import arrow_frame, empty_frame, struct_type
from catalog_app.engine.predicate_arrow import Unsupported, computed
from catalog_app.engine.predicate_columns import to_column
from catalog_app.engine.predicate_parser import Expr, parse_expression
from catalog_app.engine.segments import ORDER, POSITION, SEGMENT_ID, Column, Fill, SegmentRead
from catalog_app.engine.types import arrow_type, json_value, python_value, spark_type
from catalog_app.engine.warehouse import Warehouse, arrow_filesystem

# What reading files here with pyarrow raises when the warehouse cannot be read from this process (credentials).
READ_ERRORS = (OSError, pa.ArrowException)
SMALL_READ = 16  # up to this many segments are read one scan each (see read_segments)
_POSITION_COLUMNS = ((SEGMENT_ID, "string"), (POSITION, "long"), (ORDER, "long"))


def read_segments(
    spark: SparkSession,
    warehouse: Warehouse,
    base: str,
    current: Sequence[Column],
    segments: Sequence[SegmentRead],
    *,
    positions: bool = False,
    dropped: Mapping[str, pa.Array] | None = None,
) -> DataFrame:
    """The rows of `segments` in the `current` schema, deltas applied. With `positions`, each row also carries
    its segment id, its position in the segment and the segment's order (for stable paging). `dropped` leaves
    out more positions of some segments (by segment id): the rows a job is replacing, say.

    Up to SMALL_READ segments are read one scan each, with their ids as literals; more are read one scan per
    written schema, and each row's segment found from its file path."""
    if not segments:
        frame = empty_frame(spark, current)
        if positions:
            frame = frame.select("*", *[F.lit(None).cast(t).alias(n) for n, t in _POSITION_COLUMNS])
        return frame
    if len(segments) <= SMALL_READ:
        rows = reduce(DataFrame.unionByName, [_segment_rows(spark, warehouse, current, s) for s in segments])
    else:
        rows = _many_segments_rows(spark, warehouse, base, current, segments)
    if dropped:
        owners = pa.concat_arrays([pa.array([segment] * len(gone), pa.string()) for segment, gone in dropped.items()])
        gone = arrow_frame(spark, {SEGMENT_ID: owners, POSITION: pa.concat_arrays(list(dropped.values()))})
        rows = rows.join(gone, [SEGMENT_ID, POSITION], "left_anti")
    if not positions:
        rows = rows.drop(SEGMENT_ID, POSITION, ORDER)
    return rows


def first_misfit(
    spark: SparkSession,
    warehouse: Warehouse,
    base: str,
    current: Sequence[Column],
    segments: Sequence[SegmentRead],
    column: Column,
    to: str,
) -> Any | None:
    """The first value of `column` in the rows of `segments` (read in the `current` schema, as JSON) that is not
    itself once cast to type `to` and back (a number out of range or with more digits, text that is not the
    number's or the date's own spelling): None when every value fits, so that a read casting the column's values
    to `to` gives each of them exactly, in Spark and in Arrow alike."""
    value = F.col(f"`{column.name}`")
    cast = value.try_cast(spark_type(to))
    back = cast.try_cast(spark_type(column.type))
    rows = read_segments(spark, warehouse, base, current, segments).select(value)
    found = rows.where(value.isNotNull() & (cast.isNull() | ~back.eqNullSafe(value))).limit(1).collect()
    return json_value(found[0][0]) if found else None


def _projection(written: Sequence[Column], current: Sequence[Column]) -> list[SparkColumn]:
    """The columns of a segment written with `written`, in the `current` schema (matched by column id). A column
    it lacks reads as its default, or as its fill computed from the segment's own values (`Fill`)."""
    by_id = {column.id: column for column in written}

    def projected(c: Column) -> SparkColumn:
        if c.id in by_id:
            return F.col(f"`{by_id[c.id].name}`").cast(spark_type(c.type))
        if c.fill is None:
            return F.lit(c.default).cast(spark_type(c.type))
        inputs = {f.name: projected(f) for f in c.fill.columns}
        return to_column(parsed_fill(c.fill), inputs.__getitem__).cast(spark_type(c.type))

    return [projected(c).alias(c.name) for c in current]


def parsed_fill(fill: Fill) -> Expr:
    """A fill's expression, parsed over the columns it reads."""
    return _parsed_fill(fill.expression, tuple((c.name, c.type) for c in fill.columns))


@lru_cache(maxsize=256)
def _parsed_fill(text: str, types: tuple[tuple[str, str], ...]) -> Expr:
    return parse_expression(text, dict(types))


def _segment_rows(spark, warehouse: Warehouse, current, segment: SegmentRead) -> DataFrame:
    frame = spark.read.schema(struct_type(segment.columns)).parquet(warehouse.uri(segment.path))
    frame = frame.select(
        *_projection(segment.columns, current), F.lit(segment.id).alias(SEGMENT_ID),
        F.col("_metadata.row_index").alias(POSITION), F.lit(segment.order).cast("long").alias(ORDER),
    )  # fmt: skip
    if segment.deltas:
        deleted = spark.read.schema("pos long").parquet(*[warehouse.uri(p) for p in segment.deltas])
        frame = frame.join(deleted.select(F.col("pos").alias(POSITION)), POSITION, "left_anti")
    return frame


def _many_segments_rows(spark, warehouse: Warehouse, base: str, current, segments) -> DataFrame:
    by_schema: dict[tuple[Column, ...], list[SegmentRead]] = {}
    for segment in segments:
        by_schema.setdefault(segment.columns, []).append(segment)
    parts = []
    for written, group in by_schema.items():
        frame = spark.read.schema(struct_type(written)).parquet(*[warehouse.uri(s.path) for s in group])
        elsewhere = {s.path.rsplit("/", 1)[0] for s in group if not s.path.startswith(f"{base}/")}
        path = _relative_path(F.col("_metadata.file_path"), base, elsewhere).alias("_path")
        parts.append(frame.select(*_projection(written, current), path, F.col("_metadata.row_index").alias(POSITION)))
    rows = reduce(DataFrame.unionByName, parts)
    files = arrow_frame(
        spark,
        {"_path": [s.path for s in segments], SEGMENT_ID: [s.id for s in segments],
         ORDER: pa.array([s.order for s in segments], pa.int64())},
    )  # fmt: skip
    rows = rows.join(F.broadcast(files), "_path").drop("_path")
    delta_paths = {delta: segment.id for segment in segments for delta in segment.deltas}
    if delta_paths:
        deleted = spark.read.schema("pos long").parquet(*[warehouse.uri(p) for p in delta_paths])
        owners = arrow_frame(spark, {"_dpath": list(delta_paths), SEGMENT_ID: list(delta_paths.values())})
        deleted = deleted.select(_relative_path(F.col("_metadata.file_path"), base).alias("_dpath"), F.col("pos"))
        deleted = deleted.join(F.broadcast(owners), "_dpath").select(SEGMENT_ID, F.col("pos").alias(POSITION))
        rows = rows.join(deleted, [SEGMENT_ID, POSITION], "left_anti")
    return rows


def _relative_path(path_column: SparkColumn, base: str, elsewhere: Collection[str] = ()) -> SparkColumn:
    """The part of a file URI from `base` (`<catalog id>/<table id>`) on: the path as the catalog stores it. A
    segment registered where another catalog wrote it (catalog_app/iceberg/register.py) lies outside `base`: its
    path is its folder (one of `elsewhere`, from the warehouse root) and its file name."""
    pattern = f"{re.escape(base)}/.*"
    if elsewhere:
        pattern += "|(?:" + "|".join(re.escape(folder) for folder in sorted(elsewhere)) + ")/[^/]+"
    return F.regexp_extract(path_column, f"({pattern})$", 1)


def read_page(
    spark: SparkSession,
    warehouse: Warehouse,
    base: str,
    current: Sequence[Column],
    segments: Sequence[SegmentRead],
    *,
    offset: int,
    limit: int,
) -> list[list[Any]]:
    """Rows `offset` to `offset + limit` in a stable order (segment, then position). Reads only the segments
    the window can reach: a preview of a large table reads its first segments, not the whole table."""
    frame = read_segments(spark, warehouse, base, current, segments, positions=True)
    page = frame.orderBy(ORDER, POSITION).offset(offset).limit(limit).select(*[F.col(f"`{c.name}`") for c in current])
    return _json_rows(page.toArrow())


def _json_rows(rows: pa.Table) -> list[list[Any]]:
    return [[json_value(value) for value in row.values()] for row in rows.to_pylist()]


PAGE_BATCH_ROWS = 4096  # rows decoded at a time when a page is read here (a row group may hold millions)


def read_page_arrow(
    warehouse: Warehouse, current: Sequence[Column], segments: Sequence[SegmentRead], *, offset: int, limit: int
) -> list[list[Any]]:
    """The page `read_page` gives, read in this process with pyarrow: row groups before the page are skipped by
    their row counts less their deleted positions, and the rest decoded a batch at a time, only until the page is
    full. No Spark job and no queue, so a preview answers at once whatever the workers are doing. A segment
    written in an older schema is projected onto the current one as Spark projects it (`projected_arrow`)."""
    schema = _arrow_schema(current)
    parts: list[pa.Table] = []
    before = seen = 0  # live rows before the first part kept, and before what is read next
    for segment in segments:
        deleted = deleted_positions(warehouse, segment.deltas).to_numpy() if segment.deltas else None
        filesystem, path = arrow_filesystem(warehouse.uri(segment.path))
        names = [c.name for c in segment.columns]
        with filesystem.open_input_file(path) as handle:
            source, start = pq.ParquetFile(handle, buffer_size=2**20), 0  # buffered: a column chunk read in pieces
            for index in range(source.metadata.num_row_groups):
                size = source.metadata.row_group(index).num_rows
                keep = np.ones(size, dtype=bool)
                if deleted is not None:
                    keep[deleted[(deleted >= start) & (deleted < start + size)] - start] = False
                start += size
                if seen + int(keep.sum()) <= offset:
                    seen += int(keep.sum())
                    continue
                at = 0
                for batch in source.iter_batches(PAGE_BATCH_ROWS, row_groups=[index], columns=names):
                    mask, at = keep[at : at + batch.num_rows], at + batch.num_rows
                    live = int(mask.sum())
                    if seen + live > offset:
                        before = before if parts else seen
                        rows = pa.Table.from_batches([batch]).select(names).filter(pa.array(mask))
                        parts.append(projected_arrow(rows, segment.columns, current))
                    seen += live
                    if seen >= offset + limit:
                        break
                if seen >= offset + limit:
                    break
        if seen >= offset + limit:
            break
    return _json_rows(pa.concat_tables(parts).slice(offset - before, limit) if parts else schema.empty_table())


def read_rows_arrow(warehouse: Warehouse, current: Sequence[Column], segments: Sequence[SegmentRead]) -> pa.Table:
    """All live rows of `segments` in the `current` schema, read in this process with pyarrow, in the order
    `read_page` gives them: what `read_segments` reads, for a table small enough to hold here (the caller bounds
    its rows)."""
    parts = []
    for segment in segments:
        filesystem, path = arrow_filesystem(warehouse.uri(segment.path))
        rows = pq.read_table(path, columns=[c.name for c in segment.columns], filesystem=filesystem)
        if segment.deltas:
            keep = np.ones(rows.num_rows, dtype=bool)
            keep[deleted_positions(warehouse, segment.deltas).to_numpy()] = False
            rows = rows.filter(pa.array(keep))
        parts.append(projected_arrow(rows, segment.columns, current))
    return pa.concat_tables(parts) if parts else _arrow_schema(current).empty_table()


def projected_arrow(rows: pa.Table, written: Sequence[Column], current: Sequence[Column]) -> pa.Table:
    """Rows of a segment written with `written`, in the `current` schema: `_projection` in Arrow. Matched by
    column id (a renamed column keeps its data), an added column reads as its default or its fill, a widened one is
    cast up (every widening `types.is_widening` allows is exact in Arrow too, and so is a cast a merge checked the
    values for)."""
    by_id = {column.id: column for column in written}
    arrays = []
    for column in current:
        if column.id in by_id:
            arrays.append(rows.column(by_id[column.id].name).cast(arrow_type(column.type)))
        else:
            arrays.append(_default_array(column, rows.num_rows))
    projected = pa.Table.from_arrays(arrays, schema=_arrow_schema(current))
    for index, column in enumerate(current):
        if column.fill is not None and column.id not in by_id:  # from the segment's own values, as `_projection`
            inputs = projected_arrow(rows, written, column.fill.columns)
            types = {c.name: c.type for c in column.fill.columns}
            try:
                value = computed(parsed_fill(column.fill), inputs, types, column.type, time_zone="UTC")
            except Unsupported as why:  # these rows need Spark (a NaN compared): read as a file this process cannot
                raise pa.ArrowNotImplementedError(f"the fill of {column.name!r} needs Spark: {why}") from None
            projected = projected.set_column(index, projected.field(index), value)
    return projected


def fill_problem(
    spark: SparkSession, warehouse: Warehouse, base: str, segments: Sequence[SegmentRead], column: Column
) -> str | None:
    """What is wrong with the fill of `column` (`Fill`) in the rows of `segments` written without the column: an
    expression Arrow cannot compute as Spark does (`predicate_arrow.computed`: previews read it there), a NULL in
    a NOT NULL column, a value the column's type does not hold exactly, or an error computing it. None when every
    such row takes its fill exactly."""
    expr = parsed_fill(column.fill)
    types = {c.name: c.type for c in column.fill.columns}
    try:
        computed(expr, _arrow_schema(column.fill.columns).empty_table(), types, column.type, time_zone="UTC")
    except Unsupported as why:
        return f"it needs Spark to be computed ({why}): a fill takes columns, literals, integer arithmetic, comparisons"
    lacking = [s for s in segments if column.id not in {c.id for c in s.columns}]
    rows = read_segments(spark, warehouse, base, column.fill.columns, lacking)
    value = to_column(expr, lambda name: F.col(f"`{name}`"))
    cast = value.try_cast(spark_type(column.type))
    wrong = value.isNotNull() & (cast.isNull() | (cast != value))
    if not column.nullable:
        wrong = wrong | value.isNull()
    try:
        found = rows.select(value.alias("_fill"), *[F.col(f"`{c.name}`") for c in column.fill.columns])
        found = found.where(wrong).limit(1).collect()
    except CapturedException as error:
        return f"computing it fails: {str(error).splitlines()[0][:300]}"
    if not found:
        return None
    row = {name: json_value(v) for name, v in found[0].asDict().items() if name != "_fill"}
    value = json_value(found[0]["_fill"])
    if value is None:
        return f"it gives NULL for the row {row}, and the column is NOT NULL"
    return f"it gives {value!r} for the row {row}, which is not exactly a {column.type}"


def _default_array(column: Column, size: int) -> pa.Array:
    """A column added after a segment was written, as Spark reads it there: its default (`F.lit(default)` cast
    to the column's type) on every row."""
    kind = arrow_type(column.type)
    if column.default is None:
        return pa.nulls(size, kind)
    value = column.default
    if column.type != "binary":  # a string cast to binary in Spark is its UTF-8 bytes (none is allowed yet)
        value = python_value(value, column.type)
    return pa.array([value] * size, kind if column.type != "binary" else pa.string()).cast(kind)


def _arrow_schema(columns: Sequence[Column]) -> pa.Schema:
    return pa.schema([(c.name, arrow_type(c.type)) for c in columns])


def deleted_positions(warehouse: Warehouse, deltas: Sequence[str]) -> pa.Array:
    """The positions a segment's delta files list (read with pyarrow: a file list, no Spark job)."""
    positions = []
    for delta in deltas:
        filesystem, path = arrow_filesystem(warehouse.uri(delta))
        positions.extend(pq.read_table(path, columns=["pos"], filesystem=filesystem).column(0).chunks)
    # Chunks, not the ChunkedArrays: pa.chunked_array would convert a ChunkedArray value by value in Python.
    return pa.chunked_array(positions, pa.int64()).combine_chunks()


def deleted_count(warehouse: Warehouse, segments: Sequence[SegmentRead]) -> int:
    """Rows deleted by the delta files of `segments`, counting a position deleted twice once."""
    return sum(len(pc.unique(deleted_positions(warehouse, s.deltas))) for s in segments if s.deltas)
