"""The console app: cluster pages over the admin client, roles, the audit log, the live tail.

The Django project that runs it (settings, URLs, ASGI, Celery) is ``project``.
"""
