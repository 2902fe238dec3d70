"""``python manage.py runbroker [-c broker.conf] [-n namesrv]``: a broker with its store."""

from ._engine import EngineCommand


def _entry_point():
    from broker.server.__main__ import main

    return main


class Command(EngineCommand):
    help = "Run a broker (same flags as `python -m broker.server`)."
    entry_point = staticmethod(_entry_point)
