from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "RocketMQ console"

    def ready(self) -> None:
        # Registers every command with the boundary, for the pages and the management commands alike.
        from console.commands import registry  # noqa: F401
