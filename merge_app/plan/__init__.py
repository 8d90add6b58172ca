"""The merge plan, a function of plain values (docs/architecture.md#the-path-of-a-merge): no ORM, no Spark.

`merge_app/selectors/diff.py` reads the three sides (each side's operations since the base, the objects' versions,
the files where they matter, a keyed table's key comparison) into a `PlanInputs`; `merge`, the plan's one entry,
makes of them a `Plan`: every object decided (`decide`: rule cells, verdicts, conflicts, discarded operations, the
merged state: `objects`, by `rules`, `semantics` and `states`), how each is written and what the merge commit
records of it. Each key of a primary-key table that both sides changed, as the engine's comparison on Spark found
it, is decided by `key_verdicts` (`keys`). The writer (`merge_app/services/merge_writer.py`) takes from the `Plan`
how it writes each object and which files it reads (`Plan.writes`, `writes`), reads them, and asks the plan once on
what it read (`Plan.on_files`) for the exact files of each table whose files change, with the target's segments whose
rows of overwritten partitions it deletes (`table_plans`, `files`), the schema version each file it takes over reads
with and the source's versions it copies or discards (`schema_takeovers`), and the rows a table merged by key writes
for the keys both sides changed (`key_rows`); what the merge commit records of each object is the `Plan`'s too
(`Plan.records`, `records`). It then only applies
(reads, writes the rows, delete files and schema copies it is told to), and the audit log reports what the plan
decided.
"""

import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

from merge_app.plan import keys
from merge_app.plan.conflicts import object_conflicts
from merge_app.plan.files import File, FilePlan, Schema, TakeOver, object_file_plan, schema_takeover, taken_plan
from merge_app.plan.lineage import lineage_check
from merge_app.plan.objects import KIND_ORDER, ObjectDiff, PlanInputs, object_diffs
from merge_app.plan.pairs import pairs_decide
from merge_app.plan.records import MERGE, Record, Records, declined, object_records
from merge_app.plan.resolutions import resolutions_settle
from merge_app.plan.rules import TARGET_WINS
from merge_app.plan.states import merged_states
from merge_app.plan.writes import Write, object_write

__all__ = [
    "FileFacts", "FileWork", "Plan", "key_merged", "key_rows", "key_verdicts", "merge", "schema_takeovers",
    "table_plans",
]  # fmt: skip

key_verdicts = keys.key_verdicts


class TableFiles(Protocol):
    """A table's live files on one side (as `catalog_app.selectors.table_files.TableFiles` holds them)."""

    def by_id(self) -> Mapping[str, File]: ...


@dataclass(frozen=True)
class Plan:
    """What the plan decides of a merge before any file is read: every object either side changed, decided, in
    report order; how the merge writes each object it writes (`writes`); what the merge commit records of them
    (`records`) and of each declined table (`declined`). `kind`: how the source's operations come to be replayed
    (`records.MERGE`, `REVERT` or `CHERRY_PICK`). The writes and records are worked out when first asked (a diff
    page asks for neither), once."""

    objects: list[ObjectDiff]
    kind: str = MERGE

    @cached_property
    def writes(self) -> dict[uuid.UUID, Write]:
        return object_writes(self.objects)

    @cached_property
    def _records(self) -> tuple[dict[uuid.UUID, Records], list[Record]]:
        return commit_records(self.objects, self.writes, self.kind)

    @property
    def records(self) -> dict[uuid.UUID, Records]:
        return self._records[0]

    @property
    def declined(self) -> list[Record]:
        return self._records[1]

    def on_files(self, read: "FileFacts") -> "FileWork":
        """What the writer does on the files it read (`read`), the plan's second and last step: the exact files of
        each table whose files change (`table_plans`), how the files taken over read (`schema_takeovers`), the rows
        of the keys both sides changed in each table merged by key (`key_rows`)."""
        by_id = {obj.object_id: obj for obj in self.objects}
        found = table_plans(self.objects, self.writes, read.files, read.overwrites)
        return FileWork(
            files=found,
            takeovers=schema_takeovers(found, read.history, read.made, read.commits),
            key_rows={
                table_id: key_rows(by_id[table_id], result, types)
                for table_id, (result, types) in read.key_results.items()
            },
        )


@dataclass(frozen=True)
class FileFacts:
    """What the writer read for the plan's second step (`Plan.on_files`): `files`, side -> table id -> the table's
    live files there (as `Plan.writes` named them); `overwrites`, of each table replayed by file, the partitions each
    of its replayed source overwrites replaced (`Write.overwrites`; None: the whole table); the target's schema
    version ids of each table (`history`) and the versions the source's commits (`commits`) made of it (`made`);
    `key_results`, of each table merged by key, the engine's comparison of the keys both sides changed and its
    columns' types by name."""

    files: Mapping[str, Mapping[uuid.UUID, TableFiles]]
    overwrites: Mapping[uuid.UUID, Sequence[list[dict[str, Any]] | None]]
    history: Mapping[uuid.UUID, Collection[int]]
    made: Mapping[uuid.UUID, Sequence[Schema]]
    commits: Collection[str]
    key_results: Mapping[uuid.UUID, tuple[keys.KeyResult, Mapping[str, str]]]


@dataclass(frozen=True)
class FileWork:
    """The plan on the files read (`Plan.on_files`): each changed table's file plan (`FilePlan`), how the files it
    takes over read (`TakeOver`), and each key-merged table's rows for the keys both sides changed."""

    files: dict[uuid.UUID, FilePlan]
    takeovers: dict[uuid.UUID, TakeOver]
    key_rows: dict[uuid.UUID, list[keys.Row]]


def key_merged(inputs: PlanInputs) -> list[uuid.UUID]:
    """The primary-key tables the plan merges by key (both sides changed their rows): the key comparisons `merge`
    needs (`compared`), the first step of a plan that has tables merged by key."""
    return [
        table_id for table_id, changed in inputs.keyed_changes.items()
        if table_id in inputs.object_ids and all(changed.values()) and inputs.versions["base"].get(table_id)
    ]  # fmt: skip


def merge(
    inputs: PlanInputs, *, resolution: dict[str, Any], compared: Mapping[uuid.UUID, dict], kind: str = MERGE
) -> Plan:
    """The plan of a merge (a revert, a cherry-pick: `kind`), the one entry from the diff selector: every object
    decided (`decide`), with its writes and records (`Plan`). The writer then asks the plan once more, on the files
    it read (`Plan.on_files`), for the exact files of each table, how those taken over read and the rows of the keys
    both sides changed."""
    return Plan(decide(inputs, resolution=resolution, compared=compared), kind)


def decide(inputs: PlanInputs, *, resolution: dict[str, Any], compared: Mapping[uuid.UUID, dict]) -> list[ObjectDiff]:
    """Every object either side changed, decided, in report order (databases, then tables, by name), stage by stage,
    each a module of its own: the objects and their changes (`objects`), the conflicts of their names and places
    (`conflicts`), the verdict of every pair of operations by the rule tables (`pairs`), each object's merged state
    (`states`), what the lineage of a table's segments shows (`lineage`; a revert's own check is its pairs',
    `rules.revert_verdict`), and what the resolution settles (`resolutions`). A primary-key table merged by key
    takes its key comparison from `compared` (table id -> counts and conflicts); without one it is pending."""
    objects = object_diffs(inputs, (resolution or {}).get("schema", {}))
    object_conflicts(objects, inputs.versions, inputs.taken, inputs.target_children)
    pairs_decide(objects, inputs.live_files)
    merged_states(objects, inputs.segment_stats)
    if not inputs.reverting:
        lineage_check(objects, inputs.live_files, inputs.restored_origins)
    objects.sort(key=lambda obj: (KIND_ORDER.get(obj.kind, 2), obj.name))
    resolutions_settle(objects, resolution, compared, inputs.segment_stats)
    return objects


def key_rows(obj: ObjectDiff, result: keys.KeyResult, types: Mapping[str, str]) -> list[keys.Row]:
    """The rows a table merged by key writes for the keys both sides changed (`keys.key_rows`), as the decided
    object's resolution settled its conflicts (`keys.key_choices`); `types`: its columns' types by name."""
    return keys.key_rows(result, *keys.key_choices(obj.keys), types)


def object_writes(objects: Iterable[ObjectDiff]) -> dict[uuid.UUID, Write]:
    """How the merge writes each object it writes (`writes.Write`), in report order: every object that merges,
    unless its resolution keeps the target's version (`target_wins`: nothing is written of it)."""
    return {obj.object_id: object_write(obj) for obj in objects if obj.merges and obj.resolution != TARGET_WINS}


def table_plans(
    objects: Iterable[ObjectDiff],
    writes: Mapping[uuid.UUID, Write],
    files: Mapping[str, Mapping[uuid.UUID, TableFiles]],
    overwrites: Mapping[uuid.UUID, Sequence[list[dict[str, Any]] | None]],
) -> dict[uuid.UUID, FilePlan]:
    """The exact files of each table whose files the merge changes, decided on the files the writer read (`files`:
    side -> table id -> the table's live files there, as `object_writes` named them; a table with none is left
    out): for a table replayed by file, its file plan (`files.object_file_plan`; `overwrites`: the partitions each
    of its replayed source overwrites replaced, `files.replayed_overwrites`); for one whose version the merge takes,
    the source's files (`files.taken_plan`)."""
    plans = {}
    for obj in objects:
        write = writes.get(obj.object_id)
        if write is None or not (write.by_file or write.taken):
            continue
        source, target = (_by_id(files[side], obj.object_id) for side in ("source", "target"))
        if write.taken:
            plans[obj.object_id] = taken_plan(source=source, target=target)
            continue
        base, replaced = _by_id(files["base"], obj.object_id), overwrites.get(obj.object_id, [])
        plans[obj.object_id] = object_file_plan(obj, base=base, source=source, target=target, overwrites=replaced)
    return plans


def schema_takeovers(
    plans: Mapping[uuid.UUID, FilePlan],
    history: Mapping[uuid.UUID, Collection[int]],
    made: Mapping[uuid.UUID, Sequence[Schema]],
    commits: Collection[str],
) -> dict[uuid.UUID, TakeOver]:
    """The schema version each file a table's plan takes over (`table_plans`: `FilePlan.taken_over`) reads with on the
    target, and which of the source's schema versions the audit log lists as kept invisible or discarded
    (`files.schema_takeover`), from each table's schema version ids on the target (`history`), the versions the
    source's commits (`commits`) made of it (`made`)."""
    return {
        table_id: schema_takeover(found.taken_over, history=history.get(table_id, set()),
                                  made=made.get(table_id, []), commits=commits)
        for table_id, found in plans.items()
    }  # fmt: skip


def _by_id(side: Mapping[uuid.UUID, TableFiles], table_id: uuid.UUID) -> Mapping[str, File]:
    found = side.get(table_id)
    return found.by_id() if found is not None else {}


def commit_records(
    objects: Sequence[ObjectDiff], writes: Mapping[uuid.UUID, Write], kind: str
) -> tuple[dict[uuid.UUID, Records], list[Record]]:
    """What the merge commit records (`records`): of each object it writes, in `writes` (`records.object_records`;
    `kind`: how the source's operations came to be replayed, `records.MERGE`, `REVERT` or `CHERRY_PICK`), and then,
    in report order, each declined table's choice (`records.declined`)."""
    written = {obj.object_id: object_records(obj, writes[obj.object_id], kind) for obj in objects
               if obj.object_id in writes}  # fmt: skip
    return written, [record for obj in objects if (record := declined(obj)) is not None]
