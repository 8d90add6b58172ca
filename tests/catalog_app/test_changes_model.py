"""Random histories, for real (data jobs, merges, restores, reverts and picks through their services), and between
random pairs of their commits (ancestors or not, either way round) the change stream of docs/changes.md: applied to
`from`'s rows it gives exactly `to`'s rows, by key for a keyed table and as multisets for one without a key; every
record's before image is what `from` held, and a record names a commit of `to`'s history (always, when `from` is on
`to`'s first-parent history).

    LAKEUI_CHANGES_SEED=1,2,3 LAKEUI_CHANGES_STEPS=200 LAKEUI_CHANGES_PAIRS=100 pytest tests/catalog_app/test_changes_model.py

The seed and the steps are printed on failure.
"""

import os
import random
from collections import Counter
from unittest import mock

import pytest
from django.conf import settings

from catalog_app.engine.reads import read_rows_arrow
from catalog_app.engine.warehouse import Warehouse
from catalog_app.models import Commit
from catalog_app.selectors import changes
from catalog_app.selectors.changes import changes_between, tables_changed
from catalog_app.selectors.refs import commit_chain, commit_log, ref_resolve
from catalog_app.selectors.table_files import table_columns, table_files
from catalog_app.services.refs import branch_create
from lakeui.errors import ApplicationError, ConflictError
from merge_app.services.merges import branch_merge
from merge_app.services.picks import commits_pick
from merge_app.services.restores import branch_restore
from tests.support.catalogs import head, make_catalog, make_table
from tests.support.data import table_version
from tests.support.merges import change

pytestmark = pytest.mark.django_db(transaction=True)

SEEDS = [int(seed) for seed in os.environ.get("LAKEUI_CHANGES_SEED", "31,32").split(",")]
STEPS = int(os.environ.get("LAKEUI_CHANGES_STEPS", "30"))
PAIRS = int(os.environ.get("LAKEUI_CHANGES_PAIRS", "12"))
BRANCHES = ("main", "b1", "b2")
TABLES = {"k": ["id"], "log": []}  # a keyed table and one without a key
KEYS = 10


class Run:
    def __init__(self, seed: int) -> None:
        self.random, self.seed, self.log = random.Random(seed), seed, []
        self.catalog = make_catalog()
        for table, key in TABLES.items():
            make_table(self.catalog, table=table, primary_key=key, properties={
                "write.mode": self.random.choice(["merge-on-read", "copy-on-write"])})  # fmt: skip
        self.commits = [head(self.catalog)]
        self.log.append("0: load both tables on main, branch b1 and b2 from it")
        for table in TABLES:
            self.do_load("main", table)
        for name in BRANCHES[1:]:
            branch_create(catalog=self.catalog, name=name, source="main")
        self.branches = list(BRANCHES)
        self.checked = 0  # records applied

    def rows(self, amount_range=3):
        return [{"id": self.random.randrange(KEYS), "amount": self.random.randrange(amount_range),
                 "region": self.random.choice("ab")} for _ in range(self.random.randint(1, 3))]  # fmt: skip

    def step(self, number: int) -> None:
        branch = self.random.choice(self.branches)
        table = self.random.choice(list(TABLES))
        kind = self.random.choices(
            ["load", "delete_key", "delete_where", "update", "compact", "overwrite", "restore", "revert", "pick",
             "merge"],
            weights=[10, 4, 3, 4, 3, 1, 2, 2, 2, 6],
        )[0]  # fmt: skip
        self.log.append(f"{number}: {kind} {table} on {branch}")
        before = head(self.catalog, branch)
        try:
            getattr(self, f"do_{kind}")(branch, table)
        except ApplicationError as error:  # a refusal (a conflict left unresolved, nothing to revert): no commit
            self.log[-1] += f" refused {error.code}"
        for name in self.branches:
            if head(self.catalog, name) not in self.commits:
                self.commits.append(head(self.catalog, name))
        if head(self.catalog, branch) == before:
            self.log[-1] += " (no commit)"

    def do_load(self, branch, table):
        rows = self.rows()
        if TABLES[table]:
            rows = list({r["id"]: r for r in rows}.values())
            params = {"strategy": "upsert", "key_columns": ["id"], "rows": rows}
        else:
            params = {"strategy": "append_only", "rows": rows + rows[:1]}  # a row appended twice, at times
        self.log[-1] += f" {params['rows']}"
        change(self.catalog, "table_load", params, branch=branch, table=table)

    def do_delete_key(self, branch, table):
        key = self.random.randrange(KEYS)
        self.log[-1] += f" id = {key}"
        change(self.catalog, "table_delete", {"where": f"id = {key}"}, branch=branch, table=table)

    def do_delete_where(self, branch, table):
        bound = self.random.randrange(3)
        self.log[-1] += f" amount = {bound}"
        change(self.catalog, "table_delete", {"where": f"amount = {bound} AND id > 4"}, branch=branch, table=table)

    def do_update(self, branch, table):
        key = self.random.randrange(KEYS)
        assignments = self.random.choice([{"amount": "amount + 1"}, {"region": "'c'"}])
        self.log[-1] += f" id <= {key} {assignments}"
        change(self.catalog, "table_update", {"set": assignments, "where": f"id <= {key}"}, branch=branch, table=table)

    def do_compact(self, branch, table):
        change(self.catalog, "table_compact", {}, branch=branch, table=table)

    def do_overwrite(self, branch, table):
        rows = list({r["id"]: r for r in self.rows()}.values())
        self.log[-1] += f" {rows}"
        change(self.catalog, "table_load", {"strategy": "full_refresh", "rows": rows}, branch=branch, table=table)

    def _own_commit(self, branch):
        own = [c.id for c in commit_log(commit_chain(Commit.objects.get(id=head(self.catalog, branch))))[:30]]
        return self.random.choice(own[:-2]) if len(own) > 2 else None  # not the table's creation

    def do_restore(self, branch, table):
        point = self._own_commit(branch)
        if point is not None:
            self.log[-1] += f" to {point[:8]}"
            branch_restore(catalog=self.catalog, branch=branch, point=point, database="sales", table=table)

    def do_revert(self, branch, table):
        commit = self._own_commit(branch)
        if commit is not None:
            self.log[-1] += f" {commit[:8]}"
            self._resolved(lambda resolution: commits_pick(catalog=self.catalog, kind="revert", branch=branch,
                                                           commits=[commit], resolution=resolution))  # fmt: skip

    def do_pick(self, branch, table):
        source = self.random.choice(self.branches)
        commit = self._own_commit(source)
        if commit is not None and source != branch:
            self.log[-1] += f" {commit[:8]} of {source}"
            self._resolved(lambda resolution: commits_pick(catalog=self.catalog, kind="cherry_pick", branch=branch,
                                                           commits=[commit], resolution=resolution))  # fmt: skip

    def do_merge(self, branch, table):
        if len(self.branches) > 1:
            source = self.random.choice([b for b in self.branches if b != branch])
            self.log[-1] = self.log[-1].replace(f"merge {table} on", f"merge {source} into")
            self._resolved(lambda resolution: branch_merge(catalog=self.catalog, source=source, target=branch,
                                                           resolution=resolution))  # fmt: skip

    def _resolved(self, run):
        try:
            run(None)
        except ConflictError:
            choice = self.random.choice(["source_wins", "target_wins"])
            self.log[-1] += f" conflict, again with {choice}"
            run({"default": choice})

    # --- the check

    def rows_at(self, commit: str, table: str) -> list[dict]:
        """The table's rows at the commit; none where it has no such table (a restore to before its creation)."""
        try:
            chain, version = table_version(self.catalog, commit, table=table)
        except ApplicationError:
            return []
        files = table_files(chain, table_id=version.object_id)
        return read_rows_arrow(Warehouse(settings.LAKEUI_WAREHOUSE), table_columns(version), files.reads()).to_pylist()

    def ancestors(self, commit: str) -> set[str]:
        seen, stack = set(), [commit]
        while stack:
            current = stack.pop()
            if current and current not in seen:
                seen.add(current)
                stack += list(Commit.objects.filter(id=current).values_list("parent_id", "merge_parent_id")[0])
        return seen

    def check(self, source: str, target: str) -> None:
        refs = [ref_resolve(catalog=self.catalog, ref=c) for c in (source, target)]
        feed = changes_between(source=refs[0], target=refs[1])
        touched = tables_changed(source=refs[0], target=refs[1])  # the tables the commits between them wrote
        with mock.patch.object(changes, "TOUCHED_COMMITS", -1):  # every table's state compared, as when far apart
            assert touched == tables_changed(source=refs[0], target=refs[1]), self.failure("the tables changed")
        records = feed[0 : len(feed)]
        assert len(records) == len(feed)
        self.checked += len(records)
        history = self.ancestors(target)
        first_parent = source in {c.id for c in commit_log(commit_chain(Commit.objects.get(id=target)))}
        for table, key in TABLES.items():
            before, after = self.rows_at(source, table), self.rows_at(target, table)
            mine = [r for r in records if r["table"] == f"sales.{table}"]
            where = f"{table} from {source[:8]} to {target[:8]}"
            for record in mine:
                assert record["commit"] is None or record["commit"] in history, self.failure(f"{where}: {record}")
                assert record["commit"] is not None or not first_parent, self.failure(f"{where}: no commit {record}")
            if key:
                state = {r["id"]: r for r in before}
                for record in mine:
                    k = record["key"]["id"]
                    if record["change"] != "insert":
                        assert state.pop(k, None) == record["before"], self.failure(f"{where}: {record}")
                    else:
                        assert k not in state, self.failure(f"{where}: insert of a key held {record}")
                    if record["change"] != "delete":
                        state[k] = record["after"]
                assert state == {r["id"]: r for r in after}, self.failure(f"{where}: applied {state} != {after}")
            else:
                counted = Counter(tuple(sorted(r.items())) for r in before)
                for record in mine:
                    if record["change"] == "delete":
                        row = tuple(sorted(record["before"].items()))
                        assert counted[row] > 0, self.failure(f"{where}: delete of a row not held {record}")
                        counted[row] -= 1
                    else:
                        counted[tuple(sorted(record["after"].items()))] += 1
                expected = Counter(tuple(sorted(r.items())) for r in after)
                assert +counted == expected, self.failure(f"{where}: applied {+counted} != {expected}")

    def failure(self, what: str) -> str:
        steps = "\n".join(self.log[-60:])
        return f"seed {self.seed}: {what}\nreplay with LAKEUI_CHANGES_SEED={self.seed}; steps:\n{steps}"


@pytest.mark.timeout(max(900, STEPS * 30 + PAIRS * 10))
@pytest.mark.parametrize("seed", SEEDS)
def test_the_change_stream_applied_to_from_gives_to(spark, seed):
    run = Run(seed)
    for number in range(1, STEPS + 1):
        try:
            run.step(number)
        except Exception as error:  # not a refusal: show the history that led to it
            raise AssertionError(run.failure(f"step {number} failed: {error!r}")) from error
    pairs = [tuple(run.random.sample(run.commits, 2)) for _ in range(PAIRS)]
    pairs += [(run.commits[0], head(run.catalog, b)) for b in run.branches]  # from the start to every head
    for source, target in pairs:
        run.check(source, target)
    print(f"seed {seed}: {STEPS} steps, {len(run.commits)} commits, {len(pairs)} pairs, {run.checked} records")
    assert run.checked >= PAIRS  # the pairs did differ
