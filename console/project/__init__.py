"""The Django project: settings, root URLs, the ASGI application and the Celery app.

Its apps are ``console`` (the cluster console) and ``analytics`` (report runs); neither reaches into
the other's modules: analytics uses the console's public module (``console.public``).
"""

# Importing the Celery app here makes @shared_task bind to it whenever Django starts (the settings
# module lives in this package, so Django imports it first).
from console.project.celery import app as celery_app

__all__ = ["celery_app"]
