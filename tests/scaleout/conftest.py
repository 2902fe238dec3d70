"""Scale-out tests: Django configured on a throw-away var dir when the run has not configured it
already (the tests that need PostgreSQL or Redis start their own processes on them and reach the
database they made through a connection alias of their own, see ``celery_workers``)."""

import atexit
import os
import shutil
import tempfile

import django
import django.apps

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
_OWN_VAR_DIR = None if "CONSOLE_VAR_DIR" in os.environ else tempfile.mkdtemp(prefix="scaleout-var-")
if _OWN_VAR_DIR:
    os.environ["CONSOLE_VAR_DIR"] = _OWN_VAR_DIR
    atexit.register(shutil.rmtree, _OWN_VAR_DIR, ignore_errors=True)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
if not django.apps.apps.ready:
    django.setup()
