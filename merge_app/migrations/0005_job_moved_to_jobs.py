# The Job model moved to the jobs app (lakeui/jobs) by state only: these fields point there before catalog_app
# drops the model from its state; no table or constraint changes.

import django.db.models.deletion
from django.db import migrations, models


def _job(related_name: str = "+"):
    return models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                             related_name=related_name, to="jobs.job")  # fmt: skip


class Migration(migrations.Migration):
    dependencies = [
        ("merge_app", "0004_merge_requests"),
        ("jobs", "0001_initial"),
    ]
    run_before = [("catalog_app", "0009_job_moved_to_jobs")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(model_name="merge", name="job", field=_job()),
                migrations.AlterField(model_name="restore", name="job", field=_job()),
                migrations.AlterField(model_name="mergerequest", name="plan_job", field=_job()),
                migrations.AlterField(model_name="mergerequest", name="merge_job", field=_job()),
            ],
        ),
    ]
