"""``python manage.py runbroker [-c broker.conf] [-n namesrv]``: a broker with its store."""

from ._engine import EngineCommand


class Command(EngineCommand):
    help = "Run a broker (same flags as `python -m broker.server`)."
    module = "broker.server"
