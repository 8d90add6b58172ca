# The Job model moved to the jobs app (lakeui/jobs) by state only: no table or constraint changes.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("catalog_app", "0008_operation_resolve"),
        ("jobs", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="commit",
                    name="job",
                    field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="commit", to="jobs.job"),  # noqa: E501
                ),
                migrations.DeleteModel(name="Job"),
            ],
        ),
    ]
