"""A model-based test of MERGE BRANCH: random histories of four branches, each step run for real (jobs on Spark,
merges through the service) and in a small pure-Python model of the replay semantics of docs/merge-semantics.md.

The model knows rows by a row-version id (`rid`, a column of the table): an insert or an overwrite adds rows, a
delete removes rids, an update replaces a rid with a new one (its rows get `amount + 1`). A merge replays on the
target the source's changes since the merge base (4.0: the operations of the commits the source reaches and the
target does not, each once, as the source's first-parent history holds them), by what they left on the source
(`replay`), with the rule table of 4.3: a source
delete or update against target inserts is refused, and so is one that addresses a row the target also deleted
or updated, if the base or either side still holds a version of that row, or only the source once a later source
overwrite replaced it (seeds 84 and 103: where none does, the merge can neither lose, double nor bring back any of
it, and the two sides may hold it in different segments), and not as the own result of a restore that is the
source's last overwrite (seed 99: the restore replaces the target's version, and the merge holds its own once); a target overwrite discards the source's updates and deletes of older rows (A4/A5); a source overwrite replaces the target's
rows. The cells whose verdict depends on files (a common segment, compactions, copy-on-write rewrites) may go either
way; whatever the system does, if it merges, the rows must be the model's.
Criss-cross histories merge from a virtual base: the bases merged into one another first, under the same rules.
After a share of the merges (LAKEUI_MODEL_CONVERGE, 0.3), the target is merged back into the source on copies of
the two branches: merges converge, so both must then hold the same rows, whatever a merge in either
history declined (`target_wins`, A4/A5 discards): a target that holds a table as the merge base has it takes the
source's version (docs/merge-semantics.md#merges-converge).

    LAKEUI_MODEL_SEED=7 LAKEUI_MODEL_STEPS=1000 pytest tests/merge_app/test_merge_model.py

The seed and the steps so far are printed on failure.
"""

import itertools
import os
import random
from dataclasses import dataclass, field, replace

import pytest

from catalog_app.services.refs import branch_create, branch_delete
from lakeui.errors import ApplicationError, ConflictError
from merge_app.services.merges import branch_merge
from merge_app.services.picks import commits_pick
from merge_app.services.restores import branch_restore
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import read
from tests.support.merges import CONVERGE, ancestors_of, change, converges

SEEDS = [int(seed) for seed in os.environ.get("LAKEUI_MODEL_SEED", "11,12").split(",")]
STEPS = int(os.environ.get("LAKEUI_MODEL_STEPS", "100"))
PICKS = int(os.environ.get("LAKEUI_MODEL_PICKS", "6"))  # the weight of cherry-picks and of reverts among the steps
RESTORES = int(os.environ.get("LAKEUI_MODEL_RESTORES", "4"))  # the weight of restores among the steps
# The share of merges still refused after the `target_wins` retry (or not retried) whose branches are then made to
# meet: the one that is not `main` is deleted and branched again from the other, as a user abandons a stuck branch.
# Without it a long history ends with every pair of branches in conflict, and its merges all refused (seed 190: 930
# of some 1,400 merges in 2,000 steps), so the rest of the run hunted nothing.
RESETS = float(os.environ.get("LAKEUI_MODEL_RESETS", "0.5"))
BRANCHES = ("main", "b1", "b2", "b3")
COLUMNS = [
    {"name": "rid", "type": "long", "nullable": False},
    {"name": "id", "type": "long"},
    {"name": "amount", "type": "int"},
]
MUST, MAYBE, OK = "must", "maybe", "ok"
POSITIONAL = frozenset({"delete", "update"})


@dataclass(frozen=True)
class Row:
    rid: int
    id: int
    amount: int


@dataclass(frozen=True)
class MOp:
    """One original operation: what it did to rows, and the commit that made it."""

    uid: int
    commit: int
    kind: str  # insert | delete | update | overwrite (a restore is one) | compaction
    rows: tuple[Row, ...] = ()  # insert, overwrite: the rows written
    rids: frozenset[int] = frozenset()  # delete, update: the row versions addressed
    step: int = 0  # update: the new version of a row is `step * 10**6 + id`
    uncertain: bool = False  # a revert's undo of a rewrite: its cells against other operations may go either way
    restore: bool = False  # an overwrite a restore made: its rows are those of an earlier commit, older rows among them

    @property
    def created(self) -> set[int]:
        """The row versions it may have added (ids are under 10**6, so a rid names its row's id)."""
        updated = self.versions_of(self.rids) if self.kind == "update" else set()
        return {row.rid for row in self.rows} | updated

    def versions_of(self, rids: set[int] | frozenset[int]) -> set[int]:
        """An update's new versions of these rows."""
        return {self.step * 10**6 + rid % 10**6 for rid in rids}


@dataclass
class MCommit:
    id: int
    parent: "MCommit | None"
    merge_parent: "MCommit | None"
    rows: dict[int, Row]
    ops: list[MOp] = field(default_factory=list)  # a plain commit's operations; a merge's, those it replayed
    partial: bool = False  # a merge that replayed less than the source's changes (target_wins, A4/A5 discards)
    # A merge that took the source's rows: the operations those rows carry; or, in one that replayed, the operations
    # it discarded whose files a later source overwrite had replaced anyway (LakeUI may replay them: seed 203).
    held: frozenset[int] = frozenset()
    # Of its operations (and `held`), the compactions LakeUI may have dropped (C*) rather than replayed: they change
    # no row, so the model cannot tell, and the target may or may not hold them afterwards (seed 94).
    unsure: frozenset[int] = frozenset()
    # A merge whose target holds the base's rows after changing the table: the merge commit that takes the source's
    # rows, which LakeUI makes instead where the target's files are the base's too (`Run.outcome`).
    instead: "MCommit | None" = None
    # A merge whose rows LakeUI tells by file and the model cannot: the other rows it may make (`Run.outcome`).
    other: "MCommit | None" = None
    took: bool = False  # a merge that took the source's rows: its files are the source's, older rows among them

    @property
    def changed(self) -> bool:
        """Whether LakeUI records a change of the table in this commit: operations made or replayed, a merge's
        decision (a `resolve` with `declined`), or a taken version's held operations (a `resolve` with `held`: seed
        135, a merge that took another side's rows and replayed nothing of its own still changed the table)."""
        return bool(self.ops or self.partial or self.held)

    @property
    def parents(self) -> list["MCommit"]:
        return [p for p in (self.parent, self.merge_parent) if p is not None]


def ancestors(commit: MCommit) -> dict[int, MCommit]:
    return ancestors_of([commit])


def first_parents(head: MCommit, since: dict[int, MCommit]) -> list[MCommit]:
    """The head's first-parent chain as long as it stays in `since`, newest first."""
    chain, current = [], head
    while current is not None and current.id in since:
        chain.append(current)
        current = current.parent
    return chain


def side_ops(head: MCommit, since: dict[int, MCommit]) -> list[MOp]:
    """4.0: the operations the head's first-parent history holds whose commit the other side lacks, each once."""
    chain = first_parents(head, since)
    picked: dict[int, MOp] = {}
    for commit in reversed(chain):
        for op in commit.ops:
            if op.commit in since:
                picked.setdefault(op.uid, op)
    return sorted(picked.values(), key=lambda op: (op.commit, op.uid))


def applied_order(ops: list[MOp], head: MCommit, since: dict[int, MCommit]) -> list[MOp]:
    """A side's operations (`side_ops`, listed by the commits that made them) in the order the side applied them:
    where its first-parent history last recorded each (a merge replays an older operation after the side's own)."""
    at = {op.uid: n for n, commit in enumerate(reversed(first_parents(head, since))) for op in commit.ops}
    return sorted(ops, key=lambda op: at.get(op.uid, -1))


def chain_held(head: MCommit, since: dict[int, MCommit], *, sure: bool = False) -> set[int]:
    """The operations the head's first-parent history since the base holds: those its commits made or replayed, and
    those a merge that took another side's rows holds with them (`sure`: only those no merge may have dropped)."""
    return {
        uid for c in first_parents(head, since) for uid in [*(op.uid for op in c.ops), *c.held]
        if not (sure and uid in c.unsure)
    }  # fmt: skip


def carried_ops(src: MCommit, base: MCommit) -> tuple[set[int], set[int]]:
    """The operations the source's first-parent history holds down to where it meets the base's, less those the
    base's holds down to there; and of those, the ones no commit there holds for sure (`MCommit.unsure`)."""
    at_src, at_base, held_src, held_base, sure = src, base, set(), set(), set()
    while at_src is not at_base:
        if at_base is None or (at_src is not None and at_src.id > at_base.id):
            held = {op.uid for op in at_src.ops} | at_src.held
            held_src |= held
            sure |= held - at_src.unsure
            at_src = at_src.parent
        else:
            held_base |= {op.uid for op in at_base.ops} | at_base.held
            at_base = at_base.parent
    return held_src - held_base, held_src - held_base - sure


def held_after(rows: dict[int, Row], later: list[MOp]) -> set[int]:
    """The ids of the source's rows a common row of two positional operations must be one of to be a certain conflict
    when later source operations overwrote the table: those the source still holds, but the versions its last
    overwrite holds if a restore made it. A restore's result is its own, older rows among them
    (docs/merge-semantics.md#restore): replayed, it replaces the target's rows, so the merge holds its version of the
    row once, whatever the earlier pair did (seed 99: `main` updated row 1 and restored the table to a point that
    held row 1 as it was; `b1` deleted row 1; the merge holds the restore's row 1)."""
    overwrites = [op for op in later if op.kind == "overwrite"]
    restored = {row.rid for row in overwrites[-1].rows} if overwrites and overwrites[-1].restore else set()
    return {rid % 10**6 for rid in rows if rid not in restored}


def brought_after_overwrite(rows: dict[int, Row], ops: list[MOp]) -> bool:
    """Whether the side holds rows that neither its last overwrite among `ops` nor a later one of them wrote: they
    reached it after the overwrite by operations that are not among `ops` (the base holds them)."""
    last = max((i for i, op in enumerate(ops) if op.kind == "overwrite"), default=None)
    return last is not None and bool(set(rows) - set().union(*(op.created for op in ops[last:])))


def pair_verdict(src: MOp, dest: MOp, live: set[int], dest_replaced: bool = False) -> str:
    """The pair's verdict; `live`: the ids of the rows a common row must be one of to be a certain conflict;
    `dest_replaced`: a later target overwrite replaced what the target operation wrote. A1/A3 compare the segments
    both changed, and the two sides may hold the row in different segments (restores to different points, a
    copy-on-write rewrite on one line): the target's overwrite then settles the source's change (A4/A5), and LakeUI
    may merge (seed 341: `main` updated row 2 in the segment its restore held, `b3` in the one its own restore held,
    and then restored the table again)."""
    if src.uncertain or dest.uncertain:
        return MAYBE
    if src.kind in POSITIONAL and dest.kind == "insert":
        return MUST  # 4.3: delete/update x insert
    if src.kind in POSITIONAL and dest.kind in POSITIONAL:
        if dest.kind == "delete" and src.kind == "delete":
            return MAYBE  # A2 is ok; a copy-on-write rewrite of a common segment is R*
        common = {rid for rid in src.rids & dest.rids if rid % 10**6 in live}
        if common and not (src.kind == "delete" and dest.kind == "update") and not dest_replaced:
            return MUST  # A1, A3 on a common row (seeds 84, 103: not on one an overwrite replaced)
        return MAYBE  # a common segment (A1/A3), copy-on-write rewrites (R*)
    if src.kind in POSITIONAL and dest.kind == "compaction":
        return MAYBE  # F*
    if src.kind == "compaction" and dest.kind != "compaction":
        return MAYBE  # C*
    if src.kind == "overwrite" and dest.kind in ("update", "compaction"):
        return MAYBE  # R*: the target rewrote (copy-on-write, compaction) rows the source may still have
    return OK


@dataclass
class Model:
    commits: itertools.count = field(default_factory=lambda: itertools.count(1))
    uids: itertools.count = field(default_factory=lambda: itertools.count(1))
    heads: dict[str, MCommit] = field(default_factory=dict)
    origin: dict[int, int] = field(default_factory=dict)  # an operation's uid -> the commit that made it
    unsure_pick: MCommit | None = None  # a pick that may be up to date: its commit, if LakeUI makes one
    copy_on_write: bool = False  # the table's write mode: a delete or an update rewrites the segments it changes

    def commit(self, branch: str, op_kind: str, **fields) -> None:
        head = self.heads[branch]
        commit = MCommit(next(self.commits), head, None, dict(head.rows))
        op = MOp(next(self.uids), commit.id, op_kind, **fields)
        self.origin[op.uid] = commit.id
        commit.ops.append(op)
        commit.rows = apply(commit.rows, op)
        self.heads[branch] = commit

    def merge(self, source: str, target: str, keep_target: bool = False) -> tuple[str, dict[int, Row] | None]:
        """(`refused` | `maybe` | `merged` | `up_to_date` | `kept_target`, the target's rows after a merge).
        `keep_target`: the merge runs with `target_wins` after it was refused, which keeps the target's table
        whole: none of the source's operations is replayed, and so none is part of the target's history later."""
        src, dest = self.heads[source], self.heads[target]
        if keep_target:  # the virtual base of several bases is made without the merge's resolution
            outcome, _ = self.base(src, dest)
            if outcome == "refused":
                return "refused", None
            self.heads[target] = MCommit(next(self.commits), dest, src, dict(dest.rows), [], partial=True)
            return ("maybe" if outcome == "maybe" else "kept_target"), dest.rows
        outcome, commit = self.merge_commits(src, dest)
        if commit is not None:
            self.heads[target] = commit
        return outcome, None if commit is None else commit.rows

    def base(self, src: MCommit, dest: MCommit) -> tuple[str, MCommit | None]:
        """The merge base, or the virtual base of several, with the outcome of merging the bases."""
        src_anc, dest_anc = ancestors(src), ancestors(dest)
        common = set(src_anc) & set(dest_anc)
        below = set(ancestors_of([p for c in common for p in src_anc[c].parents]))  # ancestors of another common one
        bases = [src_anc[c] for c in common if c not in below]
        bases.sort(key=lambda c: -c.id)  # newest first, as the real graph walk finds them: the first is the target
        worst, base = "merged", bases[0]
        for other in bases[1:]:
            outcome, merged = self.merge_commits(other, base)
            if outcome == "refused":
                return "refused", None
            worst = "maybe" if outcome == "maybe" else worst
            base = merged or base
        return worst, base

    def merge_commits(self, src: MCommit, dest: MCommit) -> tuple[str, MCommit | None]:
        """The merge of two commits: its outcome and (unless refused or up to date) the merge commit. With several
        merge bases, the merge runs from their virtual base (the bases merged into one another first, each merge
        under the same rules): a base merge that is refused refuses the merge."""
        outcome, base = self.base(src, dest)
        if outcome == "refused":
            return "refused", None
        verdicts = [MAYBE if outcome == "maybe" else OK]
        src_anc, dest_anc = ancestors(src), ancestors(dest)
        src_since = {i: c for i, c in src_anc.items() if i not in dest_anc}
        dest_since = {i: c for i, c in dest_anc.items() if i not in src_anc}
        src_ops, dest_ops = side_ops(src, src_since), side_ops(dest, dest_since)
        since = src_since | dest_since
        return self.three_way(base, src, dest, src_ops, dest_ops, since, verdicts, merge_parent=src)

    def three_way(
        self, base, src, dest, src_ops, dest_ops, since, verdicts, merge_parent
    ) -> tuple[str, MCommit | None]:
        """The merge of the source's operations since `base` into `dest` (a merge, or a cherry-pick with the
        picked commit's parent as the base). An operation both sides hold (cherry-picked) is no change of either."""
        in_base = ancestors(base)
        held = {op.uid for op in [*src_ops, *dest_ops] if self.origin[op.uid] in in_base}
        src_held = held | chain_held(src, since)
        dest_held = held | chain_held(dest, since)
        src_unsure = src_held - held - chain_held(src, since, sure=True)
        # An operation a side holds only through a merge that may have dropped it (a compaction, C*) may be the other
        # side's change in LakeUI: the cells it would meet may go either way.
        unsure = [op for op in src_ops if op.uid in dest_held - held - chain_held(dest, since, sure=True)]
        unsure_dest = [op for op in dest_ops if op.uid in src_unsure]
        src_ops = [op for op in src_ops if op.uid not in dest_held]
        dest_ops = [op for op in dest_ops if op.uid not in src_held]
        if not src_ops and merge_parent is None and unsure:
            # A pick of operations the target may hold (seed 94: a compaction a merge into the target may have
            # dropped, C*): up to date, or a pick commit that changes no row (the pick planned again, and dropped or
            # replayed). Made only if LakeUI made one (`Run.outcome`).
            number = next(self.commits)
            ops = [replace(op, commit=number) for op in unsure]
            uids = frozenset(op.uid for op in ops)
            return "held_maybe", MCommit(number, dest, None, dict(dest.rows), ops, partial=True, unsure=uids)
        if (src.id in ancestors(dest) and merge_parent is not None) or (not src_ops and merge_parent is None):
            # nothing to merge (a criss-cross history's bases merged first: they may refuse)
            return ("up_to_date_maybe" if MAYBE in verdicts else "up_to_date"), None
        verdicts += [MAYBE] * bool(unsure or unsure_dest)
        number = next(self.commits)
        chain, src_chain = first_parents(dest, since), first_parents(src, since)
        # Where the target's head is the base, the source's rows if they differ, whatever it recorded (seed 306: LakeUI
        # takes the version of a table whose files differ from the base's, `plan.operations.held_otherwise`)
        touched = src_ops or any(c.changed for c in src_chain) or (dest is base and src.rows != base.rows)

        def taken() -> MCommit:
            """The merge commit that takes the source's rows, whatever merges on the source declined (4.7). It holds
            what those rows carry: the operations the source's first-parent history holds and the base's does not
            (LakeUI's `plan.operations.carried`)."""
            carried, unsure_carried = carried_ops(src, base)
            carried = frozenset(carried - {op.uid for op in src_ops})
            ops = [replace(op, commit=number) for op in src_ops] if merge_parent is None else src_ops
            unsure_ops = (unsure_carried & carried) | {op.uid for op in ops if op.uid in src_unsure}
            return MCommit(number, dest, merge_parent, dict(src.rows), ops, held=carried, unsure=frozenset(unsure_ops),
                           took=True)  # fmt: skip

        if touched and not any(c.changed for c in chain) and (chain[-1].parent if chain else dest) is base:
            # The target holds the table as the base has it (its first-parent history leads back to the base and
            # changed nothing): the merge takes the source's rows.
            return ("maybe" if MAYBE in verdicts else "merged"), taken()
        # A target that changed the table since the base and holds the base's rows again may hold its files too (an
        # overwrite, then the base's table taken back by a merge: seed 176): LakeUI tells by the files, which the model
        # does not know, and takes the source's rows (`instead`) where they are the base's; else it replays.
        instead = taken() if touched and dest.rows == base.rows else None
        if not src_ops:  # the target holds every operation but not the head: a merge commit that changes nothing
            outcome = "maybe" if MAYBE in verdicts else "merged"
            return outcome, MCommit(number, dest, merge_parent, dict(dest.rows), instead=instead)
        if merge_parent is None:
            # A cherry-pick's base is the picked commit's parent, which the target's history need not hold: a source
            # delete or update of rows of that base the target holds in no version is refused by file (R*: the
            # target lacks their segment), as a three-way merge sets it against the target's delete of them, or
            # replayed where the target holds the segment (seed 201: `b3` updated rows its overwrite wrote, and the
            # update was picked onto `b1`, which never had them; the model replayed it and added the new versions);
            # so too where the target holds another version of the row (an update on the base's line wrote the one
            # addressed into a segment of its own). The target may also hold the base's rows in other segments than
            # the base: where the base's history holds a compaction, or a copy-on-write delete or update, that the
            # target's does not, the pick's delete or update addresses a segment the target lacks, R* (seed 294: `b1`
            # compacted the load's segment, and a pick onto `main`, which held it uncompacted, of `b2`'s update of a
            # row of the compaction was refused).
            in_dest = {uid for c in ancestors(dest).values() for uid in [*(op.uid for op in c.ops), *c.held]}
            rewrites = {"compaction", *(POSITIONAL if self.copy_on_write else ())}
            apart = any(op.kind in rewrites and op.uid not in in_dest for c in in_base.values() for op in c.ops)
            verdicts += [MAYBE for op in src_ops if op.kind in POSITIONAL and (apart or op.rids - set(dest.rows))]
        # The rows a common row of two positional operations must be one of to be a certain conflict: those the base
        # or either side holds a version of (seed 84: an overwrite in the base replaced it on both lines); after a
        # later source overwrite, those the source holds (seed 103: the overwrite replaces the target's version too),
        # but as the own result of a restore that is its last overwrite (`held_after`, seed 99). Else the two sides
        # may hold the row in different segments (A1/A3 compare segments), and the merge can neither lose nor double
        # it.
        live = {rid % 10**6 for rows in (src.rows, base.rows, dest.rows) for rid in rows}
        replaced = [any(later.kind == "overwrite" for later in src_ops[i + 1 :]) for i in range(len(src_ops))]
        dest_order = applied_order(dest_ops, dest, since)
        dest_replaced = {
            op.uid for n, op in enumerate(dest_order) if any(later.kind == "overwrite" for later in dest_order[n + 1 :])
        }
        verdicts += [
            pair_verdict(s, d, held_after(src.rows, src_ops[i + 1 :]) if replaced[i] else live, d.uid in dest_replaced)
            for i, s in enumerate(src_ops)
            for d in dest_ops
        ]
        # A merge that may have dropped a compaction (C*, `MCommit.unsure`) kept the uncompacted segments on its side
        # while the other holds them compacted, as one that kept its own table does (seed 109: main drops b2's
        # compaction for its own delete and b2 takes main's table back; b3 holds the compaction: b2's delete by
        # position addresses a segment b3 lacks, R*).
        declined = any(
            c.partial or c.unsure for c in [*since.values(), *ancestors(src).values(), *ancestors(dest).values()]
        )
        if declined:
            # A side's table is not the base's with its changes replayed (a merge in either history kept its own
            # version, or dropped a compaction, and its files stay apart even once merged back): rows a source
            # operation changed by position may sit in files the target lacks (a conflict, R*) or has.
            verdicts += [MAYBE for op in src_ops if op.kind in POSITIONAL | {"compaction"}]
            # Rows that reached the source after its last overwrite by operations the base holds may sit in the
            # target in another version, by a rewrite the base declined: which of the target's files the overwrite
            # replaces cannot be told by file (R*, seed 205).
            verdicts += [MAYBE] * brought_after_overwrite(src.rows, src_ops)
        self.last = f"base {sorted(base.rows)}, source {sorted(src.rows)}, target {sorted(dest.rows)}, "
        self.last += f"source ops {[(op.kind, sorted(op.rids)) for op in src_ops]}, target ops {[(op.kind, sorted(op.rids)) for op in dest_ops]}"
        if MUST in verdicts:
            return ("refused", None) if instead is None else ("maybe", instead)
        overwritten = any(d.kind == "overwrite" for d in dest_ops)
        # A target restore's rows are its own result, older rows among them: they did not reach it after its
        # overwrite (seed 11 with restores: an update of a row the target restored is discarded, as against any
        # other overwrite).
        restored = {row.rid for d in dest_ops if d.restore for row in d.rows}
        holds: set[int] = set()  # the rows (ids) of the target's last overwrite since the base, if a restore made it
        # The rows the target's own inserts since its last overwrite made (a source insert of the same rows is a
        # revert's undo putting back a segment the target got by a pick or a merge: seed 322).
        inserted: set[int] = set()
        for d in applied_order(dest_ops, dest, since):  # seed 228: a merge replayed an older overwrite after it
            if d.kind == "overwrite":
                holds = {row.id for row in d.rows} if d.restore else set()
                inserted = set()
            elif d.kind == "insert":
                inserted |= {row.rid for row in d.rows}
        applied, partial, undone, superseded, apart = [], False, set(), set(), {}
        # The rows the target holds that reached it after its overwrite (by a later merge: seed 57), and the new
        # versions the replayed updates make of them (seed 22: a second update of a row whose first update merged was
        # discarded, and the row was lost).
        reached = set(dest.rows) - restored
        dest_ids = {rid % 10**6 for rid in dest.rows}  # the rows the target holds, in any version
        for i, op in enumerate(src_ops):
            if overwritten and op.kind in POSITIONAL:
                # A4/A5: the rows the target's overwrite replaced are not changed again; the source's own rows (made
                # by the operations before it: seed 267, a revert's undo deleted rows that a later revert of that
                # revert put back, and the model kept the delete as one of own rows) and those that reached the
                # target after it are
                kept = op.rids & (own_rows(src_ops[:i], set(base.rows)) | reached)
                if op.kind == "update":
                    reached |= op.versions_of(kept & reached)
                partial = partial or kept != op.rids
                if not replaced[i]:  # undone, the source would still have them; not past its own later overwrite
                    undone |= op.rids - kept  # (seed 210: an update discarded against the target's restore)
                if not kept:
                    # What it wrote a later source overwrite replaced anyway: LakeUI finds no file of it to discard
                    # and may replay it, changing no row, so the merge may hold it (seed 203: a later pick of it
                    # is up to date there, refused as against the target's overwrite here).
                    if replaced[i]:
                        superseded.add(op.uid)
                    continue
                op = MOp(op.uid, op.commit, op.kind, rids=frozenset(kept), step=op.step)
            if op.kind == "insert" and any(row.id in holds for row in op.rows):
                # The target's restore holds these rows, in some version (its result holds the insert's segment by
                # reference, maybe with delete files of the rows changed before its point, or what rewrites made of
                # it): they are there, whatever the target did to them since, and replaying the insert adds none of
                # them again (seed 91: a pick onto `b3` of an insert whose rows `b3` had restored and then updated
                # one of; bringing the old version back would hold that row twice). Where the restore holds the
                # segment rewritten (a copy-on-write change or a compaction made its files), LakeUI cannot tell by
                # file which rows it holds and refuses (R*; seed 235: it had appended the segment again).
                # A revert's undo may put back several segments (an overwrite's undo), and those the restore does not
                # hold come back (seed 248): it may add the rows the restore does not hold.
                if op.uncertain and any(row.id not in holds for row in op.rows):
                    apart[len(applied)] = replace(op, rows=tuple(row for row in op.rows if row.id not in holds))
                op = replace(op, rows=())
                verdicts.append(MAYBE)
            elif op.kind == "insert" and (again := [row for row in op.rows if row.rid in inserted]):
                # Rows the target inserted too since the base are the target's already, whatever it did to them
                # since: they are not added again (LakeUI: their segment is live on the target, or rewritten into
                # segments it holds, `plan.lineage.rewritten_by_target`; seed 322: `main` had compacted the segment,
                # and a pick of a revert that put it back held row 4 twice). Copy-on-write, a target that deleted
                # every one of them holds no file of them, and LakeUI adds them again (`other`).
                if self.copy_on_write and not any(row.id in dest_ids for row in again):
                    apart[len(applied)] = op
                op = replace(op, rows=tuple(row for row in op.rows if row.rid not in inserted))
            applied.append(op)
        # What a later source overwrite replaced, later as the source applied them (seed 303; `replay`)
        order = applied_order(src_ops, src, since)
        last = max((n for n, op in enumerate(order) if op.kind == "overwrite"), default=0)
        replaced_ops = {op.uid for op in order[:last]}
        # Rows the source holds that its operations before that overwrite made: a merge may have replayed the
        # overwrite after them, older than they are, keeping them (seed 338); by file LakeUI cannot tell them from
        # rows the overwrite replaced that an operation the base holds brought back (seed 303), and may refuse (R*).
        if any(op.uid in replaced_ops and op.created & set(src.rows) for op in order):
            verdicts.append(MAYBE)
        rows = replay(base.rows, src.rows, dest.rows, applied, undone, replaced_ops)
        others = [apart.get(i, op) for i, op in enumerate(applied)]
        other_rows = replay(base.rows, src.rows, dest.rows, others, undone, replaced_ops) if apart else None
        if merge_parent is None:  # a cherry-pick: its operations are the picked ones, made in its own commit
            applied = [replace(op, commit=number) for op in applied]
            others = [replace(op, commit=number) for op in others]
        # A compaction against the target's changes, or on a history that declined some (C*: LakeUI drops one whose
        # segments the target changed or holds in no version), may be dropped rather than replayed.
        unsure = {
            op.uid for op in applied if op.uid in src_unsure or (op.kind == "compaction" and (dest_ops or declined))
        }
        commit = MCommit(number, dest, merge_parent, rows, applied, partial, held=frozenset(superseded),
                         unsure=frozenset(unsure | superseded), instead=instead)  # fmt: skip
        if other_rows is not None and other_rows != rows:
            commit.other = replace(commit, rows=other_rows, ops=others)
        return ("maybe" if MAYBE in verdicts else "merged"), commit

    def pick(self, commit: MCommit, target: str) -> tuple[str, dict[int, Row] | None]:
        """CHERRY-PICK: the commit merged into the target from its parent (its own operations only)."""
        dest, base = self.heads[target], commit.parent
        base_anc = ancestors(base)
        dest_since = {i: c for i, c in ancestors(dest).items() if i not in base_anc}
        outcome, made = self.three_way(base, commit, dest, list(commit.ops), side_ops(dest, dest_since),
                                       dest_since | {commit.id: commit}, [OK], merge_parent=None)  # fmt: skip
        if outcome == "held_maybe":
            self.unsure_pick = made  # the target's head if LakeUI makes a commit for the pick
        elif made is not None:
            self.heads[target] = made
        return outcome, None if made is None else made.rows

    def revert(self, commit: MCommit, target: str) -> tuple[str, dict[int, Row] | None] | None:
        """REVERT: the commit's parent merged into the target from the commit: the rows it added taken out, those
        it removed put back; a later operation on the rows it wrote is a conflict (V*). None: a history whose
        outcome the model cannot say row by row (the commit rewrote files that later operations also rewrote,
        compacted or overwrote), which the test does not try."""
        dest, before = self.heads[target], commit.parent
        commit_anc = ancestors(commit)
        dest_since = {i: c for i, c in ancestors(dest).items() if i not in commit_anc}
        later = side_ops(dest, dest_since)
        added = {rid for rid in commit.rows if rid not in before.rows}
        removed = {rid: row for rid, row in before.rows.items() if rid not in commit.rows}
        # A merge that took the source's rows swapped the target's files for the source's: the files it wrote hold
        # older rows too, in other segments than the target's (default seed 12 with per-step draws: a later update of
        # such a row changed a file the merge wrote, V*, where the model saw only the rows the merge added).
        rewrote = commit.took or any(op.kind != "insert" or op.uncertain for op in commit.ops)
        # A merge into the target since the commit that declined changes (target_wins, a discard, a dropped
        # compaction) may have kept the commit's result out of the target though it is in its history: the rows the
        # commit wrote are then not the target's, and an undo by file cannot be told row by row (seed 43: a revert of
        # a restore that `b1` had declined in a `target_wins` merge).
        declined = any(
            (c.partial or c.unsure) and commit.id in ancestors(c.merge_parent)
            for c in dest_since.values() if c.merge_parent is not None
        )  # fmt: skip
        if (
            declined
            or any(op.kind in ("overwrite", "compaction") for op in later)
            or (rewrote and any(op.kind in POSITIONAL or op.uncertain for op in later))
        ):
            return None
        if not commit.ops:
            return "up_to_date", None
        if any(op.kind in POSITIONAL and op.rids & added for op in later):
            return "refused", None
        rows = {rid: row for rid, row in dest.rows.items() if rid not in added} | removed
        undo = []
        if added:
            undo.append(MOp(next(self.uids), 0, "delete", rids=frozenset(added), uncertain=rewrote))
        if removed:
            undo.append(MOp(next(self.uids), 0, "insert", rows=tuple(removed.values()), uncertain=rewrote))
        if not undo:
            # A commit that changed files and no row (a compaction): its undo is a compaction too, which changes the
            # table since a merge base as any compaction does (seed 84: `b2` reverted a compaction; counted as no
            # change, the model took `b1`'s table in the next merge, where LakeUI replays `b1`'s operations).
            undo.append(MOp(next(self.uids), 0, "compaction", uncertain=True))
        number = next(self.commits)
        self.origin |= {op.uid: number for op in undo}
        self.heads[target] = MCommit(number, dest, None, rows, [replace(op, commit=number) for op in undo])
        return "merged", rows


def own_rows(ops: list[MOp], base: set[int]) -> set[int]:
    """The row versions these operations (one side's, in order) made of rows of their own: the rows they inserted or
    overwrote with, and new versions of those. A new version of an older row is that row still: a target overwrite
    that replaced the row replaced its versions too (A4/A5; seed 13: a second update of a row whose first update was
    discarded took the rows of its copy-on-write rewrite back). A row the base holds is not the side's own, even if
    one of its operations inserted it too (seed 47: the target picked the source's insert before the base, then
    restored to before it; the source's updates of those rows are discarded with them). A restore's rows are its own
    result, those the base holds among them (docs/merge-semantics.md#restore; seed 52: an update of a base row the
    source's restore brought back was discarded against the target's overwrite, and the row was lost)."""
    own: set[int] = set()
    for op in ops:
        if op.kind in ("insert", "overwrite"):
            own |= {row.rid for row in op.rows} - (set() if op.restore else base)
        elif op.kind == "update":
            own |= op.versions_of(op.rids & own)
    return own


def replay(
    base: dict[int, Row],
    src: dict[int, Row],
    dest: dict[int, Row],
    ops: list[MOp],
    undone: set[int] = frozenset(),
    replaced: set[int] = frozenset(),
) -> dict[int, Row]:
    """The target's rows once the source's operations are replayed, each by what it left on the source (a later
    overwrite there may have replaced it): the rows they added that the source still has, less the rows they
    deleted or updated that the source no longer has. A source overwrite replaces the target's rows but those the
    source still has, and those whose deletes or updates by the source were discarded (`undone`, A4/A5): a
    discarded change is as if not made, so the source would still have them (seed 83: the source overwrote, took
    rows 1 and 2 back by a merge and deleted row 2; against the target's restore of them the delete is discarded,
    and row 2 stays as the target has it). A restore's rows are its own, even those the base holds
    (docs/merge-semantics.md#restore). What a later overwrite replaced (`replaced`: the operations before the
    source's last overwrite, as the source applied them) is not added, though the source holds it again: an
    operation the base holds brought it back (seed 303: a restore, an overwrite, then a pick of another branch's
    restore to the same point that the base holds; LakeUI's `plan.lineage.replaced_later`)."""
    standing = [op for op in ops if op.uid not in replaced]
    created = set().union(*(op.created for op in standing))
    restored = {row.rid for op in standing if op.restore for row in op.rows}  # its own result, older rows too
    addressed = set().union(*(op.rids for op in ops))
    overwrote = any(op.kind == "overwrite" for op in ops)
    gone = {rid for rid in addressed if rid not in src}
    kept = {rid: row for rid, row in dest.items() if rid not in gone and (rid in src or rid in undone or not overwrote)}
    return kept | {rid: row for rid, row in src.items() if (rid not in base and rid in created) or rid in restored}


def listed(rows: dict[int, Row]) -> list[tuple]:
    """The rows as `Run.rows_of` reads them from LakeUI."""
    return sorted((row.rid, row.id, row.amount) for row in rows.values())


def apply(rows: dict[int, Row], op: MOp) -> dict[int, Row]:
    rows = dict(rows)
    if op.kind == "insert":
        rows |= {row.rid: row for row in op.rows}
    elif op.kind == "overwrite":
        rows = {row.rid: row for row in op.rows}
    elif op.kind == "delete":
        for rid in op.rids:
            rows.pop(rid, None)
    elif op.kind == "update":
        for rid in op.rids:
            old = rows.pop(rid, None)
            if old is not None:
                new = Row(op.step * 10**6 + old.id, old.id, old.amount + 1)
                rows[new.rid] = new
    return rows


class Run:
    """One random history, run for real and in the model side by side."""

    def __init__(self, seed: int, spark, *, mode: str | None = None) -> None:
        self.random = random.Random(seed)  # the write mode's; each step draws from its own (`step`)
        self.converging = random.Random(-seed)  # apart, so that checking convergence leaves the history as it was
        self.spark = spark
        self.seed = seed
        self.log: list[str] = []
        self.catalog = make_catalog()
        mode = mode or self.random.choice(["merge-on-read", "copy-on-write"])
        make_table(self.catalog, columns=COLUMNS, properties={"write.mode": mode})
        self.log.append(f"table write.mode={mode}")
        self.model = Model(copy_on_write=mode == "copy-on-write")
        self.model.heads["main"] = MCommit(0, None, None, {})
        self.next_id = itertools.count(1)
        self.outcomes: dict[str, int] = {}
        self.real: dict[int, str] = {}  # model commit id -> the commit LakeUI made for it

    def rows(self, count: int) -> tuple[Row, ...]:
        ids = [next(self.next_id) for _ in range(count)]
        return tuple(Row(i, i, self.random.randrange(100)) for i in ids)

    def step(self, number: int) -> None:
        """One random step. Its draws come from generators of its own, seeded by the seed and the step's number:
        LakeUI's answers (a merge the model allows to go either way, a compaction that finds nothing to do) change the
        model's state, and with one generator for the whole history they also moved every later draw, so that a
        seed drew another history once the product answered one step otherwise (a fix, or a change of the rules).
        Now each step draws the same numbers whatever the steps before it did; what it does with them depends on
        the model's state only (its branches, its rows and commits in sorted order), never on LakeUI's."""
        self.random = random.Random(f"{self.seed}:{number}")
        self.converging = random.Random(f"{-self.seed}:{number}")
        branches = [b for b in BRANCHES if b in self.model.heads]
        missing = [b for b in BRANCHES if b not in self.model.heads]
        branch = self.random.choice(branches)
        live = sorted(self.model.heads[branch].rows)
        choice = self.random.choices(
            ["branch", "insert", "delete", "update", "overwrite", "compaction", "merge", "pick", "revert", "restore"],
            weights=[8 if missing else 0, 24, 8, 12, 4, 4, 40, PICKS, PICKS, RESTORES],
        )[0]
        if choice in ("delete", "update") and not live:
            choice = "insert"
        if choice == "merge" and len(branches) < 2:
            choice = "branch" if missing else "insert"
        self.log.append(f"{number}: {choice} on {branch}")
        getattr(self, f"do_{choice}")(branch, number, live, branches, missing)
        for name, commit in self.model.heads.items():  # what each model commit is in LakeUI
            self.real.setdefault(commit.id, head(self.catalog, name))

    def picked(self, branch: str, plain: bool) -> MCommit | None:
        """A random commit of the branch's history with a parent (`plain`: not a merge commit) made by a step."""
        found = [c for c in ancestors(self.model.heads[branch]).values()
                 if c.parent is not None and c.id in self.real and not (plain and c.merge_parent)]  # fmt: skip
        return self.random.choice(sorted(found, key=lambda c: c.id)) if found else None

    def do_pick(self, branch, number, live, branches, missing) -> None:
        source = self.random.choice(branches)
        commit = self.picked(source, plain=True)
        if commit is None:
            return
        self.log[-1] = f"{number}: cherry-pick {commit.id} ({self.real[commit.id][:8]}) of {source} onto {branch}"
        saved = dict(self.model.heads)
        expected, rows = self.model.pick(commit, branch)
        self.applied("cherry_pick", commit, branch, expected, rows, saved)

    def do_revert(self, branch, number, live, branches, missing) -> None:
        commit = self.picked(branch, plain=False)
        saved = dict(self.model.heads)
        said = None if commit is None else self.model.revert(commit, branch)
        if said is None:
            return
        self.log[-1] = f"{number}: revert {commit.id} ({self.real[commit.id][:8]}) on {branch}"
        self.applied("revert", commit, branch, *said, saved)

    def applied(self, kind, commit, branch, expected, rows, saved) -> None:
        try:
            (result,) = commits_pick(catalog=self.catalog, kind=kind, branch=branch, commits=[self.real[commit.id]])
            refused = None
        except ConflictError as error:
            result, refused = None, error
        self.outcome(branch, expected, rows, saved, result, refused)

    def outcome(self, branch, expected, rows, saved, result, refused) -> bool:
        """Check a merge's, a pick's or a revert's outcome against the model's: refused only where the model may
        refuse, and if it went through, the rows are the model's."""
        if refused is not None:
            self.model.heads = dict(saved)
            assert expected in ("refused", "maybe", "up_to_date_maybe", "held_maybe"), self.failure(
                f"refused ({refused.code}: {refused.message} {refused.details}); the model merges: {sorted(rows or [])}"
            )
            self.count(f"refused_{expected}")
            return False
        assert expected != "refused", self.failure(f"merged ({result.status}); model: {expected}")
        if expected == "held_maybe":  # up to date, or a pick commit that changes no row: the model's if LakeUI made one
            if result.status == "merged":
                self.model.heads[branch] = self.model.unsure_pick
            expected = "merged_maybe" if result.status == "merged" else "up_to_date_maybe"
        self.count(expected)
        wanted = "up_to_date" if expected.startswith("up_to_date") else "merged"
        assert result.status == wanted, self.failure(f"{result.status}, the model: {expected}")
        made = self.model.heads[branch]
        if made.instead is not None and any(o.get("how") == "rows_taken" for o in result.log.get("objects", [])):
            self.model.heads[branch] = made.instead  # the target's files were the base's: it took the source's
        if made.other is not None and self.rows_of(branch) == listed(made.other.rows):
            self.model.heads[branch] = made.other
        self.check(branch)
        return True

    def do_branch(self, branch, number, live, branches, missing) -> None:
        name = missing[0]
        self.log[-1] = f"{number}: branch {name} from {branch}"
        branch_create(catalog=self.catalog, name=name, source=branch)
        self.model.heads[name] = self.model.heads[branch]

    def do_insert(self, branch, number, live, branches, missing) -> None:
        rows = self.rows(self.random.randint(1, 3))
        change(self.catalog, "table_load", {"strategy": "append_only", "rows": [r.__dict__ for r in rows]},
               branch=branch)  # fmt: skip
        self.model.commit(branch, "insert", rows=rows)

    def do_overwrite(self, branch, number, live, branches, missing) -> None:
        rows = self.rows(self.random.randint(1, 3))
        change(self.catalog, "table_load", {"strategy": "full_refresh", "rows": [r.__dict__ for r in rows]},
               branch=branch)  # fmt: skip
        self.model.commit(branch, "overwrite", rows=rows)

    def _addressed(self, live) -> list[int]:
        return self.random.sample(live, self.random.randint(1, min(2, len(live))))

    def do_delete(self, branch, number, live, branches, missing) -> None:
        rids = self._addressed(live)
        self.log[-1] += f" rids {rids}"
        change(self.catalog, "table_delete", {"where": f"rid IN ({', '.join(map(str, rids))})"}, branch=branch)
        self.model.commit(branch, "delete", rids=frozenset(rids))

    def do_update(self, branch, number, live, branches, missing) -> None:
        rids = self._addressed(live)
        self.log[-1] += f" rids {rids}"
        assignments = {"amount": "amount + 1", "rid": f"id + {number * 10**6}"}
        change(self.catalog, "table_update", {"set": assignments, "where": f"rid IN ({', '.join(map(str, rids))})"},
               branch=branch)  # fmt: skip
        self.model.commit(branch, "update", rids=frozenset(rids), step=number)

    def do_compaction(self, branch, number, live, branches, missing) -> None:
        before = head(self.catalog, branch)
        change(self.catalog, "table_compact", {}, branch=branch)
        if head(self.catalog, branch) != before:  # nothing to compact commits nothing
            self.model.commit(branch, "compaction")

    def do_restore(self, branch, number, live, branches, missing) -> None:
        """RESTORE TABLE to one of the branch's earlier commits: recorded as an overwrite of the whole table whose
        rows (files) are those of the point, older ones among them."""
        earlier = [c for c in ancestors(self.model.heads[branch]).values() if c.id in self.real]
        if not earlier:
            self.log[-1] = f"{number}: restore on {branch}: no earlier commit, skipped"
            return
        point = self.random.choice(sorted(earlier, key=lambda c: c.id))
        self.log[-1] = f"{number}: restore on {branch} to {point.id} ({self.real[point.id][:8]})"
        self.restore_to(branch, point)

    def restore_to(self, branch: str, point: MCommit) -> None:
        restore = branch_restore(catalog=self.catalog, branch=branch, point=self.real[point.id], database="sales",
                                 table="orders")  # fmt: skip
        if restore.commit_id is None:  # the table's files are the point's already
            assert point.rows == self.model.heads[branch].rows, self.failure(
                "a restore that changed rows committed nothing"
            )
            self.count("restore_unchanged")
            return
        self.model.commit(branch, "overwrite", rows=tuple(point.rows.values()), restore=True)
        self.count("restored")
        self.check(branch)

    def do_merge(self, branch, number, live, branches, missing) -> None:
        """A merge between two random branches (criss-cross histories too). A refused merge is retried with
        `target_wins` most times, as a user would, so the branches' histories meet again."""
        saved = dict(self.model.heads)
        source, target = self.random.sample(branches, 2)
        retry, reset = self.random.random() < 0.7, self.random.random() < RESETS  # drawn whatever LakeUI answers
        expected, rows = self.model.merge(source, target)
        self.log[-1] = f"{number}: merge {source} into {target}"
        refused = not self.merged(source, target, expected, rows, saved)
        if refused and retry:
            self.log.append(f"{number}: merge {source} into {target} with target_wins")
            expected, rows = self.model.merge(source, target, keep_target=True)
            refused = not self.merged(source, target, expected, rows, saved, resolution={"default": "target_wins"})
        if refused and reset:
            stuck, other = (target, source) if target != "main" else (source, target)
            self.log.append(f"{number}: {stuck} deleted and branched again from {other}")
            branch_delete(catalog=self.catalog, name=stuck)
            branch_create(catalog=self.catalog, name=stuck, source=other)
            self.model.heads[stuck] = self.model.heads[other]
            self.count("reset")

    def merged(self, source, target, expected, rows, saved, resolution=None) -> bool:
        try:
            result = branch_merge(catalog=self.catalog, source=source, target=target, resolution=resolution)
            refused = None
        except ConflictError as error:
            result, refused = None, error
        done = self.outcome(target, expected, rows, saved, result, refused)
        if done and self.converging.random() < CONVERGE:
            self.log.append(f"(merge {target} back into {source} on copies: the same rows?)")
            problem = converges(self.catalog, source=source, target=target, rows=self.rows_of)
            assert problem is None, self.failure(problem)
        return done

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        self.log[-1] += f" -> {outcome}"

    def rows_of(self, branch: str) -> list[tuple]:
        return sorted((r["rid"], r["id"], r["amount"]) for r in read(self.spark, self.catalog, branch).collect())

    def check(self, branch: str) -> None:
        actual = self.rows_of(branch)
        expected = listed(self.model.heads[branch].rows)
        assert actual == expected, self.failure(
            f"rows on {branch}: only in LakeUI {sorted(set(actual) - set(expected))}, "
            f"only in the model {sorted(set(expected) - set(actual))}, {len(actual)} vs {len(expected)} rows"
        )

    def failure(self, what: str) -> str:
        steps = "\n".join(self.log) + "\nlast merge in the model: " + getattr(self.model, "last", "")
        return f"seed {self.seed}: {what}\nreplay with LAKEUI_MODEL_SEED={self.seed}; last steps:\n{steps}"


class Scripted(Run):
    """A history given step by step (a hunt's failure cut down, for a regression test), each step run for real and in
    the model and checked as a random history's are: refused only where the model may refuse; merged, the model's
    rows. A row `rid` is loaded as (rid, rid, rid * 10); step n's update makes (n * 10**6 + id, id, amount + 1)."""

    def __init__(self, spark, *, mode: str) -> None:
        super().__init__(0, spark, mode=mode)

    def load(self, branch: str, strategy: str, *rids: int) -> None:
        rows = tuple(Row(rid, rid, rid * 10) for rid in rids)
        self.log.append(f"{len(self.log)}: {strategy} {list(rids)} on {branch}")
        change(self.catalog, "table_load", {"strategy": strategy, "rows": [r.__dict__ for r in rows]}, branch=branch)
        self.model.commit(branch, "insert" if strategy == "append_only" else "overwrite", rows=rows)

    def branch(self, name: str, source: str) -> None:
        self.log.append(f"{len(self.log)}: branch {name} from {source}")
        branch_create(catalog=self.catalog, name=name, source=source)
        self.model.heads[name] = self.model.heads[source]

    def delete(self, branch: str, *rids: int) -> None:
        self.log.append(f"{len(self.log)}: delete on {branch} rids {list(rids)}")
        change(self.catalog, "table_delete", {"where": f"rid IN ({', '.join(map(str, rids))})"}, branch=branch)
        self.model.commit(branch, "delete", rids=frozenset(rids))

    def update(self, branch: str, *rids: int) -> None:
        number = len(self.log)
        self.log.append(f"{number}: update on {branch} rids {list(rids)}")
        assignments = {"amount": "amount + 1", "rid": f"id + {number * 10**6}"}
        change(self.catalog, "table_update", {"set": assignments, "where": f"rid IN ({', '.join(map(str, rids))})"},
               branch=branch)  # fmt: skip
        self.model.commit(branch, "update", rids=frozenset(rids), step=number)

    def compact(self, branch: str) -> None:
        self.log.append(f"{len(self.log)}: compaction on {branch}")
        self.do_compaction(branch, len(self.log), [], [], [])

    def restore(self, branch: str, point: str) -> None:
        """Restore the table on `branch` to where the branch `point` is now (one of its earlier commits)."""
        commit = self.model.heads[point]
        self.real.setdefault(commit.id, head(self.catalog, point))
        self.log.append(f"{len(self.log)}: restore on {branch} to {point}'s head")
        self.restore_to(branch, commit)

    def revert(self, branch: str) -> None:
        """Revert the branch's head commit on it (the model must be able to say the outcome row by row)."""
        commit = self.model.heads[branch]
        self.real.setdefault(commit.id, head(self.catalog, branch))
        self.log.append(f"{len(self.log)}: revert {branch}'s head on {branch}")
        saved = dict(self.model.heads)
        said = self.model.revert(commit, branch)
        assert said is not None, "a revert the model cannot say row by row"
        self.applied("revert", commit, branch, *said, saved)

    def pick(self, source: str, target: str) -> None:
        """Cherry-pick the commit `source` points at (a branch made for it) onto `target`."""
        commit = self.model.heads[source]
        self.real.setdefault(commit.id, head(self.catalog, source))
        self.log.append(f"{len(self.log)}: cherry-pick {source}'s head onto {target}")
        saved = dict(self.model.heads)
        expected, rows = self.model.pick(commit, target)
        self.applied("cherry_pick", commit, target, expected, rows, saved)

    def merge(self, source: str, target: str, *, target_wins: bool = False) -> bool:
        """Whether it merged (or was up to date); `target_wins`: with that resolution (after a refusal)."""
        saved = dict(self.model.heads)
        expected, rows = self.model.merge(source, target, keep_target=target_wins)
        self.log.append(f"{len(self.log)}: merge {source} into {target}" + " with target_wins" * target_wins)
        resolution = {"default": "target_wins"} if target_wins else None
        return self.merged(source, target, expected, rows, saved, resolution=resolution)

    def failure(self, what: str) -> str:  # no seed to replay
        return (
            f"{what}\nsteps:\n" + "\n".join(self.log) + "\nlast merge in the model: " + getattr(self.model, "last", "")
        )


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(max(600, STEPS * 15))  # long hunts take many steps
@pytest.mark.parametrize("seed", SEEDS)
def test_random_histories_merge_as_the_model_says(spark, seed):
    run = Run(seed, spark)
    for number in range(1, STEPS + 1):
        try:
            run.step(number)
        except ApplicationError as error:  # not a refusal the step expects: show the history that led to it
            pytest.fail(run.failure(f"step {number} failed: {error.code}: {error.message}"))
    for branch in run.model.heads:
        run.check(branch)
    print(f"seed {seed}: {STEPS} steps, merges {run.outcomes}")
    assert sum(run.outcomes.values()) >= STEPS // 5  # the history did merge


# The model on its own (no database, no Spark): histories a hunt found it wrong on.


def seed_84_model(*, overwrite: bool = True) -> Model:
    """Seed 84 (150 steps, copy-on-write) cut down: main holds rows 1 and 2; b1 and b2 branch from it; b2 deletes row
    2 (copy-on-write: row 1 moves to a segment of b2's own); main overwrites with row 10 (`overwrite`) and merges b2
    (the delete is discarded, A5); b1 and b2 each update row 1 (in the load's segment and in b2's)."""
    model = Model()
    model.heads["main"] = MCommit(0, None, None, {})
    model.commit("main", "insert", rows=(Row(1, 1, 10), Row(2, 2, 20)))
    model.heads["b1"] = model.heads["b2"] = model.heads["main"]
    model.commit("b2", "delete", rids=frozenset({2}))
    if overwrite:
        model.commit("main", "overwrite", rows=(Row(10, 10, 100),))
    assert model.merge("b2", "main")[0] == "merged"
    model.commit("b1", "update", rids=frozenset({1}), step=5)
    model.commit("b2", "update", rids=frozenset({1}), step=6)
    return model


def test_model_both_sides_updated_a_row_an_overwrite_in_the_base_replaced_may_merge():
    """Each side takes main's overwrite; the merge base then holds it, and no version of row 1 is left in the base or
    on either side: A3 merges the two updates where they touched different segments (the product's answer on seed
    84), and the rows are the overwrite's. The model refused it as A3 on a common row."""
    model = seed_84_model()
    assert model.merge("main", "b1") == ("maybe", {10: Row(10, 10, 100)})
    assert model.merge("main", "b2") == ("maybe", {10: Row(10, 10, 100)})
    assert model.merge("b1", "b2") == ("maybe", {10: Row(10, 10, 100)})


def test_model_both_sides_updated_a_row_both_still_hold_is_refused():
    """Without the overwrite each side still holds its version of row 1: merged, it would be there twice."""
    model = seed_84_model(overwrite=False)
    assert model.merge("b1", "b2") == ("refused", None)
    assert model.merge("b2", "b1") == ("refused", None)


def seed_103_model(*, overwrite: bool = True) -> Model:
    """Seed 103 (150 steps, copy-on-write) cut down: main holds rows 1 and 2; b1 and b2 branch from it; b2 deletes row
    2 (row 1 moves to a segment of b2's own), b1 inserts row 3; b1 merges b2 keeping its own table (delete x insert,
    `target_wins`): the merge base of the two is now b2's delete, and b1 holds row 1 in the load's segment still. Both
    update row 1; b1 then overwrites the table with row 5 (`overwrite`)."""
    model = Model()
    model.heads["main"] = MCommit(0, None, None, {})
    model.commit("main", "insert", rows=(Row(1, 1, 10), Row(2, 2, 20)))
    model.heads["b1"] = model.heads["b2"] = model.heads["main"]
    model.commit("b2", "delete", rids=frozenset({2}))
    model.commit("b1", "insert", rows=(Row(3, 3, 30),))
    assert model.merge("b2", "b1") == ("refused", None)
    assert model.merge("b2", "b1", keep_target=True)[0] == "kept_target"
    model.commit("b1", "update", rids=frozenset({1}), step=7)
    if overwrite:
        model.commit("b1", "overwrite", rows=(Row(5, 5, 50),))
    model.commit("b2", "update", rids=frozenset({1}), step=9)
    return model


def test_model_both_sides_updated_a_row_a_later_source_overwrite_replaced_may_merge():
    """The row lives on in the base and on the target, but the source's overwrite, replayed after the source's update,
    replaces the target's version too: the merge can neither lose nor double it. A3 merges the two updates where
    they touched different segments (the product's answer on seed 103), and the rows are the overwrite's."""
    model = seed_103_model()
    assert model.merge("b1", "b2") == ("maybe", {5: Row(5, 5, 50)})


def test_model_both_sides_updated_a_row_the_source_still_holds_is_refused():
    model = seed_103_model(overwrite=False)
    assert model.merge("b1", "b2") == ("refused", None)


def seed_341_model(*, overwrite: bool = True) -> Model:
    """Seed 341 (192 steps, copy-on-write) cut down: main holds rows 1 and 2; b1 and b2 branch from it; b1 updates row
    1 and then overwrites the table with row 5 (`overwrite`); b2 updates row 1."""
    model = Model(copy_on_write=True)
    model.heads["main"] = MCommit(0, None, None, {})
    model.commit("main", "insert", rows=(Row(1, 1, 10), Row(2, 2, 20)))
    model.heads["b1"] = model.heads["b2"] = model.heads["main"]
    model.commit("b1", "update", rids=frozenset({1}), step=3)
    if overwrite:
        model.commit("b1", "overwrite", rows=(Row(5, 5, 50),))
    model.commit("b2", "update", rids=frozenset({1}), step=5)
    return model


def test_model_both_sides_updated_a_row_a_later_target_overwrite_replaced_may_merge():
    """The target's overwrite replaced its version of the row: A1/A3 compare the segments both updates changed, which
    differ where the sides hold the row in different segments (restores to different points), and then the overwrite
    discards the source's update (A4). The model refused it as A3 on a common row."""
    model = seed_341_model()
    assert model.merge("b2", "b1") == ("maybe", {5: Row(5, 5, 50)})


def test_model_both_sides_updated_a_row_the_target_still_holds_is_refused():
    model = seed_341_model(overwrite=False)
    assert model.merge("b2", "b1") == ("refused", None)


def seed_109_model() -> Model:
    """Seed 109 (150 steps, copy-on-write) cut down: main holds rows 1 and 2 (segment S); b1 and b2 branch from it; b2
    compacts S into C; main deletes row 1 (by position in S); b1 merges b2 (unchanged: it takes b2's table, C);
    main merges b2 (C* may drop the compaction for main's delete: main keeps S); b2 merges main back (unchanged since
    the base: it takes main's table, S with the delete); b3 branches from b1."""
    model = Model()
    model.heads["main"] = MCommit(0, None, None, {})
    model.commit("main", "insert", rows=(Row(1, 1, 10), Row(2, 2, 20)))
    model.heads["b1"] = model.heads["b2"] = model.heads["main"]
    model.commit("b2", "compaction")
    model.commit("main", "delete", rids=frozenset({1}))
    assert model.merge("b2", "b1")[0] == "merged"
    assert model.merge("b2", "main")[0] == "maybe"
    assert model.merge("main", "b2")[0] == "merged"
    model.heads["b3"] = model.heads["b1"]
    return model


def test_model_a_delete_in_a_segment_a_merge_kept_uncompacted_may_be_refused():
    """b2 into b3: the base is b2's compaction and b3 holds it (its first-parent chain leads to b1's fork, not to the
    base: the delete is replayed). b2's delete of row 1 addresses S, which b3 holds only compacted (C): LakeUI
    refuses it (R*, the target lacks the segment); the model merged it, counting only `target_wins` and A4/A5
    discards (`partial`) as merges that kept a side's own files, not a compaction C* may have dropped."""
    model = seed_109_model()
    assert model.merge("b2", "b3") == ("maybe", {2: Row(2, 2, 20)})


def test_model_a_merge_that_took_rows_and_replayed_nothing_changed_the_target():
    """Seed 135 (150 steps, copy-on-write) cut down: b1 deletes row 1 (X); main overwrites and merges b1 (X discarded,
    A5); b2 inserts row 4 and keeps its table against main (`target_wins`); main takes b2's table; b1 keeps its own
    against b2 and overwrites; b2 takes main's table back (a merge that replays nothing of its own and holds main's
    overwrite: LakeUI records it, a `resolve` with `held`). Merging b1 into b2 from that base, b2 is not the base's
    table: b1's overwrite is replayed, and b2 does not hold X. A pick of X onto b2 is planned again (delete x insert:
    refused). The model counted the merge that took main's table as no change, took b1's table with X and found the
    pick up to date."""
    model = Model()
    model.heads["main"] = MCommit(0, None, None, {})
    model.commit("main", "insert", rows=(Row(1, 1, 10), Row(2, 2, 20), Row(3, 3, 30)))
    model.heads["b1"] = model.heads["b2"] = model.heads["main"]
    model.commit("b1", "delete", rids=frozenset({1}))
    deleted = model.heads["b1"]
    model.commit("main", "overwrite", rows=(Row(7, 7, 70),))
    assert model.merge("b1", "main") == ("merged", {7: Row(7, 7, 70)})
    model.commit("b2", "insert", rows=(Row(4, 4, 40),))
    assert model.merge("main", "b2", keep_target=True)[0] == "kept_target"
    assert model.merge("b2", "main")[0] == "merged"
    assert model.merge("b2", "b1", keep_target=True)[0] == "kept_target"
    model.commit("b1", "overwrite", rows=(Row(8, 8, 80),))
    assert model.merge("main", "b2")[0] == "merged"
    assert model.heads["b2"].held and not model.heads["b2"].ops
    assert model.merge("b1", "b2") == ("merged", {8: Row(8, 8, 80)})
    assert not model.heads["b2"].held  # b1's overwrite replayed: b1's table not taken, with X
    assert model.pick(deleted, "b2") == ("refused", None)


def test_model_a_revert_of_a_compaction_changes_the_table():
    """Seed 84 (500 steps, restores weighted 8, copy-on-write) cut down: b2 compacts the table (X); b1 deletes row 1,
    merges b2 (C* may drop the compaction for the delete) and updates row 2; b2 reverts X. LakeUI records the revert's
    undo as a compaction (docs/merge-semantics.md#revert-and-cherry-pick): b2 changed the table since the base (X),
    so merging b1 into b2 replays b1's operations, and where they address segments b2 lacks that is R*. The model's
    revert recorded no operation (the compaction changed no row), counted b2 as holding the base's table and took
    b1's rows for sure, so LakeUI's R* was a refusal it did not allow."""
    model = Model()
    model.heads["main"] = MCommit(0, None, None, {})
    model.commit("main", "insert", rows=(Row(1, 1, 10), Row(2, 2, 20)))
    model.heads["b1"] = model.heads["b2"] = model.heads["main"]
    model.commit("b2", "compaction")
    compacted = model.heads["b2"]
    model.commit("b1", "delete", rids=frozenset({1}))
    assert model.merge("b2", "b1")[0] == "maybe"
    model.commit("b1", "update", rids=frozenset({2}), step=7)
    assert model.revert(compacted, "b2") == ("merged", {1: Row(1, 1, 10), 2: Row(2, 2, 20)})
    assert model.heads["b2"].changed
    assert model.merge("b1", "b2") == ("maybe", {7000002: Row(7000002, 2, 21)})


def test_model_a_target_that_holds_the_base_rows_again_may_take_the_sources_rows():
    """Beside seed 176's history (a target that took the base's table back after its overwrite): b3 inserts row 7 and
    restores the table to the base (its files are the base's again); main updates row 1. Replayed, main's update
    meets b3's insert (a refusal); LakeUI finds b3's table the base's by its files and takes main's
    (`MCommit.instead`), which the model cannot tell from rows alone: either may happen, and taken, the rows are
    main's."""
    model = Model()
    model.heads["main"] = MCommit(0, None, None, {})
    model.commit("main", "insert", rows=(Row(1, 1, 10),))
    model.heads["b3"] = base = model.heads["main"]
    model.commit("b3", "insert", rows=(Row(7, 7, 70),))
    model.commit("b3", "overwrite", rows=tuple(base.rows.values()), restore=True)
    model.commit("main", "update", rids=frozenset({1}), step=9)
    assert model.merge("main", "b3") == ("maybe", {9000001: Row(9000001, 1, 11)})


def test_model_a_discarded_update_a_later_source_overwrite_replaced_may_be_held():
    """Seed 203 (294 steps, merge-on-read) cut down: b1 updates row 1, then overwrites the table; main overwrites it
    too; b1 is merged into main. A4/A5 discards the update against main's overwrite, but LakeUI finds no file of it
    to discard (b1's own overwrite replaced them) and replays it, changing no row: the merge may hold it. A later pick
    of the update onto main is then up to date in LakeUI, or refused as the update against main's overwrite."""
    model = Model()
    model.heads["main"] = MCommit(0, None, None, {})
    model.commit("main", "insert", rows=(Row(1, 1, 10), Row(2, 2, 20)))
    model.heads["b1"] = model.heads["main"]
    model.commit("b1", "update", rids=frozenset({1}), step=3)
    updated = model.heads["b1"]
    model.commit("b1", "overwrite", rows=(Row(5, 5, 50),))
    model.commit("main", "overwrite", rows=(Row(6, 6, 60),))
    outcome, rows = model.merge("b1", "main")
    assert outcome in ("merged", "maybe") and rows == {5: Row(5, 5, 50)}
    [update] = updated.ops
    assert update.uid in model.heads["main"].held and update.uid in model.heads["main"].unsure
    assert model.pick(updated, "main")[0] == "held_maybe"


def test_model_an_update_discarded_against_a_target_restore_the_source_overwrote_since_keeps_no_row():
    """Seed 210 (149 steps, copy-on-write) cut down: b1 updates row 1, then overwrites the table; main restores it
    (to the base: row 1 as it was, among its own result). A4/A5 discards the update against the restore, but undone
    it would not leave the row on b1, whose own later overwrite replaced it: the overwrite takes row 1 out of main,
    as LakeUI's merge does (the model kept it)."""
    model = Model()
    model.heads["main"] = MCommit(0, None, None, {})
    model.commit("main", "insert", rows=(Row(1, 1, 10), Row(2, 2, 20)))
    model.heads["b1"] = base = model.heads["main"]
    model.commit("main", "overwrite", rows=tuple(base.rows.values()), restore=True)
    model.commit("b1", "update", rids=frozenset({1}), step=3)
    model.commit("b1", "overwrite", rows=(Row(5, 5, 50),))
    outcome, rows = model.merge("b1", "main")
    assert outcome in ("merged", "maybe") and rows == {5: Row(5, 5, 50)}


def test_model_a_second_update_of_a_row_that_reached_the_target_after_its_overwrite_merges():
    """Seed 22 with restores weighted 8 and picks 10 (258 steps, merge-on-read) cut down: b1 overwrites the table, then
    takes main's version back (main kept its own against the overwrite): b1 holds rows 1 and 2 after its overwrite,
    in the base's segment. b2 updates row 1 twice. A4 replays the first update (its row reached the target after the
    overwrite); the model discarded the second, whose row the first made, as an older row's, and lost row 1 (LakeUI
    follows the new segment back to the base's, which the target holds, and replays both)."""
    model = Model()
    model.heads["main"] = MCommit(0, None, None, {})
    model.commit("main", "insert", rows=(Row(1, 1, 10), Row(2, 2, 20)))
    model.heads["b1"] = model.heads["b2"] = model.heads["main"]
    model.commit("b1", "overwrite", rows=(Row(9, 9, 90),))
    assert model.merge("b1", "main", keep_target=True)[0] == "kept_target"
    assert model.merge("main", "b1") == ("merged", {1: Row(1, 1, 10), 2: Row(2, 2, 20)})
    model.commit("b2", "update", rids=frozenset({1}), step=5)
    model.commit("b2", "update", rids=frozenset({5000001}), step=6)
    outcome, rows = model.merge("b2", "b1")
    assert outcome in ("merged", "maybe") and rows == {2: Row(2, 2, 20), 6000001: Row(6000001, 1, 12)}


def test_model_a_delete_of_rows_a_later_source_operation_put_back_is_no_delete_of_own_rows():
    """Seed 267 with restores and picks weighted (25 steps, merge-on-read) cut down: b1 reverts main's update of rows
    1 and 2 (its undo deletes the new versions and puts the old ones back), then reverts that revert (the new versions
    back), then takes main's restore of the table to before the update (the base). main inserts row 4, restores the
    table to the update's commit and inserts row 5. Against main's restore, A4/A5 discards the first undo's delete: the
    rows it deletes are the restore's, not the source's own, though the second undo puts them back later. The model
    counted them as the source's own over all its operations, kept the delete and lost the two rows."""
    model = Model()
    model.heads["main"] = MCommit(0, None, None, {})
    model.commit("main", "insert", rows=(Row(1, 1, 10), Row(2, 2, 20), Row(3, 3, 30)))
    loaded = model.heads["main"]
    model.commit("main", "update", rids=frozenset({1, 2}), step=3)
    updated = model.heads["b1"] = model.heads["main"]
    assert model.revert(updated, "b1")[0] == "merged"
    assert model.revert(model.heads["b1"], "b1")[0] == "merged"
    model.commit("main", "overwrite", rows=tuple(loaded.rows.values()), restore=True)
    assert model.merge("main", "b1")[1] == loaded.rows
    model.commit("main", "insert", rows=(Row(4, 4, 40),))
    model.commit("main", "overwrite", rows=tuple(updated.rows.values()), restore=True)
    model.commit("main", "insert", rows=(Row(5, 5, 50),))
    outcome, rows = model.merge("b1", "main")
    assert outcome == "maybe" and sorted(rows) == [3, 5, 3000001, 3000002]
