"""A table's rows at a commit: a page of them (read here with pyarrow, or by a worker's Spark), its rows as a
Spark frame, and a SELECT over the tables of a ref."""

import logging

from django.conf import settings

from catalog_app.engine import quick_sql, sql
from catalog_app.engine.frames import Frame
from catalog_app.engine.reads import READ_ERRORS, read_page, read_page_arrow, read_rows_arrow, read_segments
from catalog_app.engine.warehouse import Warehouse
from catalog_app.models import Catalog, ObjectKind, ObjectVersion
from catalog_app.selectors.objects import object_find, object_get
from catalog_app.selectors.refs import Chain, commit_at, commit_chain, commit_get, timestamp_parse
from catalog_app.selectors.table_files import table_columns, table_files
from lakeui.errors import ApplicationError

logger = logging.getLogger(__name__)


def table_frame_at(spark, chain: Chain, *, database: str, table: str, warehouse: Warehouse) -> Frame:
    """A table's rows at a commit, in its current schema there."""
    db = object_get(chain, kind=ObjectKind.DATABASE, name=database)
    version = object_get(chain, kind=ObjectKind.TABLE, name=table, parent_id=db.object_id)
    files = table_files(chain, table_id=version.object_id)
    base = f"{version.catalog_id}/{version.object_id}"
    return read_segments(spark, warehouse, base, table_columns(version), files.reads())


def rows_page(chain: Chain, table: ObjectVersion, *, page: int, page_size: int, spark=None) -> dict | None:
    """A page of the table's rows at the chain's commit, in a stable order (segment, then position), with the
    count of live rows. With `spark` (a worker's), read by Spark; without, read here with pyarrow (segments of an
    older schema projected as Spark projects them), or None if this process cannot read the warehouse."""
    columns, files = table_columns(table), table_files(chain, table_id=table.object_id)
    offset, limit = (page - 1) * page_size, page_size
    # Only the segments the page can reach: their rows less deletions is a lower bound of what they hold.
    reach, held = [], 0
    for segment, read in zip(files.segments, files.reads(), strict=True):
        reach.append(read)
        held += segment.row_count - sum(d.row_count for d in files.deltas.get(segment.id, []))
        if held >= offset + limit:
            break
    warehouse = Warehouse(settings.LAKEUI_WAREHOUSE)
    if spark is None:
        try:
            rows = read_page_arrow(warehouse, columns, reach, offset=offset, limit=limit)
        except READ_ERRORS:  # a warehouse this process cannot read (credentials): a worker reads it
            logger.warning("Reading a page of table %s here failed; a worker reads it", table.object_id, exc_info=True)
            rows = None
    else:
        base = f"{table.catalog_id}/{table.object_id}"
        rows = read_page(spark, warehouse, base, columns, reach, offset=offset, limit=limit)
    if rows is None:
        return None
    return {
        "count": files.live_rows(warehouse),
        "page": page,
        "page_size": limit,
        "columns": [{"id": c.id, "name": c.name, "type": c.type} for c in columns],
        "rows": rows,
    }


def select_frame(spark, *, catalog: Catalog, chain: Chain, statement: str, warehouse: Warehouse, limit=None):
    """A SELECT over tables of the ref whose chain is given; `FOR TIMESTAMP AS OF` reads a table as it was on
    that chain then, `FOR VERSION AS OF '<commit>'` at that commit of the catalog."""

    def frame_of(reference: sql.TableReference) -> Frame:
        at_chain = chain
        if reference.version is not None:
            at_chain = commit_chain(commit_get(catalog=catalog, commit_id=reference.version))
        elif reference.timestamp is not None:
            at_chain = commit_chain(commit_at(chain, timestamp_parse(reference.timestamp)))
        return table_frame_at(spark, at_chain, database=reference.database, table=reference.table, warehouse=warehouse)

    try:
        references = sql.table_references(spark, statement)
        return sql.run_select(spark, statement, references, frame_of, limit=limit)
    except sql.SqlError as exc:
        raise ApplicationError("invalid_query", exc.message, details={"position": exc.position}) from None


def quick_select(*, chain: Chain, statement: str) -> quick_sql.Answer | None:
    """A SELECT's whole result answered in this process, with no Spark job, when `quick_sql` can give Spark's answer
    exactly and its table holds at most LAKEUI_QUICK_SQL_ROWS rows (before deletes) in at most
    LAKEUI_QUICK_SQL_BYTES of files (a few wide rows must not fill the web process); else None, and Spark runs it
    (and gives the errors: a table that is missing here is None too)."""
    query = quick_sql.parse(statement)
    if query is None or settings.LAKEUI_QUICK_SQL_ROWS <= 0:
        return None
    db = object_find(chain, kind=ObjectKind.DATABASE, name=query.database)
    version = db and object_find(chain, kind=ObjectKind.TABLE, name=query.table, parent_id=db.object_id)
    if not version or version.dropped:
        return None
    files = table_files(chain, table_id=version.object_id)
    if (
        sum(segment.row_count for segment in files.segments) > settings.LAKEUI_QUICK_SQL_ROWS
        or sum(segment.size_bytes for segment in files.segments) > settings.LAKEUI_QUICK_SQL_BYTES
    ):
        return None
    columns = table_columns(version)
    try:
        rows = read_rows_arrow(Warehouse(settings.LAKEUI_WAREHOUSE), columns, files.reads())
    except READ_ERRORS:  # a warehouse this process cannot read (credentials): a worker reads it
        logger.warning("Reading table %s here failed; Spark answers", version.object_id, exc_info=True)
        return None
    return quick_sql.answer(query, columns, rows)
