"""The conflict rule tables (docs/merge-semantics.md#databases and #tables-without-a-primary-key), as data, and
the conditions their notes name.

A table is written here exactly as in the design, and parsed once: rows are the source branch's operation,
columns the target's. A cell is `ok`, `conflict`, or the name of a note (A1-A6, the starred cells) whose
condition decides from the two operations and what the merge knows about the two sides (`Facts`). Primary-key
tables (4.4) get their own table here when they are merged by key.

Besides the cells, one physical check guards every pair of DML operations that the tables call `ok`: if one side
rewrote a segment (copy-on-write, compaction) whose rows the other side deleted or updated by position, the
positions no longer exist and replaying would lose that change, so the pair is a conflict (note `R*`). The
design's own F* is that check for dest compactions; R* applies it to the other rewrites.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from catalog_app.engine.type_names import is_widening, parse_type

OK, CONFLICT, DISCARDED, PENDING = "ok", "conflict", "discarded", "pending"
FAIL, SOURCE_WINS, TARGET_WINS = "fail", "source_wins", "target_wins"
CHOICES = (FAIL, SOURCE_WINS, TARGET_WINS)  # the resolutions a merge takes (4.4)
# Only the merge of criss-cross bases into a virtual base takes this one: a key the bases conflict on is left out
# of the virtual base, so that each side's row of it is a change of its own
# (docs/merge-semantics.md#criss-cross-histories).
LEAVE_OUT = "leave_out"

DATABASE_TABLE = """
| src \\ dest | drop | modify_name | set_properties | unset_properties |
| drop | ok | ok | ok | ok |
| modify_name | conflict | ok | ok | ok |
| set_properties | conflict | ok | ok | ok |
| unset_properties | conflict | ok | ok | U* |
"""

TABLE_TABLE = """
| src \\ dest | drop | alter_name | alter_properties | alter_column | alter_partition | insert | delete | update | overwrite | compaction |
| drop | ok | ok | ok | ok | ok | ok | ok | ok | ok | ok* |
| alter_name | conflict | ok | ok | ok | ok | ok | ok | ok | ok | ok* |
| alter_properties | conflict | ok | P* | ok | ok | ok | ok | ok | ok | ok* |
| alter_column | conflict | ok | ok | A6 | ok | ok | ok | ok | ok | ok* |
| alter_partition | conflict | ok | ok | ok | S* | ok | ok | ok | ok | ok* |
| insert | conflict | ok | ok | ok | ok | ok | ok | ok | ok | ok* |
| delete | conflict | ok | ok | ok | ok | conflict | A2 | ok | A5 | F* |
| update | conflict | ok | ok | ok | ok | conflict | A1 | A3 | A4 | F* |
| overwrite | conflict | ok | ok | ok | ok | ok | ok | ok | ok | ok* |
| compaction | conflict | ok | ok | ok | ok | C* | C* | C* | C* | C* |
"""  # noqa: E501

DML = frozenset({"insert", "delete", "update", "overwrite", "compaction"})
TOUCHING = frozenset({"delete", "update"})  # DML that addresses existing rows by position
REWRITES = frozenset({"delete", "update", "compaction"})  # DML that may remove a segment and rewrite its rows


def _parse(text: str) -> tuple[list[str], list[str], dict[tuple[str, str], str]]:
    lines = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in text.strip().splitlines()]
    columns = lines[0][1:]
    cells = {(row[0], column): cell for row in lines[1:] for column, cell in zip(columns, row[1:], strict=True)}
    return [row[0] for row in lines[1:]], columns, cells


@dataclass(frozen=True)
class RuleTable:
    name: str  # "database" | "table"
    title: str
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], str]

    def cell(self, src_op: str, dest_op: str) -> str | None:
        return self.cells.get((src_op, dest_op))


RULE_TABLES = {
    "database": RuleTable("database", "4.2 Existing databases", *_parse(DATABASE_TABLE)),
    "table": RuleTable("table", "4.3 Existing tables without a primary key", *_parse(TABLE_TABLE)),
}

NOTES = {
    "A1": "src update vs dest delete: conflict if both touched a common segment, else ok.",
    "A2": "delete vs delete: ok, also on a common segment (both delta files apply).",
    "A3": "update vs update: conflict if both touched a common segment, else ok.",
    "A4": "src update vs dest overwrite: updates of rows src added since the ancestor merge; updates of older rows "
    "are discarded (the overwrite replaced them).",
    "A5": "src delete vs dest overwrite: deletes of rows src added merge; deletes of older rows are discarded.",
    "A6": "alter_column vs alter_column: conflict if dest's type for the column is wider than the one src sets "
    "(6.1), or dest added a NOT NULL column without default and src wrote data (6.2).",
    "P*": "properties vs properties: ok, src wins per key; conflict only if both unset the same key.",
    "S*": "partition vs partition: ok if both set the same spec, else conflict.",
    "F*": "src delete/update vs dest compaction: conflict if dest compacted a segment src's change touched.",
    "C*": "src compaction vs dest DML: taken over if dest changed or removed none of the segments it compacted, "
    "else discarded; a conflict only if src also changed rows of the table (they would be lost with it).",
    "U*": "unset vs unset: conflict if both unset the same key, else ok.",
    "ok*": "dest compaction changes no row: src's change is replayed on the compacted files.",
    "R*": "a segment one side rewrote holds rows the other side deleted or updated by position.",
    "V*": "a revert vs a later change: conflict if the later change rewrote, removed or changed rows by position in "
    "files the reverted commit wrote (the revert would take them out with that change), or rewrote a segment whose "
    "rows the revert brings back; else ok.",
    "4.4": "primary-key table: data changes are compared by key; a key changed on both sides merges if both made "
    "the same change or changed different columns, and conflicts otherwise (or always, with merge.granularity=row).",
}


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of one side, as recorded in its commit. A side's operations are listed in the order of the
    commits that first made them; `applied` is where the side last applied it (its place on the side's first-parent
    chain, `operations.side_changes`): a merge replays an older operation after the side's own later ones."""

    commit: str
    position: int
    op: str
    details: dict[str, Any]
    applied: int = field(default=0, compare=False)

    @property
    def touched(self) -> set[str]:
        return set(self.details.get("segments_touched", []))

    @property
    def removed(self) -> set[str]:
        return set(self.details.get("segments_removed", []))

    @property
    def addressed(self) -> set[str]:
        """The segments whose rows it deleted or updated by position, by what it did to files: those it names as
        touched, those it put delete files on and, a delete or an update, those it took out. For a plain delete or
        update these are the segments it names as touched; a revert's undo names only those whose rows it brings
        back, and deletes rows by taking segments out and putting delete files back (unkeyed model seed 102)."""
        taken_out = self.removed if self.op in TOUCHING else set()
        on = {segment for segment in self.details.get("deltas_on", {}).values() if segment is not None}
        return self.touched | taken_out | on

    @property
    def added(self) -> set[str]:
        return {*self.details.get("segments_added", []), *self.details.get("deltas_added", [])}

    @property
    def taken_out(self) -> set[str]:
        """The files it took out: segments and delete files."""
        return {*self.details.get("segments_removed", []), *self.details.get("deltas_removed", [])}

    @property
    def puts_back_own(self) -> bool:
        """A revert's undo of a commit that rewrote no rows (an overwrite's: `undo.undo_operations` records `rewrote`):
        the segments it puts back hold rows of their own, as an insert's do, not those of the files it takes out.
        False for an undo recorded without the mark, and for any other operation."""
        return self.details.get("rewrote") is False

    @property
    def origins(self) -> dict[str, frozenset[str]]:
        """Of the segments it wrote by rewriting rows (an update's new rows, a copy-on-write rewrite's kept rows, a
        compaction's), the segments whose rows each holds: the one recorded (`segments_from`), else every segment it
        rewrote. Empty for an operation that rewrote none, and for the undo of a commit that rewrote none
        (`puts_back_own`). Followed back through a side's earlier rewrites by `lineage.segment_origins`."""
        if self.op not in REWRITES or self.puts_back_own:
            return {}
        recorded, rewritten = self.details.get("segments_from", {}), frozenset(self.touched | self.removed)
        return {
            new: frozenset({recorded[new]}) if recorded.get(new) is not None else rewritten
            for new in self.details.get("segments_added", [])
        }

    @property
    def restored(self) -> set[str]:
        """A restore's result: the files of the table at its point, those it added and those it kept (a restore is
        recorded as an overwrite of the whole table). Its own result, even where a file is as old as the merge base;
        empty for any other operation."""
        if not self.details.get("restore"):
            return set()
        return {*self.added, *self.details.get("segments_kept", []), *self.details.get("deltas_kept", [])}

    @property
    def identity(self) -> tuple[str, int]:
        """The operation this one is: itself, or the one it was cherry-picked from (docs/merge-semantics.md)."""
        picked = self.details.get("picked_from")
        return (picked[0], picked[1]) if picked else (self.commit, self.position)


@dataclass
class Facts:
    """What the conditions need beyond the two operations."""

    dest_columns: dict[int, dict] = field(default_factory=dict)  # dest's current columns by id
    src_wrote_data: bool = False
    src_changed_rows: bool = False  # src inserted, deleted, updated or overwrote rows of the table (not compaction)
    key_mode: bool = False  # a primary-key table with data changes on both sides (4.4)
    keyed: bool = False  # a primary-key table: its data operations are compared by key, never by file (4.4)
    reverting: bool = False  # the source's operations undo a commit's (a revert): `revert_verdict` decides
    # The segments the source wrote by rewriting others' rows, each with the segments it did not write whose rows it
    # holds (`lineage.segment_origins`); any other segment holds its own.
    src_origins: dict[str, frozenset[str]] = field(default_factory=dict)
    src_restored: frozenset[str] = frozenset()  # the files of the source's restores' results (`Op.restored`)
    dest_live: frozenset[str] = frozenset()  # the target's live segments (read where the source rewrote by position)
    # A6 settled by the resolution's `schema`, by column id: {"type": ...} (6.1) or {"fill": ...} (6.2)
    schema_settled: dict[int, dict] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Verdict:
    verdict: str  # ok | conflict | discarded
    note: str  # the cell or note that decided it
    reason: str
    discarded: tuple[str, ...] = ()  # files of the src operation that are not taken over
    # A6 conflicts a resolution's `schema` settles: the column, how ("type" for 6.1, "fill" for 6.2), its type
    settles: tuple[str, str, str] | None = None


Condition = Callable[[Op, Op, Facts], Verdict]
# A pair of data operations of a table merged by key, until its key comparison is known
KEYS_PENDING = Verdict(PENDING, "4.4", "The key-by-key comparison has not run yet.")


def segments_named(ids: set[str]) -> str:
    """Segment ids as the reasons name them."""
    return ", ".join(sorted(segment[:8] for segment in ids))


def _common_segment(note: str) -> Condition:
    def decide(src: Op, dest: Op, facts: Facts) -> Verdict:
        common = src.touched & dest.touched
        if common:
            return Verdict(CONFLICT, note, f"Both sides changed rows of segment(s) {segments_named(common)}.")
        return Verdict(OK, note, "The two sides changed rows of different segments.")

    return decide


def _replaced_by_overwrite(note: str) -> Condition:
    def decide(src: Op, dest: Op, facts: Facts) -> Verdict:
        # A segment the source rewrote from one the overwrite replaced holds the replaced one's rows (seed 13 of
        # the keyless model: an update discarded here, then a second update of its new rows, took those rows back).
        # A restore's result is its own, the segments it kept among them: the source's changes of their rows are
        # discarded as against any overwrite (docs/merge-semantics.md#restore; keyless model seed 1: a delete of a
        # row of a segment the target's restore kept was replayed, and the row the restore holds was lost).
        # A delete that took a segment out (a revert's undo of an insert) addresses its rows as one that put a
        # delete file on it does (`Op.addressed`).
        # Rows of the source's own restore's result are its own, not older rows: its overwrite replaces the target's
        # (keyless model seed 3: an update after the source restored the table was discarded, the old row kept).
        # A segment the overwrite removed that the target holds again (a later merge or revert brought it back) holds
        # rows the target has after its overwrite, not rows it replaced: the source's changes of them merge (unkeyed
        # model seed 176: the target took the base's table back after its restore, then deleted another row; the
        # source's delete of a row it holds again was discarded, and the row stayed).
        overwritten = ((dest.removed - facts.dest_live) | dest.restored) - facts.src_restored
        lineage = {segment: facts.src_origins.get(segment, {segment}) for segment in src.addressed}
        replaced = {segment for segment, origins in lineage.items() if origins & overwritten}
        mixed = {segment for segment in replaced if not lineage[segment] <= overwritten}
        if mixed:
            return Verdict(
                CONFLICT, note,
                f"The source's {src.op} changed rows of segment(s) {segments_named(mixed)}, which hold rows the "
                "target's overwrite replaced together with rows it did not: they cannot be split.",
            )  # fmt: skip
        if not replaced:
            return Verdict(OK, note, "The source changed only rows the target's overwrite did not replace.")
        kept = src.addressed - replaced
        if kept and replaced & src.removed & dest.restored:  # the target's restore still holds them
            return Verdict(
                CONFLICT, note,
                f"The source's {src.op} took out segment(s) {segments_named(replaced & src.removed & dest.restored)}, "
                "which the target's restore kept, together with rows it did not: it cannot be split.",
            )  # fmt: skip
        # The segments the undo of an overwrite puts back that hold no row the target's overwrite replaced come back,
        # with their delete files (unkeyed model seed 248: `b3` reverted its overwrite, which the base holds, and
        # updated a row it put back; against `b1`'s overwrite of the base's rows the undo was discarded whole, the
        # segments it put back with it, and the update with them: three of the source's rows were lost).
        back = _put_back_apart(src, facts, overwritten)
        if back and (kept or not back >= set(src.details.get("deltas_added", []))):
            return Verdict(
                CONFLICT, note,
                f"The source's {src.op} puts back segment(s) {segments_named(back)} and changes rows the target's "
                f"overwrite replaced (of {segments_named(replaced)}) in the same operation: it cannot be split.",
            )  # fmt: skip
        files = _files_on(src, replaced) if kept else tuple(sorted(src.added - back))
        if files is not None:
            why = "rows the target's overwrite replaced" + (" (the rest merges)" if kept or back else "")
            return Verdict(DISCARDED, note, f"The source's {src.op} of {why} is discarded.", files)
        return Verdict(
            CONFLICT, note,
            f"The source's {src.op} rewrote rows both of segments the target's overwrite replaced "
            f"({segments_named(replaced)}) and of others, in the same files: it cannot be split.",
        )  # fmt: skip

    return decide


def _put_back_apart(src: Op, facts: Facts, overwritten: set[str]) -> set[str]:
    """The files the undo of a commit that rewrote no rows (`undo.undo_operations`: an overwrite's) puts back that hold
    no row of `overwritten`: its segments, and its delete files where every segment it puts back is such (a delete
    file is of the segment it puts back with; which one is not recorded). Empty for any other operation."""
    if not src.puts_back_own:
        return set()
    segments = set(src.details.get("segments_added", []))
    apart = {segment for segment in segments if not facts.src_origins.get(segment, {segment}) & overwritten}
    return apart | set(src.details.get("deltas_added", [])) if apart == segments else apart


def _files_on(src: Op, segments: set[str]) -> tuple[str, ...] | None:
    """The files `src` wrote for rows of `segments`: its delta files on them and the new segments it wrote from
    their rows (an update's new rows, a copy-on-write rewrite's kept rows: `segments_from`). None when some new
    segment of `src` mixes rows of several segments (written before `segments_from` was recorded): it cannot be
    split."""
    origins = src.details.get("segments_from", {})
    if not set(src.details.get("segments_added", [])) <= set(origins):
        return None
    on = src.details.get("deltas_on", {})
    deltas = [delta for delta, segment in on.items() if segment in segments]
    return tuple(sorted([*deltas, *(new for new, origin in origins.items() if origin in segments)]))


def _properties(src: Op, dest: Op, facts: Facts) -> Verdict:
    both = set(src.details.get("unset", [])) & set(dest.details.get("unset", []))
    if both:
        return Verdict(CONFLICT, "P*", f"Both sides unset {sorted(both)}.")
    return Verdict(OK, "P*", "Properties merge key by key; where both set a key, the source's value wins.")


def _unset(src: Op, dest: Op, facts: Facts) -> Verdict:
    both = set(src.details.get("unset", [])) & set(dest.details.get("unset", []))
    if both:
        return Verdict(CONFLICT, "U*", f"Both sides unset {sorted(both)}.")
    return Verdict(OK, "U*", "The two sides unset different keys.")


def _partition(src: Op, dest: Op, facts: Facts) -> Verdict:
    if src.details.get("new") == dest.details.get("new"):
        return Verdict(OK, "S*", "Both sides set the same partition spec.")
    return Verdict(CONFLICT, "S*", "The two sides set different partition specs.")


def _narrower(new: str, *, than: str) -> bool:
    """Whether setting type `new` would lose the target's type `than` (not the same, and not a widening of it)."""
    return new != than and not is_widening(parse_type(than), parse_type(new))


def _columns(src: Op, dest: Op, facts: Facts) -> Verdict:
    column = facts.dest_columns.get(src.details["column_id"]) if src.details.get("action") == "widen" else None
    if column is not None and "type" in facts.schema_settled.get(column["id"], {}):
        wanted = facts.schema_settled[column["id"]]["type"]
        return Verdict(OK, "A6", f"6.1 settled: column {column['name']!r} becomes {wanted}, which holds both sides' "
                       "values (a widening holds them all; any other type is checked against them when the merge "
                       "runs).")  # fmt: skip
    if column is not None and _narrower(src.details["new"], than=column["type"]):
        return Verdict(
            CONFLICT, "A6",
            f"6.1: the target's type of column {column['name']!r} ({column['type']}) is wider than or "
            f"incompatible with the source's {src.details['new']}.", settles=(column["name"], "type", column["type"]),
        )  # fmt: skip
    added = dest.details.get("column") if dest.details.get("action") == "add" else None
    if added and "fill" in facts.schema_settled.get(added.get("id"), {}):
        return Verdict(OK, "A6", f"6.2 settled: the rows without column {added['name']!r} take the fill "
                       f"{facts.schema_settled[added['id']]['fill']!r}.")  # fmt: skip
    if added and not added["nullable"] and added.get("default") is None and facts.src_wrote_data:
        return Verdict(
            CONFLICT, "A6",
            f"6.2: the target added NOT NULL column {added['name']!r} without a default, and the source wrote rows "
            "that have no value for it.", settles=(added["name"], "fill", added["type"]),
        )  # fmt: skip
    return Verdict(OK, "A6", "Columns are matched by id; the source's column change is replayed.")


def _compacted_touched(src: Op, dest: Op, facts: Facts) -> Verdict:
    common = src.addressed & dest.removed
    if common:
        return Verdict(CONFLICT, "F*", f"The target compacted segment(s) {segments_named(common)} the source changed.")
    return Verdict(OK, "F*", "The target compacted none of the segments the source changed.")


def _src_compaction(src: Op, dest: Op, facts: Facts) -> Verdict:
    changed = src.removed & (dest.touched | dest.removed)
    if changed and facts.src_changed_rows:
        # Dropping the compaction would drop the source's row changes with it: those made before it live in its
        # output only, and those made after it address its output.
        return Verdict(
            CONFLICT, "C*",
            f"The target changed segment(s) {segments_named(changed)} the source compacted, and the source also "
            "changed rows of the table: the compaction cannot be dropped without losing those changes.",
        )  # fmt: skip
    if changed:
        return Verdict(
            DISCARDED, "C*",
            f"The target changed segment(s) {segments_named(changed)} the source compacted: the compaction is dropped.",
            tuple(sorted(src.added)),
        )  # fmt: skip
    return Verdict(OK, "C*", "The target changed none of the segments the source compacted.")


CONDITIONS: dict[str, Condition] = {
    "A1": _common_segment("A1"),
    "A2": lambda src, dest, facts: Verdict(OK, "A2", "Both delete files apply."),
    "A3": _common_segment("A3"),
    "A4": _replaced_by_overwrite("A4"),
    "A5": _replaced_by_overwrite("A5"),
    "A6": _columns,
    "P*": _properties,
    "S*": _partition,
    "F*": _compacted_touched,
    "C*": _src_compaction,
    "U*": _unset,
    "ok*": lambda src, dest, facts: Verdict(OK, "ok*", NOTES["ok*"]),
}


def _rewritten_positions(src: Op, dest: Op) -> set[str]:
    """Segments one side rewrote while the other addressed rows in them by position (R*)."""
    if src.op not in DML or dest.op not in DML or "overwrite" in (src.op, dest.op):
        return set()
    common = set()
    if dest.op in REWRITES and src.op in TOUCHING:
        common |= src.addressed & dest.removed
    if src.op in REWRITES and dest.op in TOUCHING:
        common |= dest.touched & src.removed
    return common


@dataclass(frozen=True)
class SourceWins:
    """What a table's `source_wins` settles on a table without a primary key (`resolutions.source_wins_scope`)."""

    files: frozenset[str]  # the contested segments and every file either side derived from them
    superseded: tuple[int, ...]  # indexes of the target operations the source's version of those files replaces
    mixed: tuple[int, ...]  # of those, target inserts: rows of the target's own that would be lost


def verdict(table: RuleTable, src: Op, dest: Op, facts: Facts) -> tuple[str, Verdict]:
    """The cell of the pair and what it decides."""
    if facts.keyed and src.op in DML and dest.op in DML:
        if not facts.key_mode:
            return "4.4", Verdict(OK, "4.4", "Merged by key: only one side's rows differ from the base's.")
        return "4.4", KEYS_PENDING  # until the key comparison is known (`resolutions.keys_settle`)
    if facts.reverting and src.op in DML and dest.op in DML:
        return "V*", revert_verdict(src, dest)
    cell = table.cell(src.op, dest.op)
    if cell is None:
        return "-", Verdict(OK, "-", f"{src.op} and {dest.op} do not interact.")
    if cell == CONFLICT:
        return cell, Verdict(CONFLICT, cell, f"The source's {src.op} cannot be replayed after the target's {dest.op}.")
    decided = CONDITIONS[cell](src, dest, facts) if cell in CONDITIONS else Verdict(OK, cell, "Replayed as is.")
    if decided.verdict == OK and cell not in ("F*", "C*", "A4", "A5"):
        rewritten = _rewritten_positions(src, dest)
        if rewritten:
            why = f"Segment(s) {segments_named(rewritten)} were rewritten by one side after the other changed rows in "
            why += "them."
            return cell, Verdict(CONFLICT, "R*", why)
    return cell, decided


def revert_verdict(undo: Op, later: Op) -> Verdict:
    """A revert's undo of a data operation against a change the target made after the reverted commit (V*): the
    undo takes out the files the reverted commit wrote, so a later change to them (rows deleted or updated in them
    by position, the files rewritten, compacted or overwritten) would be lost with them."""
    wrote = undo.taken_out
    changed = (later.touched | later.taken_out) & wrote
    if changed:
        why = f"A later {later.op} changed file(s) {segments_named(changed)} that the reverted commit wrote."
        return Verdict(CONFLICT, "V*", why)
    rewritten = later.removed & undo.touched  # rows the undo brings back by position, in a segment since rewritten
    if rewritten:
        why = f"A later {later.op} rewrote segment(s) {segments_named(rewritten)} whose rows the revert brings back."
        return Verdict(CONFLICT, "V*", why)
    return Verdict(OK, "V*", "The later change does not touch what the reverted commit wrote.")
