"""A model-based test of MERGE BRANCH for primary-key tables (docs/merge-semantics.md, "Primary-key tables"):
random histories of up to six branches, each step run for real (data jobs on Spark, merges through the service)
and in a small model that knows only each commit's rows by key.

The model merges states, as the design says a keyed table merges: the merge base is the newest commit both heads
reach, and each key takes the side that changed it since the base; both changed it the same way: that row; both
updated it: cell by cell, unless both set one column to different values; one deleted what the other updated, or
both inserted one key with different rows: a conflict. A merge with conflicts must be refused (and then is retried
with `source_wins` or `target_wins` most times, as a user would); one without must go through, and the target's
rows must then be the model's, every key once. Restores of the keyed table to an earlier commit of its branch are
changes of its rows like any other. Beside the keyed table a table without a key takes appends only
(merged as the union of both sides' rows). Criss-cross histories merge from a virtual base (the merge bases
merged first, as git's recursive strategy does); a key the bases conflict on is left out of it, so that each side's
row of that key is a change of its own (a conflict where the two rows differ).

    LAKEUI_KEY_MODEL_SEED=7 LAKEUI_KEY_MODEL_STEPS=2000 pytest tests/merge_app/test_key_model.py

A merge retried with a resolution draws column rules (docs/merge-semantics.md#column-rules) half the time
(`LAKEUI_KEY_MODEL_RULES`, the share), which the model applies cell by cell; among them column expressions
(docs/merge-semantics.md#column-expressions) over the key's three rows, which the model computes in Python; and,
with `LAKEUI_KEY_MODEL_CELLS` (the share), a reviewer's cell picks (docs/merge-semantics.md#cell-picks) of some
conflicting cells, a side's value or a typed one, a tenth of them stale (the key then stands).

The seed and the steps so far are printed on failure.
"""

import itertools
import os
import random
from dataclasses import dataclass, field

import pytest

from catalog_app.models import Commit
from catalog_app.services.refs import branch_create
from lakeui.errors import ApplicationError, ConflictError
from merge_app.services.merges import branch_merge
from merge_app.services.picks import commits_pick
from merge_app.services.restores import branch_restore
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import read
from tests.support.merges import CONVERGE, ancestors_of, change, converges

pytestmark = pytest.mark.django_db(transaction=True)

SEEDS = [int(seed) for seed in os.environ.get("LAKEUI_KEY_MODEL_SEED", "21").split(",")]
STEPS = int(os.environ.get("LAKEUI_KEY_MODEL_STEPS", "40"))
RULED = float(os.environ.get("LAKEUI_KEY_MODEL_RULES", "0.5"))  # the share of resolved merges with column rules
PICKED = float(os.environ.get("LAKEUI_KEY_MODEL_CELLS", "0.4"))  # the share of resolved merges with cell picks
PICKS = int(os.environ.get("LAKEUI_KEY_MODEL_PICKS", "6"))  # the weight of cherry-picks and of reverts among steps
BRANCHES = ("main", "b1", "b2", "b3", "b4", "b5")
KEYS = 12  # the keys upserts, updates and deletes pick from: few, so that both sides often meet on one
COLUMNS = ("amount", "region")
# Column expressions merges draw (docs/merge-semantics.md#column-expressions), per column, each with what the model
# computes of the key's rows (base, src, dest: (amount, region); base None when both inserted the key: its columns
# read NULL).
EXPRESSIONS = {
    "amount": {
        "CASE WHEN source.region = target.region THEN source.amount ELSE target.amount - coalesce(base.amount, 0) END": (
            lambda b, s, d: s[0] if s[1] == d[1] else d[0] - (b[0] if b else 0)
        ),
        "greatest(source.amount, target.amount, base.amount) + 1": (
            lambda b, s, d: max([s[0], d[0]] + ([b[0]] if b else [])) + 1
        ),
    },
    "region": {
        "concat(target.region, '-', coalesce(base.region, 'new'))": lambda b, s, d: f"{d[1]}-{b[1] if b else 'new'}",
        "CASE WHEN source.amount > target.amount THEN source.region ELSE upper(target.region) END": (
            lambda b, s, d: s[1] if s[0] > d[0] else d[1].upper()
        ),
    },
}
MODEL_EXPRESSIONS = {text: model for drawn in EXPRESSIONS.values() for text, model in drawn.items()}
# The column rules merges draw (docs/merge-semantics.md#column-rules), per column; None: no rule.
RULES = {
    "amount": [
        None, "source_wins", "target_wins", "base", "greatest", "least", "sum_of_changes",
        *({"expression": text} for text in EXPRESSIONS["amount"]),
    ],
    "region": [
        None, "source_wins", "target_wins", "base", "greatest", "least", "concat", {"concat": {"separator": "+"}},
        *({"expression": text} for text in EXPRESSIONS["region"]),
    ],
}  # fmt: skip

Row = tuple[int, str]  # amount, region
State = dict[int, Row]


@dataclass
class MCommit:
    id: int
    parents: tuple["MCommit", ...]
    rows: State  # the keyed table, by key
    log: frozenset[int]  # the table without a key: the ids of its rows


def ancestors(commit: MCommit) -> dict[int, MCommit]:
    return ancestors_of([commit])


def merge_bases(source: MCommit, target: MCommit) -> list[MCommit]:
    src, dest = ancestors(source), ancestors(target)
    common = {i: c for i, c in src.items() if i in dest}
    below = set(ancestors_of([p for c in common.values() for p in c.parents]))
    return sorted((c for i, c in common.items() if i not in below), key=lambda c: -c.id)  # newest first


def key_merge(base: Row | None, src: Row | None, dest: Row | None) -> tuple[bool, Row | None]:
    """(conflict, the merged row) of one key."""
    if src == base:
        return False, dest
    if dest == base or src == dest:
        return False, src
    if base is None or src is None or dest is None:
        return True, None  # both inserted different rows; one deleted what the other updated
    merged = []
    for b, s, d in zip(base, src, dest, strict=True):
        if s != b and d != b and s != d:
            return True, None
        merged.append(s if s != b else d)
    return False, tuple(merged)


def cell_rule(
    rule, base: int | str | None, src: int | str, dest: int | str, has_base: bool, rows
) -> tuple[bool, object]:
    """(whether the column rule settles it, the value) of one conflicting cell (docs/merge-semantics.md#column-rules);
    `rows`, the key's base (None if it has none), src and dest rows, for an expression (which settles every cell)."""
    if isinstance(rule, dict) and "expression" in rule:
        return True, MODEL_EXPRESSIONS[rule["expression"]](*rows)
    name = "concat" if isinstance(rule, dict) else rule
    if name == "base" or name == "sum_of_changes":
        if not has_base:
            return False, None
        return True, base if name == "base" else dest + src - base
    if name == "concat":
        return True, (rule["concat"]["separator"] if isinstance(rule, dict) else " | ").join([dest, src])
    return True, {"source_wins": src, "target_wins": dest, "greatest": max(src, dest), "least": min(src, dest)}[name]


def cells_settled(
    base: Row | None, src: Row, dest: Row, choice: str | None, rules: dict, picks: dict | None = None
) -> Row | None:
    """A key whose conflict is of cells, merged cell by cell with a reviewer's picks (`picks`: column -> (value,
    stale)) and the table's column rules: each conflicting cell by its pick (a stale one: the key's conflict
    stands), else its column's rule, else the choice (None: the key's conflict stands)."""
    merged = []
    for column, b, s, d in zip(COLUMNS, base or (None, None), src, dest, strict=True):
        if base is not None and (s == b or d == b):
            merged.append(s if s != b else d)  # a cell one side changed
            continue
        if s == d:
            merged.append(s)
            continue
        if column in (picks or {}):
            value, stale = picks[column]
            if stale:
                return None
            merged.append(value)
            continue
        rows = (base, src, dest)
        settled, value = cell_rule(rules[column], b, s, d, base is not None, rows) if column in rules else (False, None)
        if not settled:
            if choice not in ("source_wins", "target_wins"):
                return None
            value = s if choice == "source_wins" else d
        merged.append(value)
    return tuple(merged)


def state_merge(
    base: State, src: State, dest: State, choice: str | None, rules: dict | None = None, picks: dict | None = None
) -> tuple[list[int], State]:
    """The conflicting keys and the merged rows; `picks`: key -> column -> (value, stale)."""
    conflicts, merged = [], {}
    for key in sorted(set(base) | set(src) | set(dest)):
        conflict, row = key_merge(base.get(key), src.get(key), dest.get(key))
        if conflict:
            conflicts.append(key)
            if (rules or key in (picks or {})) and src.get(key) is not None and dest.get(key) is not None:
                row = cells_settled(base.get(key), src[key], dest[key], choice, rules or {}, (picks or {}).get(key))
            else:
                row = {"source_wins": src.get(key), "target_wins": dest.get(key)}.get(choice)
        if row is not None:
            merged[key] = row
    return conflicts, merged


def _stands(base: State, src: State, dest: State, key: int, choice: str | None, rules: dict, picks: dict) -> bool:
    """Whether a conflicting key stays a conflict with the picks, the column rules and `choice`."""
    if (rules or key in picks) and src.get(key) is not None and dest.get(key) is not None:
        return cells_settled(base.get(key), src[key], dest[key], choice, rules, picks.get(key)) is None
    return choice not in ("source_wins", "target_wins")


def conflicting_cells(base: Row | None, src: Row, dest: Row) -> list[tuple[str, object, object, object]]:
    """The cells of a key both sides changed to different values: (column, base, source, target)."""
    cells = []
    for column, b, s, d in zip(COLUMNS, base or (None, None), src, dest, strict=True):
        if s != d and (base is None or (s != b and d != b)):
            cells.append((column, b, s, d))
    return cells


def log_merge(base: frozenset[int], src: frozenset[int], dest: frozenset[int]) -> frozenset[int]:
    """The table without a key: the rows the source added since the base join the target's, and those it took out
    (a revert of an append) leave it."""
    return (dest - (base - src)) | (src - base)


@dataclass
class Model:
    ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    heads: dict[str, MCommit] = field(default_factory=dict)

    def commit(self, branch: str, rows: State | None = None, log: frozenset[int] | None = None) -> None:
        current = self.heads[branch]
        self.heads[branch] = MCommit(
            next(self.ids), (current,), current.rows if rows is None else rows, current.log if log is None else log
        )

    def merge(
        self, source: str, target: str, choice: str | None = None, rules: dict | None = None, picks: dict | None = None
    ) -> tuple[str, list[int]]:
        """(`conflict` | `up_to_date` | `merged`, the conflicting keys); a merge moves the target. With several
        merge bases the merge runs from their virtual base. `rules`: the table's column rules; `picks`: cells
        picked, key -> column -> (value, stale)."""
        src, dest = self.heads[source], self.heads[target]
        if src.id in ancestors(dest):
            return "up_to_date", []
        base = self.base(src, dest)
        conflicts, rows = state_merge(base.rows, src.rows, dest.rows, choice, rules, picks)
        if any(_stands(base.rows, src.rows, dest.rows, key, choice, rules or {}, picks or {}) for key in conflicts):
            return "conflict", conflicts
        self.heads[target] = self.merged(base, src, dest, rows)
        return "merged", conflicts

    def pick(self, kind: str, commit: MCommit, target: str, choice: str | None = None) -> tuple[str, list[int]]:
        """A cherry-pick (the commit merged from its parent) or a revert (its parent merged from the commit): a
        three-way merge of states with that base; the commit moves the target, which has no second parent."""
        dest, parent = self.heads[target], commit.parents[0]
        base, src = (parent, commit) if kind == "cherry_pick" else (commit, parent)
        conflicts, rows = state_merge(base.rows, src.rows, dest.rows, choice)
        if conflicts and choice is None:
            return "conflict", conflicts
        log = log_merge(base.log, src.log, dest.log)
        if rows == dest.rows and log == dest.log:
            return "unchanged", conflicts
        self.heads[target] = MCommit(next(self.ids), (dest,), rows, log)
        return "merged", conflicts

    def base(self, src: MCommit, dest: MCommit) -> MCommit:
        """The merge base, or the virtual base of several, as git's recursive strategy: the keys they conflict on
        left out (`state_merge` without a choice keeps no row of them)."""
        bases = merge_bases(src, dest)
        current = bases[0]
        for other in bases[1:]:
            base = self.base(other, current)
            _, rows = state_merge(base.rows, other.rows, current.rows, None)
            current = self.merged(base, other, current, rows)
        return current

    def merged(self, base: MCommit, src: MCommit, dest: MCommit, rows: State) -> MCommit:
        return MCommit(next(self.ids), (dest, src), rows, log_merge(base.log, src.log, dest.log))


class Run:
    """One random history, run for real and in the model side by side."""

    def __init__(self, seed: int, spark) -> None:
        self.random = random.Random(seed)
        self.converging = random.Random(-seed)  # apart, so that checking convergence leaves the history as it was
        self.rules = random.Random(seed * 7 + 1)  # the column rules of merges, apart too
        self.spark, self.seed = spark, seed
        self.log: list[str] = []
        self.catalog = make_catalog()
        mode = self.random.choice(["merge-on-read", "copy-on-write"])
        make_table(self.catalog, table="k", primary_key=["id"], properties={"write.mode": mode})
        make_table(self.catalog, table="log", columns=[{"name": "rid", "type": "long"}])
        self.log.append(f"table k write.mode={mode}")
        self.model = Model()
        self.model.heads["main"] = MCommit(0, (), {}, frozenset())
        self.fresh = itertools.count(100)  # keys of appends, and row ids of the table without a key
        self.outcomes: dict[str, int] = {}
        self.real: dict[int, str] = {}  # model commit id -> the commit LakeUI made for it

    def step(self, number: int) -> None:
        branches = [b for b in BRANCHES if b in self.model.heads]
        missing = [b for b in BRANCHES if b not in self.model.heads]
        branch = self.random.choice(branches)
        live = sorted(self.model.heads[branch].rows)
        choice = self.random.choices(
            [
                "branch",
                "upsert",
                "update",
                "delete",
                "append",
                "log",
                "compaction",
                "restore",
                "merge",
                "pick",
                "revert",
            ],
            weights=[10 if missing else 0, 22, 10, 8, 4, 4, 4, 4, 38, PICKS, PICKS],
        )[0]
        if choice in ("update", "delete") and not live:
            choice = "upsert"
        if choice == "merge" and len(branches) < 2:
            choice = "branch"
        self.log.append(f"{number}: {choice} on {branch}")
        getattr(self, f"do_{choice}")(branch, live, branches, missing)
        for name, commit in self.model.heads.items():  # what each model commit is in LakeUI
            self.real.setdefault(commit.id, head(self.catalog, name))

    def do_pick(self, branch, live, branches, missing) -> None:
        self._pick("cherry_pick", self.random.choice(branches), branch)

    def do_revert(self, branch, live, branches, missing) -> None:
        self._pick("revert", branch, branch)

    def _pick(self, kind: str, source: str, branch: str) -> None:
        """A cherry-pick of a commit of `source` (not a merge commit) onto the branch, or a revert of one of the
        branch's commits (merge commits too); a refused one is retried with a resolution most times."""
        # The table without a key only ever gains rows here (its deletes and their rule cells are the other model's):
        # no revert of a commit that added some, no pick of one that took some out.
        found = [c for c in ancestors(self.model.heads[source]).values() if c.parents and c.id in self.real
                 and (kind == "revert" or len(c.parents) == 1)
                 and not (c.log - c.parents[0].log if kind == "revert" else c.parents[0].log - c.log)]  # fmt: skip
        if not found:
            return
        commit = self.random.choice(sorted(found, key=lambda c: c.id))
        message = Commit.objects.get(id=self.real[commit.id]).message
        changed = sorted(k for k in set(commit.rows) | set(commit.parents[0].rows)
                         if commit.rows.get(k) != commit.parents[0].rows.get(k))  # fmt: skip
        self.log[-1] = f"{kind} {commit.id} ({self.real[commit.id][:8]}: {message}, keys {changed}) of {source} onto "
        self.log[-1] += branch
        saved = dict(self.model.heads)
        expected, conflicts = self.model.pick(kind, commit, branch)
        self.log[-1] += f" -> model {expected} {conflicts}"
        if not self.picked(kind, commit, branch, expected, saved) or self.random.random() < 0.3:
            return
        choice = self.random.choice(["source_wins", "target_wins"])
        self.log.append(f"{kind} {commit.id} onto {branch} with {choice}")
        self.model.heads = dict(saved)
        expected, _ = self.model.pick(kind, commit, branch, choice)
        self.picked(kind, commit, branch, expected, saved, {"default": choice})

    def picked(self, kind, commit, branch, expected, saved, resolution=None) -> bool:
        """Whether the model's outcome needs a retry: the real revert or pick, checked against the model (a pick
        that changes no row may still commit: a keyed table compares equal key by key and records it)."""
        refused = None
        try:
            (result,) = commits_pick(catalog=self.catalog, kind=kind, branch=branch,
                                     commits=[self.real[commit.id]], resolution=resolution)  # fmt: skip
        except ConflictError as error:
            refused = error
        if refused is not None:
            self.model.heads = dict(saved)
            what = f"refused ({refused.code}: {refused.message} {refused.details}); model {expected}"
            assert refused.code == "merge_conflict" and expected == "conflict", self.failure(what)
            self.count(f"{kind}_refused")
            return True
        assert expected in ("merged", "unchanged"), self.failure(f"{kind} {result.status}; the model: {expected}")
        assert expected == "unchanged" or result.status == "merged", self.failure(f"{kind} {result.status}")
        if expected == "unchanged" and result.commit_id:  # the commit LakeUI made, with the rows the branch had
            self.model.commit(branch)
        self.count(f"{kind}_{result.status}")
        self.check(branch)
        return False

    def do_branch(self, branch, live, branches, missing) -> None:
        name = missing[0]
        self.log[-1] = self.log[-1].replace("branch on", f"branch {name} from")
        branch_create(catalog=self.catalog, name=name, source=branch)
        self.model.heads[name] = self.model.heads[branch]

    def _load(self, branch, strategy, new: State) -> None:
        rows = [{"id": k, "amount": a, "region": r} for k, (a, r) in new.items()]
        self.log[-1] += f" {sorted(new.items())}"
        params = {"strategy": strategy, "rows": rows}
        if strategy == "upsert":
            params["key_columns"] = ["id"]
        change(self.catalog, "table_load", params, branch=branch, table="k")
        self.model.commit(branch, rows=self.model.heads[branch].rows | new)

    def do_upsert(self, branch, live, branches, missing) -> None:
        keys = self.random.sample(range(KEYS), self.random.randint(1, 3))
        self._load(branch, "upsert", {k: (self.random.randrange(3), self.random.choice("ab")) for k in keys})

    def do_append(self, branch, live, branches, missing) -> None:
        self._load(branch, "append_only", {next(self.fresh): (self.random.randrange(3), "n")})

    def do_update(self, branch, live, branches, missing) -> None:
        keys = self.random.sample(live, self.random.randint(1, min(2, len(live))))
        rows = dict(self.model.heads[branch].rows)
        if self.random.random() < 0.5:
            assignments = {"amount": "amount + 1"}
            rows |= {k: (rows[k][0] + 1, rows[k][1]) for k in keys}
        else:
            region = self.random.choice("abc")
            assignments = {"region": f"'{region}'"}
            rows |= {k: (rows[k][0], region) for k in keys}
        self.log[-1] += f" keys {keys} {assignments}"
        where = f"id IN ({', '.join(map(str, keys))})"
        change(self.catalog, "table_update", {"set": assignments, "where": where}, branch=branch, table="k")
        self.model.commit(branch, rows=rows)

    def do_delete(self, branch, live, branches, missing) -> None:
        keys = self.random.sample(live, self.random.randint(1, min(2, len(live))))
        self.log[-1] += f" keys {keys}"
        change(
            self.catalog, "table_delete", {"where": f"id IN ({', '.join(map(str, keys))})"}, branch=branch, table="k"
        )
        self.model.commit(branch, rows={k: v for k, v in self.model.heads[branch].rows.items() if k not in keys})

    def do_log(self, branch, live, branches, missing) -> None:
        rid = next(self.fresh)
        self.log[-1] += f" rid {rid}"
        change(self.catalog, "table_load", {"strategy": "append_only", "rows": [{"rid": rid}]}, branch=branch,
               table="log")  # fmt: skip
        self.model.commit(branch, log=self.model.heads[branch].log | {rid})

    def do_compaction(self, branch, live, branches, missing) -> None:
        before = head(self.catalog, branch)
        change(self.catalog, "table_compact", {}, branch=branch, table="k")
        if head(self.catalog, branch) != before:  # nothing to compact commits nothing
            self.model.commit(branch)

    def do_restore(self, branch, live, branches, missing) -> None:
        """RESTORE TABLE k of the branch to one of its earlier commits (its files as they were there): a change of
        the table's rows like any other, which later merges compare by state."""
        earlier = [c for c in ancestors(self.model.heads[branch]).values() if c.id in self.real]
        if not earlier:  # no commit of this branch's history that LakeUI made yet: nothing to restore to
            self.log[-1] = f"restore k on {branch}: no earlier commit, skipped"
            return
        point = self.random.choice(sorted(earlier, key=lambda c: c.id))
        self.log[-1] = f"restore k on {branch} to {point.id} ({self.real[point.id][:8]})"
        restore = branch_restore(catalog=self.catalog, branch=branch, point=self.real[point.id], database="sales",
                                 table="k")  # fmt: skip
        if restore.commit_id is not None:
            self.model.commit(branch, rows=point.rows)
        else:
            assert point.rows == self.model.heads[branch].rows, self.failure(
                "a restore that changed rows committed nothing"
            )
        self.count("restored" if restore.commit_id else "restore_unchanged")
        self.check(branch)

    def do_merge(self, branch, live, branches, missing) -> None:
        """A merge between two random branches (any history, criss-cross too); a refused
        merge is retried with a resolution most times, as a user would."""
        saved = dict(self.model.heads)
        source, target = self.random.sample(branches, 2)
        expected, conflicts = self.model.merge(source, target)
        bases = len(merge_bases(saved[source], saved[target]))
        self.log[-1] = f"merge {source} into {target} ({bases} bases) -> model {expected} {conflicts}"
        if not self.merged(source, target, expected, saved) or expected != "conflict":
            return
        if self.random.random() < 0.7:
            choice = self.random.choice(["source_wins", "target_wins"])
            # Column rules, drawn apart (`self.rules`) so that the history draws as it did without them: a rule
            # for each column or none, the rest by the choice (and a fail, so that a cell no rule settles stands).
            rules = {column: rule for column, drawn in RULES.items()
                     if (rule := self.rules.choice(drawn)) is not None} if self.rules.random() < RULED else {}  # fmt: skip
            if rules and self.rules.random() < 0.3:
                choice = "fail"
            # Cell picks, as a reviewer makes them on the conflicting cells (docs/merge-semantics.md#cell-picks),
            # some of them stale: made on other values than the cell's now.
            picks, given = self.cell_picks(saved[source], saved[target]) if self.rules.random() < PICKED else ({}, {})
            self.log.append(f"merge {source} into {target} with {choice} {rules or ''} {given or ''}")
            self.model.heads = dict(saved)
            expected, _ = self.model.merge(source, target, None if choice == "fail" else choice, rules, picks)
            resolution = {"default": choice}
            if rules:
                resolution["tables"] = {"sales.k": {"columns": rules}}
                self.count("with_column_rules")
                if any(isinstance(rule, dict) and "expression" in rule for rule in rules.values()):
                    self.count("with_expressions")
            if given:
                resolution["cells"] = {"sales.k": given}
                self.count("with_cell_picks")
                if any(stale for cells in picks.values() for _, stale in cells.values()):
                    self.count("with_stale_picks")
            self.merged(source, target, expected, saved, resolution)

    def cell_picks(self, src: MCommit, dest: MCommit) -> tuple[dict, dict]:
        """Picks for some conflicting cells of the merge of `src` into `dest`: the model's (key -> column ->
        (value, stale)) and the resolution's (key id -> column -> pick with its inputs). A side's value or a typed
        one; a tenth of them stale (made on another source value)."""
        draw, base = self.rules, self.model.base(src, dest).rows
        model, given = {}, {}
        for key in sorted(set(src.rows) & set(dest.rows)):
            b, s, d = base.get(key), src.rows[key], dest.rows[key]
            if not key_merge(b, s, d)[0]:
                continue
            for column, old, mine, theirs in conflicting_cells(b, s, d):
                if draw.random() < 0.4:
                    continue
                sides = {"base": old, "source": mine, "target": theirs}
                kind = draw.choice(["source", "target", "value", *(["base"] if b is not None else [])])
                typed = draw.randint(-50, 50) if column == "amount" else f"p{draw.randint(0, 9)}"
                stale = draw.random() < 0.1
                inputs = {**sides, "source": (mine + 1000 if column == "amount" else mine + "!") if stale else mine}
                pick = {"value": typed} if kind == "value" else {"pick": kind}
                model.setdefault(key, {})[column] = (typed if kind == "value" else sides[kind], stale)
                given.setdefault(f"[{key}]", {})[column] = {**pick, "inputs": inputs}
        return model, given

    def merged(self, source, target, expected, saved, resolution=None) -> bool:
        """Whether the model's outcome needs a retry: the real merge, checked against the model."""
        refused = None
        try:
            result = branch_merge(catalog=self.catalog, source=source, target=target, resolution=resolution)
        except ConflictError as error:
            refused = error
        if refused is not None:
            self.model.heads = dict(saved)
            what = f"refused ({refused.code}: {refused.message} {refused.details}); model {expected}"
            assert refused.code == "merge_conflict" and expected == "conflict", self.failure(what)
            self.count(f"refused_{expected}")
            return True
        assert expected in ("merged", "up_to_date"), self.failure(f"merged ({result.status}); the model: {expected}")
        if result.status == "up_to_date":  # no commit: the branch stays (and must then hold the model's rows)
            self.model.heads[target] = saved[target]
        self.count(expected if result.status == "merged" else str(result.status))
        self.check(target)
        if self.converging.random() < CONVERGE:
            self.log.append(f"(merge {target} back into {source} on copies: the same rows?)")
            problem = converges(self.catalog, source=source, target=target, rows=self.rows_of)
            assert problem is None, self.failure(problem)
        return False

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def rows_of(self, branch: str) -> list[tuple]:
        """Both tables' rows on a branch."""
        keyed = read(self.spark, self.catalog, branch, table="k").collect()
        log = read(self.spark, self.catalog, branch, table="log").collect()
        return sorted([("k", r["id"], r["amount"], r["region"]) for r in keyed] + [("log", r["rid"]) for r in log])

    def check(self, branch: str) -> None:
        found = [
            (r["id"], r["amount"], r["region"]) for r in read(self.spark, self.catalog, branch, table="k").collect()
        ]
        expected = sorted((k, *row) for k, row in self.model.heads[branch].rows.items())
        assert sorted(found) == expected, self.failure(
            f"rows of k on {branch}: only in LakeUI {sorted(set(found) - set(expected))}, only in the model "
            f"{sorted(set(expected) - set(found))}; {len(found)} rows, {len({r[0] for r in found})} keys"
        )
        log = sorted(r["rid"] for r in read(self.spark, self.catalog, branch, table="log").collect())
        assert log == sorted(self.model.heads[branch].log), self.failure(f"rows of log on {branch}: {log}")

    def failure(self, what: str) -> str:
        steps = "\n".join(self.log[-120:])
        return f"seed {self.seed}: {what}\nreplay with LAKEUI_KEY_MODEL_SEED={self.seed}; last steps:\n{steps}"


@pytest.mark.timeout(max(600, STEPS * 15))  # long hunts take many steps
@pytest.mark.parametrize("seed", SEEDS)
def test_random_histories_of_a_keyed_table_merge_as_the_model_says(spark, seed):
    run = Run(seed, spark)
    for number in range(1, STEPS + 1):
        try:
            run.step(number)
        except ApplicationError as error:  # not a refusal the step expects: show the history that led to it
            pytest.fail(run.failure(f"step {number} failed: {error.code}: {error.message}"))
    for branch in run.model.heads:
        run.check(branch)
    print(f"seed {seed}: {STEPS} steps, merges {run.outcomes}")
    assert run.outcomes.get("merged", 0) >= STEPS // 10  # the history did merge
    assert run.outcomes.get("refused_conflict", 0) >= 1  # and met conflicts by key
