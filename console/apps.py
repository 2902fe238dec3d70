from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "RocketMQ console"

    def ready(self) -> None:
        from console.services.overview import register_sections

        register_sections()
        # Registers every command with the boundary, for the pages and the management commands alike.
        from console.commands import registry  # noqa: F401
