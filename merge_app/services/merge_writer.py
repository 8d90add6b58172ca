"""The writer of a planned merge (`MergeWriter`): the data work before the commit lock, then the commit's rows and
the audit log's account of what it wrote. Only metadata is written for tables without a primary key: their data
files are taken over by reference (zero-copy), never copied or rewritten, except for a source partition overwrite
meeting target segments that mix partitions (the plan names them), whose overwritten partitions' rows get delete
files. Primary-key tables merged by key get their merged rows written (`services/keys.py`). What to read, write and
record is the plan's (`merge_app.plan`); the writer decides none of it.
"""

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
from django.conf import settings

from catalog_app.engine import dml, dml_arrow
from catalog_app.engine.keymatch import write_position_deltas
from catalog_app.engine.reads import read_segments
from catalog_app.engine.segment_writes import write_deltas
from catalog_app.engine.segments import Column, SegmentRead
from catalog_app.engine.warehouse import Warehouse
from catalog_app.models import DataFile, ObjectKind
from catalog_app.selectors.objects import schema_histories, schema_version_ids
from catalog_app.selectors.table_files import FileRow, TableFiles
from catalog_app.services.commits import CommitDraft
from catalog_app.spark import spark_session
from lakeui.errors import ApplicationError
from lakeui.memory import gc_paused
from merge_app import plan
from merge_app.plan import records
from merge_app.plan.files import FilePlan, PutBack
from merge_app.plan.rules import TARGET_WINS
from merge_app.selectors.diff import MergeDiff, ObjectDiff
from merge_app.services import keys


@dataclass
class MergeWriter:
    """Writes a planned merge: `write_files` reads the three sides' files and does the Spark work (key merges,
    deletes in the segments the file plan names as mixing overwritten partitions), writing files only; `apply` stages
    the commit on a draft whose parent is the planned target head (the same files, so the files written hold), with
    the files and schema version copies the plan gives on the files read (`Plan.on_files`), the records of the
    diff's `Plan` (`Plan.records`, `Plan.declined`) and the ids of the files it wrote."""

    diff: MergeDiff
    key_runs: Mapping = field(default_factory=dict)  # primary-key tables: their key comparison (services/keys.py)
    log: dict[str, Any] = field(
        default_factory=lambda: {
            "objects": [],
            "discarded_operations": [],
            "superseded_operations": [],
            "schema_versions": {"invisible": [], "discarded": []},
            "files": [],
            "files_removed": [],  # the target's files the merge took out (the file plan's `removed`)
        }
    )
    # object id -> a key merge's written files, or the delete files written for a table replayed by file
    wrote: dict = field(default_factory=dict)
    restored: dict = field(default_factory=dict)  # object id -> segment id -> the delete files a revert put back with

    @gc_paused()
    def write_files(self) -> None:
        """How each object is written and which files of its tables to read, from the diff's plan (`Plan.writes`);
        those files, as the diff read them or read now (plain values: `FileRow`), the partitions its replayed
        overwrites replaced, the target's schema history, the schema versions the source's commits made and each
        key-merged table's key comparison; from the plan, on what was read (`Plan.on_files`, once), the exact files
        of the tables whose files change, the schema version each file taken over reads with and the rows of the
        keys both sides changed; then the data work."""
        self.writes = self.diff.plan.writes
        self.merging = [obj for obj in self.diff.objects if obj.object_id in self.writes]
        tables, named, whole, overwrites, key_results = [], {}, [], {}, {}
        for obj in self.merging:  # one pass: a merge of 10,000 tables asks each of these of every table
            write = self.writes[obj.object_id]
            if not write.reads:
                continue
            tables.append(obj)
            if write.named is not None:
                named[obj.object_id] = write.named
            else:
                whole.append(obj.object_id)
            if write.overwrites:
                overwrites[obj.object_id] = [self.diff.files.overwritten(op, obj.object_id) for op in write.overwrites]
            if write.how == "merged_by_key":
                run = self.key_runs[obj.object_id]
                key_results[obj.object_id] = (run.result, {c.name: c.type for c in run.sides.table.data.columns})
        read = self.diff.files
        found = read.named(named)
        self.files = {side: read.of(side, whole) | found[side] for side in ("base", "source", "target")}
        table_ids = [obj.object_id for obj in tables]
        self.work = self.diff.plan.on_files(
            plan.FileFacts(
                files=self.files, overwrites=overwrites, key_results=key_results,
                history=schema_version_ids(read.chains["target"], table_ids=table_ids),
                made=schema_histories(read.chains["source"], table_ids=table_ids, commit_ids=self.diff.source_commits),
                commits=set(self.diff.source_commits),
            )
        )  # fmt: skip
        for obj in tables:
            if obj.object_id in key_results:
                run = self.key_runs[obj.object_id]
                self.wrote[obj.object_id] = keys.replay(
                    spark_session(), run.sides, run.only, self.work.key_rows[obj.object_id],
                    tag=f"merge-{uuid.uuid4().hex}",
                )  # fmt: skip
            elif self.writes[obj.object_id].by_file:
                found = self.work.files[obj.object_id]
                self.wrote[obj.object_id] = (self._mixed_deletes(obj, found), self._put_back(obj, found.put_back))

    def written(self) -> list[str]:
        """The files `write_files` wrote (paths from the warehouse root): a key merge's segments and delete files; the
        delete files of target segments that mix partitions, and those a revert puts back segments with."""
        return [file.path for wrote in self.wrote.values() for files in wrote[:2] for file in files]

    @gc_paused()
    def apply(self, draft: CommitDraft) -> None:
        self.draft = draft
        for obj in self.diff.objects:
            if obj.merges and obj.resolution == TARGET_WINS:
                self.log["objects"].append(
                    {"kind": obj.kind, "object_id": str(obj.object_id), "name": obj.name, "how": "kept_target",
                     "verdict": self.diff.verdicts[obj.object_id], "operations": []}
                )  # fmt: skip
        written, declined = self.diff.plan.records, self.diff.plan.declined
        for obj in self.merging:
            self._object(obj, written[obj.object_id])
        for record in declined:
            self._record(record)

    def _object(self, obj: ObjectDiff, planned: records.Records) -> None:
        write = self.writes[obj.object_id]  # from the plan, in write_files
        how, state = write.how, write.state
        new_schema = None
        if obj.kind == ObjectKind.TABLE and not obj.source.dropped:
            if how == "merged_by_key":
                self._merge_by_key(obj)
            elif how in ("taken_from_source", "rows_taken"):
                self._take_source_files(obj)
            elif how != "rows_kept":
                self._table_files(obj)
            if how == "created" or state["columns"] != obj.target.state["columns"]:
                new_schema = state["columns"]
        self.draft.put(
            kind=obj.kind, object_id=obj.object_id, name=write.name, parent_id=write.parent_id, state=state,
            dropped=obj.source.dropped, new_schema=new_schema,
        )  # fmt: skip
        put_back = self.restored.get(obj.object_id)
        for record in planned.operations:
            if record.replay and put_back:
                record = replace(
                    record, details={**record.details, "put_back": {**record.details.get("put_back", {}), **put_back}}
                )
            self._record(record)
        self.log["discarded_operations"] += planned.discarded
        self.log["superseded_operations"] += planned.superseded
        verdict = self.diff.verdicts[obj.object_id]  # as the diff decided it once
        self.log["objects"].append(
            {"kind": obj.kind, "object_id": str(obj.object_id), "name": obj.name, "how": how, "verdict": verdict,
             "operations": planned.replayed}
        )  # fmt: skip

    def _record(self, record: records.Record) -> None:
        self.draft.operation(object_id=record.object_id, kind=record.kind, op=record.op, details=record.details)

    # --- table data: which files the target keeps, takes over and drops ----------------------------------

    def _take_source_files(self, obj: ObjectDiff) -> None:
        """The target's files of the table become the source's, by reference (`plan.files.taken_plan`):
        `source_wins` for a whole table without a key, or a primary-key table whose rows only the source changed
        since the base (its state is the merge's rows, whatever operations made it)."""
        self._remove(obj, self.work.files[obj.object_id].removed)
        self._take_over(obj)

    def _remove(self, obj: ObjectDiff, removed: list[FileRow]) -> None:
        """Take the target's files out, and log each."""
        for file in removed:
            self.draft.remove_file(file)
            self.log["files_removed"].append(
                {"object": obj.name, "kind": file.kind, "id": str(file.id), "path": file.path, "rows": file.row_count}
            )

    def _table_files(self, obj: ObjectDiff) -> None:
        found = self.work.files[obj.object_id]  # planned on the same files before the commit lock
        written, put_back = self.wrote[obj.object_id]
        deltas = self._add_written(obj, written, DataFile.Kind.DELTA)
        if deltas:  # the target's rows of overwritten partitions in its segments that mix partitions
            details = {
                "deltas_added": [str(d.id) for d in deltas], "segments_touched": [str(d.segment_id) for d in deltas],
                "rows_deleted": sum(d.row_count for d in deltas), "reason": "overwritten_partitions_in_mixed_segments",
            }  # fmt: skip
            self.draft.operation(object_id=obj.object_id, kind=obj.kind, op="delete", details=details)
        self._remove(obj, found.removed)
        self._take_over(obj)
        # Recorded with the revert's undo (`_operations`): a later merge of it takes each segment with its delete
        # file where the target holds the segment in no version, and neither where it does.
        masks = self._add_written(obj, put_back, DataFile.Kind.DELTA)
        written = {str(m.segment_id): [str(m.id)] for m in masks}
        self.restored[obj.object_id] = {str(p.segment.id): written.get(str(p.segment.id), []) for p in found.put_back
                                        if p.masks is None}  # fmt: skip

    def _put_back(self, obj: ObjectDiff, put_back: list[PutBack]) -> list:
        """The delete files that leave live, of each segment a revert puts back on a target that holds it in no
        version (`plan.files.PutBack`), only the rows the reverted commit removed from it (read here with pyarrow)."""
        if not put_back:
            return []
        warehouse, base = Warehouse(settings.LAKEUI_WAREHOUSE), f"{self.diff.catalog.id}/{obj.object_id}"
        columns = [Column.from_dict(c) for c in obj.merged_state["columns"]]
        masks = {}
        for found in put_back:
            if found.masks is not None:
                continue  # written by the revert a merge replays
            segment = _segment_read(found.segment, found.source_deltas)
            rewrites = [_segment_read(f, []) for f in found.rewrites]
            after = [d.path for d in found.base_deltas] if found.in_place else None
            try:
                removed = dml_arrow.positions_removed(warehouse, segment, columns, after=after, rewrites=rewrites)
            except dml_arrow.Unsupported as exc:
                raise ApplicationError(
                    "revert_unsupported",
                    f"The rows this revert brings back into {obj.name!r} could not be read ({exc}).",
                ) from None
            mask = np.setdiff1d(np.arange(found.segment.row_count, dtype=np.int64), removed)
            if len(mask):
                masks[str(found.segment.id)] = pa.array(mask, pa.int64())
        return write_position_deltas(warehouse, base, masks, tag=f"revert-{uuid.uuid4().hex}")

    def _mixed_deletes(self, obj: ObjectDiff, found: FilePlan) -> list:
        """The delete files of the rows of the overwritten partitions (`found.partitions`) in the target's segments
        the plan names as mixing them with others (`found.mixed`), read and written here, on Spark; recorded as a
        `delete` of the merge commit."""
        if not found.mixed:
            return []
        mixed = set(found.mixed)
        columns = [Column.from_dict(c) for c in obj.merged_state["columns"]]
        reads = [r for r in self.files["target"][obj.object_id].reads() if r.id in mixed]
        warehouse, base = Warehouse(settings.LAKEUI_WAREHOUSE), f"{self.diff.catalog.id}/{obj.object_id}"
        rows = read_segments(spark_session(), warehouse, base, columns, reads, positions=True)
        hit = dml.positions_matching(rows, dml.rows_in_partitions(found.partitions, columns))
        return write_deltas(warehouse, base, hit, tag=f"merge-{uuid.uuid4().hex}")

    def _add_written(self, obj: ObjectDiff, written: list, kind: str) -> list[DataFile]:
        """Files the merge wrote for `obj` (`engine.segments.WrittenFile`s): added to the commit, and logged."""
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
        segments, deltas, figures, touched = self.wrote[obj.object_id]
        new_segments = self._add_written(obj, segments, DataFile.Kind.SEGMENT)
        new_deltas = self._add_written(obj, deltas, DataFile.Kind.DELTA)
        files = {
            "segments_added": [str(f.id) for f in new_segments], "deltas_added": [str(f.id) for f in new_deltas],
            "segments_removed": [], "deltas_removed": [], "segments_touched": [str(s.id) for s in touched],
        }  # fmt: skip
        self._record(records.key_merge_record(obj, figures, files, self.diff.source_head.id))

    def _take_over(self, obj: ObjectDiff) -> None:
        """Make the files the table's plan takes over live on the target by reference, each with the schema version
        the plan says it reads with there: its own, or an invisible copy made here (`plan.files.schema_takeover`);
        and log the source's schema versions as the plan lists them."""
        takeover = self.work.takeovers[obj.object_id]
        copies = {version.id: self.draft.schema_copy(version) for version in takeover.copies}
        for taken in takeover.files:
            file, version = taken.file, copies[taken.version.id] if taken.copy else taken.version
            self.draft.add_file(file, new=False, schema_version=version, schema_visible=taken.visible)
            self.log["files"].append(
                {"object": obj.name, "kind": file.kind, "id": str(file.id), "path": file.path, "rows": file.row_count,
                 "bytes": file.size_bytes, "schema_visible": taken.visible}
            )  # fmt: skip
        for key, versions in (("invisible", takeover.invisible), ("discarded", takeover.discarded)):
            for version in versions:
                columns = [c["name"] for c in version.columns]
                self.log["schema_versions"][key].append(
                    {"object": obj.name, "source_version": version.id, "columns": columns}
                )


def _segment_read(segment: FileRow, deltas: list[FileRow]) -> SegmentRead:
    """How the engine reads one segment with these delete files (`TableFiles.reads`)."""
    return TableFiles(segments=[segment], deltas={segment.id: deltas}).reads()[0]
