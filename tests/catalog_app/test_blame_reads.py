"""The blame's ways of reading a state give the same answers (docs/provenance.md, docs/benchmarks.md#provenance).

A small file keeps what a reader asks of it in its catalog row: a segment of a keyed table its key values, a delete
file its positions (engine.writes.inline_values, delta_stats). The first pages of a blame are found from the
segments' key bounds, not by ordering every key (`FRONT`). Each is a shortcut past reading files: here, on the blame
model's random histories (merges, picks, restores, compactions), the blame at random refs, a random page of it, and
the history of a random key are the same by the shortcut, by ordering every key, and with the catalog rows' values
left unused (files read instead), each path with nothing kept from another."""

import random

import pytest

from catalog_app.models import DataFile
from catalog_app.selectors import blame
from catalog_app.selectors.refs import ref_resolve
from catalog_app.selectors.table_files import TableFiles
from lakeui.errors import ApplicationError
from tests.catalog_app.test_blame_model import SEEDS, STEPS, BlameRun
from tests.support.catalogs import make_catalog, make_table
from tests.support.data import files_at
from tests.support.merges import change, insert

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_small_file_keeps_its_keys_or_positions_in_its_catalog_row(spark):
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"])
    insert(catalog, [{"id": i, "amount": i * 10, "region": "eu"} for i in (3, 1, 2)])
    params = {"strategy": "upsert", "key_columns": ["id"], "rows": [{"id": 2, "amount": 5, "region": "us"}]}
    change(catalog, "table_load", params)
    files = files_at(catalog)
    [loaded, upserted] = files.segments
    assert loaded.stats["1"] == {"min": 1, "max": 3, "nulls": 0, "values": [3, 1, 2]}  # the key's, in file order
    assert "values" not in loaded.stats["2"] and upserted.stats["1"]["values"] == [2]
    [delta] = files.deltas[loaded.id]
    assert delta.stats == {"pos": {"min": 2, "max": 2, "nulls": 0}, "positions": [2]}
    many = [{"id": i, "amount": i, "region": "eu"} for i in range(100, 400)]  # more rows than INLINE_ROWS
    insert(catalog, many)
    [big] = [s for s in files_at(catalog).segments if s.row_count == len(many)]
    assert big.stats["1"] == {"min": 100, "max": 399, "nulls": 0}


def _paths(monkeypatch, path: str) -> None:
    """Read by one path: `front` (the default), `ordered` (every key ordered), or `files` (the catalog rows'
    values unused), nothing kept from the last."""
    blame.kept_clear()
    if path == "ordered":
        monkeypatch.setattr(blame, "FRONT", 0)
    if path == "files":
        monkeypatch.setattr(blame._Table, "inline_keys", lambda self, stats: None)
        monkeypatch.setattr(TableFiles, "inline_positions", lambda self: {})


def _answer(action):
    try:
        return action()
    except ApplicationError as error:
        return ("refused", error.code)


class PathsRun(BlameRun):
    """The blame model's run, each blame it checks read again by every path, a random page and a random key."""

    def __init__(self, seed: int, spark) -> None:
        super().__init__(seed, spark)
        self.drawn = random.Random(seed * 17 + 3)
        self.compared = 0

    def blame(self, commit, name: str) -> None:
        super().blame(commit, name)
        resolved = ref_resolve(catalog=self.catalog, ref=self.real[commit.id])
        size = self.drawn.choice([1, 2, 5, 500])
        page = self.drawn.randint(1, max(1, -(-len(commit.rows) // size)))
        keys = sorted({*commit.rows, *commit.parents[0].rows} if commit.parents else commit.rows) or [1]
        key = f"[{self.drawn.choice(keys)}]"
        answers = {}
        for path in ("front", "ordered", "files"):
            with pytest.MonkeyPatch.context() as monkeypatch:
                _paths(monkeypatch, path)
                shown = _answer(lambda: blame.table_blame(
                    resolved=resolved, database="sales", table="k", page=page, page_size=size
                ))  # fmt: skip
                versions = _answer(lambda: blame.key_history(resolved=resolved, database="sales", table="k", key=key))
                answers[path] = (
                    shown if isinstance(shown, tuple) else (shown.count, shown.results, shown.commits),
                    versions,
                )
        where = f"{name}, page {page} of {size}, key {key}"
        assert answers["ordered"] == answers["front"], self.failure(f"{where}: ordering every key answers otherwise")
        assert answers["files"] == answers["front"], self.failure(f"{where}: reading the files answers otherwise")
        self.compared += 1


@pytest.mark.timeout(max(600, STEPS * 40))
@pytest.mark.parametrize("seed", [seed + 100 for seed in SEEDS])
def test_every_path_of_the_blame_answers_the_same(spark, seed):
    run = PathsRun(seed, spark)
    for number in range(1, STEPS + 1):
        try:
            run.step(number)
        except ApplicationError as error:
            pytest.fail(run.failure(f"step {number} failed: {error.code}: {error.message}"))
    assert run.compared >= STEPS // 2
    assert DataFile.objects.filter(catalog=run.catalog, stats__has_key="positions").exists()  # the shortcut was met
