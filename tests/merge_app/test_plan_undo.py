"""The undo a merge records of the source operations it declined (`merge_app.plan.undo`,
docs/merge-semantics.md#merges-converge), on plain values: no database, no Spark. What it records for each kind of
declined operation, and thousands of random histories of a table without a key merged with `target_wins` and then
merged back: the branch merged back holds exactly the files of the branch that declined (merges converge)."""

import random
import uuid
from dataclasses import replace

import pytest

from merge_app.plan.files import file_plan
from merge_app.plan.undo import declined_undo, net_file_changes
from merge_app.planner import ObjectDiff, Pair, Version
from merge_app.rules import DISCARDED, TARGET_WINS, Op, Verdict
from tests.merge_app.test_plan_files import files, op

pytestmark = []  # no database

TABLE_ID = uuid.uuid4()


def version(dropped: bool = False) -> Version:
    return Version(1, uuid.uuid4(), TABLE_ID, "table", None, "t", 1, dropped, {"columns": []})


def table(source_operations, *, resolution=TARGET_WINS, pairs=()) -> ObjectDiff:
    """A table without a key both sides changed, the target's operations left out (the undo does not read them)."""
    return ObjectDiff(
        kind="table", object_id=TABLE_ID, name="db.t", change="changed_in_both", base=version(), source=version(),
        target=version(), source_operations=list(source_operations), pairs=list(pairs), resolution=resolution,
    )  # fmt: skip


def test_net_file_changes_drop_what_a_later_operation_took_back():
    delete = op("delete", deltas=["d1"], segments_touched=["s1"])
    compaction = op("compaction", removed=["s1", "s2"], added=["c1"], deltas_removed=["d1"])
    assert net_file_changes([delete, compaction]) == {
        "segments_added": ["c1"], "segments_removed": ["s1", "s2"], "deltas_added": [], "deltas_removed": [],
    }  # fmt: skip


UNDO_CASES = {
    # name: (the declined operations, (the undo's kind, its segments added, removed, delete files removed, touched))
    "an append's undo takes its segment out": ([op("insert", added=["x1"])], ("delete", [], ["x1"], [], [])),
    "a merge-on-read delete's undo takes its delete file out, bringing the rows back by position": (
        [op("delete", deltas=["d1"], segments_touched=["s1"])],
        ("update", [], [], ["d1"], ["s1"]),
    ),
    "a copy-on-write delete's undo puts the segment back for its rewrite": (
        [op("delete", removed=["s1"], added=["s1b"], segments_touched=["s1"])],
        ("update", ["s1"], ["s1b"], [], ["s1"]),
    ),
    "an overwrite's undo puts back what it replaced": (
        [op("overwrite", removed=["s1", "s2"], added=["w1"])],
        ("update", ["s1", "s2"], ["w1"], [], []),
    ),
}


@pytest.mark.parametrize("name", UNDO_CASES)
def test_the_undo_of_operations_declined_by_target_wins(name):
    operations, (kind, added, removed, deltas_removed, touched) = UNDO_CASES[name]
    undo = declined_undo(table(operations))
    assert undo.op == kind
    assert (undo.details["segments_added"], undo.details["segments_removed"]) == (added, removed)
    assert (undo.details["deltas_removed"], undo.details["segments_touched"]) == (deltas_removed, touched)
    assert undo.details["declines"] == [["c", 0, o.op] for o in operations]


def test_a_dropped_compaction_is_undone_and_a_discarded_update_under_an_overwrite_is_not():
    """C*: the target keeps its own version of the compacted segments, so the merge records the compaction's undo.
    A4/A5: the target's overwrite replaced the rows, and merging back replays that overwrite: nothing to undo."""
    compaction = op("compaction", removed=["s1", "s2"], added=["c1"])
    update = op("update", removed=["s3"], added=["u3"], segments_touched=["s3"])
    dropped = Pair(0, 0, "C*", Verdict(DISCARDED, "C*", "the target changed them", discarded=("c1",)))
    discarded = Pair(1, 0, "A4", Verdict(DISCARDED, "A4", "the target overwrote them", discarded=("u3",)))
    undo = declined_undo(table([compaction, update], resolution=None, pairs=[dropped, discarded]))
    assert (undo.op, undo.details["segments_added"], undo.details["segments_removed"]) == (
        "compaction", ["s1", "s2"], ["c1"],
    )  # fmt: skip
    assert declined_undo(table([update], resolution=None, pairs=[replace(discarded, source=0)])) is None


def test_nothing_is_recorded_for_a_table_a_side_dropped_or_a_merge_that_declined_nothing():
    assert declined_undo(table([op("insert", added=["x1"])], resolution=None)) is None
    dropped = table([op("insert", added=["x1"])])
    dropped.target = version(dropped=True)
    assert declined_undo(dropped) is None


# --- random histories: target_wins, then merged back -----------------------------------------------------------


class Side:
    """One branch's files of the table (segment ids, delete files as `id@segment`) and its operations since the
    base, made at random: appends, merge-on-read deletes, copy-on-write rewrites, whole-segment deletes and
    compactions (each taking its segments' delete files with it)."""

    def __init__(self, name: str, base: set[str], rng: random.Random) -> None:
        self.name, self.files, self.rng, self.operations = name, set(base), rng, []

    def segments(self) -> list[str]:
        return sorted(f for f in self.files if "@" not in f)

    def deltas_on(self, segments: set[str]) -> list[str]:
        return sorted(f for f in self.files if "@" in f and f.split("@")[1] in segments)

    def step(self, n: int) -> None:
        new = f"{self.name}{n}"
        roll, segments = self.rng.random(), self.segments()
        if roll < 0.35 or not segments:
            self.files.add(new)
            self.operations.append(op("insert", added=[new]))
            return
        chosen = set(self.rng.sample(segments, self.rng.randint(1, min(2, len(segments)))))
        deltas = self.deltas_on(chosen)
        if roll < 0.55:  # merge-on-read delete: a delete file on one segment
            segment = min(chosen)
            self.files.add(f"{new}@{segment}")
            self.operations.append(op("delete", deltas=[new], segments_touched=[segment]))
            return
        self.files -= chosen | set(deltas)
        kind, added = self.rng.choice([("delete", [new]), ("update", [new]), ("delete", []), ("compaction", [new])])
        self.files |= set(added)
        touched = sorted(chosen) if kind != "compaction" else []
        self.operations.append(
            op(kind, removed=sorted(chosen), added=added, deltas_removed=ids(deltas), segments_touched=touched)
        )


def ids(specs) -> list[str]:
    """File ids of specs (`s1`, a delete file `d1@s1`)."""
    return sorted(spec.split("@")[0] for spec in specs)


def merged_back(base: set[str], declining: Side, declined: Side, undo: Op) -> set[str]:
    """`declining`'s files after `declined` was merged into it with target_wins (its own, unchanged), merged back
    into `declined`: the base of that merge is `declined`'s head, the source's changes its own and the undo."""
    operations = [*declining.operations, undo]
    there, back = files(*declining.files), files(*declined.files)
    plan = file_plan(base=back, source=there, target=back, operations=operations, discarded=[])
    return (set(back) - {str(f.id) for f in plan.removed}) | {str(f.id) for f in plan.added}


@pytest.mark.parametrize("seed", range(4))
def test_target_wins_then_merged_back_converges(seed):
    rng = random.Random(seed)
    for _ in range(500):
        base = {f"b{i}" for i in range(rng.randint(1, 4))}
        source, target = Side("s", base, rng), Side("t", base, rng)
        for n in range(rng.randint(1, 5)):
            source.step(n)
        for n in range(rng.randint(0, 4)):
            target.step(n)
        undo = declined_undo(table(source.operations))
        undo = undo or Op("m", 0, "insert", {})  # declined nothing that changed files
        after = merged_back(base, target, source, Op("m", 0, undo.op, undo.details))
        assert sorted(after) == ids(target.files), (sorted(base), source.operations, target.operations)
