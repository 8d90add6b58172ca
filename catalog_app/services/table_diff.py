"""The data diff of one table between two refs: rows added, deleted and changed, read by a worker on Spark.

A table with a primary key is compared by key (a changed row shows which cells changed); one without is compared
as a multiset of rows (added and deleted rows). Both sides are read in the `to` side's schema, by column id.
"""

import uuid
from typing import Any

from django.conf import settings

from catalog_app.engine import keys
from catalog_app.engine.frames import collected
from catalog_app.engine.reads import read_segments
from catalog_app.engine.segments import Column
from catalog_app.engine.types import json_value
from catalog_app.engine.warehouse import Warehouse
from catalog_app.models import Commit, ObjectKind
from catalog_app.selectors.objects import object_by_id, object_find
from catalog_app.selectors.refs import ResolvedRef, commit_chain
from catalog_app.selectors.table_files import NO_FILES, TableFiles, table_columns, table_files
from lakeui.errors import NotFoundError
from lakeui.jobs.services import job_run_sync

TABLE_DIFF_JOB = "table_diff"
MAX_LISTED = 200


def table_diff_read(*, source: ResolvedRef, target: ResolvedRef, database: str, table: str, user) -> dict:
    """The rows that differ from `source` (from) to `target` (to), with counts; at most MAX_LISTED per kind."""
    found = None
    for side in (target, source):
        db = object_find(side.chain, kind=ObjectKind.DATABASE, name=database)
        found = db and object_find(side.chain, kind=ObjectKind.TABLE, name=table, parent_id=db.object_id)
        if found is not None:
            break
    if found is None:
        raise NotFoundError("table_not_found", f"Neither ref has a table {database}.{table}.")
    params = {"from": source.commit.id, "to": target.commit.id, "table_id": str(found.object_id)}
    return job_run_sync(kind=TABLE_DIFF_JOB, params=params, requested_by=user, timeout=settings.LAKEUI_READ_TIMEOUT)


def table_diff(spark, params: dict[str, Any]) -> dict[str, Any]:
    """The job: read both sides and compare them."""
    table_id = uuid.UUID(params["table_id"])
    sides = {}
    for name in ("from", "to"):
        commit = Commit.objects.get(id=params[name])
        chain = commit_chain(commit)
        version = object_by_id(chain, object_id=table_id)
        sides[name] = (chain, None if version is None or version.dropped else version)
    shown = sides["to"][1] or sides["from"][1]
    columns = table_columns(shown)
    warehouse, base = Warehouse(settings.LAKEUI_WAREHOUSE), f"{shown.catalog_id}/{table_id}"

    files = {name: table_files(chain, table_id=table_id) if version else NO_FILES for name, (chain, version) in
             sides.items()}  # fmt: skip
    # Only the segments whose rows can differ are read: files both refs share with the same deletes are skipped.
    removed, added = files["to"].changes_since(files["from"])
    kept_in_to = [s for s in removed if s.id in {t.id for t in files["to"].segments}]

    def rows(name: str, segments):
        reads = TableFiles(segments, files[name].deltas).reads()
        return read_segments(spark, warehouse, base, columns, reads)

    before, after = rows("from", removed), rows("to", kept_in_to + added)
    names = [c.name for c in columns]
    by_id = {c.id: c.name for c in columns}
    key_names = [by_id[i] for i in shown.state.get("primary_key", []) if i in by_id]
    result: dict[str, Any] = {
        "columns": [_column(c) for c in columns],
        "primary_key": key_names,
        "segments_read": len(removed) + len(kept_in_to) + len(added),
    }
    if key_names:
        changes = keys.changes_by_key(before, after, key_names, names).cache()
        counts = dict(changes.groupBy(keys.CHANGE).count().collect())
        listed = collected(changes.orderBy(*key_names).limit(MAX_LISTED))
        result |= {
            "counts": {k: counts.get(k, 0) for k in (keys.INSERT, keys.UPDATE, keys.DELETE)},
            "rows": [_change(row, names) for row in listed],
        }
        return result
    added, deleted = keys.rows_diff(before, after)
    result["counts"] = {"insert": added.count(), "update": 0, "delete": deleted.count()}
    listed = [("insert", r) for r in collected(added.limit(MAX_LISTED))]
    listed += [("delete", r) for r in collected(deleted.limit(MAX_LISTED))]
    result["rows"] = [
        {"change": change, "before": None if change == "insert" else _values(row, names),
         "after": _values(row, names) if change == "insert" else None, "cells": []}
        for change, row in listed
    ]  # fmt: skip
    return result


def _column(column: Column) -> dict:
    return {"id": column.id, "name": column.name, "type": column.type}


def _values(row, names: list[str]) -> list:
    return [json_value(row[name]) for name in names]


def _change(row, names: list[str]) -> dict:
    before = None if row[keys.BEFORE] is None else _values(row[keys.BEFORE], names)
    after = None if row[keys.AFTER] is None else _values(row[keys.AFTER], names)
    cells = [n for i, n in enumerate(names) if before and after and before[i] != after[i]]
    return {"change": row[keys.CHANGE], "before": before, "after": after, "cells": cells}
