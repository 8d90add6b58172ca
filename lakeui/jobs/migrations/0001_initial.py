# The Job model moved here from catalog_app by state only: its table (catalog_app_job), its indexes and the
# foreign keys to it stay as they are; catalog_app 0009 and merge_app 0005 point their fields here.

import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def content_type_move(apps, schema_editor):
    """Permissions and admin history of jobs follow the model to its new app."""
    content_types = apps.get_model("contenttypes", "ContentType")
    if not content_types.objects.filter(app_label="jobs", model="job").exists():
        content_types.objects.filter(app_label="catalog_app", model="job").update(app_label="jobs")


def content_type_back(apps, schema_editor):
    content_types = apps.get_model("contenttypes", "ContentType")
    if not content_types.objects.filter(app_label="catalog_app", model="job").exists():
        content_types.objects.filter(app_label="jobs", model="job").update(app_label="catalog_app")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("catalog_app", "0008_operation_resolve"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Job",
                    fields=[
                        ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ("kind", models.CharField(max_length=64)),
                        ("params", models.JSONField(default=dict)),
                        ("status", models.CharField(choices=[("queued", "Queued"), ("running", "Running"), ("succeeded", "Succeeded"), ("failed", "Failed"), ("cancelled", "Cancelled")], default="queued", max_length=16)),  # noqa: E501
                        ("progress", models.PositiveSmallIntegerField(default=0)),
                        ("progress_message", models.CharField(blank=True, max_length=255)),
                        ("result", models.JSONField(blank=True, null=True)),
                        ("error_code", models.CharField(blank=True, max_length=64)),
                        ("error_message", models.TextField(blank=True)),
                        ("error_status", models.PositiveSmallIntegerField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        ("heartbeat_at", models.DateTimeField(blank=True, null=True)),
                        ("worker", models.CharField(blank=True, max_length=255)),
                        ("attempts", models.PositiveIntegerField(default=0)),
                        ("cancel_requested", models.BooleanField(default=False)),
                        ("requested_by", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="jobs", to=settings.AUTH_USER_MODEL)),  # noqa: E501
                    ],
                    options={
                        "db_table": "catalog_app_job",
                        "ordering": ["-created_at"],
                        "indexes": [
                            models.Index(fields=["status", "created_at"], name="catalog_app_status_fadff4_idx"),
                            models.Index(fields=["kind", "created_at"], name="catalog_app_kind_1a93cd_idx"),
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(content_type_move, content_type_back),
    ]
