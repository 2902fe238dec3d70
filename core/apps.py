from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Console platform"
    default_auto_field = "django.db.models.BigAutoField"
