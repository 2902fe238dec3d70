"""Analytics tests: Django configured on a throw-away var dir (its SQLite test database is a file,
see ``project.settings``, so the Celery worker processes the tests start can share it)."""

import atexit
import os
import shutil
import tempfile

import django
import django.apps
import pytest

# Before Django reads its settings: a private var dir (secret key, Celery queue, reports).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
_OWN_VAR_DIR = None if "CONSOLE_VAR_DIR" in os.environ else tempfile.mkdtemp(prefix="analytics-var-")
if _OWN_VAR_DIR:
    os.environ["CONSOLE_VAR_DIR"] = _OWN_VAR_DIR
    # At exit, after pytest-django has dropped the test database kept in it.
    atexit.register(shutil.rmtree, _OWN_VAR_DIR, ignore_errors=True)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
if not django.apps.apps.ready:  # when the run did not configure Django before collecting us
    django.setup()


@pytest.fixture(scope="module")
def spark():
    """A local Spark session for a module's report runs (start-up costs seconds)."""
    from analytics.spark.session import spark_session

    session = spark_session("local[2]", shuffle_partitions=2)
    yield session
    session.stop()  # before interpreter exit, so py4j does not log into closed streams
