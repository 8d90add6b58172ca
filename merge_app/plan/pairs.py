"""The merge plan's third stage (docs/architecture.md#the-path-of-a-merge): the verdict of every pair of a source and
a target operation of each object both sides changed, by the rule tables (`rules`), with the cell that decided it.
A primary-key table merged by key has its data pairs pending (4.4) until its key comparison is known
(`resolutions.keys_settle`). Plain values in and out.
"""

import uuid
from collections.abc import Mapping

import merge_app.plan.lineage as lineage
import merge_app.plan.rules as rules
from merge_app.plan.objects import MERGED_KINDS, ROW_CHANGES, TABLE, WRITES_DATA, ObjectDiff, Pair
from merge_app.plan.rules import Facts


def pairs_decide(objects: list[ObjectDiff], live_files: Mapping[uuid.UUID, Mapping[str, Mapping]]) -> None:
    """Every pair's verdict (`ObjectDiff.pairs`) of each object both sides changed. `live_files`: of each table the
    source rewrote by position or overwrote, the target's live files (as `PlanInputs.live_files` holds them); a table
    merged by key is judged without them."""
    for obj in objects:
        if obj.kind not in MERGED_KINDS or obj.change != "changed_in_both":
            continue
        target_files = {} if obj.key_mode else live_files.get(obj.object_id, {}).get("target", {})
        table = rules.RULE_TABLES[obj.kind]
        facts = Facts(key_mode=obj.key_mode, keyed=obj.keyed, reverting=obj.reverting)
        facts.dest_live = frozenset(fid for fid, segment in target_files.items() if segment is None)
        if obj.kind == TABLE and obj.target is not None:
            facts.dest_columns = {column["id"]: column for column in obj.target.state["columns"]}
            facts.src_wrote_data = any(
                op.op in WRITES_DATA and op.details.get("segments_added") for op in obj.source_operations
            )
            facts.src_changed_rows = any(op.op in ROW_CHANGES for op in obj.source_operations)
            facts.src_origins = lineage.segment_origins(obj.source_operations)
            facts.src_restored = frozenset(lineage.restored_results(obj.source_operations))
            facts.schema_settled = obj.schema
        for i, src_op in enumerate(obj.source_operations):
            for j, dest_op in enumerate(obj.target_operations):
                cell, decided = rules.verdict(table, src_op, dest_op, facts)
                obj.pairs.append(Pair(i, j, cell, decided))
