"""Marks each revert's undo recorded before undos carried `rewrote` (merge_app.plan.undo): whether the commit it
reverted rewrote rows of the table (a delete, an update, a compaction). Without the mark a merge reads the segments
the undo of an overwrite puts back as rewrites of the files it takes out, and against a target overwrite it can
discard them with rows of their own (docs/merge-semantics.md, unkeyed model seed 248). An undo whose reverted
commit's operations are gone (expired) keeps the old reading."""

from django.db import migrations

# merge_app.plan.rules.REWRITES as the undo reads it, kept here: a migration does not follow later code
REWRITES = ("delete", "update", "compaction")
BATCH = 1_000


def undo_marks(apps, schema_editor) -> None:
    """Set `rewrote` on every undo without it (and on the copies merges and cherry-picks recorded of it, which carry
    its `reverts`), from the operations of the commit it reverted on the same table."""
    Operation = apps.get_model("catalog_app", "Operation")
    unmarked = list(Operation.objects.filter(details__has_key="reverts").exclude(details__has_key="rewrote"))
    reverted = {op.details["reverts"][0] for op in unmarked}
    kinds: dict[tuple[str, str], set[str]] = {}
    for commit_id, object_id, kind in Operation.objects.filter(commit_id__in=reverted).values_list(
        "commit_id", "object_id", "op"
    ):
        kinds.setdefault((commit_id, str(object_id)), set()).add(kind)
    marked = []
    for op in unmarked:
        done = kinds.get((op.details["reverts"][0], str(op.object_id)))
        if done is not None:
            op.details = {**op.details, "rewrote": bool(done & set(REWRITES))}
            marked.append(op)
    Operation.objects.bulk_update(marked, ["details"], batch_size=BATCH)


class Migration(migrations.Migration):
    dependencies = [
        ("catalog_app", "0016_subscriptions"),
    ]

    operations = [migrations.RunPython(undo_marks, migrations.RunPython.noop)]
