"""Shared plumbing for the management commands that run engine processes.

Each command becomes the engine's own process (``python -m <module>``, exec'd with this Python):
the console never imports the engine's server code, and the process that runs is exactly the one
``make run`` and the Procfile start, with its signals and exit status. The engine parses its own
RocketMQ-style flags (``-c broker.conf``, ``-n``…); Django's argument parser would reject them, so
every argument is handed through untouched.
"""

import os
import sys

from django.core.management.base import BaseCommand


class EngineCommand(BaseCommand):
    """Replaces this process with ``python -m <module> <args>``."""

    module: str

    def run_from_argv(self, argv: list[str]) -> None:
        # argv is [manage.py, <command>, *engine args]
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-m", self.module, *argv[2:]])

    def handle(self, *args, **options) -> None:  # pragma: no cover - run_from_argv is the path
        self.run_from_argv(["manage.py", "command", *args])
