"""How the merge writes each object it merges (docs/architecture.md#the-path-of-a-merge), decided from the planned
object alone: dropped, created, the source's version taken, or how its rows merge; what the object is after the
merge (state, name, parent); and, for a table, which of its files the writer needs to read.

Pure: no ORM, no Spark. The writer (`merge_app/services/merge_writer.py`) reads the files named here and applies.
"""

import uuid
from dataclasses import dataclass
from typing import Any

import merge_app.plan.states as states
from merge_app.plan.files import files_named, replayed_overwrites
from merge_app.plan.objects import TABLE, ObjectDiff
from merge_app.plan.rules import SOURCE_WINS, Op

BY_FILE = frozenset({"created", "replayed"})  # a table without a key: the source's operations replayed by file
TAKEN = frozenset({"taken_from_source", "rows_taken"})  # the target's files become the source's


@dataclass(frozen=True)
class Write:
    """How the merge writes one object (`how`) and what it is after the merge. `reads`: a table whose files the
    writer reads (one the source did not drop); `named`: of such a table, the only files it reads on each side
    (`files.files_named`), None for all of them; `overwrites`: of a table written by file, the source's overwrites
    the merge replays (`files.replayed_overwrites`), whose partitions the writer reads."""

    how: str
    state: dict[str, Any]
    name: str
    parent_id: uuid.UUID | None
    reads: bool = False
    named: set[str] | None = None
    overwrites: tuple[Op, ...] = ()

    @property
    def by_file(self) -> bool:
        """A table whose exact files `files.file_plan` decides."""
        return self.reads and self.how in BY_FILE

    @property
    def taken(self) -> bool:
        """A table whose files become the source's, by reference."""
        return self.reads and self.how in TAKEN


def object_write(obj: ObjectDiff) -> Write:
    """How the merge writes `obj` (`how`), and its state, name and parent after the merge."""
    src, chosen = obj.source, how(obj)
    reads = obj.kind == TABLE and not src.dropped
    named = files_named(obj, chosen) if reads else None
    replayed = tuple(replayed_overwrites(obj)) if reads and chosen in BY_FILE else ()
    if chosen == "dropped":
        return Write(chosen, obj.target.state, obj.target.name, obj.target.parent_id, reads, named)
    if chosen in ("created", "taken_from_source"):
        return Write(chosen, dict(src.state), src.name, src.parent_id, reads, named, replayed)
    name = states.name_merge(obj.base.name, src.name, obj.target.name)
    return Write(chosen, dict(obj.merged_state), name, obj.target.parent_id, reads, named, replayed)


def how(obj: ObjectDiff) -> str:
    """How the merge writes an object: `dropped`, `created`, `taken_from_source` (a table without a key whose whole
    version `source_wins` takes), or how its rows merge (`how_rows`)."""
    if obj.source.dropped:
        return "dropped"
    if obj.change == "added_in_source":
        return "created"
    if obj.resolution == SOURCE_WINS and obj.source_wins is None and not obj.keyed:
        return "taken_from_source"
    return how_rows(obj)


def how_rows(obj: ObjectDiff) -> str:
    """How a table's rows merge: a primary-key table by state (docs/merge-semantics.md, "Primary-key tables"):
    three-way by key when both sides changed its rows, else the rows of the side that changed them, as they are;
    a table without a key by replaying the source's operations."""
    if obj.kind != "table":
        return "replayed"
    if not obj.keyed:  # by replaying the source's operations, unless the target did not change it since the base
        return "rows_taken" if obj.target_unchanged else "replayed"
    if obj.key_mode:
        return "merged_by_key"
    return "rows_taken" if obj.data_changed["source"] else "rows_kept"
