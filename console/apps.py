from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "RocketMQ console"

    def ready(self) -> None:
        from console.services.overview import register_sections

        register_sections()
