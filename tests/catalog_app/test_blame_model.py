"""A model-based test of the blame (docs/provenance.md): random histories of a keyed table on several branches,
run for real by the key model's driver (tests/merge_app/test_key_model.py: upserts, updates, deletes, appends,
compactions, restores, merges retried with `source_wins`, `target_wins` and column rules, cherry-picks and reverts),
and beside its model of each commit's rows a model of who wrote each cell: the "last writer".

The model's last writer of a cell at a commit, from its parent's (a commit's rows against its first parent's, as the
blame reads them):

- a cell whose value the commit left as its first parent held keeps its writer (a compaction changes none);
- a key the commit inserted (every cell, the key's own too) or a cell it changed: a plain commit (a load, an update,
  a restore, a revert) wrote it itself; a cherry-pick names the commit it applied, the pick the one step of the
  chain; a merge names the source's writer of that cell when the source holds the same value (the merge appended
  to its chain), else the merge itself, as a resolution.

Then the blame at random refs (branch heads and older commits) must name, for each key and cell, the model's writer
and chain, and the merge whose resolution settled the cell's value with the choice it names (a cell pick, a column
rule, or the merge's choice: `settlements`; a cherry-pick's or revert's own resolution is not modelled and not
compared).

    LAKEUI_BLAME_MODEL_SEED=3,4,5 LAKEUI_BLAME_MODEL_STEPS=200 pytest tests/catalog_app/test_blame_model.py

The seed and the steps so far are printed on failure.
"""

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from catalog_app.selectors.blame import key_history, table_blame
from catalog_app.selectors.refs import ref_resolve
from lakeui.errors import ApplicationError, NotFoundError
from merge_app.plan.semantics import PICK
from tests.merge_app.test_key_model import COLUMNS, MCommit, Model, Row, Run, ancestors, cell_rule
from tests.support.catalogs import head

SEEDS = [int(seed) for seed in os.environ.get("LAKEUI_BLAME_MODEL_SEED", "8").split(",")]
STEPS = int(os.environ.get("LAKEUI_BLAME_MODEL_STEPS", "16"))
OLDER = 0.3  # the share of steps after which an older commit is blamed too (the branch just changed always is)

Cell = tuple[str, tuple[str, ...], bool]  # (the commit that wrote it, the chain from it to the ref, resolution)
Writers = dict[int, dict[str, Cell]]
# One version of a key: (change, its cells or None, the columns it changed, commit, chain, resolution)
Version = tuple[str, dict | None, tuple[str, ...], str, tuple[str, ...], bool]


def cells_of(key: int, row: tuple) -> dict[str, object]:
    return {"id": key, "amount": row[0], "region": row[1]}


def last_writers(commit: MCommit, known: dict[int, Writers], real: dict[int, str], picks: dict[int, int]) -> Writers:
    """Who wrote each cell at `commit` (see the module's description), from its parents' writers (`known`, by model
    commit id); `real`: the LakeUI commit of each model commit, `picks`: a cherry-pick's picked commit."""
    if not commit.parents:
        return {}
    this, parent = real[commit.id], commit.parents[0]
    found: Writers = {}
    for key, row in commit.rows.items():
        now = cells_of(key, row)
        was = cells_of(key, parent.rows[key]) if key in parent.rows else None
        found[key] = {}
        for column, value in now.items():
            if was is not None and was[column] == value:
                found[key][column] = known[parent.id][key][column]
            elif len(commit.parents) == 2:  # a merge: the source's writer of that value, else the merge's own
                source = commit.parents[1]
                held = cells_of(key, source.rows[key]) if key in source.rows else None
                if held is not None and held[column] == value:
                    writer, chain, resolution = known[source.id][key][column]
                    found[key][column] = (writer, (*chain, this), resolution)
                else:
                    found[key][column] = (this, (), True)
            elif commit.id in picks:
                found[key][column] = (real[picks[commit.id]], (this,), False)
            else:
                found[key][column] = (this, (), False)
    return found


def key_versions(
    head: MCommit,
    key: int,
    real: dict[int, str],
    picks: dict[int, int],
    chain: tuple[str, ...] = (),
    stop: frozenset[int] = frozenset(),
) -> list[Version]:
    """The model's history of `key` at `head` (docs/provenance.md#one-keys-history), newest first: each commit of
    the first-parent history that changed the key's row against its first parent made a version, down to a commit
    the history merged into already holds (`stop`: the ancestors of a merge's first parent). A merge's versions are
    its source's since then (the merge appended to `chain`), and its own, a resolution, when its row is not the
    newest of them; a cherry-pick's names the commit it applied, the pick the first step of the chain."""
    versions: list[Version] = []
    commit = head
    while commit.parents and commit.id not in stop:
        parent = commit.parents[0]
        now = cells_of(key, commit.rows[key]) if key in commit.rows else None
        was = cells_of(key, parent.rows[key]) if key in parent.rows else None
        if now != was:
            change = "insert" if was is None else "delete" if now is None else "update"
            changed = tuple(c for c in ("id", "amount", "region") if change == "insert" or (
                change == "update" and now[c] != was[c]))  # fmt: skip
            this = real[commit.id]
            if len(commit.parents) == 2:
                inner = key_versions(commit.parents[1], key, real, picks, (this, *chain),
                                     frozenset(ancestors(parent)))  # fmt: skip
                if not inner or inner[0][1] != now:
                    versions.append((change, now, changed, this, chain, True))
                versions += inner
            elif commit.id in picks:
                versions.append((change, now, changed, real[picks[commit.id]], (this, *chain), False))
            else:
                versions.append((change, now, changed, this, chain, False))
        commit = parent
    return versions


UNKNOWN = "?"  # a settlement the model does not say (a pick's or revert's): the blame's is not compared


def settled_cells(base: Row | None, src: Row | None, dest: Row | None, rules: dict | None) -> set[str]:
    """The cells of one conflicting key a merge's resolution settled, as its audit log names them: with column
    rules or cell picks of the key (`rules`; both sides hold the key), each conflicting cell (both sides changed it, differently); without, the cells
    both sides changed differently when both updated the key, else the whole row ("*")."""
    if src is None or dest is None:
        return {"*"}
    if rules or base is not None:
        cells = {c for c, b, s, d in zip(COLUMNS, base or (None, None), src, dest, strict=True)
                 if not (base is not None and (s == b or d == b)) and s != d}  # fmt: skip
        return cells or {"*"}
    return {UNKNOWN}  # both inserted the key: which cells the key comparison lists is not modelled


def settled_choices(
    base: Row | None, src: Row | None, dest: Row | None, choice: str | None, rules: dict, picks: dict
) -> dict[str, Any]:
    """The cells of one conflicting key a merge's resolution settled (`settled_cells`), each with the choice the audit
    log and the blame name for it: `pick` for a cell picked, a column's rule where it settles the cell (`base` and
    `sum_of_changes` settle no key without a base), else the merge's choice; UNKNOWN where the model does not say."""
    cells = settled_cells(base, src, dest, rules or picks)
    if UNKNOWN in cells or "*" in cells:
        return {cell: choice if cell == "*" else UNKNOWN for cell in cells}
    choices = {}
    for cell in cells:
        at = COLUMNS.index(cell)
        if cell in picks:
            choices[cell] = PICK
        elif cell in rules and cell_rule(rules[cell], base and base[at], src[at], dest[at], base is not None,
                                         (base, src, dest))[0]:  # fmt: skip
            choices[cell] = rules[cell]
        else:
            choices[cell] = choice
    return choices


@dataclass
class BlameModel(Model):
    """The key model, which also remembers which of its commits are cherry-picks, and of which commit, and which
    cells each merge's (or pick's) resolution settled."""

    picks: dict[int, int] = field(default_factory=dict)  # the pick's model commit -> the picked one
    # model commit -> {key: {cell settled: the choice named for it}}
    settling: dict[int, dict[int, dict[str, Any]]] = field(default_factory=dict)
    _base: MCommit | None = None

    def pick(self, kind: str, commit: MCommit, target: str, choice: str | None = None) -> tuple[str, list[int]]:
        before = self.heads[target]
        outcome = super().pick(kind, commit, target, choice)
        if self.heads[target] is not before:
            if kind == "cherry_pick":
                self.picks[self.heads[target].id] = commit.id
            if outcome[1]:
                self.settling[self.heads[target].id] = {key: {UNKNOWN: UNKNOWN} for key in outcome[1]}
        return outcome

    def merge(
        self, source: str, target: str, choice: str | None = None, rules: dict | None = None, picks: dict | None = None
    ) -> tuple[str, list[int]]:
        src, dest = self.heads[source], self.heads[target]
        outcome, conflicts = super().merge(source, target, choice, rules, picks)
        if outcome == "merged" and conflicts:  # settled by the resolution (a merge without one refuses them)
            base, picks = self._base.rows, picks or {}
            self.settling[self.heads[target].id] = {  # a key with picks merges cell by cell, as with column rules
                key: settled_choices(base.get(key), src.rows.get(key), dest.rows.get(key), choice, rules or {},
                                     picks.get(key, {}))
                for key in conflicts
            }  # fmt: skip
        return outcome, conflicts

    def base(self, src: MCommit, dest: MCommit) -> MCommit:
        found = super().base(src, dest)
        self._base = found  # the outermost call's, the merge's own base (virtual or not), is kept last
        return found


def settlements(
    commit: MCommit, known: dict[int, dict], real: dict[int, str], settling: dict[int, dict[int, dict[str, Any]]]
) -> dict[int, dict[str, tuple[str, Any] | str | None]]:
    """Per key and cell at `commit`, the merge (its LakeUI commit) whose resolution the blame names as having settled
    the cell's value (`settled_by`), with the choice it names, from its parents' (`known`): the newest merge of the
    first-parent history since the commit that set the value, that settled the cell (a merge that kept the target's
    value counts); else the settlement of the source's value a merge took; else none. UNKNOWN where a pick's or
    revert's would count."""
    if not commit.parents:
        return {}
    parent = commit.parents[0]
    mine = settling.get(commit.id, {})
    found: dict[int, dict[str, tuple[str, Any] | str | None]] = {}
    for key, row in commit.rows.items():
        now = cells_of(key, row)
        was = cells_of(key, parent.rows[key]) if key in parent.rows else None
        cells = mine.get(key, {})
        found[key] = {}
        for column, value in now.items():
            if column in cells or "*" in cells:
                found[key][column] = (real[commit.id], cells.get(column, cells.get("*")))
            elif UNKNOWN in cells and len(commit.parents) == 2:
                found[key][column] = UNKNOWN
            elif was is not None and was[column] == value:
                found[key][column] = known[parent.id][key][column]
            elif len(commit.parents) == 2:
                source = commit.parents[1]
                held = cells_of(key, source.rows[key]) if key in source.rows else None
                found[key][column] = known[source.id][key][column] if held and held[column] == value else None
            else:  # a plain commit, or a pick or revert (its own resolution, if it settled the key)
                found[key][column] = UNKNOWN if cells else None
    return found


def _each_ancestor(commit: MCommit, known: dict, made: Callable[[MCommit], Any]) -> Any:
    """`made(commit)` kept in `known` by model commit id, each ancestor's made first (from its parents' answers)."""
    todo = sorted((c for c in ancestors(commit).values() if c.id not in known), key=lambda c: c.id)
    for current in todo:  # a commit's parents are older: its own id is larger
        known[current.id] = made(current)
    return known[commit.id]


class _Never:
    """No convergence checks here (the key model makes them): a draw that is never below the share."""

    @staticmethod
    def random() -> float:
        return 1.0


class BlameRun(Run):
    def __init__(self, seed: int, spark) -> None:
        super().__init__(seed, spark)
        self.model = BlameModel(heads=self.model.heads)
        self.converging = _Never()
        self.real[0] = head(self.catalog, "main")
        self.blamer = random.Random(seed * 13 + 5)  # the refs blamed, drawn apart from the history
        self.blamed = 0
        # what the blames named
        self.seen = {
            "cells": 0,
            "through_a_merge": 0,
            "picked": 0,
            "resolution": 0,
            "settled": 0,
            "settled_by_a_pick": 0,
        }
        self.histories = {"keys": 0, "versions": 0, "through_a_merge": 0, "resolution": 0, "deleted": 0}
        self._writers: dict[int, Writers] = {}
        self._settled: dict[int, dict[int, dict[str, str | None]]] = {}

    def writers(self, commit: MCommit) -> Writers:
        """The model's last writer of each cell at `commit` (see the module's description)."""
        known = self._writers
        return _each_ancestor(commit, known, lambda c: last_writers(c, known, self.real, self.model.picks))

    def settled(self, commit: MCommit) -> dict[int, dict[str, str | None]]:
        """The model's settlement of each cell at `commit` (`settlements`)."""
        known = self._settled
        return _each_ancestor(commit, known, lambda c: settlements(c, known, self.real, self.model.settling))

    def step(self, number: int) -> None:
        before = dict(self.model.heads)
        super().step(number)
        changed = [b for b, c in self.model.heads.items() if before.get(b) is not c]
        for branch in changed:
            self.blame(self.model.heads[branch], branch)
        if self.blamer.random() < OLDER:
            commit = self.blamer.choice(sorted(self.known(), key=lambda c: c.id))
            self.blame(commit, f"commit {commit.id}")

    def known(self) -> list[MCommit]:
        seen: dict[int, MCommit] = {}
        for current in self.model.heads.values():
            seen |= ancestors(current)
        return [c for c in seen.values() if c.id in self.real]

    def blame(self, commit: MCommit, name: str) -> None:
        """The blame of table k at the real commit of `commit` names the model's writers."""
        real = self.real[commit.id]
        answer = table_blame(
            resolved=ref_resolve(catalog=self.catalog, ref=real), database="sales", table="k", page_size=500
        )
        self.blamed += 1
        found = {r["key"]["id"]: r for r in answer.results}
        rows = {k: (r["row"]["amount"], r["row"]["region"]) for k, r in found.items()}
        assert rows == commit.rows, self.failure(f"blame at {name} ({real[:8]}): rows {rows} != {commit.rows}")
        expected, settled = self.writers(commit), self.settled(commit)
        names = {v: f"{k}({v[:8]})" for k, v in self.real.items()}
        for key in sorted(found):
            for column, cell in found[key]["cells"].items():
                got = (cell["commit"], tuple(cell["chain"]), cell["resolution"])
                self.seen["cells"] += 1
                self.seen["resolution"] += cell["resolution"]
                self.seen["through_a_merge"] += any(answer.commits[c]["kind"] == "merge" for c in cell["chain"])
                self.seen["picked"] += any(answer.commits[c]["kind"] == "cherry_pick" for c in cell["chain"])
                want = expected[key][column]
                if got != want:
                    shown = [(names.get(c, c), [names.get(s, s) for s in chain], r) for c, chain, r in (got, want)]
                    pytest.fail(self.failure(
                        f"blame at {name} ({real[:8]}), key {key}, cell {column}: LakeUI {shown[0]}, "
                        f"the model {shown[1]} (model commit(real id): commit, chain writer to ref, resolution)"
                    ))  # fmt: skip
                by, chose = ((cell["settled_by"] or {}).get(part) for part in ("merge", "choice"))
                self.seen["settled"] += by is not None
                self.seen["settled_by_a_pick"] += chose == PICK
                want = settled[key][column]
                if want == UNKNOWN:
                    continue
                if want is not None and want[1] == UNKNOWN:  # the merge the model says, not the choice
                    chose = UNKNOWN
                if (by, chose) != (want or (None, None)):
                    pytest.fail(self.failure(
                        f"blame at {name} ({real[:8]}), key {key}, cell {column}: settled by LakeUI "
                        f"{names.get(by, by)} ({chose}), the model {want and (names.get(want[0], want[0]), want[1])}"
                    ))  # fmt: skip
        self.history(commit, name)

    def history(self, commit: MCommit, name: str) -> None:
        """The history of a random key the ref's history ever held (or of each, once in a few blames) is the
        model's (`key_versions`)."""
        real = self.real[commit.id]
        held = sorted({k for c in ancestors(commit).values() for k in c.rows})
        if not held:
            return
        names = {v: f"{k}({v[:8]})" for k, v in self.real.items()}
        for key in held if self.blamer.random() < 0.2 else [self.blamer.choice(held)]:
            want = key_versions(commit, key, self.real, self.model.picks)
            try:
                answer = key_history(resolved=ref_resolve(catalog=self.catalog, ref=real), database="sales",
                                     table="k", key=str(key))  # fmt: skip
                got = [(v["change"], v["row"], tuple(v["changed"]), v["commit"], tuple(v["chain"]), v["resolution"])
                       for v in answer["versions"]]  # fmt: skip
            except NotFoundError:
                got = []
            self.histories["keys"] += 1
            self.histories["versions"] += len(got)
            self.histories["through_a_merge"] += sum(bool(v[4]) for v in got)
            self.histories["resolution"] += sum(v[5] for v in got)
            self.histories["deleted"] += sum(v[0] == "delete" for v in got)
            if got != want:
                shown = [[(v[0], v[1] and (v[1]["amount"], v[1]["region"]), names.get(v[3], v[3]),
                           [names.get(c, c) for c in v[4]], v[5]) for v in side] for side in (got, want)]  # fmt: skip
                pytest.fail(self.failure(
                    f"history of key {key} at {name} ({real[:8]}):\n LakeUI    {shown[0]}\n the model {shown[1]}"
                    " (change, row, commit, chain writer to ref, resolution; newest first)"
                ))  # fmt: skip

    def failure(self, what: str) -> str:
        return super().failure(what).replace("LAKEUI_KEY_MODEL_SEED", "LAKEUI_BLAME_MODEL_SEED")


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(max(600, STEPS * 20))  # long hunts take many steps
@pytest.mark.parametrize("seed", SEEDS)
def test_blame_at_random_refs_names_the_models_last_writer_of_each_cell(spark, seed):
    run = BlameRun(seed, spark)
    for number in range(1, STEPS + 1):
        try:
            run.step(number)
        except ApplicationError as error:  # not a refusal the step expects: show the history that led to it
            pytest.fail(run.failure(f"step {number} failed: {error.code}: {error.message}"))
    for branch, commit in run.model.heads.items():
        run.blame(commit, branch)
    print(f"seed {seed}: {STEPS} steps, {run.blamed} blames, cells {run.seen}, histories {run.histories}, "
          f"outcomes {run.outcomes}")  # fmt: skip
    assert run.blamed >= STEPS // 2  # the steps that changed a branch blamed it, and some older commits
    assert run.seen["through_a_merge"] >= 1  # a chain was walked
    assert run.histories["keys"] >= run.blamed and run.histories["through_a_merge"] >= 1  # histories across merges


def test_the_models_last_writer_of_each_cell():
    """The model's rule on a small history (no LakeUI): a load, an update of one cell, a merge that brings a
    cell from its source and makes another itself (a column rule's sum), a pick, a delete and an insert again."""
    real = {i: f"c{i}" for i in range(10)}
    root = MCommit(0, (), {}, frozenset())
    loaded = MCommit(1, (root,), {9: (1, "a"), 8: (0, "a")}, frozenset())
    on_dev = MCommit(2, (loaded,), {9: (1, "b"), 8: (5, "a")}, frozenset())  # region of 9, amount of 8
    on_main = MCommit(3, (loaded,), {9: (1, "a"), 8: (2, "a")}, frozenset())  # amount of 8
    merged = MCommit(4, (on_main, on_dev), {9: (1, "b"), 8: (6, "a")}, frozenset())  # 8's amount: 2 + 5 - 0
    picked = MCommit(5, (merged,), {9: (7, "b"), 8: (6, "a")}, frozenset())  # a pick of commit 7's amount
    deleted = MCommit(6, (picked,), {9: (7, "b")}, frozenset())
    again = MCommit(8, (deleted,), {9: (7, "b"), 8: (6, "a")}, frozenset())
    known: dict[int, Writers] = {}
    for commit in (root, loaded, on_dev, on_main, merged, picked, deleted, again):
        known[commit.id] = last_writers(commit, known, real, {5: 7})
    assert known[4][9] == {"id": ("c1", (), False), "amount": ("c1", (), False), "region": ("c2", ("c4",), False)}
    assert known[4][8]["amount"] == ("c4", (), True) and known[3][8]["amount"] == ("c3", (), False)
    assert known[5][9]["amount"] == ("c7", ("c5",), False) and known[5][9]["region"] == ("c2", ("c4",), False)
    assert 8 not in known[6] and known[8][8] == dict.fromkeys(("id", "amount", "region"), ("c8", (), False))
