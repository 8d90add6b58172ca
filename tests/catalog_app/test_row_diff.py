"""The row diff computed in the web process with pyarrow (catalog_app/engine/row_diff.py): by key, and as
multisets for a table without one; no Django, no Spark."""

import numpy as np
import pyarrow as pa

from catalog_app.engine import row_diff


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
