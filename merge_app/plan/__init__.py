"""The merge plan, a function of plain values (docs/architecture.md#the-path-of-a-merge): no ORM, no
Spark. `merge_app/selectors/diff.py` reads the three sides (each table's files, each side's operations since the
base, a keyed table's key comparison) into a `PlanInputs`; `objects.plan_objects` decides every object (rule cells,
verdicts, conflicts, discarded operations, the merged state) by `rules`, `semantics` and `states`;
`files.object_file_plan` decides the exact files of a table replayed by file. The writer applies both and the audit
log reports both."""
