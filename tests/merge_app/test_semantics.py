"""The merge's own decisions (4.1 names, resolutions, the 4.4 row merge) as pure functions: no database."""

import pytest

from merge_app.plan import conflicts as names
from merge_app.plan import semantics, states
from merge_app.plan.rules import CONFLICT, FAIL, SOURCE_WINS, TARGET_WINS

BASE = {"id": 1, "a": "a0", "b": "b0"}


def row(**changes):
    return {**BASE, **changes}


# --- names (4.1) ---


def test_a_name_is_taken_only_by_another_object():
    taken = {("table", "db", "t"): "id-1"}
    assert names.taken_by_another(taken, ("table", "db", "t"), "id-2")
    assert not names.taken_by_another(taken, ("table", "db", "t"), "id-1")  # its own name
    assert not names.taken_by_another(taken, ("table", "db", "u"), "id-2")


def test_a_new_object_conflicts_on_a_taken_name_and_on_a_dropped_database():
    args = {"kind": "table", "name": "db.t", "parent_in_base": True}
    assert names.new_object_conflicts(taken_by_other=False, parent_on_target=True, **args) == []
    [named] = names.new_object_conflicts(taken_by_other=True, parent_on_target=True, **args)
    assert (named.verdict, named.note) == (CONFLICT, "4.1") and "db.t" in named.reason
    both = names.new_object_conflicts(taken_by_other=True, parent_on_target=False, **args)
    assert [c.reason for c in both][1] == "The target dropped the database this table is in."
    # a table in a database the source added too: no database to miss on the target yet
    assert names.new_object_conflicts(**{**args, "parent_in_base": False}, taken_by_other=False,
                                          parent_on_target=False) == []  # fmt: skip


def test_a_rename_conflicts_only_onto_a_name_another_object_holds():
    assert names.rename_conflict(base_name="t", source_name="t", taken_by_other=True) is None  # not renamed
    assert names.rename_conflict(base_name="t", source_name="u", taken_by_other=False) is None
    conflict = names.rename_conflict(base_name="t", source_name="u", taken_by_other=True)
    assert (conflict.verdict, conflict.note) == (CONFLICT, "name")


def test_a_dropped_database_conflicts_while_the_target_keeps_objects_in_it():
    assert names.emptied_database_conflict([]) is None
    assert "['a', 'b']" in names.emptied_database_conflict(["b", "a"]).reason


# --- resolutions ---


def test_the_table_choice_settles_any_pair_and_the_default_only_data_pairs():
    assert semantics.pair_choice("update", "update", table_choice=None, default=SOURCE_WINS) == SOURCE_WINS
    assert semantics.pair_choice("alter_column", "alter_column", table_choice=None, default=SOURCE_WINS) is None
    assert semantics.pair_choice("alter_column", "insert", table_choice=TARGET_WINS, default=FAIL) == TARGET_WINS
    assert semantics.pair_choice("update", "update", table_choice=None, default=FAIL) is None
    assert semantics.data_choice(table_choice=None, default=FAIL) is None
    assert semantics.data_choice(table_choice=SOURCE_WINS, default=FAIL) == SOURCE_WINS


def test_a_table_is_resolved_only_when_every_conflict_is_settled():
    assert semantics.table_resolution([], table_choice=None, default=SOURCE_WINS) is None  # nothing to settle
    assert semantics.table_resolution([SOURCE_WINS, None], table_choice=None, default=SOURCE_WINS) is None
    assert semantics.table_resolution([TARGET_WINS], table_choice=TARGET_WINS, default=SOURCE_WINS) == TARGET_WINS


def test_the_choices_of_a_resolution():
    resolution = {"default": SOURCE_WINS, "tables": {"db.t": TARGET_WINS}}
    assert semantics.choices_of(resolution, "db.t") == {"table_choice": TARGET_WINS, "default": SOURCE_WINS}
    assert semantics.choices_of({}, "db.u") == {"table_choice": None, "default": FAIL}


def conflicts(*key_ids):
    return [{"key": {"id": key_id}, "key_id": f"[{key_id}]"} for key_id in key_ids]


def test_a_keys_own_fail_stands_whatever_the_table_or_the_default_chose():
    chosen = semantics.key_choices(conflicts(1, 2, 3), table="db.t", per_key={"[1]": FAIL, "[2]": TARGET_WINS},
                                   table_choice=SOURCE_WINS, default=FAIL)  # fmt: skip
    assert [(c["key_id"], c["choice"], c["scope"]) for c in chosen] == [
        ("[2]", TARGET_WINS, "key"), ("[3]", SOURCE_WINS, "table")
    ]  # fmt: skip
    chosen = semantics.key_choices(conflicts(1), table="db.t", per_key={}, table_choice=None, default=SOURCE_WINS)
    assert [(c["choice"], c["scope"], c["object"]) for c in chosen] == [(SOURCE_WINS, "default", "db.t")]


def test_keys_past_the_listed_ones_take_the_table_choice_or_the_default():
    args = {"listed": 3, "settled": 2, "total": 10}
    assert semantics.keys_unresolved(**args, table_choice=None, default=FAIL) == 1 + 7
    assert semantics.keys_unresolved(**args, table_choice=SOURCE_WINS, default=FAIL) == 1
    assert semantics.keys_unresolved(**args, table_choice=None, default=TARGET_WINS) == 1


# --- the row merge of one key (4.4) ---

VALUES = ["a", "b"]


@pytest.mark.parametrize(
    ("src", "dest", "mine", "theirs", "expected"),
    [
        ("delete", "delete", None, None, ([], {})),
        ("delete", "update", None, row(a="x"), (["*"], None)),
        ("update", "delete", row(a="x"), None, (["*"], None)),
        ("update", "update", row(a="x"), row(b="y"), ([], row(a="x", b="y"))),  # cell by cell
        ("update", "update", row(a="x"), row(a="x"), ([], row(a="x"))),  # the same change
        ("update", "update", row(a="x"), row(a="z"), (["a"], None)),
        ("update", "update", row(a="x", b="y"), row(a="z", b="w"), (["a", "b"], None)),
        ("insert", "insert", row(a="x"), row(a="x"), ([], row(a="x"))),
        ("insert", "insert", row(a="x"), row(a="z", b="w"), (["a", "b"], None)),
    ],
)
def test_the_row_merge_of_a_key_both_sides_changed(src, dest, mine, theirs, expected):
    base = None if src == dest == "insert" else BASE
    assert semantics.row_merge(src, dest, base, mine, theirs, VALUES) == expected


def test_row_granularity_makes_different_changes_of_one_row_conflict_on_the_cells_both_changed():
    assert semantics.row_merge("update", "update", BASE, row(a="x"), row(b="y"), VALUES, row_granularity=True) == (
        ["*"], None  # no cell changed by both: the row as a whole
    )  # fmt: skip
    both = semantics.row_merge("update", "update", BASE, row(a="x", b="y"), row(a="x"), VALUES, row_granularity=True)
    assert both == (["a"], None)
    same = semantics.row_merge("update", "update", BASE, row(a="x"), row(a="x"), VALUES, row_granularity=True)
    assert same == ([], row(a="x"))  # the same change merges at any granularity


def test_the_change_names_are_the_engines():
    from catalog_app.engine import keys

    assert (semantics.INSERT, semantics.UPDATE, semantics.DELETE) == (keys.INSERT, keys.UPDATE, keys.DELETE)


def test_a_side_made_a_column_not_null_only_where_the_base_allowed_null_in_it():
    def table(*nullable):
        return {"columns": [{"id": i, "name": f"c{i}", "nullable": n} for i, n in enumerate(nullable, 1)]}

    base = table(True, False)
    assert states.made_not_null(base, [table(False, False), base])
    assert not states.made_not_null(base, [base, base])
    assert not states.made_not_null(base, [table(True, True)])  # made nullable: no NOT NULL check reads statistics
    assert not states.made_not_null(base, [{"columns": []}])  # both columns dropped


def test_a_definition_neither_side_changed_merges_to_itself_as_a_copy():
    """The short way (all three states equal) gives what the column-by-column merge gives for one side's change
    undone, and a copy: the merged state is written, never the diff's decoded states."""
    column = {"id": 1, "name": "id", "type": "long", "nullable": False, "default": None}
    state = {"columns": [column], "properties": {"k": "v"}, "last_column_id": 1, "partition_by": [1]}
    renamed = {**state, "columns": [{**column, "name": "key"}]}
    merged = states.table_state_merge(state, dict(state), dict(state))
    assert merged == states.table_state_merge(renamed, state, renamed)  # the source renamed it back: the same
    assert merged == {**state, "primary_key": None, "comment": None}
    merged["columns"][0]["name"] = "changed"
    merged["properties"]["k"] = "changed"
    assert state["columns"][0]["name"] == "id" and state["properties"] == {"k": "v"}
