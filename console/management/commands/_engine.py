"""Shared plumbing for the management commands that run engine processes.

The engine's own entry points parse RocketMQ-style flags (``-c broker.conf``, ``-n``…); Django's
argument parser would reject them, so these commands hand every argument through untouched.
"""

from collections.abc import Callable

from django.core.management.base import BaseCommand


class EngineCommand(BaseCommand):
    """Runs an engine ``main(argv)`` with the command line as given."""

    entry_point: Callable[[], Callable[[list[str]], int | None]]

    def run_from_argv(self, argv: list[str]) -> None:
        # argv is [manage.py, <command>, *engine args]
        main = type(self).entry_point()
        status = main(list(argv[2:]))
        raise SystemExit(status or 0)

    def handle(self, *args, **options) -> None:  # pragma: no cover - run_from_argv is the path
        self.run_from_argv(["manage.py", "command", *args])
