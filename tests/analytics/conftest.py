"""Analytics tests: Django configured on a throw-away var dir (its SQLite test database is a file,
see ``console.settings``, so the Celery worker processes the tests start can share it)."""

import os
import tempfile

import django
import django.apps

# Before Django reads its settings: a private var dir (secret key, Celery queue, reports).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("CONSOLE_VAR_DIR", tempfile.mkdtemp(prefix="analytics-var-"))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
if not django.apps.apps.ready:  # when the run did not configure Django before collecting us
    django.setup()
