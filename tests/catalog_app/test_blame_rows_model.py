"""A model-based test of the blame of a table without a key (docs/provenance.md): random histories run for real by
the keyless merge model's driver (tests/merge_app/test_merge_model.py: appends, deletes, updates, overwrites,
compactions, restores, merges retried with `target_wins`, cherry-picks and reverts, in merge-on-read or
copy-on-write), and beside its model of each commit's rows a model of who wrote each row: the "last writer".

The merge model knows a row version by its `rid` (an update makes a new one), so the last writer of a row at a
commit is found from its first parent's:

- a row version its first parent held keeps its writer (a compaction, a copy-on-write rewrite, a restore or a
  merge that left it as it was changes none);
- a row version the commit added: a plain commit (a load, an update, a restore, a revert) wrote it itself; a
  cherry-pick names the commit it applied, the pick the one step of the chain; a merge names the source's writer
  of that row (the merge appended to its chain), else the merge itself, as a resolution.

Then the blame at random refs (branch heads and older commits) must name, for each row, the model's writer and
chain.

    LAKEUI_BLAME_ROWS_SEED=3,4,5 LAKEUI_BLAME_ROWS_STEPS=200 pytest tests/catalog_app/test_blame_rows_model.py

The seed and the steps so far are printed on failure.
"""

import os
import random

import pytest

from catalog_app.selectors.blame import table_blame
from catalog_app.selectors.refs import ref_resolve
from lakeui.errors import ApplicationError
from tests.merge_app.test_merge_model import MCommit, Run, ancestors

SEEDS = [int(seed) for seed in os.environ.get("LAKEUI_BLAME_ROWS_SEED", "5").split(",")]
STEPS = int(os.environ.get("LAKEUI_BLAME_ROWS_STEPS", "24"))
OLDER = 0.3  # the share of steps after which an older commit is blamed too (the branch just changed always is)

Writer = tuple[str, tuple[str, ...], bool]  # (the commit that wrote it, the chain from it to the ref, resolution)


def last_writers(
    commit: MCommit, known: dict[int, dict[int, Writer]], real: dict[int, str], picks: dict[int, int]
) -> dict[int, Writer]:
    """Who wrote each row version (by rid) at `commit` (see the module's description), from its parents' writers
    (`known`, by model commit id); `real`: the LakeUI commit of each model commit, `picks`: a cherry-pick's picked
    commit."""
    if commit.parent is None:
        return {}
    this, parent, source = real.get(commit.id, f"?{commit.id}"), commit.parent, commit.merge_parent
    found: dict[int, Writer] = {}
    for rid in commit.rows:
        if rid in parent.rows:
            found[rid] = known[parent.id][rid]
        elif source is not None:
            if rid in source.rows:
                writer, chain, resolution = known[source.id][rid]
                found[rid] = (writer, (*chain, this), resolution)
            else:
                found[rid] = (this, (), True)
        elif commit.id in picks:
            found[rid] = (real[picks[commit.id]], (this,), False)
        else:
            found[rid] = (this, (), False)
    return found


class _Never:
    """No convergence checks here (the merge model makes them): a draw that is never below the share."""

    @staticmethod
    def random() -> float:
        return 1.0


class BlameRowsRun(Run):
    def __init__(self, seed: int, spark) -> None:
        super().__init__(seed, spark)
        self.converging = _Never()
        self.picks: dict[int, int] = {}  # a cherry-pick's model commit -> the picked one
        self.blamer = random.Random(seed * 13 + 5)  # the refs blamed, drawn apart from the history
        self.blamed = 0
        self.seen = {"rows": 0, "through_a_merge": 0, "picked": 0, "resolution": 0}  # what the blames named
        self._writers: dict[int, dict[int, Writer]] = {}

        picked = self.model.pick

        def pick(commit: MCommit, target: str):  # the model's pick, remembering which commit its commit applied
            before = self.model.heads[target]
            outcome = picked(commit, target)
            if self.model.heads[target] is not before:
                self.picks[self.model.heads[target].id] = commit.id
            return outcome

        self.model.pick = pick

    def writers(self, commit: MCommit) -> dict[int, Writer]:
        """The model's last writer of each row at `commit` (see the module's description)."""
        todo = sorted((c for c in ancestors(commit).values() if c.id not in self._writers), key=lambda c: c.id)
        for current in todo:  # a commit's parents are older: its own id is larger
            self._writers[current.id] = last_writers(current, self._writers, self.real, self.picks)
        return self._writers[commit.id]

    def step(self, number: int) -> None:
        before = dict(self.model.heads)
        super().step(number)
        for branch in [b for b, c in self.model.heads.items() if before.get(b) is not c]:
            self.blame(self.model.heads[branch], branch)
        if self.blamer.random() < OLDER:
            seen: dict[int, MCommit] = {}
            for current in self.model.heads.values():
                seen |= ancestors(current)
            known = sorted((c for c in seen.values() if c.id in self.real), key=lambda c: c.id)
            commit = self.blamer.choice(known)
            self.blame(commit, f"commit {commit.id}")

    def blame(self, commit: MCommit, name: str) -> None:
        """The blame of the table at the real commit of `commit` names the model's writer of each row."""
        real = self.real[commit.id]
        answer = table_blame(
            resolved=ref_resolve(catalog=self.catalog, ref=real), database="sales", table="orders", page_size=500
        )
        self.blamed += 1
        assert answer.count <= 500, "a history of more rows than one page"
        found = {r["row"]["rid"]: r for r in answer.results}
        rows = sorted((r["row"]["rid"], r["row"]["id"], r["row"]["amount"]) for r in answer.results)
        wanted = sorted((r.rid, r.id, r.amount) for r in commit.rows.values())
        assert rows == wanted, self.failure(f"blame at {name} ({real[:8]}): rows {rows} != the model's {wanted}")
        expected = self.writers(commit)
        names = {v: f"{k}({v[:8]})" for k, v in self.real.items()}
        for rid in sorted(found):
            result = found[rid]
            got = (result["commit"], tuple(result["chain"]), result["resolution"])
            self.seen["rows"] += 1
            self.seen["resolution"] += result["resolution"]
            self.seen["through_a_merge"] += any(answer.commits[c]["kind"] == "merge" for c in result["chain"])
            self.seen["picked"] += any(answer.commits[c]["kind"] == "cherry_pick" for c in result["chain"])
            if got != expected[rid]:
                shown = [(names.get(c, c), [names.get(s, s) for s in chain], r) for c, chain, r in (got, expected[rid])]
                pytest.fail(self.failure(
                    f"blame at {name} ({real[:8]}), row {rid}: LakeUI {shown[0]}, the model {shown[1]} "
                    "(model commit(real id): commit, chain writer to ref, resolution)"
                ))  # fmt: skip

    def failure(self, what: str) -> str:
        return super().failure(what).replace("LAKEUI_MODEL_SEED", "LAKEUI_BLAME_ROWS_SEED")


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(max(600, STEPS * 20))  # long hunts take many steps
@pytest.mark.parametrize("seed", SEEDS)
def test_blame_of_a_table_without_a_key_at_random_refs_names_the_models_last_writer_of_each_row(spark, seed):
    run = BlameRowsRun(seed, spark)
    for number in range(1, STEPS + 1):
        try:
            run.step(number)
        except ApplicationError as error:  # not a refusal the step expects: show the history that led to it
            pytest.fail(run.failure(f"step {number} failed: {error.code}: {error.message}"))
    for branch, commit in run.model.heads.items():
        run.blame(commit, branch)
    print(f"seed {seed}: {STEPS} steps, {run.blamed} blames, rows {run.seen}, outcomes {run.outcomes}")
    assert run.blamed >= STEPS // 2  # the steps that changed a branch blamed it, and some older commits
    assert run.seen["through_a_merge"] >= 1  # a chain was walked


def test_the_models_last_writer_of_each_row():
    """The model's rule on a small history (no LakeUI): a load, an update, a merge that brings the update, a
    compaction, a pick and a restore that brings a row back."""
    from tests.merge_app.test_merge_model import Row

    real = {i: f"c{i}" for i in range(10)}
    one, two, two_updated = Row(1, 1, 10), Row(2, 2, 20), Row(3_000_002, 2, 21)
    root = MCommit(0, None, None, {})
    loaded = MCommit(1, root, None, {1: one, 2: two})
    updated = MCommit(2, loaded, None, {1: one, 3_000_002: two_updated})  # on dev
    merged = MCommit(3, loaded, updated, {1: one, 3_000_002: two_updated})  # main merges dev
    compacted = MCommit(4, merged, None, dict(merged.rows))
    picked = MCommit(5, compacted, None, {**compacted.rows, 7: Row(7, 7, 70)})  # a pick of commit 6's insert
    restored = MCommit(8, picked, None, {1: one, 2: two})  # a restore to `loaded`
    known: dict[int, dict[int, Writer]] = {}
    for commit in (root, loaded, updated, merged, compacted, picked, restored):
        known[commit.id] = last_writers(commit, known, real, {5: 6})
    assert known[3] == {1: ("c1", (), False), 3_000_002: ("c2", ("c3",), False)}
    assert known[4] == known[3] and known[5][7] == ("c6", ("c5",), False)
    assert known[8] == {1: ("c1", (), False), 2: ("c8", (), False)}
