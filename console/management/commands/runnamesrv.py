"""``python manage.py runnamesrv [-c namesrv.conf] [--listen-port N]``: the name server."""

from ._engine import EngineCommand


class Command(EngineCommand):
    help = "Run a RocketMQ name server (same flags as `python -m broker.namesrv`)."
    module = "broker.namesrv"
