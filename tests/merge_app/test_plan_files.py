"""The file-level outcome of a merge of a table without a key (`merge_app.plan.files`), on plain values: no
database, no Spark. Table-driven cases for each rule the plan follows, the histories that went wrong (issue 37's
revert after a pick), and thousands of random three-way histories checked against a row-level reference: no file
lost, none doubled, and what the source took out is out wherever the target got it."""

import random
from dataclasses import dataclass, field

import pytest

from merge_app.plan.files import file_plan
from merge_app.plan.objects import Pair
from merge_app.plan.rules import DISCARDED, Op, Verdict

pytestmark = []  # no database


@dataclass(frozen=True)
class F:
    id: str
    kind: str = "segment"
    segment_id: str | None = None
    partition_values: dict = field(default_factory=dict, hash=False, compare=False)


def files(*specs) -> dict[str, F]:
    """`s1` a segment, `d1@s1` a delete file on s1, `s1:eu` a segment of partition region=eu."""
    out = {}
    for spec in specs:
        if "@" in spec:
            name, segment = spec.split("@")
            out[name] = F(name, "delta", segment)
        else:
            name, _, region = spec.partition(":")
            out[name] = F(name, partition_values={"2": region} if region else {})
    return out


def op(kind, *, added=(), removed=(), deltas=(), **details) -> Op:
    detail = {"segments_added": list(added), "segments_removed": list(removed), "deltas_added": list(deltas)}
    return Op("c", 0, kind, detail | details)


def outcome(plan) -> tuple[list[str], list[str], list[str]]:
    return (
        sorted(str(f.id) for f in plan.removed),
        sorted(str(f.id) for f in plan.kept),
        sorted(str(f.id) for f in plan.added),
    )


CASES = {
    # name: (base, source, target, source operations, (removed, kept, added))
    "an append is taken over": (["s1"], ["s1", "s2"], ["s1"], [op("insert", added=["s2"])], ([], [], ["s2"])),
    "a delete of a base segment takes it out": (
        ["s1", "s2"],
        ["s2"],
        ["s1", "s2"],
        [op("delete", removed=["s1"])],
        (["s1"], [], []),
    ),
    "the target's own appends stay": (["s1"], ["s1"], ["s1", "t1"], [], ([], ["t1"], [])),
    "a delete file lands on a segment the target holds": (
        ["s1"],
        ["s1", "d1@s1"],
        ["s1"],
        [op("delete", deltas=["d1"])],
        ([], [], ["d1"]),
    ),
    "a delete file on a segment the target took out is not taken": (
        ["s1"],
        ["s1", "d1@s1"],
        [],
        [op("delete", deltas=["d1"])],
        ([], [], []),
    ),
    "a segment taken out takes its delete files with it": (
        ["s1", "d0@s1"],
        ["s2"],
        ["s1", "d0@s1", "d9@s1"],
        [op("update", removed=["s1"], added=["s2"])],
        (["d0", "d9", "s1"], [], ["s2"]),
    ),
    # issue 37: X appended on b1 (s9), picked onto main (same file), reverted on b1; b1 merged into main. The
    # insert is held by both (the pick) and is no change; the revert's delete takes the picked copy out.
    "a revert takes out the picked copy": (
        ["s1"],
        ["s1"],
        ["s1", "s9"],
        [op("delete", removed=["s9"], reverts=["c", 0, "insert"])],
        (["s9"], [], []),
    ),
    # unkeyed model seed 324: the target restored the table to the source's overwrite (s4) and updated its rows (d1,
    # n1); the overwrite picked onto it is its own result, delete files included: the rows of s4 come back.
    "a replayed overwrite's result takes the target's delete files on it out": (
        ["s1"],
        ["s4"],
        ["s4", "d1@s4", "n1"],
        [op("overwrite", removed=["s1"], added=["s4"], whole_table=True)],
        (["d1", "n1"], [], []),
    ),
    "a whole overwrite replaces the target's own rows": (
        ["s1"],
        ["s5"],
        ["s1", "t1"],
        [op("overwrite", removed=["s1"], added=["s5"])],
        (["s1", "t1"], [], ["s5"]),
    ),
    # unkeyed model seed 2: the source overwrote the table, then took back the base's segment s1 with another
    # side's version of the table (no operation records that), its rows deleted there (d1); the target deleted one
    # too (d2). The rows of s1 both sides hold stay: the segment with both sides' delete files, the base's (d0) too.
    "a segment a source overwrite replaced and the source holds again keeps both sides' deletes": (
        ["s1", "d0@s1"],
        ["s1", "d1@s1"],
        ["s1", "d0@s1", "d2@s1"],
        [op("overwrite", removed=["s1"], added=["s5"], deltas_removed=["d0"])],
        ([], ["d0", "d2"], ["d1"]),
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_a_file_plan_case(name):
    base, source, target, operations, expected = CASES[name]
    overwrites = [None for o in operations if o.op == "overwrite"]
    plan = file_plan(base=files(*base), source=files(*source), target=files(*target), operations=operations,
                     discarded=[], overwrites=overwrites)  # fmt: skip
    assert outcome(plan) == expected


def test_a_partition_overwrite_replaces_only_its_partitions():
    target = files("s1:eu", "s2:us", "t1:eu")
    plan = file_plan(base=files("s1:eu", "s2:us"), source=files("s2:us", "s5:eu"), target=target,
                     operations=[op("overwrite", removed=["s1"], added=["s5"])], discarded=[],
                     overwrites=[[{"2": "eu"}]])  # fmt: skip
    assert outcome(plan) == (["s1", "t1"], [], ["s5"])  # s2 stays: both hold it
    assert plan.partitions == [{"2": "eu"}]


def test_a_discarded_compaction_leaves_the_segments_it_would_have_replaced():
    compaction = op("compaction", removed=["s1", "s2"], added=["c1"])
    dropped = Pair(0, 0, "C*", Verdict(DISCARDED, "C*", "the target changed them", discarded=("c1",)))
    plan = file_plan(base=files("s1", "s2"), source=files("c1"), target=files("s1", "s2", "d1@s1"),
                     operations=[compaction], discarded=[dropped])  # fmt: skip
    assert outcome(plan) == ([], ["d1", "s1", "s2"], [])


def test_an_update_discarded_whole_leaves_the_segment_it_rewrote_wherever_the_target_got_it():
    """Unkeyed model seed 57: the target overwrote the table (A4: the source's update of an older row discarded),
    then received the updated row's segment again by a merge; the discarded update took it out all the same."""
    update = op("update", removed=["s3"], added=["u3"])
    dropped = Pair(0, 0, "A4", Verdict(DISCARDED, "A4", "the target overwrote the rows", discarded=("u3",)))
    plan = file_plan(base=files("s1", "s3"), source=files("s1", "u3"), target=files("o1", "s3"),
                     operations=[update], discarded=[dropped])  # fmt: skip
    assert outcome(plan) == ([], ["o1", "s3"], [])


def test_a_revert_of_a_change_of_a_replayed_restores_segment_is_undone_by_file():
    """Unkeyed model seed 63: the source restored the table (segment s1 back), deleted a row of s1 by copy-on-write
    (into s2) and reverted the delete; the target had overwritten s1. The replayed restore gives the target s1: the
    undo is no put-back onto a target that holds s1 in no version (its delete file, reckoned against the merge base,
    masked every row of s1)."""
    restore = op("overwrite", removed=["s4"], added=["s1"], restore=True)
    delete = op("delete", removed=["s1"], added=["s2"], segments_touched=["s1"], segments_from={"s2": "s1"})
    undo = op("update", removed=["s2"], added=["s1"], segments_touched=["s1"], segments_from={"s2": "s1"},
              reverts=["c", 0, "delete"])  # fmt: skip
    plan = file_plan(base=files("s1"), source=files("s1"), target=files("o1"), operations=[restore, delete, undo],
                     discarded=[], overwrites=[None])  # fmt: skip
    assert outcome(plan) == (["o1"], [], ["s1"])
    assert plan.put_back == []


def test_a_restores_result_is_taken_over_where_a_pair_discarded_the_operation_that_wrote_it():
    """The source updated an older row (u1, u2 from s1; A4 discards it against the target's overwrite), appended s3 and
    restored the table to the point after the update (u1 and u2 kept): they are the restore's result, its own."""
    update = op("update", removed=["s1"], added=["u1", "u2"], segments_touched=["s1"])
    restore = op("overwrite", removed=["s3"], segments_kept=["u1", "u2"], restore=True)
    dropped = Pair(0, 0, "A4", Verdict(DISCARDED, "A4", "the target overwrote the rows", discarded=("u1", "u2")))
    plan = file_plan(base=files("s1"), source=files("u1", "u2"), target=files("o1"),
                     operations=[update, op("insert", added=["s3"]), restore], discarded=[dropped],
                     overwrites=[None])  # fmt: skip
    assert outcome(plan) == (["o1"], [], ["u1", "u2"])


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_restores_result_a_later_overwrite_replaced_is_not_taken_over_where_the_source_holds_it_again(mode):
    """Unkeyed model seed 303: the source appended s3, restored the table to s1 and overwrote it with o5; a pick of
    another branch's restore to the same point, which the merge base holds, brought s1 back. The target deleted row 1
    of s1 (a delete file; copy-on-write, s1 taken out). The overwrite replaced the first restore's result: s1 is
    not the source's change, and neither comes back nor takes the target's delete file out (`lineage.replaced_later`)."""
    restore = op("overwrite", removed=["s2", "s3"], segments_kept=["s1"], restore=True, whole_table=True)
    load = op("overwrite", removed=["s1"], added=["o5"], whole_table=True)
    target = files("s1", "d1@s1", "s2") if mode == "merge-on-read" else files("s2")
    plan = file_plan(base=files("s1", "s2"), source=files("s1"), target=target,
                     operations=[op("insert", added=["s3"]), restore, load], discarded=[], overwrites=[None, None])  # fmt: skip
    assert outcome(plan) == ((["s2"], ["d1"], []) if mode == "merge-on-read" else (["s2"], [], []))


def test_a_restored_segment_the_target_lacks_comes_with_the_sources_later_delete_files_on_it():
    """Unkeyed model seed 316 (merge-on-read): the source's only change since the merge base is a restore that kept
    s1 by reference; two updates the base holds (no change of the source) then deleted rows of s1 (d1) and wrote
    their new versions (u1). The target, which lacks s1, takes it with d1: without it, the old versions of the
    updated rows came back beside the new ones (`restored_anew` in `file_plan`)."""
    restore = op("overwrite", removed=["s2"], segments_kept=["s1"], restore=True, whole_table=True)
    plan = file_plan(base=files("s2", "u1"), source=files("s1", "d1@s1", "u1"), target=files("s2", "t1", "u1"),
                     operations=[restore], discarded=[], overwrites=[None])  # fmt: skip
    assert outcome(plan) == (["s2", "t1"], [], ["d1", "s1"])


def test_a_file_the_source_puts_back_that_the_target_rewrote_into_segments_it_keeps_is_not_taken_again():
    """Unkeyed model seed 322: the target got s4 (a merge) and compacted it with s1 into c1; the source's revert of a
    restore puts s4 back. Its rows are in c1: taken again, they were held twice (`lineage.rewritten_by_target`)."""
    undo = op("insert", added=["s4"], reverts=["c", 0, "overwrite"], rewrote=False)
    plan = file_plan(base=files("s1"), source=files("s1", "s4"), target=files("c1"), operations=[undo], discarded=[],
                     rewritten_on_target={"c1": frozenset({"s1", "s4"})})  # fmt: skip
    assert outcome(plan) == ([], ["c1"], [])
    assert plan.put_back == []


def test_a_file_a_source_overwrite_adds_comes_in_where_the_overwrite_replaces_the_targets_rewrite_of_it():
    """The limit of the seed-322 rule: only a rewrite the merge keeps holds a file's rows. The source overwrote the
    table with s4, which the target also got and then updated copy-on-write (u1 holds its rows). The replayed
    overwrite replaces u1, so s4 comes in: counted as the target's, its rows would be lost."""
    load = op("overwrite", removed=["s1"], added=["s4"], whole_table=True)
    plan = file_plan(base=files("s1"), source=files("s4"), target=files("s1", "u1"), operations=[load], discarded=[],
                     overwrites=[None], rewritten_on_target={"u1": frozenset({"s4"})})  # fmt: skip
    assert outcome(plan) == (["s1", "u1"], [], ["s4"])


def test_source_wins_takes_the_sources_version_of_the_contested_files():
    plan = file_plan(base=files("s1"), source=files("s1", "d1@s1"), target=files("s1", "d2@s1"),
                     operations=[op("delete", deltas=["d1"])], discarded=[], contested=frozenset({"s1"}))  # fmt: skip
    assert outcome(plan) == (["d2"], [], ["d1"])


# --- random three-way histories -------------------------------------------------------------------------------


def random_history(rng: random.Random):
    """A base of segments; the source appends, deletes whole segments and reverts some of its appends; the target
    appends, deletes, and holds cherry-picked copies of some of the source's appends (the same files). Returns the
    plan's inputs as the diff selector gives them (an operation both sides hold is no change of either) and the
    files the target must hold after the merge: the union of both sides' changes, each file once."""
    base = [f"b{i}" for i in range(rng.randint(0, 5))]
    source, target = set(base), set(base)
    operations, picked = [], set()
    for n in range(rng.randint(0, 6)):
        roll = rng.random()
        if roll < 0.4:
            new = f"s{n}"
            source.add(new)
            if rng.random() < 0.4:  # picked onto the target: held by both, no change of either
                target.add(new)
                picked.add(new)
            else:
                operations.append(op("insert", added=[new]))
        elif roll < 0.7 and source:
            gone = rng.choice(sorted(source))
            source.discard(gone)  # a delete of a whole segment, or a revert of an append (picked or not)
            operations.append(op("delete", removed=[gone]))
    for n in range(rng.randint(0, 4)):
        if rng.random() < 0.6:
            target.add(f"t{n}")
        elif own := sorted(target - picked - source):
            target.discard(rng.choice(own))  # a segment the source no longer has either: no conflict
    removed_by_source = {f for o in operations for f in o.removed}
    expected = (target | (source - set(base))) - removed_by_source
    return files(*base), files(*sorted(source)), files(*sorted(target)), operations, expected


@pytest.mark.parametrize("seed", range(4))
def test_random_histories_lose_and_double_no_file(seed):
    rng = random.Random(seed)
    for _ in range(1000):
        base, source, target, operations, expected = random_history(rng)
        plan = file_plan(base=base, source=source, target=target, operations=operations, discarded=[])
        after = [str(f.id) for f in plan.kept] + [str(f.id) for f in plan.added]
        held = [fid for fid in target if fid in source and fid not in {str(f.id) for f in plan.removed}]
        result = after + held
        assert len(result) == len(set(result)), (base, source, target, operations)
        assert set(result) == expected, (sorted(base), sorted(source), sorted(target), operations)
