"""The audit log's move from the console app to core keeps existing databases: one migrated at the
old head (console 0004, before core existed) migrates forward with its rows and permissions, a
fresh database migrates to the same schema, and the rollback the README describes gives the
records back to the console app. Each case runs in a process of its own against a SQLite
file (``DATABASE_URL``), as ``manage.py migrate`` would on an operator's installation."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The project's leaf migrations at the commit before core existed (with what they depend on: auth,
# contenttypes).
OLD_HEAD = [
    ("console", "0004_replay_job_heartbeat"),
    ("analytics", "0002_run_heartbeat"),
    ("history", "0002_rollup_value_increase"),
    ("alerts", "0005_resolved_value_may_be_none"),
]

UPGRADE = """
import json, sys
import django
django.setup()
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

old_head = [tuple(t) for t in json.loads(sys.argv[1])]
executor = MigrationExecutor(connection)
executor.migrate(old_head)
old = MigrationExecutor(connection).loader.project_state(old_head).apps
user = old.get_model("auth", "User").objects.create(username="ops")
record = old.get_model("console", "AuditRecord").objects.create(
    user_id=user.pk, username="ops", action="topic.delete", target="Orders",
    parameters={"why": "kept"}, result="ok",
)
content_type_model = old.get_model("contenttypes", "ContentType")
content_type = content_type_model.objects.create(app_label="console", model="auditrecord")
permission = old.get_model("auth", "Permission").objects.create(
    content_type=content_type, codename="view_auditrecord", name="Can view audit record"
)
user_model = old.get_model("auth", "User")
user_model.user_permissions.through.objects.create(user_id=user.pk, permission_id=permission.pk)

executor = MigrationExecutor(connection)
executor.migrate(executor.loader.graph.leaf_nodes())

from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from core.models import AuditRecord

kept = AuditRecord.objects.get(pk=record.pk)
print(json.dumps({
    "row": [kept.username, kept.action, kept.target, kept.parameters, kept.result, kept.user.username],
    "content_type": list(ContentType.objects.filter(model="auditrecord").values_list("app_label", flat=True)),
    "may_view": User.objects.get(pk=user.pk).has_perm("core.view_auditrecord"),
    "unapplied": len(MigrationExecutor(connection).migration_plan(executor.loader.graph.leaf_nodes())),
}))
"""

FRESH = """
import json
import re
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from core.models import AuditRecord
from django.db import connection
record = AuditRecord.objects.create(username="ops", action="topic.save", result="ok")
print(json.dumps({
    "row": AuditRecord.objects.filter(pk=record.pk).values_list("username", "action").get(),
    "table": AuditRecord._meta.db_table,
    "tables": sorted(t for t in connection.introspection.table_names() if "auditrecord" in t),
}))
"""


def _run(script: str, tmp_path: Path, *args: str) -> dict:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'console.sqlite3'}",
        "CONSOLE_VAR_DIR": str(tmp_path),
        "PYTHONPATH": str(ROOT),
    }
    env.pop("REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_database_at_the_old_head_keeps_its_audit_records_and_permissions(tmp_path):
    upgraded = _run(UPGRADE, tmp_path, json.dumps(OLD_HEAD))
    assert upgraded["row"] == ["ops", "topic.delete", "Orders", {"why": "kept"}, "ok", "ops"]
    # The content type moved with the model, so a permission granted on it is still held.
    assert upgraded["content_type"] == ["core"]
    assert upgraded["may_view"] is True
    assert upgraded["unapplied"] == 0


def test_a_fresh_database_migrates_to_the_same_table(tmp_path):
    fresh = _run(FRESH, tmp_path)
    assert fresh["row"] == ["ops", "topic.save"]
    assert fresh["table"] == "console_auditrecord"
    assert fresh["tables"] == ["console_auditrecord"]


ROLLBACK = """
import json, sys
import django
django.setup()
from django.core.management import call_command
from django.db import connection

call_command("migrate", verbosity=0)
from core.models import AuditRecord
AuditRecord.objects.create(username="ops", action="topic.save", result="ok")
for step in json.loads(sys.argv[1]):
    call_command("migrate", *step, verbosity=0)
with connection.cursor() as cursor:
    cursor.execute("select app_label from django_content_type where model = 'auditrecord'")
    content_type = [row[0] for row in cursor.fetchall()]
    cursor.execute("select username from console_auditrecord")
    rows = [row[0] for row in cursor.fetchall()]
    cursor.execute("select app, name from django_migrations where app in ('core', 'console')")
    applied = sorted(f"{app} {name[:4]}" for app, name in cursor.fetchall())
print(json.dumps({"content_type": content_type, "rows": rows, "applied": applied}))
"""


def _readme_rollback_steps() -> list[list[str]]:
    """The ``manage.py migrate`` commands of the README's paragraph on rolling back, in its order."""
    readme = (ROOT / "README.md").read_text()
    paragraph = readme.split("**Upgrading and rolling back.**", 1)[1].split("\n\n", 1)[0]
    return [s.split() for s in re.findall(r"`manage\.py migrate ([a-z]+ [a-z0-9]+)`", paragraph)]


def test_the_rollback_the_readme_describes_gives_the_audit_log_back_to_the_console(tmp_path):
    steps = _readme_rollback_steps()
    assert steps == [["core", "zero"], ["console", "0004"]]
    rolled_back = _run(ROLLBACK, tmp_path, json.dumps(steps))
    assert rolled_back["content_type"] == ["console"]  # where the older release looks
    assert rolled_back["rows"] == ["ops"]  # the table and its rows stay
    assert [m for m in rolled_back["applied"] if m.startswith("core") or m.endswith("0005")] == []
