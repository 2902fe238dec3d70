"""Metric history (W16): the cluster sampled on a schedule into the console's database, rolled up
and kept for bounded periods, read back as series for charts and top-N lists."""

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class HistoryConfig(AppConfig):
    name = "history"
    verbose_name = "Metric history"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core import metric_history
        from history.readings import History
        from history.schedule import ensure_default_schedule

        metric_history.register(History())

        # post_migrate comes after every app's migrations, so django_celery_beat's tables exist.
        post_migrate.connect(ensure_default_schedule, sender=self, dispatch_uid="history-default-schedule")
