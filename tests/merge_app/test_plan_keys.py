"""A primary-key table's merge by key as the plan decides it (`merge_app.plan.keys`), on plain values: no database,
no Spark. Each key both sides changed gets its verdict (merged cell by cell, or a conflict with its cells, listed in
key order), and the rows the merge writes for them follow the resolution's choice of each conflicting key."""

import datetime
import decimal

from catalog_app.engine.keys import BothChanged as Changed
from merge_app.plan import key_rows, key_verdicts
from merge_app.plan.keys import discarding_overwrites, key_choices
from merge_app.plan.objects import ObjectDiff
from merge_app.plan.rules import Op
from tests.merge_app.test_plan_writes import table

pytestmark = []  # no database

COLUMNS = ["amount", "region"]
TYPES = {"id": "long", "amount": "decimal(10,2)", "region": "string"}


def row(key, amount, region="eu"):
    return {"id": key, "amount": decimal.Decimal(amount), "region": region}


def updated(key, base, source, target):
    return Changed((key,), "update", "update", base, source, target)


BOTH = [
    updated(3, row(3, "1"), row(3, "2"), row(3, "1", "us")),  # different cells: merged cell by cell
    updated(1, row(1, "1"), row(1, "5"), row(1, "7")),  # amount set to 5 and 7: a conflict
    updated(2, row(2, "1"), row(2, "4"), row(2, "4")),  # the same change: the target holds it already
    Changed((4,), "delete", "update", row(4, "1"), None, row(4, "3")),  # deleted what the other updated
    Changed((5,), "delete", "delete", row(5, "1"), None, None),  # deleted on both: nothing to write
]


def decided():
    return key_verdicts(BOTH, ["id"], COLUMNS, row_granularity=False)


def test_each_key_both_sides_changed_is_merged_by_cell_or_a_conflict_listed_in_key_order():
    result = decided()
    assert result.counts == {"both": 5, "merged_cell_by_cell": 1, "conflicts": 2}
    assert result.merged == {"[3]": ((3,), (3, decimal.Decimal("2"), "us"))}
    assert [c["key_id"] for c in result.conflicts] == ["[1]", "[4]"]
    first = result.conflicts[0]
    assert first["key"] == {"id": 1} and first["cells"] == ["amount"]
    assert (first["base"]["amount"], first["source"]["amount"], first["target"]["amount"]) == ("1", "5", "7")
    assert result.conflicts[1]["cells"] == ["*"] and result.conflicts[1]["source"] is None
    assert result.source_rows == {"[1]": ((1,), (1, decimal.Decimal("5"), "eu")), "[4]": ((4,), None)}


def test_row_granularity_makes_every_different_change_of_a_row_a_conflict():
    result = key_verdicts(BOTH, ["id"], COLUMNS, row_granularity=True)
    assert [c["key_id"] for c in result.conflicts] == ["[1]", "[3]", "[4]"]
    assert result.merged == {}  # key 2 (the same change) needs no row


def test_keys_are_ids_of_json_values():
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
    changed = Changed((when, b"\x01"), "insert", "insert", None, {"v": 1}, {"v": 2})
    [conflict] = key_verdicts([changed], ["at", "raw"], ["v"], row_granularity=False).conflicts
    assert conflict["key_id"] == '["2026-01-02T01:04:05","AQ=="]'  # in UTC, without the offset; bytes in base64
    assert conflict["key"] == {"at": "2026-01-02T01:04:05", "raw": "AQ=="}


def keyed_object(choices) -> ObjectDiff:
    return table("changed_in_both", keyed=True, key_mode=True, keys={"choices": choices})


def test_the_rows_written_follow_each_conflicting_keys_choice():
    result = decided()
    merged_3 = ((3,), (3, decimal.Decimal("2"), "us"))
    settled = {"key_id": "[1]", "choice": "columns", "cells": {"amount": {"rule": "greatest", "result": "7.50"}}}
    cases = {
        "target_wins": ([{"key_id": "[1]", "choice": "target_wins"}, {"key_id": "[4]", "choice": "target_wins"}],
                        [merged_3]),
        "source_wins": ([{"key_id": "[1]", "choice": "source_wins"}, {"key_id": "[4]", "choice": "source_wins"}],
                        [merged_3, ((1,), (1, decimal.Decimal("5"), "eu")), ((4,), None)]),
        "leave_out": ([{"key_id": "[1]", "choice": "leave_out"}, {"key_id": "[4]", "choice": "leave_out"}],
                      [merged_3, ((1,), None), ((4,), None)]),
        "columns": ([settled], [merged_3, ((1,), (1, decimal.Decimal("7.50"), "eu"))]),
    }  # fmt: skip
    for name, (choices, expected) in cases.items():
        assert key_rows(keyed_object(choices), result, TYPES) == expected, name


def test_a_key_settled_by_columns_to_the_targets_row_is_not_written():
    result = decided()
    settled = {"key_id": "[1]", "choice": "columns", "cells": {"amount": {"rule": "target_wins", "result": "7"}}}
    assert key_rows(keyed_object([settled]), result, TYPES) == [((3,), (3, decimal.Decimal("2"), "us"))]


def test_choices_and_settled_cells_are_read_from_the_keys_report():
    report = {"choices": [
        {"scope": "table", "choice": "source_wins"},  # a table's choice names no key
        {"key_id": "[1]", "choice": "columns", "cells": {"amount": {"rule": "least", "result": "1"}}},
        {"key_id": "[4]", "choice": "target_wins"},
    ]}  # fmt: skip
    assert key_choices(report) == ({"[1]": "columns", "[4]": "target_wins"}, {"[1]": {"amount": "1"}})


def test_a_loads_overwrite_discards_the_sources_changes_of_keys_a_restore_does_not():
    load = Op("c1", 0, "overwrite", {"partitions": [{"region": "eu"}]})
    restore = Op("c2", 0, "overwrite", {"restore": {"to": "c0"}})
    obj = table("changed_in_both", keyed=True, key_mode=True,
                target_operations=[load, restore, Op("c3", 0, "update", {})])  # fmt: skip
    assert discarding_overwrites(obj) == [load]
