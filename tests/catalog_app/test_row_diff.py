"""The row diff computed in the web process with pyarrow (catalog_app/engine/row_diff.py): by key, and as
multisets for a table without one; no Django, no Spark."""

import threading
from collections import Counter
from datetime import date
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from catalog_app.engine import reads, row_diff
from catalog_app.engine.segments import Column, SegmentRead
from catalog_app.engine.warehouse import Warehouse


def changes(diff: pa.Table) -> list[tuple]:
    return [
        (r["_change"], r["b:id"], r["b:v"], r["a:id"], r["a:v"]) for r in diff.select(
            ["_change", "b:id", "b:v", "a:id", "a:v"]
        ).to_pylist()
    ]  # fmt: skip


def test_by_key_inserted_deleted_and_changed_cells_with_nulls():
    before = pa.table({"id": pa.array([3, 1, 2, 5], pa.int64()), "v": pa.array([3, 1, None, 5])})
    after = pa.table({"id": pa.array([5, 2, 4, 3], pa.int64()), "v": pa.array([5, 2, 4, None])})
    expected = [
        ("delete", 1, 1, None, None), ("update", 2, None, 2, 2), ("update", 3, 3, 3, None),
        ("insert", None, None, 4, 4),
    ]  # fmt: skip
    fast = row_diff.diff_rows(before, after, ["id"])  # one integer key: numpy's sorted searches
    assert changes(fast) == expected
    slow = row_diff.diff_rows(
        before.cast(pa.schema([("id", pa.string()), ("v", pa.int64())])),
        after.cast(pa.schema([("id", pa.string()), ("v", pa.int64())])), ["id"],
    )  # fmt: skip
    assert [
        (c, *(None if x is None else int(x) for x in rest)) for c, *rest in changes(slow)
    ] == expected  # the hash join (a string key)
    page = row_diff.page_of(fast, ["id", "v"], offset=1, limit=2)
    assert page == [
        {"change": "update", "before": [2, None], "after": [2, 2], "cells": ["v"]},
        {"change": "update", "before": [3, 3], "after": [3, None], "cells": ["v"]},
    ]
    assert row_diff.counts_of(fast) == {"insert": 1, "update": 2, "delete": 1}


def test_the_integer_key_path_agrees_with_the_join_on_random_states():
    rng = np.random.default_rng(7)
    ids = rng.permutation(2000)[:1500]
    before = pa.table({"id": pa.array(ids[:1000], pa.int64()), "v": pa.array(rng.integers(0, 3, 1000))})
    after = pa.table({"id": pa.array(ids[500:], pa.int64()), "v": pa.array(rng.integers(0, 3, 1000))})
    fast = row_diff.diff_rows(before, after, ["id"])
    joined = row_diff._by_key(before.cast(pa.schema([("id", pa.float64()), ("v", pa.int64())])),
                              after.cast(pa.schema([("id", pa.float64()), ("v", pa.int64())])), ["id"], ["id", "v"])  # fmt: skip
    assert row_diff.counts_of(fast) == row_diff.counts_of(joined)
    assert [r["_change"] for r in fast.to_pylist()] == [r["_change"] for r in joined.to_pylist()]


def test_without_a_key_rows_are_multisets():
    before = pa.table({"id": [1, 1, 2, None], "v": ["a", "a", "b", None]})
    after = pa.table({"id": [1, 2, 2, None], "v": ["a", "b", "b", None]})
    diff = row_diff.diff_rows(before, after, [])
    assert changes_keyless(diff) == [("delete", 1, "a"), ("insert", 2, "b")]  # one of two 1s out, a second 2 in


def changes_keyless(diff: pa.Table) -> list[tuple]:
    return [
        (r["_change"], r["b:id"] if r["_change"] == "delete" else r["a:id"],
         r["b:v"] if r["_change"] == "delete" else r["a:v"])
        for r in diff.to_pylist()
    ]  # fmt: skip


# The first page is laid out before the whole diff (Changes.rows), the whole diff is kept afterwards in a thread
# (kept_write_later): both must give the rows and counts an independent reading of the two states gives.


def reference(before: pa.Table, after: pa.Table, key: list[str]) -> list[tuple]:
    """The changed rows as (change, before row, after row), computed in plain Python: by key, ordered by key; or,
    without a key, the rows held more often on one side, deleted then added, each by value (nulls last)."""
    names = before.column_names
    b_rows, a_rows = [tuple(r.values()) for r in before.to_pylist()], [tuple(r.values()) for r in after.to_pylist()]
    nulls = (None,) * len(names)
    if key:
        at = [names.index(k) for k in key]
        b_by, a_by = {tuple(r[i] for i in at): r for r in b_rows}, {tuple(r[i] for i in at): r for r in a_rows}
        found = []
        for k in sorted(b_by.keys() | a_by.keys()):
            b, a = b_by.get(k), a_by.get(k)
            if b is None:
                found.append(("insert", nulls, a))
            elif a is None:
                found.append(("delete", b, nulls))
            elif b != a:
                found.append(("update", b, a))
        return found
    counted = Counter(a_rows)
    counted.subtract(Counter(b_rows))

    def by_value(row):
        return tuple((v is None, v) for v in row)

    deleted = sorted((r for r, n in counted.items() if n < 0 for _ in range(-n)), key=by_value)
    added = sorted((r for r, n in counted.items() if n > 0 for _ in range(n)), key=by_value)
    return [("delete", r, nulls) for r in deleted] + [("insert", nulls, r) for r in added]


def as_tuples(diff: pa.Table) -> list[tuple]:
    names = [n[2:] for n in diff.column_names if n.startswith("b:")]
    return [
        (r["_change"], tuple(r["b:" + n] for n in names), tuple(r["a:" + n] for n in names)) for r in diff.to_pylist()
    ]


def random_states(seed: int, key: str) -> tuple[pa.Table, pa.Table]:
    """Two states sharing some rows: ids unique per side when keyed, repeated rows and nulls when not."""
    rng = np.random.default_rng(seed)
    n = 600
    ids = rng.permutation(1000)[:n] if key else rng.integers(0, 40, n)
    values = [None if x == 0 else int(x) for x in rng.integers(0, 4, n)]
    names = [["x", "y", None][i] for i in rng.integers(0, 3, n)]
    rows = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(values, pa.int64()), "s": names})
    before, after = rows.slice(0, 400), rows.slice(200, 400)
    if key:  # some kept keys get new values
        changed = pa.array([None if x == 0 else int(x) for x in rng.integers(0, 4, 400)], pa.int64())
        after = after.set_column(1, "v", pc.if_else(pa.array(rng.random(400) < 0.3), changed, after.column("v")))
    else:  # a row now held twice more
        after = pa.concat_tables([after, after.slice(0, 1), after.slice(0, 1)])
    shuffle = rng.permutation(after.num_rows)
    return before, after.take(pa.array(shuffle))  # not in key order: the sort is exercised


@pytest.mark.parametrize("kind", ["integer key", "string key (the join)", "no key"])
def test_a_page_laid_out_alone_is_the_slice_of_the_whole_diff(kind):
    before, after = random_states(11, "id" if kind != "no key" else "")
    key = [] if kind == "no key" else ["id"]
    if kind.startswith("string"):
        schema = pa.schema([("id", pa.string()), ("v", pa.int64()), ("s", pa.string())])
        before, after = before.cast(schema), after.cast(schema)
    expected = reference(before, after, key)
    changes = row_diff.changes_of(before, after, key)
    assert len({c for c, _, _ in expected}) == (3 if key else 2)  # the states change rows in every way
    assert changes.total == len(expected)
    assert changes.counts == {c: sum(1 for e in expected if e[0] == c) for c in ("insert", "update", "delete")}
    assert as_tuples(changes.table()) == expected
    for offset, limit in ((0, 50), (50, 50), (37, 13), (len(expected) - 5, 50), (len(expected), 50)):
        assert as_tuples(changes.rows(offset, limit)) == expected[offset : offset + limit], (offset, limit)
    whole = row_diff.diff_rows(before, after, key)
    page = row_diff.page_of(whole, before.column_names, offset=50, limit=50)
    assert row_diff.page_of(changes.rows(50, 50), before.column_names, offset=0, limit=50) == page


def test_a_page_of_a_large_keyless_diff_picks_its_first_rows_without_sorting_all():
    rng = np.random.default_rng(3)
    values = rng.integers(0, 10_000, 5000)
    before = pa.table(
        {"v": pa.array(values[:3000]), "s": pa.array([str(v % 7) if v % 5 else None for v in values[:3000]])}
    )
    after = pa.table(
        {"v": pa.array(values[2000:]), "s": pa.array([str(v % 7) if v % 3 else None for v in values[2000:]])}
    )
    expected = reference(before, after, [])
    changes = row_diff.changes_of(before, after, [])
    assert as_tuples(changes.rows(0, 50)) == expected[:50]  # select_k of 50 among thousands, then their sort
    at = changes.counts["delete"] - 10  # a page across deleted and added rows
    assert as_tuples(changes.rows(at, 20)) == expected[at : at + 20]


def test_a_first_page_answered_before_the_diff_is_kept_equals_the_kept_diff(tmp_path):
    before, after = random_states(5, "id")
    changes = row_diff.changes_of(before, after, ["id"])
    path = tmp_path / "pair.arrow"
    hold = threading.Event()
    row_diff._keeper.submit(hold.wait)  # the keeping thread is busy: the diff is not kept yet
    try:
        row_diff.kept_write_later(path, changes, {"table": "t"})
        first = row_diff.page_of(changes.rows(0, 50), before.column_names, offset=0, limit=50)
        second = row_diff.page_of(changes.rows(50, 50), before.column_names, offset=0, limit=50)
        assert not path.exists()
    finally:
        hold.set()
    kept = row_diff.kept_read(path)  # waits for the keeping under way
    assert kept is not None and kept.schema.metadata[b"table"] == b"t"
    assert row_diff.counts_of(kept) == changes.counts and kept.num_rows == changes.total
    assert row_diff.page_of(kept, before.column_names, offset=0, limit=50) == first
    assert row_diff.page_of(kept, before.column_names, offset=50, limit=50) == second
    assert as_tuples(kept) == reference(before, after, ["id"])
    assert not list(tmp_path.glob("*.part"))


def write_segment(root, name: str, rows: pa.Table, deleted: list[int] | None = None) -> tuple[str, tuple[str, ...]]:
    pq.write_table(rows, root / f"{name}.parquet")
    if deleted is None:
        return f"{name}.parquet", ()
    pq.write_table(pa.table({"pos": pa.array(deleted, pa.int64())}), root / f"{name}-deltas.parquet")
    return f"{name}.parquet", (f"{name}-deltas.parquet",)


@pytest.mark.parametrize("key", [["id"], []])
def test_a_segment_on_both_sides_gives_only_the_rows_one_side_deleted(tmp_path, key):
    """A segment whose deletes changed (a delete, an update written as delete and insert) is read once: the rows
    both sides keep are not compared; the diff is the one of every live row."""
    columns = [Column(1, "id", "long"), Column(2, "v", "long"), Column(3, "s", "string")]
    rows = pa.table({"id": pa.array(range(10), pa.int64()), "v": pa.array(range(10), pa.int64()), "s": ["a"] * 10})
    path, _ = write_segment(tmp_path, "shared", rows)
    _, before_deltas = write_segment(tmp_path, "before", rows, [9])  # deleted on both sides
    _, after_deltas = write_segment(tmp_path, "after", rows, [1, 2, 9])
    shared_before = SegmentRead("s1", path, tuple(columns), (before_deltas[0],))
    shared_after = SegmentRead("s1", path, tuple(columns), (before_deltas[0], after_deltas[0]))
    updated = pa.table({"id": pa.array([2, 11], pa.int64()), "v": pa.array([-2, 11], pa.int64()), "s": ["a", "b"]})
    added_path, _ = write_segment(tmp_path, "added", updated)
    added = SegmentRead("s2", added_path, tuple(columns))
    gone_path, _ = write_segment(tmp_path, "gone", rows.slice(3, 1))  # a segment only the `from` side holds
    gone = SegmentRead("s3", gone_path, tuple(columns))
    warehouse = Warehouse(str(tmp_path))
    before, after = row_diff.read_sides_arrow(warehouse, columns, [shared_before, gone], [shared_after, added])
    assert sorted(before.column("id").to_pylist()) == [1, 2, 3]  # 0 and 3..8 of the shared segment: on both sides
    assert sorted(after.column("id").to_pylist()) == [2, 11]
    every_before = reads.read_rows_arrow(warehouse, columns, [shared_before, gone])
    every_after = reads.read_rows_arrow(warehouse, columns, [shared_after, added])
    if not key:  # as multisets, `gone`'s row 3 is one of two 3s before and none after
        assert as_tuples(row_diff.diff_rows(before, after, key)) == reference(every_before, every_after, key)
    else:  # keys unique per side: compare without `gone` (a second id 3)
        every_before = reads.read_rows_arrow(warehouse, columns, [shared_before])
        before, after = row_diff.read_sides_arrow(warehouse, columns, [shared_before], [shared_after, added])
        assert as_tuples(row_diff.diff_rows(before, after, key)) == reference(every_before, every_after, key) == [
            ("delete", (1, 1, "a"), (None, None, None)), ("update", (2, 2, "a"), (2, -2, "a")),
            ("insert", (None, None, None), (11, 11, "b")),
        ]  # fmt: skip
    same = SegmentRead("s1", path, tuple(columns), (after_deltas[0],))
    assert row_diff.read_sides_arrow(warehouse, columns, [same], [same])[0].num_rows == 0  # nothing to read


@pytest.mark.parametrize(
    "values",
    [
        pa.array([1.5, None, -0.5, 2.0, 1.5, 3.25], pa.float64()),  # floats: grouped on every column
        pa.array([-(2**62), None, 2**62, 0, -(2**62), 5], pa.int64()),  # a range too wide for one code
        pa.array([2**63 + 1, None, 1, 0, 2**63 + 1, 5], pa.uint64()),
        pa.array([True, None, False, True, True, False]),
        pa.array([date(2024, 1, d) for d in (1, 2, 3, 4, 1, 6)], pa.date32()),
        pa.array(
            [Decimal("1.10"), None, Decimal("-2.00"), Decimal("1.10"), Decimal("1.10"), None], pa.decimal128(6, 2)
        ),
        pa.array([3, None, -7, 3, 3, None], pa.int32()),  # integers with nulls: coded by value
    ],
    ids=["float", "wide int", "uint64", "bool", "date", "decimal", "int with nulls"],
)
def test_without_a_key_every_column_type_counts_rows_as_multisets(values):
    """Rows without a key are counted by one integer code per row when the columns allow one, else by grouping on
    every column: either way the rows held more often on one side, as many times more."""
    ids = pa.array([1, 1, 2, None, 1, 3], pa.int64())
    rows = pa.table({"id": ids, "v": values, "s": ["a", "a", None, "b", "a", "c"]})
    before = rows.take(pa.array([0, 1, 2, 3, 5]))
    after = rows.take(pa.array([4, 3, 3, 5, 2, 2, 0, 4]))
    expected = reference(before, after, [])
    changes = row_diff.changes_of(before, after, [])
    assert as_tuples(changes.table()) == expected and expected
    assert changes.counts == {"insert": sum(e[0] == "insert" for e in expected), "update": 0,
                              "delete": sum(e[0] == "delete" for e in expected)}  # fmt: skip
    assert as_tuples(changes.rows(1, 2)) == expected[1:3]


@pytest.mark.parametrize("key", [[1, 2, 3, 4], ["1", "2", "3", "4"], None], ids=["integer key", "joined key", "rows"])
def test_an_origin_column_is_carried_beside_each_row_and_never_compared(key):
    """`ORIGIN` (where a row was read) rides along: the same changes as without it, each with its own row's origin;
    a keyless row held more often on one side carries the origin of its last copy there (floats: grouped rows)."""
    one, two, three, four = key or [1.0, 2.0, 3.0, 4.0]
    before = pa.table({"id": [one, two, three], "v": [1.0, 2.0, 3.0], row_diff.ORIGIN: pa.array([10, 11, 12])})
    ids, v, at = ([one, two, four], [1.0, 5.0, 4.0], [20, 21, 22]) if key else (
        [one, two, four, four], [1.0, 5.0, 4.0, 4.0], [20, 21, 22, 23])  # fmt: skip
    after = pa.table({"id": ids, "v": v, row_diff.ORIGIN: pa.array(at)})
    by = ["id"] if key else []
    plain = row_diff.diff_rows(before.drop_columns([row_diff.ORIGIN]), after.drop_columns([row_diff.ORIGIN]), by)
    carried = row_diff.diff_rows(before, after, by)
    assert carried.drop_columns(["b:_origin", "a:_origin"]).equals(plain)
    origins = {(r["_change"], r["b:id"], r["a:id"], r["a:v"]): (r["b:_origin"], r["a:_origin"])
               for r in carried.to_pylist()}  # fmt: skip
    if key:
        assert origins == {("update", two, two, 5.0): (11, 21), ("delete", three, None, None): (12, None),
                           ("insert", None, four, 4.0): (None, 22)}  # fmt: skip
    else:
        assert origins == {("delete", two, None, None): (11, None), ("delete", three, None, None): (12, None),
                           ("insert", None, two, 5.0): (None, 21), ("insert", None, four, 4.0): (None, 23)}  # fmt: skip


def test_a_keyless_row_held_twice_more_carries_the_origin_of_its_last_copy():
    before = pa.table({"id": pa.array([1, 2], pa.int64()), row_diff.ORIGIN: pa.array([10, 11])})
    after = pa.table({"id": pa.array([2, 7, 1, 7], pa.int64()), row_diff.ORIGIN: pa.array([20, 21, 22, 23])})
    carried = row_diff.diff_rows(before, after, [])  # integer rows: coded, not grouped
    assert [(r["_change"], r["a:id"], r["a:_origin"]) for r in carried.to_pylist()] == [
        ("insert", 7, 23), ("insert", 7, 23)
    ]  # fmt: skip
