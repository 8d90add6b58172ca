"""Each key of the rows every commit writes (object versions, file entries, operations) is indexed once: the
single-column indexes that a composite index starts with, and the LIKE copies of the commit's text key, go. The
database keeps its constraints and the commit index it has (renamed), so that nothing is rebuilt or checked again.
"""

import django.db.models.deletion
from django.db import migrations, models


# The indexes that go: the foreign keys' own, whose column a composite index starts with, and PostgreSQL's LIKE
# copies of the commit key (absent on SQLite).
DROPPED = [
    "catalog_app_fileentry_file_id_f6e08c91",
    "catalog_app_fileentry_commit_id_1b35f23d_like",
    "catalog_app_objectversion_catalog_id_40a072f0",
    "catalog_app_objectversion_line_id_a7cf3059",
    "catalog_app_objectversion_commit_id_618127a7_like",
    "catalog_app_operation_commit_id_80b4c26f_like",
]
# The commit indexes the foreign keys made, now named in Meta.indexes.
RENAMED = [
    ("fileentry", "catalog_app_fileentry_commit_id_1b35f23d", "catalog_fe_commit_idx"),
    ("objectversion", "catalog_app_objectversion_commit_id_618127a7", "catalog_ov_commit_idx"),
    ("operation", "catalog_app_operation_commit_id_80b4c26f", "catalog_op_commit_idx"),
]


def lean(apps, schema_editor):
    for name in DROPPED:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')
    for model, old, new in RENAMED:
        index = models.Index(fields=["commit"], name=new)
        schema_editor.rename_index(
            apps.get_model("catalog_app", model), models.Index(fields=["commit"], name=old), index
        )


class Migration(migrations.Migration):
    dependencies = [
        ("catalog_app", "0013_retention"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(lean, migrations.RunPython.noop)],
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
