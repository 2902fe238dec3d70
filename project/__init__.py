"""The Django project: settings, root URLs, the ASGI application and the Celery app.

Its apps are ``core`` (the platform every app shares) and the feature apps ``console``,
``history``, ``alerts`` and ``analytics``, which import ``core`` and never each other.
"""

# Importing the Celery app here makes @shared_task bind to it whenever Django starts (the settings
# module lives in this package, so Django imports it first).
from project.celery import app as celery_app

__all__ = ["celery_app"]
