"""AuditRecord now belongs to core (``core.0001_audit_record_from_console``): the console's state
forgets the model, and its table, rows and indexes stay for core's model."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0004_replay_job_heartbeat"),
        ("core", "0001_audit_record_from_console"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="AuditRecord")],
            database_operations=[],
        ),
    ]
