"""Each key of the rows every commit writes (object versions, file entries, operations) is indexed once: the
single-column indexes that a composite index starts with, and the LIKE copies of the commit's text key, go. The
database keeps its constraints and the commit index it has (renamed), so that nothing is rebuilt or checked again.
"""

import django.db.models.deletion
from django.db import migrations, models


# The indexes that go (name, table, column, whether it is a LIKE copy): the foreign keys' own, whose column a
# composite index starts with, and PostgreSQL's LIKE copies of the commit key (absent on SQLite).
DROPPED = [
    ("catalog_app_fileentry_file_id_f6e08c91", "catalog_app_fileentry", "file_id", False),
    ("catalog_app_fileentry_commit_id_1b35f23d_like", "catalog_app_fileentry", "commit_id", True),
    ("catalog_app_objectversion_catalog_id_40a072f0", "catalog_app_objectversion", "catalog_id", False),
    ("catalog_app_objectversion_line_id_a7cf3059", "catalog_app_objectversion", "line_id", False),
    ("catalog_app_objectversion_commit_id_618127a7_like", "catalog_app_objectversion", "commit_id", True),
    ("catalog_app_operation_commit_id_80b4c26f_like", "catalog_app_operation", "commit_id", True),
]
# The commit indexes the foreign keys made, now named in Meta.indexes.
RENAMED = [
    ("fileentry", "catalog_app_fileentry_commit_id_1b35f23d", "catalog_fe_commit_idx"),
    ("objectversion", "catalog_app_objectversion_commit_id_618127a7", "catalog_ov_commit_idx"),
    ("operation", "catalog_app_operation_commit_id_80b4c26f", "catalog_op_commit_idx"),
]


def lean(apps, schema_editor):
    for name, *_ in DROPPED:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')
    for model, old, new in RENAMED:
        _rename(apps, schema_editor, model, old, new)


def unlean(apps, schema_editor):
    """Back to 0013's indexes."""
    for model, old, new in RENAMED:
        _rename(apps, schema_editor, model, new, old)
    for name, table, column, like in DROPPED:
        schema_editor.execute(
            f'CREATE INDEX "{name}" ON "{table}" ("{column}"{" varchar_pattern_ops" if like else ""})'
        )


def _rename(apps, schema_editor, model: str, old: str, new: str) -> None:
    model = apps.get_model("catalog_app", model)
    schema_editor.rename_index(
        model, models.Index(fields=["commit"], name=old), models.Index(fields=["commit"], name=new)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("catalog_app", "0013_retention"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(lean, unlean)],
            state_operations=[
                migrations.AlterField(
                    model_name="fileentry",
                    name="commit",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="file_entries",
                        to="catalog_app.commit",
                    ),
                ),
                migrations.AlterField(
                    model_name="fileentry",
                    name="file",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="entries",
                        to="catalog_app.datafile",
                    ),
                ),
                migrations.AlterField(
                    model_name="objectversion",
                    name="catalog",
                    field=models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="catalog_app.catalog",
                    ),
                ),
                migrations.AlterField(
                    model_name="objectversion",
                    name="commit",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="object_versions",
                        to="catalog_app.commit",
                    ),
                ),
                migrations.AlterField(
                    model_name="objectversion",
                    name="line",
                    field=models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="catalog_app.line",
                    ),
                ),
                migrations.AlterField(
                    model_name="operation",
                    name="commit",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="operations",
                        to="catalog_app.commit",
                    ),
                ),
                migrations.AddIndex(
                    model_name="fileentry",
                    index=models.Index(fields=["commit"], name="catalog_fe_commit_idx"),
                ),
                migrations.AddIndex(
                    model_name="objectversion",
                    index=models.Index(fields=["commit"], name="catalog_ov_commit_idx"),
                ),
                migrations.AddIndex(
                    model_name="operation",
                    index=models.Index(fields=["commit"], name="catalog_op_commit_idx"),
                ),
            ],
        ),
    ]
