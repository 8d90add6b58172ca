"""MERGE BRANCH (DESIGN.md section 4): decide with the diff report, then write exactly one commit on the target.

The merge runs in one transaction that holds the catalog's commit lock from the moment it reads the target's
head, so merges and writes into a branch are serialised: a merge sees every commit before it and no commit can
slip in between its decision and its commit. It either refuses with its conflicts and changes nothing (the
refusal is logged), or adds one commit whose second parent is the source head. Only metadata is written for
tables without a primary key: data files are taken over by reference (zero-copy), never copied or rewritten. The
one exception is a source partition overwrite meeting target segments that mix partitions: delete files drop the
overwritten partitions' rows from them.
"""

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from catalog_app.engine import dml
from catalog_app.engine.tables import Column, Warehouse, file_in_partitions, read_segments, write_deltas
from catalog_app.models import Catalog, DataFile, Job, ObjectKind, SchemaVersion
from catalog_app.selectors.objects import schema_histories
from catalog_app.selectors.refs import commit_chain, ref_resolve
from catalog_app.selectors.tables import NO_FILES, tables_files
from catalog_app.services.access import branch_write_check
from catalog_app.services.commits import CommitDraft, commit_begin
from catalog_app.services.jobs import job_create
from catalog_app.spark import spark_session
from lakeui.errors import ApplicationError, ConflictError
from merge_app import states
from merge_app.models import Merge
from merge_app.rules import DML, Op
from merge_app.selectors.diff import (
    MergeDiff,
    ObjectDiff,
    diff_as_dict,
    merge_diff,
    merge_diff_of,
    overwritten_partitions,
    resolution_check,
)
from merge_app.services import keys
from merge_app.services.keys import SOURCE_WINS, TARGET_WINS

MERGE_JOB = "branch_merge"
MESSAGE_CONFLICT = "The merge of {source!r} into {target!r} has {count} conflicting object(s); nothing was merged."
MESSAGE_MOVED = "{which} {ref!r} has moved since the merge was planned: its head is {head}."


def merge_submit(
    *,
    catalog: Catalog,
    source: str,
    target: str,
    dry_run: bool = False,
    user: AbstractBaseUser | None = None,
    expected_heads: dict[str, str] | None = None,
    resolution: dict | None = None,
    via_merge_request: int | None = None,
    audit: dict[str, Any] | None = None,
) -> Job:
    """Check what needs no worker and queue the merge job. A merge into a protected branch is refused here (403
    `branch_protected`) unless it is a merge request's (`via_merge_request`); dry runs write nothing and pass."""
    src = ref_resolve(catalog=catalog, ref=source)
    dest = ref_resolve(catalog=catalog, ref=target)
    if dest.kind != "branch":
        raise ApplicationError("read_only_ref", f"{target!r} is a {dest.kind}; a merge target must be a branch.")
    if src.commit.id == dest.commit.id and source == target:
        raise ApplicationError("invalid_input", "A branch cannot be merged into itself.")
    if not dry_run:
        branch_write_check(catalog=catalog, branch=target, via_merge_request=via_merge_request)
    params = {"catalog_id": str(catalog.id), "source": source, "target": target, "dry_run": dry_run}
    if expected_heads:
        params["expected_heads"] = expected_heads
    if resolution:
        params["resolution"] = resolution_check(resolution)
    if via_merge_request is not None:
        params["merge_request"] = via_merge_request
    if audit:
        params["audit"] = audit
    return job_create(kind=MERGE_JOB, params=params, requested_by=user)


def branch_merge(
    *,
    catalog: Catalog,
    source: str,
    target: str,
    dry_run: bool = False,
    user: AbstractBaseUser | None = None,
    job: Job | None = None,
    expected_heads: dict[str, str] | None = None,
    resolution: dict | None = None,
    via_merge_request: int | None = None,
    audit: dict[str, Any] | None = None,
    on_merged: Callable[[Merge], None] | None = None,
) -> Merge:
    """Merge `source` (any ref) into the branch `target`. Raises ConflictError `merge_conflict` (logged) when the
    rule tables refuse it and the resolution does not settle it.

    A merge request's merge passes `via_merge_request` (it may write a protected branch), `audit` (entries for the
    log: the request's number and approvers, and `resolution_choices`, who chose each resolution and when, which
    name the chooser of each resolution applied), and `on_merged`, run inside the merge's transaction once the
    merge is logged, so the request and the merge commit together or not at all."""
    started = time.monotonic()
    extra = dict(audit or {})
    if dry_run:
        diff = merge_diff(catalog=catalog, source=source, target=target, resolution=resolution)
        _check_heads(diff, expected_heads)
        _keys_compared(diff)
        status = Merge.Status.CONFLICT if not diff.mergeable else Merge.Status.PLANNED
        return _log(diff, status=status, user=user, job=job, dry_run=True, timings=_since(started), log=extra)
    # Primary-key tables are compared on Spark before the commit lock is taken (and the comparison is kept even
    # if the merge is refused); it is redone under the lock only if a head moved in between.
    planned = merge_diff(catalog=catalog, source=source, target=target, resolution=resolution)
    runs = _keys_compared(planned)
    try:
        with transaction.atomic():
            draft = commit_begin(catalog=catalog, branch=target, via_merge_request=via_merge_request)
            src = ref_resolve(catalog=catalog, ref=source)
            diff = planned  # the same heads give the same diff: it is computed again only if one moved
            if (src.commit.id, draft.parent.id) != (planned.source_head.id, planned.target_head.id):
                diff = merge_diff_of(
                    catalog=catalog, source=source, target=target, source_head=src.commit, target_head=draft.parent,
                    source_chain=src.chain, target_chain=draft.chain, resolution=resolution,
                )  # fmt: skip
                runs = _keys_compared(diff)
            _check_heads(diff, expected_heads)
            decided = time.monotonic()
            if not diff.mergeable:
                raise _Refused(diff)
            if diff.up_to_date:
                merge = _log(diff, status=Merge.Status.UP_TO_DATE, user=user, job=job, timings=_since(started),
                             log=extra)  # fmt: skip
            else:
                writer = _MergeWriter(draft, diff, key_runs=runs)
                writer.apply()
                chooser = user.username if user is not None and user.is_authenticated else None
                writer.log["resolutions"] = [
                    {**entry, **_chosen(entry, extra.get("resolution_choices"), chooser)}
                    for entry in diff.resolution_log
                ]
                message = f"Merge {source} into {target}"
                commit = draft.commit(author=user, message=message, merge_parent=diff.source_head, job=job)
                timings = {"decide_ms": _ms(decided - started), **_since(started)}
                merge = _log(diff, status=Merge.Status.MERGED, user=user, job=job, commit=commit,
                             log={**writer.log, **extra}, timings=timings)  # fmt: skip
            if on_merged is not None:
                on_merged(merge)
            return merge
    except _Refused as refused:
        merge = _log(refused.diff, status=Merge.Status.CONFLICT, user=user, job=job, timings=_since(started),
                     log=extra)  # fmt: skip
        raise merge_conflict_error(merge) from None


def _chosen(entry: dict, choices: list[dict] | None, merger: str | None) -> dict[str, Any]:
    """Who chose an applied resolution, and when: the latest matching choice recorded in a merge request (for a
    key, else its table, else the default), or the user who ran the merge."""
    for choice in reversed(choices or []):
        same_table = choice.get("table") == entry.get("object")
        if (
            (entry.get("scope") == "key" and choice["scope"] == "key" and same_table
             and choice.get("key") == entry.get("key_id"))
            or (choice["scope"] == "table" and same_table)
        ):  # fmt: skip
            return {"chosen_by": choice["by"], "chosen_at": choice["at"]}
    for choice in reversed(choices or []):
        if choice["scope"] == "default":
            return {"chosen_by": choice["by"], "chosen_at": choice["at"]}
    return {"chosen_by": merger}


def _keys_compared(diff: MergeDiff) -> dict:
    """Run the key comparison of the diff's primary-key tables on Spark (this process is a worker)."""
    if not any(obj.key_mode for obj in diff.objects):
        return {}
    return keys.key_runs(spark_session(), diff)


class _Refused(Exception):
    def __init__(self, diff: MergeDiff) -> None:
        self.diff = diff


def merge_conflict_error(merge: Merge) -> ConflictError:
    conflicts = [
        {"kind": obj["kind"], "name": obj["name"], "conflicts": _conflicts_of(obj)}
        for obj in merge.report["objects"]
        if obj["verdict"] == "conflict"
    ]
    message = MESSAGE_CONFLICT.format(source=merge.source, target=merge.target, count=len(conflicts))
    return ConflictError("merge_conflict", message, details={"merge": str(merge.id), "conflicts": conflicts})


def _conflicts_of(obj: dict) -> list[dict]:
    unresolved = [pair for pair in obj["pairs"] if pair["verdict"] == "conflict" and not pair.get("resolved")]
    return [*obj["conflicts"], *unresolved]


def _check_heads(diff: MergeDiff, expected: dict[str, str] | None) -> None:
    for which, ref, head in (("source", diff.source, diff.source_head), ("target", diff.target, diff.target_head)):
        wanted = (expected or {}).get(which)
        if wanted and not head.id.startswith(wanted):
            message = MESSAGE_MOVED.format(which=which.capitalize(), ref=ref, head=head.id)
            raise ConflictError("branch_moved", message, details={which: head.id})


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _since(started: float) -> dict[str, int]:
    return {"total_ms": _ms(time.monotonic() - started)}


def _log(diff: MergeDiff, *, status, user, job, dry_run=False, commit=None, log=None, timings=None) -> Merge:
    return Merge.objects.create(
        catalog=diff.catalog, source=diff.source, target=diff.target, source_head=diff.source_head.id,
        target_head=diff.target_head.id, base=diff.base.id, commit=commit, dry_run=dry_run, status=status,
        requested_by=user if user is not None and user.is_authenticated else None, job=job,
        report=diff_as_dict(diff), log=log or {}, timings=timings or {},
    )  # fmt: skip


def merge_result(merge: Merge) -> dict[str, Any]:
    """What a merge job returns."""
    return {
        "merge": str(merge.id),
        "status": merge.status,
        "commit": merge.commit_id,
        "dry_run": merge.dry_run,
        "mergeable": merge.report.get("mergeable"),
        "counts": merge.report.get("counts"),
    }


# --- writing the merge ------------------------------------------------------------------------------------


@dataclass
class _MergeWriter:
    draft: CommitDraft
    diff: MergeDiff
    log: dict[str, Any] = field(
        default_factory=lambda: {
            "objects": [],
            "discarded_operations": [],
            "schema_versions": {"invisible": [], "discarded": []},
            "files": [],
        }
    )

    key_runs: dict = field(default_factory=dict)  # primary-key tables: their key comparison (services/keys.py)

    def apply(self) -> None:
        merging = [obj for obj in self.diff.objects if obj.merges and obj.resolution != TARGET_WINS]
        for obj in self.diff.objects:
            if obj.merges and obj.resolution == TARGET_WINS:
                self.log["objects"].append(
                    {"kind": obj.kind, "object_id": str(obj.object_id), "name": obj.name, "how": "kept_target",
                     "verdict": obj.verdict, "operations": []}
                )  # fmt: skip
        tables = [obj.object_id for obj in merging if obj.kind == ObjectKind.TABLE and not obj.source.dropped]
        chains = {
            "base": commit_chain(self.diff.base), "source": commit_chain(self.diff.source_head),
            "target": self.draft.chain,
        }  # fmt: skip
        self.files = {side: tables_files(chain, table_ids=tables) for side, chain in chains.items()}
        self.schemas = {
            side: schema_histories(chains[side], table_ids=tables) for side in ("source", "target")
        }  # fmt: skip
        for obj in merging:
            self._object(obj)

    def _object(self, obj: ObjectDiff) -> None:
        src = obj.source
        if src.dropped:
            how, state, name, parent_id = "dropped", obj.target.state, obj.target.name, obj.target.parent_id
        elif obj.change == "added_in_source":
            how, state, name, parent_id = "created", dict(src.state), src.name, src.parent_id
        elif obj.resolution == SOURCE_WINS:
            how, state, name, parent_id = "taken_from_source", dict(src.state), src.name, src.parent_id
        else:
            how, state, parent_id = "replayed", dict(obj.merged_state), obj.target.parent_id
            name = states.name_merge(obj.base.name, src.name, obj.target.name)
            how = "merged_by_key" if obj.key_mode else how
        new_schema = None
        if obj.kind == ObjectKind.TABLE and not src.dropped:
            if how == "merged_by_key":
                self._merge_by_key(obj)
            else:
                self._table_files(obj, how)
            if how == "created" or state["columns"] != obj.target.state["columns"]:
                new_schema = state["columns"]
        self.draft.put(
            kind=obj.kind, object_id=obj.object_id, name=name, parent_id=parent_id, state=state,
            dropped=src.dropped, new_schema=new_schema,
        )  # fmt: skip
        replayed = self._operations(obj, how)
        self.log["objects"].append(
            {"kind": obj.kind, "object_id": str(obj.object_id), "name": obj.name, "how": how, "verdict": obj.verdict,
             "operations": [op.op for op in replayed]}
        )  # fmt: skip

    def _operations(self, obj: ObjectDiff, how: str) -> list[Op]:
        """Record the source's operations this merge replays on the target; log the discarded ones. A table merged
        by key records its data change itself (`_merge_by_key`): only its DDL operations are replayed here."""
        discarded = {pair.source: pair for pair in obj.discarded}
        if how == "created":
            details = {"name": obj.source.name, "merged_from": obj.source.commit_id, **obj.source.state}
            self.draft.operation(object_id=obj.object_id, kind=obj.kind, op="create", details=details)
        replayed = []
        for index, op in enumerate(obj.source_operations):
            if op.op == "create" or (how == "merged_by_key" and op.op in DML):
                continue
            pair = discarded.get(index)
            if pair is not None:
                self.log["discarded_operations"].append(
                    {"object": obj.name, "object_id": str(obj.object_id), "op": op.op, "commit": op.commit,
                     "note": pair.decided.note, "reason": pair.decided.reason,
                     "files": list(pair.decided.discarded)}
                )  # fmt: skip
                if set(pair.decided.discarded) >= op.added:
                    continue  # discarded whole; else only some of its files (a merge-on-read delete, A5)
            details = {k: v for k, v in op.details.items() if k != "deltas_on"} | {"merged_from": op.commit}
            self.draft.operation(object_id=obj.object_id, kind=obj.kind, op=op.op, details=details)
            replayed.append(op)
        return replayed

    # --- table data: which files the target keeps, takes over and drops ----------------------------------

    def _table_files(self, obj: ObjectDiff, how: str) -> None:
        base, src, dest = (
            self.files[side].get(obj.object_id, NO_FILES).by_id() for side in ("base", "source", "target")
        )
        if how == "taken_from_source":  # source_wins for the whole table: its files become the source's
            for fid in sorted(set(dest) - set(src)):
                self.draft.remove_file(dest[fid])
            self._take_over(obj, [f for fid, f in src.items() if fid not in dest])
            return
        not_taken, not_removed = set(), set()
        for pair in obj.discarded:
            op = obj.source_operations[pair.source]
            not_taken |= set(pair.decided.discarded)
            if op.op == "compaction":  # dropped compaction: the target keeps the segments it would have replaced
                not_removed |= op.removed | set(op.details.get("deltas_removed", []))
        removed = {fid for fid in base if fid not in src and fid not in not_removed}
        overwrites = [
            overwritten_partitions(op, obj.object_id) for index, op in enumerate(obj.source_operations)
            if op.op == "overwrite" and index not in {pair.source for pair in obj.discarded}
        ]  # fmt: skip
        for partitions in overwrites:
            removed |= {fid for fid, f in dest.items() if fid not in src and _in_scope(f, partitions)}
        removed |= {fid for fid, f in dest.items() if f.kind == DataFile.Kind.DELTA and str(f.segment_id) in removed}
        kept = [f for fid, f in dest.items() if fid not in src and fid not in removed]
        self._delete_in_mixed(obj, kept, [p for partitions in overwrites if partitions for p in partitions])
        added = [f for fid, f in src.items() if fid not in base and fid not in dest and fid not in not_taken]
        live_segments = {fid for fid, f in dest.items() if f.kind == DataFile.Kind.SEGMENT and fid not in removed}
        live_segments |= {str(f.id) for f in added if f.kind == DataFile.Kind.SEGMENT}
        added = [f for f in added if f.kind == DataFile.Kind.SEGMENT or str(f.segment_id) in live_segments]
        for fid in sorted(removed & set(dest)):
            self.draft.remove_file(dest[fid])
        self._take_over(obj, added)

    def _delete_in_mixed(self, obj: ObjectDiff, kept: list[DataFile], partitions: list[dict[str, Any]]) -> None:
        """The target's own segments that mix partitions (written before the table was partitioned by the source
        overwrite's columns) cannot be dropped whole: the rows of the overwritten `partitions` in them get delete
        files, recorded as a `delete` of the merge commit."""
        target = self.files["target"].get(obj.object_id, NO_FILES)
        ids = {column_id for partition in partitions for column_id in partition}
        mixed = {s.id for s in target.unsplit(ids)} & {f.id for f in kept}
        if not mixed:
            return
        columns = [Column.from_dict(c) for c in obj.merged_state["columns"]]
        reads = [r for r in target.reads() if uuid.UUID(r.id) in mixed]
        warehouse, base = Warehouse(settings.LAKEUI_WAREHOUSE), f"{self.diff.catalog.id}/{obj.object_id}"
        rows = read_segments(spark_session(), warehouse, base, columns, reads, positions=True)
        hit = dml.positions_matching(rows, dml.rows_in_partitions(partitions, columns))
        deltas = self._add_written(
            obj, write_deltas(warehouse, base, hit, tag=f"merge-{uuid.uuid4().hex}"), DataFile.Kind.DELTA
        )
        if not deltas:
            return
        details = {
            "deltas_added": [str(d.id) for d in deltas], "segments_touched": [str(d.segment_id) for d in deltas],
            "rows_deleted": sum(d.row_count for d in deltas), "reason": "overwritten_partitions_in_mixed_segments",
        }  # fmt: skip
        self.draft.operation(object_id=obj.object_id, kind=obj.kind, op="delete", details=details)

    def _add_written(self, obj: ObjectDiff, written: list, kind: str) -> list[DataFile]:
        """Files the merge wrote for `obj` (`engine.tables.WrittenFile`s): added to the commit, and logged."""
        files = [self._written(obj.object_id, w, kind) for w in written]
        for file in files:
            self.draft.add_file(file)
            entry = {"object": obj.name, "kind": file.kind, "id": str(file.id), "path": file.path,
                     "rows": file.row_count, "bytes": file.size_bytes, "written_by_merge": True}  # fmt: skip
            if file.segment_id is not None:
                entry["segment"] = str(file.segment_id)
            self.log["files"].append(entry)
        return files

    def _written(self, table_id, written, kind: str) -> DataFile:
        """A file the merge wrote; a segment gets the schema its table has after this commit (CommitDraft)."""
        return DataFile(
            catalog=self.diff.catalog, table_id=table_id, kind=kind, path=written.path, row_count=written.row_count,
            size_bytes=written.size_bytes, stats=written.stats, partition_values=written.partition_values,
            segment_id=uuid.UUID(written.segment_id) if written.segment_id else None,
        )  # fmt: skip

    def _merge_by_key(self, obj: ObjectDiff) -> None:
        """A primary-key table: write the merged rows of the keys that change, and delete files for the old ones."""
        run = self.key_runs[obj.object_id]
        choices = {c["key_id"]: c["choice"] for c in obj.keys["choices"] if "key_id" in c}
        segments, deltas, figures, touched = keys.replay(
            spark_session(), run.sides, run.result, run.only, choices, tag=f"merge-{uuid.uuid4().hex}"
        )
        new_segments = self._add_written(obj, segments, DataFile.Kind.SEGMENT)
        new_deltas = self._add_written(obj, deltas, DataFile.Kind.DELTA)
        details = {
            "segments_added": [str(f.id) for f in new_segments], "deltas_added": [str(f.id) for f in new_deltas],
            "segments_removed": [], "deltas_removed": [], "segments_touched": [str(s.id) for s in touched],
            "by_key": obj.keys and {k: v for k, v in obj.keys.items() if k not in ("listed", "choices")},
            **figures,
        }  # fmt: skip
        op = "update" if figures["rows_replaced"] else "insert"
        self.draft.operation(object_id=obj.object_id, kind=obj.kind, op=op, details=details)

    def _take_over(self, obj: ObjectDiff, added: list[DataFile]) -> None:
        """Make `added` live on the target by reference. A segment written with a schema version the target's
        history lacks reads with an invisible copy of it (4.5); src versions no merged segment uses are discarded."""
        history = {v.id for v in self.schemas["target"].get(obj.object_id, [])}
        copies: dict[int, SchemaVersion] = {}
        for file in added:
            version, visible = None, None
            if file.kind == DataFile.Kind.SEGMENT:
                version = file.schema_version
                if version.id in history:
                    visible = version.visible
                else:
                    if version.id not in copies:
                        copies[version.id] = self.draft.schema_copy(version)
                    version, visible = copies[version.id], False
            self.draft.add_file(file, new=False, schema_version=version, schema_visible=visible)
            self.log["files"].append(
                {"object": obj.name, "kind": file.kind, "id": str(file.id), "path": file.path, "rows": file.row_count,
                 "bytes": file.size_bytes, "schema_visible": visible}
            )  # fmt: skip
        source_commits = set(self.diff.source_commits)
        for version in self.schemas["source"].get(obj.object_id, []):
            if version.commit_id not in source_commits or not version.visible:
                continue
            entry = {"object": obj.name, "source_version": version.id, "columns": [c["name"] for c in version.columns]}
            key = "invisible" if version.id in copies else "discarded"
            self.log["schema_versions"][key].append(entry)


def _in_scope(file: DataFile, partitions: list[dict[str, Any]] | None) -> bool:
    """Whether a segment is among those a source overwrite replaced: the whole table (None), or its partitions
    (values by column id, see `overwritten_partitions`)."""
    return file.kind == DataFile.Kind.SEGMENT and (
        partitions is None or file_in_partitions(file.partition_values, partitions)
    )
