"""How the merge writes each object and the exact files of the tables whose files change, as the plan decides them
(`merge_app.plan.object_writes`, `table_plans`), on plain values: no database, no Spark. The writer reads the files
these name and applies what they return."""

import uuid
from dataclasses import dataclass

import pytest

from merge_app.plan import object_writes, table_plans
from merge_app.plan.files import file_plan, taken_plan
from merge_app.plan.objects import ObjectDiff, Version
from merge_app.plan.rules import SOURCE_WINS, TARGET_WINS, Op
from tests.merge_app.test_plan_files import F

pytestmark = []  # no database

PARENT, OTHER_PARENT = uuid.uuid4(), uuid.uuid4()


@dataclass
class Files:
    """A table's live files on one side, as `catalog_app.selectors.table_files.TableFiles` gives them."""

    files: list[F]

    def by_id(self) -> dict[str, F]:
        return {f.id: f for f in self.files}


def version(object_id, name, *, parent=PARENT, dropped=False, columns=("a",)) -> Version:
    state = {"columns": [{"id": i, "name": c} for i, c in enumerate(columns)], "properties": {}}
    return Version(1, uuid.uuid4(), object_id, "table", parent, name, 1, dropped, state)


def table(change="changed_in_source", *, ops=(), source=None, target=None, **fields) -> ObjectDiff:
    object_id = uuid.uuid4()
    base = version(object_id, "db.t")
    source = source or version(object_id, "db.t")
    target = target or version(object_id, "db.t")
    merged = {"columns": [{"id": 0, "name": "merged"}], "properties": {}}
    return ObjectDiff("table", object_id, "db.t", change, base, source, target, source_operations=list(ops),
                      merged_state=merged, **fields)  # fmt: skip


def append(*added) -> Op:
    return Op("c", 0, "insert", {"segments_added": list(added)})


def test_how_each_table_is_written_and_what_it_is_after():
    dropped = table(source=version(uuid.uuid4(), "db.t", dropped=True), target=version(uuid.uuid4(), "db.kept"))
    created = table("added_in_source", ops=[append("s1")], source=version(uuid.uuid4(), "db.new", parent=OTHER_PARENT))
    taken = table("changed_in_both", ops=[append("s2")], resolution=SOURCE_WINS)
    rows_taken = table(ops=[append("s3")], target_unchanged=True)
    by_key = table("changed_in_both", keyed=True, key_mode=True, data_changed={"source": True, "target": True})
    rows_kept = table("changed_in_both", keyed=True, data_changed={"source": False, "target": True})
    renamed = table(ops=[append("s4")], source=version(uuid.uuid4(), "db.renamed"))
    writes = object_writes([dropped, created, taken, rows_taken, by_key, rows_kept, renamed])
    gone, new = writes[dropped.object_id], writes[created.object_id]
    assert (gone.how, gone.name, gone.state, gone.reads) == ("dropped", "db.kept", dropped.target.state, False)
    assert (new.name, new.parent_id, new.state, new.reads) == ("db.new", OTHER_PARENT, created.source.state, True)
    hows = [writes[obj.object_id].how for obj in [created, taken, rows_taken, by_key, rows_kept, renamed]]
    assert hows == ["created", "taken_from_source", "rows_taken", "merged_by_key", "rows_kept", "replayed"]
    assert writes[renamed.object_id].name == "db.renamed" and writes[renamed.object_id].state == renamed.merged_state
    # Only a table replayed by file whose source operations only add files reads just those files.
    assert writes[created.object_id].named == {"s1"} and writes[renamed.object_id].named == {"s4"}
    assert writes[taken.object_id].named is None and writes[by_key.object_id].named is None
    assert [writes[obj.object_id].by_file for obj in [created, taken, rows_taken, renamed]] == [
        True,
        False,
        False,
        True,
    ]
    assert [writes[obj.object_id].taken for obj in [created, taken, rows_taken, rows_kept]] == [
        False,
        True,
        True,
        False,
    ]


def test_target_wins_and_objects_that_do_not_merge_are_not_written():
    kept = table("changed_in_both", resolution=TARGET_WINS)
    theirs = table("changed_in_target")
    written = table()
    assert list(object_writes([kept, theirs, written])) == [written.object_id]


def test_a_taken_table_drops_the_targets_files_the_source_lacks_and_takes_the_sources():
    source, target = {"s1": F("s1"), "s3": F("s3")}, {"s2": F("s2"), "s1": F("s1"), "d2": F("d2", "delta", "s2")}
    plan = taken_plan(source=source, target=target)
    assert ([f.id for f in plan.removed], plan.kept, [f.id for f in plan.added]) == (["d2", "s2"], [], ["s3"])


@pytest.mark.parametrize("target_files", [True, False])
def test_table_plans_decide_each_changed_tables_files_from_the_files_read(target_files):
    replayed = table(ops=[append("s2")])
    taken = table("changed_in_both", ops=[append("s2")], resolution=SOURCE_WINS)
    kept = table("changed_in_both", keyed=True, data_changed={"source": False, "target": True})
    objects = [replayed, taken, kept]
    on = {"base": [F("s1")], "source": [F("s1"), F("s2")], "target": [F("s1"), F("t1")] if target_files else []}
    files = {side: {obj.object_id: Files(list(fs)) for obj in objects if fs} for side, fs in on.items()}
    plans = table_plans(objects, object_writes(objects), files, {})
    assert set(plans) == {replayed.object_id, taken.object_id}
    by_id = {side: {f.id: f for f in fs} for side, fs in on.items()}
    assert plans[replayed.object_id] == file_plan(**by_id, operations=replayed.source_operations, discarded=[])
    assert plans[taken.object_id] == taken_plan(source=by_id["source"], target=by_id["target"])
    assert [f.id for f in plans[taken.object_id].removed] == (["t1"] if target_files else [])
