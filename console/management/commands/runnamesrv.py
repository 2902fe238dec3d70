"""``python manage.py runnamesrv [-c namesrv.conf] [--listen-port N]``: the name server."""

from ._engine import EngineCommand


def _entry_point():
    from broker.namesrv.server import main

    return main


class Command(EngineCommand):
    help = "Run a RocketMQ name server (same flags as `python -m broker.namesrv`)."
    entry_point = staticmethod(_entry_point)
