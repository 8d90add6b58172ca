"""RESTORE (docs/merge-semantics.md#restore): one new commit on a branch whose state equals that of a point in time.

`RESTORE TABLE db.t [ON BRANCH b] TO ...` restores one table, `RESTORE BRANCH b TO ...` every object. The point is
a commit (any commit of the catalog) or a time on the branch (its head then). Zero-copy: the files live at the
point are made live again by reference. Schemas come from the visible history only: a restored table takes the
columns of its state at the point, which is always a visible version there (merges record invisible versions for
segments only), and gets a new visible version when they differ from the current ones. Restoring to a point
before a table existed drops it; to a point after it was dropped recreates it with the same id. The commit
records the operations the restore amounts to (alter_* for DDL, `overwrite` of the whole table for its files),
so a restore merges into other branches like any change. Runs as a job; logged in `Restore`.
"""

import time
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from catalog_app.models import Catalog, Commit, DataFile, ObjectKind, ObjectVersion, Operation
from catalog_app.selectors.objects import object_named, objects_newest
from catalog_app.selectors.refs import branch_get, commit_at, commit_chain, commit_get, timestamp_parse
from catalog_app.selectors.table_files import NO_FILES, tables_files
from catalog_app.services.access import branch_write_check
from catalog_app.services.commits import CommitDraft, commit_begin
from lakeui.errors import ApplicationError, ConflictError, NotFoundError
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_create
from merge_app.job_specs import RestoreSpec
from merge_app.models import Restore
from merge_app.services.events import restore_event_emit

RESTORE_JOB = RestoreSpec.KIND
Op = Operation.Op


def restore_point(*, catalog: Catalog, branch: str, timestamp: str | None = None, commit: str | None = None) -> Commit:
    """The commit to restore to: a commit of the catalog, or the branch's head at a time."""
    if (timestamp is None) == (commit is None):
        raise ApplicationError("invalid_input", "Give exactly one of `timestamp` or `commit` to restore to.")
    if commit is not None:
        return commit_get(catalog=catalog, commit_id=commit)
    moment: datetime = timestamp_parse(timestamp)
    return commit_at(commit_chain(branch_get(catalog=catalog, name=branch).head), moment)


def restore_submit(
    *,
    catalog: Catalog,
    branch: str,
    database: str | None = None,
    table: str | None = None,
    timestamp: str | None = None,
    commit: str | None = None,
    user: AbstractBaseUser | None = None,
) -> Job:
    if bool(database) != bool(table):
        raise ApplicationError("invalid_input", "Restore a table with both `database` and `table`, or the branch.")
    branch_write_check(catalog=catalog, branch=branch)  # a protected branch is restored through a merge request
    point = restore_point(catalog=catalog, branch=branch, timestamp=timestamp, commit=commit)
    if table:
        _table_id(catalog, branch, point, database, table)  # a 404 now, not in the job
    spec = RestoreSpec(
        catalog_id=str(catalog.id), branch=branch, point=point.id, database=database if table else None,
        table=table or None,
    )  # fmt: skip
    return job_create(kind=spec.KIND, params=spec.to_params(), requested_by=user)


def _find(chain, kind: str, name: str, parent_id=None) -> ObjectVersion | None:
    return object_named(chain, kind=kind, name=name, parent_id=parent_id)


def _table_id(catalog: Catalog, branch: str, point: Commit, database: str, table: str):
    """The table's id: as named on the branch now, else as named at the point (a dropped table)."""
    for chain in (commit_chain(branch_get(catalog=catalog, name=branch).head), commit_chain(point)):
        db = _find(chain, ObjectKind.DATABASE, database)
        found = db and _find(chain, ObjectKind.TABLE, table, db.object_id)
        if found is not None:
            return found.object_id
    raise NotFoundError("table_not_found", f"There is no table {database}.{table} on {branch!r} or at the point.")


def branch_restore(
    *,
    catalog: Catalog,
    branch: str,
    point: str,
    database: str | None = None,
    table: str | None = None,
    user: AbstractBaseUser | None = None,
    job: Job | None = None,
) -> Restore:
    started = time.monotonic()
    point_commit = commit_get(catalog=catalog, commit_id=point)
    with transaction.atomic():
        draft = commit_begin(catalog=catalog, branch=branch)
        head_before = draft.parent.id
        point_chain = commit_chain(point_commit)
        only = None
        if table:
            db = _find(draft.chain, ObjectKind.DATABASE, database)
            if db is None or db.dropped:
                raise ConflictError(
                    "database_not_found", f"Database {database!r} does not exist on {branch!r}; restore the branch."
                )
            only = {_table_id(catalog, branch, point_commit, database, table)}
        writer = _RestoreWriter(draft, point_chain, only)
        writer.apply()
        what = f"table {database}.{table}" if table else f"branch {branch}"
        commit = None
        if writer.changed:
            commit = draft.commit(author=user, message=f"Restore {what} to {point_commit.id[:12]}", job=job)
        restore = Restore.objects.create(
            catalog=catalog, branch=branch, database=database or "", table=table or "", point=point_commit.id,
            head_before=head_before, commit=commit, requested_by=user if user and user.is_authenticated else None,
            job=job, log=writer.log, timings={"total_ms": round((time.monotonic() - started) * 1000)},
        )  # fmt: skip
        restore_event_emit(restore)
        return restore


def restore_result(restore: Restore) -> dict[str, Any]:
    return {"restore": str(restore.id), "commit": restore.commit_id, "point": restore.point}


class _RestoreWriter:
    def __init__(self, draft: CommitDraft, point_chain, only: set | None) -> None:
        self.draft, self.point_chain, self.only = draft, point_chain, only
        self.log: dict[str, Any] = {"objects": [], "files_added": [], "files_removed": []}
        self.changed = False

    def _versions(self, chain) -> dict:
        return {v.object_id: v for v in objects_newest(chain, object_ids=self.only)}

    def apply(self) -> None:
        now, then = self._versions(self.draft.chain), self._versions(self.point_chain)
        tables = [i for i, v in {**now, **then}.items() if v.kind == ObjectKind.TABLE]
        self.files_now = tables_files(self.draft.chain, table_ids=tables)
        self.files_then = tables_files(self.point_chain, table_ids=tables)
        order = {ObjectKind.DATABASE: 0}
        for object_id in sorted({*now, *then}, key=lambda i: (order.get((then.get(i) or now[i]).kind, 1), str(i))):
            self._object(now.get(object_id), then.get(object_id))

    def _object(self, now: ObjectVersion | None, then: ObjectVersion | None) -> None:
        live_now = now is not None and not now.dropped
        live_then = then is not None and not then.dropped
        if not live_now and not live_then:
            return
        shown = then if live_then else now
        if live_then and self.only is not None:
            self._check_name_free(then)
        ops: list[tuple[str, dict]] = []
        new_schema = None
        if not live_then:
            ops.append((Op.DROP, {"name": now.name}))
        elif not live_now:
            ops.append((Op.CREATE, {"name": then.name, **then.state}))
        else:
            ops += _state_operations(now, then)
            if shown.kind == ObjectKind.TABLE and then.state["columns"] != now.state["columns"]:
                new_schema = then.state["columns"]
        if live_then and shown.kind == ObjectKind.TABLE:
            file_op = self._files(shown.object_id)
            if file_op and live_now:
                ops.append((Op.OVERWRITE, file_op))
        if not ops:
            return
        state = dict(then.state if live_then else now.state)
        self.draft.put(
            kind=shown.kind, object_id=shown.object_id, name=shown.name, parent_id=shown.parent_id, state=state,
            dropped=not live_then, new_schema=new_schema,
        )  # fmt: skip
        for op, details in ops:
            self.draft.operation(object_id=shown.object_id, kind=shown.kind, op=op, details=details)
        self.changed = True
        how = "dropped" if not live_then else "recreated" if not live_now else "restored"
        self.log["objects"].append(
            {"kind": shown.kind, "object_id": str(shown.object_id), "name": shown.name, "how": how,
             "operations": [op for op, _ in ops]}
        )  # fmt: skip

    def _check_name_free(self, then: ObjectVersion) -> None:
        """A table restored alone takes its name at the point back: another live table or view holding that name
        now would leave two objects of one name (a branch restore restores every name at once)."""
        for kind in (ObjectKind.TABLE, ObjectKind.VIEW):
            other = self.draft.find(kind, then.name, then.parent_id)
            if other is not None and other.object_id != then.object_id:
                raise ConflictError(
                    "name_taken",
                    f"The table was named {then.name!r} at the point, and another {kind} has that name now: rename "
                    "or drop it first, then restore.",
                    details={"name": then.name, "object_id": str(other.object_id)},
                )

    def _files(self, table_id) -> dict | None:
        """Make the table's files those of the point; the `overwrite` details, or None if they already are."""
        now = self.files_now.get(table_id, NO_FILES).by_id()
        then = self.files_then.get(table_id, NO_FILES).by_id()
        removed = [f for fid, f in now.items() if fid not in then]
        added = [f for fid, f in then.items() if fid not in now]
        kept = [f for fid, f in then.items() if fid in now]
        for file in removed:
            self.draft.remove_file(file)
        for file in added:
            schema = file.schema_version if file.kind == DataFile.Kind.SEGMENT else None
            visible = file.schema_visible if schema is not None else None
            self.draft.add_file(file, new=False, schema_version=schema, schema_visible=visible)
        self.log["files_added"] += [{"path": f.path, "rows": f.row_count, "bytes": f.size_bytes} for f in added]
        self.log["files_removed"] += [{"path": f.path, "rows": f.row_count, "bytes": f.size_bytes} for f in removed]
        if not added and not removed:
            return None
        return {
            "whole_table": True,
            "restore": True,
            "segments_added": [str(f.id) for f in added if f.kind == DataFile.Kind.SEGMENT],
            "deltas_added": [str(f.id) for f in added if f.kind == DataFile.Kind.DELTA],
            "segments_removed": [str(f.id) for f in removed if f.kind == DataFile.Kind.SEGMENT],
            "deltas_removed": [str(f.id) for f in removed if f.kind == DataFile.Kind.DELTA],
            "segments_touched": [],
            # The rest of its result, the files of the point the table still had: with those it added, the table as
            # the restore made it (its own result, which a merge takes as an overwrite's, `Op.restored`).
            "segments_kept": [str(f.id) for f in kept if f.kind == DataFile.Kind.SEGMENT],
            "deltas_kept": [str(f.id) for f in kept if f.kind == DataFile.Kind.DELTA],
        }


def _state_operations(now: ObjectVersion, then: ObjectVersion) -> list[tuple[str, dict]]:
    """The DDL operations that take an object from its current state back to the point's."""
    table = now.kind == ObjectKind.TABLE
    ops: list[tuple[str, dict]] = []
    if now.name != then.name:
        ops.append((Op.ALTER_NAME if table else Op.MODIFY_NAME, {"old": now.name, "new": then.name}))
    old, new = now.state.get("properties", {}), then.state.get("properties", {})
    changed = {k: v for k, v in new.items() if old.get(k) != v}
    unset = [k for k in old if k not in new]
    previous = {k: old.get(k) for k in [*changed, *unset]}
    if table and (changed or unset):
        ops.append((Op.ALTER_PROPERTIES, {"set": changed, "unset": unset, "previous": previous}))
    elif changed:
        ops.append((Op.SET_PROPERTIES, {"set": changed, "previous": previous}))
    if not table and unset:
        ops.append((Op.UNSET_PROPERTIES, {"unset": unset, "previous": previous}))
    if table:
        if now.state["partition_by"] != then.state["partition_by"]:
            ops.append((Op.ALTER_PARTITION, {"old": now.state["partition_by"], "new": then.state["partition_by"]}))
        ops += [(Op.ALTER_COLUMN, detail) for detail in _column_changes(now.state["columns"], then.state["columns"])]
    return ops


def _column_changes(now: list[dict], then: list[dict]) -> list[dict]:
    now_by_id, then_by_id = {c["id"]: c for c in now}, {c["id"]: c for c in then}
    changes = [{"action": "drop", "column_id": c["id"], "column": c} for c in now if c["id"] not in then_by_id]
    changes += [{"action": "add", "column_id": c["id"], "column": c} for c in then if c["id"] not in now_by_id]
    changes += [
        {"action": "restore", "column_id": c["id"], "old": now_by_id[c["id"]], "new": c}
        for c in then
        if c["id"] in now_by_id and now_by_id[c["id"]] != c
    ]
    return changes
