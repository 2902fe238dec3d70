"""Analytics tests: Django configured on a throw-away var dir, a file database a Celery worker
process can share, and helpers for writing an archived workload."""

import os
import tempfile

import django
import django.apps
import pytest

# Before Django reads its settings: a private var dir (secret key, Celery queue, reports).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("CONSOLE_VAR_DIR", tempfile.mkdtemp(prefix="analytics-var-"))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
if not django.apps.apps.ready:  # when the run did not configure Django before collecting us
    django.setup()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """SQLite test databases default to memory; a worker process needs a file it can open."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        folder = tempfile.mkdtemp(prefix="analytics-db-")
        database.setdefault("TEST", {})["NAME"] = os.path.join(folder, "test.sqlite3")
