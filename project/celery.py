"""The project's one Celery app: console tasks (bulk DLQ replay, offset resets) and analytics jobs.

On embedded defaults the transport is Celery's filesystem transport under ``var/celery`` (no server
to run); with ``REDIS_URL`` set, broker and results move to Redis (see ``project.settings``).
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
