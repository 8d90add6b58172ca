"""The data diff of one table between two refs: rows added, deleted and changed, read here with pyarrow or by a
worker on Spark (never waited for).

A table with a primary key is compared by key (a changed row shows which cells changed); one without is compared
as a multiset of rows (added and deleted rows). Both sides are read in the `to` side's schema, by column id.
"""

import json
import logging
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings

from catalog_app.engine import keys, row_diff
from catalog_app.engine.frames import cache_scope, cached, collected
from catalog_app.engine.reads import READ_ERRORS, read_segments
from catalog_app.engine.segments import Column
from catalog_app.engine.types import json_value
from catalog_app.engine.warehouse import Warehouse
from catalog_app.models import Commit, ObjectKind, ObjectVersion
from catalog_app.selectors.changes import tables_changed  # noqa: F401  (the Compare page's list, re-exported)
from catalog_app.selectors.objects import object_by_id, object_find
from catalog_app.selectors.refs import ResolvedRef, commit_chain
from catalog_app.selectors.table_files import NO_FILES, TableFiles, table_columns, table_files
from lakeui.errors import NotFoundError
from lakeui.jobs.services import job_read, read_is_pending

logger = logging.getLogger(__name__)

TABLE_DIFF_JOB = "table_diff"
MAX_LISTED = 200
PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def table_diff_read(
    *,
    source: ResolvedRef,
    target: ResolvedRef,
    database: str = "",
    table: str = "",
    table_id: str = "",
    user,
    page: int = 1,
    page_size: int = PAGE_SIZE,
) -> dict:
    """A page of the rows that differ from `source` (from) to `target` (to), with counts, for the table named
    `database`.`table` (or whose id is `table_id`) on either ref.

    Read here with pyarrow (segments written in an older schema projected onto the shown one by column id, as Spark
    projects them), and kept as an Arrow file per pair of commits, so a later page or a reload is a slice of that
    file; a warehouse this process cannot read, or a type Arrow cannot compare, is read by a worker's Spark, whose
    job the answer names until it has finished (`job_read`: `{"complete": false, "job": ...}`, to read again; the
    finished job's page then answers every read of it: commits never change)."""
    found = None
    for side in (target, source):
        if table_id:
            try:
                found = object_by_id(side.chain, object_id=uuid.UUID(str(table_id)))
            except ValueError:
                raise NotFoundError("table_not_found", f"There is no table with id {table_id!r}.") from None
            if found is not None and found.kind != ObjectKind.TABLE:
                found = None
        else:
            db = object_find(side.chain, kind=ObjectKind.DATABASE, name=database)
            found = db and object_find(side.chain, kind=ObjectKind.TABLE, name=table, parent_id=db.object_id)
        if found is not None:
            break
    if found is None:
        raise NotFoundError("table_not_found", f"Neither ref has a table {table_id or f'{database}.{table}'}.")
    page, page_size = max(1, int(page)), max(1, min(int(page_size), MAX_PAGE_SIZE))
    params = {"from": source.commit.id, "to": target.commit.id, "table_id": str(found.object_id)}
    result = _diff_arrow(params, page=page, page_size=page_size)
    if result is None:
        result = job_read(kind=TABLE_DIFF_JOB, params={**params, "page": page, "page_size": page_size},
                          requested_by=user)  # fmt: skip
        if not read_is_pending(result):
            result = {**result, "read_by": "worker"}
    return {"from": params["from"], "to": params["to"], "table_id": params["table_id"], **result}


def _sides(params: dict[str, Any]):
    """Both sides' table versions and files, the columns shown (the `to` side's, else the `from` side's) and the
    segments to read: of `from`, those `to` removed or changed the deletes of; of `to`, those and the ones added."""
    table_id = uuid.UUID(params["table_id"])
    sides = {}
    for name in ("from", "to"):
        commit = Commit.objects.get(id=params[name])
        chain = commit_chain(commit)
        version = object_by_id(chain, object_id=table_id)
        sides[name] = (chain, None if version is None or version.dropped else version)
    shown = sides["to"][1] or sides["from"][1]
    chain = sides["to"][0] if sides["to"][1] else sides["from"][0]
    database = object_by_id(chain, object_id=shown.parent_id)
    name = f"{database.name}.{shown.name}" if database is not None else shown.name
    files = {name: table_files(chain, table_id=table_id) if version else NO_FILES for name, (chain, version) in
             sides.items()}  # fmt: skip
    removed, added = files["to"].changes_since(files["from"])
    kept_in_to = [s for s in removed if s.id in {t.id for t in files["to"].segments}]
    reads = {
        "from": TableFiles(removed, files["from"].deltas).reads(),
        "to": TableFiles(kept_in_to + added, files["to"].deltas).reads(),
    }
    return shown, name, table_columns(shown), reads, len(removed) + len(kept_in_to) + len(added)


def _kept_path(params: dict[str, Any]) -> Path:
    return Path(settings.VAR_DIR) / "row-diffs" / f"{params['from']}-{params['to']}-{params['table_id']}.arrow"


def _diff_arrow(params: dict[str, Any], *, page: int, page_size: int) -> dict[str, Any] | None:
    """The page from the kept diff of the pair, or computed here with pyarrow; None if a worker must. A page
    computed here is laid out from its own rows, and the whole diff is kept after it is answered (in a thread of
    this process: `row_diff.kept_write_later`), so the first view does not wait for laying out and writing it."""
    path = _kept_path(params)
    offset = (page - 1) * page_size
    diff = row_diff.kept_read(path)
    if diff is not None:
        meta = {k.decode(): v.decode() for k, v in (diff.schema.metadata or {}).items()}
        counts, total, listed, kept = row_diff.counts_of(diff), diff.num_rows, diff.slice(offset, page_size), True
    else:
        shown, name, columns, reads, segments_read = _sides(params)
        warehouse = Warehouse(settings.LAKEUI_WAREHOUSE)
        key = _key_names(shown, columns)
        try:
            sides = row_diff.read_sides_arrow(warehouse, columns, reads["from"], reads["to"])
            changes = row_diff.changes_of(*sides, key)
            listed = changes.rows(offset, page_size)
        except (*READ_ERRORS, NotImplementedError):  # credentials, or a type Arrow cannot compare: a worker reads
            logger.warning("Diffing table %s here failed; a worker reads it", params["table_id"], exc_info=True)
            return None
        meta = {
            "columns": json.dumps([_column(c) for c in columns]), "primary_key": json.dumps(key),
            "segments_read": str(segments_read), "table": name,
        }  # fmt: skip
        row_diff.kept_write_later(path, changes, meta)
        counts, total, kept = changes.counts, changes.total, False
    columns = json.loads(meta["columns"])
    return {
        "table": meta["table"],
        "columns": columns,
        "primary_key": json.loads(meta["primary_key"]),
        "segments_read": int(meta["segments_read"]),
        "counts": counts,
        "total": total,
        "page": page,
        "page_size": page_size,
        "pages": max(1, -(-total // page_size)),
        "rows": row_diff.page_of(listed, [c["name"] for c in columns], offset=0, limit=page_size),
        "read_by": "web",
        "kept": kept,
    }


def _key_names(shown: ObjectVersion, columns: list[Column]) -> list[str]:
    by_id = {c.id: c.name for c in columns}
    return [by_id[i] for i in shown.state.get("primary_key", []) if i in by_id]


@cache_scope()
def table_diff(spark, params: dict[str, Any]) -> dict[str, Any]:
    """The job: read both sides with Spark (any schema the segments were written in) and compare them; one page."""
    shown, name, columns, reads, segments_read = _sides(params)
    page, page_size = int(params.get("page", 1)), int(params.get("page_size", MAX_LISTED))
    offset = (page - 1) * page_size
    warehouse, base = Warehouse(settings.LAKEUI_WAREHOUSE), f"{shown.catalog_id}/{shown.object_id}"
    before = read_segments(spark, warehouse, base, columns, reads["from"])
    after = read_segments(spark, warehouse, base, columns, reads["to"])
    names = [c.name for c in columns]
    key_names = _key_names(shown, columns)
    result: dict[str, Any] = {
        "table": name, "columns": [_column(c) for c in columns], "primary_key": key_names,
        "segments_read": segments_read, "page": page, "page_size": page_size,
    }  # fmt: skip
    if key_names:
        changes = cached(keys.changes_by_key(before, after, key_names, names))
        counts = dict(changes.groupBy(keys.CHANGE).count().collect())
        listed = collected(changes.orderBy(*key_names).offset(offset).limit(page_size))
        result |= {
            "counts": {k: counts.get(k, 0) for k in (keys.INSERT, keys.UPDATE, keys.DELETE)},
            "rows": [_change(row, names) for row in listed],
        }
    else:
        added, deleted = keys.rows_diff(before, after)
        result["counts"] = {"insert": added.count(), "update": 0, "delete": deleted.count()}
        listed = [("delete", r) for r in collected(deleted.limit(offset + page_size))]
        listed += [("insert", r) for r in collected(added.limit(max(0, offset + page_size - len(listed))))]
        result["rows"] = [
            {"change": change, "before": None if change == "insert" else _values(row, names),
             "after": _values(row, names) if change == "insert" else None, "cells": []}
            for change, row in listed[offset : offset + page_size]
        ]  # fmt: skip
    total = sum(result["counts"].values())
    return result | {"total": total, "pages": max(1, -(-total // page_size))}


def _column(column: Column) -> dict:
    return {"id": column.id, "name": column.name, "type": column.type}


def _values(row, names: list[str]) -> list:
    return [json_value(row[name]) for name in names]


def _change(row, names: list[str]) -> dict:
    before = None if row[keys.BEFORE] is None else _values(row[keys.BEFORE], names)
    after = None if row[keys.AFTER] is None else _values(row[keys.AFTER], names)
    cells = [n for i, n in enumerate(names) if before and after and before[i] != after[i]]
    return {"change": row[keys.CHANGE], "before": before, "after": after, "cells": cells}
