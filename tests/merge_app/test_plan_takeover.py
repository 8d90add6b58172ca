"""What the writer is told to do with a table's files beyond dropping and keeping them, as the plan decides it
(`merge_app.plan.files`), on plain values: no database, no Spark. Which of the target's own segments mix a replayed
partition overwrite's partitions with others (`FilePlan.mixed`: the writer reads only those, and writes delete files
for their rows of those partitions), and the schema version each file taken over reads with on the target, with the
source's versions the audit log lists as kept invisible or discarded (`schema_takeover`): the writer makes the copies
it names, and nothing else."""

import uuid
from dataclasses import dataclass

import pytest

from catalog_app.selectors.table_files import TableFiles
from merge_app import plan
from merge_app.plan import object_writes, schema_takeovers, table_plans
from merge_app.plan.files import FilePlan, PutBack, file_plan, mixed_segments, schema_takeover
from tests.merge_app.test_plan_files import F, files, op
from tests.merge_app.test_plan_writes import Files, table

pytestmark = []  # no database

EU, EU_X = [{"2": "eu"}], [{"2": "eu", "3": "x"}]


def overwrite(target, overwrites, *, base=("s1:us",), source=("s1:us", "s5:eu")):
    """A source overwrite of region eu (adding s5) replayed onto `target`; `overwrites` as the writer reads them."""
    return file_plan(base=files(*base), source=files(*source), target=target,
                     operations=[op("overwrite", added=["s5"])], discarded=[], overwrites=overwrites)  # fmt: skip


def test_the_targets_own_kept_segments_without_a_partition_value_are_mixed():
    """t1 was written before the table was partitioned (no region): it keeps its us rows, its eu rows get delete
    files. t2 and t3 are written per region (t3, of eu, is dropped whole); s1 is the source's too, not the target's
    own; a delete file is never a segment that mixes."""
    plan = overwrite(files("s1:us", "t1", "d1@t1", "t2:us", "t3:eu"), [EU])
    assert [str(f.id) for f in plan.removed] == ["t3"]
    assert plan.mixed == ["t1"]
    assert plan.partitions == EU


def test_a_segment_partitioned_by_other_columns_mixes_and_each_column_counts():
    by_day, by_region = F("t4", partition_values={"3": "x"}), F("t5", partition_values={"2": "us"})
    target = {**files("s1:us"), "t4": by_day, "t5": by_region}
    assert overwrite(target, [EU]).mixed == ["t4"]
    assert overwrite(target, [EU_X]).mixed == ["t4", "t5"]  # t5 has no value of column 3


@pytest.mark.parametrize("overwrites", [[None], []], ids=["whole table", "no overwrite"])
def test_without_overwritten_partitions_nothing_is_mixed(overwrites):
    plan = overwrite(files("s1:us", "t1"), overwrites)
    assert (plan.partitions, plan.mixed) == ([], [])


def test_mixed_are_the_kept_segments_the_catalog_calls_unsplit():
    """What the writer asked of the target's files itself (`TableFiles.unsplit` of the partitions' columns, among
    the kept files), now the plan's, on the same files."""
    target = {**files("t1", "t2:us", "t3:eu", "d1@t1"), "t4": F("t4", partition_values={"3": "x"})}
    segments = [f for f in target.values() if f.kind == "segment"]
    for partitions in (EU, EU_X, [{"3": "x"}, {"2": "eu"}]):
        columns = {column for partition in partitions for column in partition}
        kept = [f for f in target.values() if f.id != "t3"]
        unsplit = {s.id for s in TableFiles(segments=segments, deltas={}).unsplit(columns)}
        assert mixed_segments(kept, partitions) == [f.id for f in kept if f.id in unsplit]


def test_table_plans_name_the_mixed_segments_of_each_replayed_table():
    obj = table(ops=[op("overwrite", added=["s5"])])
    sides = {"base": files("s1:us"), "source": files("s1:us", "s5:eu"), "target": files("s1:us", "t1", "t3:eu")}
    read = {side: {obj.object_id: Files(list(found.values()))} for side, found in sides.items()}
    plans = table_plans([obj], object_writes([obj]), read, {obj.object_id: [EU]})
    assert (plans[obj.object_id].mixed, plans[obj.object_id].partitions) == (["t1"], EU)


@dataclass(frozen=True)
class V:
    """A schema version as `catalog_app.selectors.objects.SchemaRow` gives it."""

    id: int
    visible: bool = True
    commit_id: str = "c1"


@dataclass(frozen=True)
class TF(F):
    """A file read with the schema version it reads with (`FileRow`)."""

    schema_version: V | None = None


def told(takeover) -> list[tuple]:
    return [(t.file.id, t.version.id if t.version else None, t.visible, t.copy) for t in takeover.files]


def test_a_segment_reads_with_its_own_version_where_the_targets_history_has_it():
    """Its visibility on the target is the version's: an invisible copy an earlier merge made stays invisible."""
    shared, copied_before = V(1), V(2, visible=False)
    taken = [TF("s1", schema_version=shared), TF("s2", schema_version=copied_before)]
    takeover = schema_takeover(taken, history={1, 2}, made=[], commits={"c1"})
    assert told(takeover) == [("s1", 1, True, False), ("s2", 2, False, False)]
    assert (takeover.copies, takeover.invisible, takeover.discarded) == ([], [], [])


def test_a_version_the_target_lacks_is_copied_once_invisible_and_a_delete_file_names_none():
    new, newer = V(7), V(8)
    taken = [TF("s1", schema_version=new), TF("d1", "delta", "s1"), TF("s2", schema_version=newer),
             TF("s3", schema_version=new)]  # fmt: skip
    takeover = schema_takeover(taken, history={1}, made=[], commits=set())
    assert told(takeover) == [("s1", 7, False, True), ("d1", None, None, False), ("s2", 8, False, True),
                              ("s3", 7, False, True)]  # fmt: skip
    assert takeover.copies == [new, newer]  # in the order the files first use them


def test_the_sources_visible_versions_are_kept_invisible_if_copied_else_discarded():
    """Seed 001: the source added two columns, one commit each, and wrote rows only with the second; an invisible
    version of the source, or one a commit outside the merge made, is not listed."""
    intermediate, with_data = V(5, commit_id="c1"), V(6, commit_id="c2")
    hidden, older = V(4, visible=False, commit_id="c1"), V(3, commit_id="c0")
    made = [older, hidden, intermediate, with_data]
    takeover = schema_takeover([TF("s9", schema_version=with_data)], history={1, 3}, made=made, commits={"c1", "c2"})
    assert (takeover.invisible, takeover.discarded) == ([with_data], [intermediate])
    assert schema_takeover([], history={1}, made=made, commits={"c1", "c2"}).discarded == [intermediate, with_data]


def test_each_table_takes_over_its_plans_files_with_the_segments_a_revert_puts_back():
    """`FilePlan.taken_over`: the source's files it takes, then each segment put back with an earlier revert's delete
    files for it (a segment whose rows the writer reads has none yet); a table without a history on the target
    copies every version its segments use."""
    version = V(7)
    added, segment, mask, other = (TF("s5", schema_version=version), TF("s6", schema_version=version),
                                   TF("m1", "delta", "s6"), TF("s7", schema_version=V(1)))  # fmt: skip
    put_back = [PutBack(segment, masks=[mask]), PutBack(other)]
    found = FilePlan(removed=[], kept=[], added=[added], partitions=[], put_back=put_back)
    assert found.taken_over == [added, segment, mask, other]
    first, second = uuid.uuid4(), uuid.uuid4()
    plans = {first: found, second: FilePlan(removed=[], kept=[], added=[added], partitions=[])}
    takeovers = schema_takeovers(plans, {first: {1}}, {first: [version]}, {"c1"})
    assert told(takeovers[first]) == [("s5", 7, False, True), ("s6", 7, False, True), ("m1", None, None, False),
                                      ("s7", 1, True, False)]  # fmt: skip
    assert (takeovers[first].copies, takeovers[first].invisible) == ([version], [version])
    assert (told(takeovers[second]), takeovers[second].invisible) == ([("s5", 7, False, True)], [])


def test_the_plan_on_the_files_read_is_one_call_the_writer_makes():
    """The writer reads the partitions of the overwrites the table's write names (`Write.overwrites`), then asks the
    plan once (`Plan.on_files`): the file plan and how the files it takes over read."""
    obj = table(ops=[op("overwrite", added=["s5"])])
    version = V(7)
    source = {**files("s1:us"), "s5": TF("s5", partition_values={"2": "eu"}, schema_version=version)}
    sides = {"base": files("s1:us"), "source": source, "target": files("s1:us", "t1", "t3:eu")}
    read = {side: {obj.object_id: Files(list(found.values()))} for side, found in sides.items()}
    planned = plan.Plan([obj])
    assert planned.writes[obj.object_id].overwrites == tuple(obj.source_operations)
    facts = plan.FileFacts(files=read, overwrites={obj.object_id: [EU]}, history={obj.object_id: {7}}, made={},
                           commits=set(), key_results={})  # fmt: skip
    work = planned.on_files(facts)
    assert (work.files[obj.object_id].mixed, [str(f.id) for f in work.files[obj.object_id].removed]) == (["t1"], ["t3"])
    assert told(work.takeovers[obj.object_id]) == [("s5", 7, True, False)] and work.key_rows == {}
