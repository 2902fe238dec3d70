from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    name = "analytics"
    verbose_name = "Analytics reports"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import commands  # noqa: F401  (registers the report commands with core.boundary)
