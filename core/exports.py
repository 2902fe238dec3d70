"""Documents the console's export page offers for download that another app writes (the alerts
app's Prometheus rule file), registered in that app's ``AppConfig.ready()``."""

from __future__ import annotations

from collections.abc import Callable

_writers: dict[str, Callable[[], str]] = {}

PROMETHEUS_RULES = "prometheus_rules"  # the alert rules as a Prometheus rule file (YAML)


def register(name: str, write: Callable[[], str]) -> None:
    _writers[name] = write


def document(name: str) -> str | None:
    """The text of document ``name``, or None when no installed app writes it."""
    write = _writers.get(name)
    return write() if write is not None else None
