"""The overview page's sections, each registered by the app that owns its figures (in its
``AppConfig.ready()``): the console's cluster figures (brokers, lagging groups, dead letters), the
alerts app's firing events. The page reads every registered section on its own, so one that fails
shows its error and the rest of the page still answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.client.admin import MQAdmin, MQClientError


@dataclass
class Section:
    """One part of the page: its figures, or why it has none."""

    data: Any = None
    error: str = ""
    source: str = ""  # where the figures come from, shown beside the section's title
    count: int | None = None  # of the whole, where ``data`` shows only the first rows


# A section's reader: the admin client of the name server shown and its BROKER_NAMESRV entry.
SectionReader = Callable[[MQAdmin, str], Section]

_readers: dict[str, SectionReader] = {}


def register(key: str, read: SectionReader) -> None:
    """Offer section ``key`` (the name the page's template shows it under); registering a key
    again replaces its reader (an app's ``ready()`` may run more than once in tests)."""
    _readers[key] = read


def sections(admin: MQAdmin, cluster: str) -> dict[str, Section]:
    """Every registered section for the name server ``cluster``, in registration order (the
    order of ``INSTALLED_APPS``), each read on its own: a cluster error becomes its section's."""
    out = {}
    for key, read in _readers.items():
        try:
            out[key] = read(admin, cluster)
        except MQClientError as exc:
            out[key] = Section(error=str(exc))
    return out
