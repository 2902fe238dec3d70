"""AuditRecord moves from the console app to core, table and rows kept.

The table (``console_auditrecord``) was created by ``console.0001_audit_record`` and stays where it
is, so this migration only takes the model into core's state (``console.0005`` drops it from the
console's). The content type and its permissions follow the model, so a permission granted on the
console's audit records is held on core's."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def move_content_type(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    if content_type.objects.filter(app_label="core", model="auditrecord").exists():
        return
    content_type.objects.filter(app_label="console", model="auditrecord").update(app_label="core")


def move_content_type_back(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    if content_type.objects.filter(app_label="console", model="auditrecord").exists():
        return
    content_type.objects.filter(app_label="core", model="auditrecord").update(app_label="console")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("console", "0004_replay_job_heartbeat"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AuditRecord",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
                        ("username", models.CharField(max_length=150)),
                        ("action", models.CharField(db_index=True, max_length=64)),
                        ("target", models.CharField(blank=True, max_length=512)),
                        ("parameters", models.JSONField(blank=True, default=dict)),
                        ("result", models.CharField(max_length=16)),
                        ("detail", models.TextField(blank=True)),
                        ("remote_addr", models.GenericIPAddressField(blank=True, null=True)),
                        (
                            "user",
                            models.ForeignKey(
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "ordering": ["-created_at", "-id"],
                        "db_table": "console_auditrecord",
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_type, move_content_type_back),
    ]
