"""Broker members that are down and that the name server no longer lists, from the metric history.

A broker that stops (cleanly or not) is dropped by the name server at once, so a page built from
the name server alone shows a two-set cluster whose second set died as a healthy one-set cluster.
The history sampler remembers every member it heard from and stores one that vanished as down
(``up`` 0, with the seconds since it last answered) for a day; the cluster and topic pages read
that here to say which set is down. Without a sampled cycle (the beat task not running) there is
nothing to read, and the pages show what the name server lists, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import DatabaseError

from core import metric_history

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VanishedBroker:
    broker_name: str
    broker_id: int
    sampled_at: datetime  # the history cycle that found it down
    last_heard_seconds: float | None  # before that cycle; None: history never heard it answer

    @property
    def is_master(self) -> bool:
        return self.broker_id == 0


def _parse(name: str) -> tuple[str, int] | None:
    broker_name, sep, broker_id = name.rpartition(":")  # history's broker_key: "name:id"
    if not sep or not broker_name or not broker_id.lstrip("-").isdigit():
        return None
    return broker_name, int(broker_id)


def vanished_brokers(history_cluster: str, listed: Iterable[tuple[str, int]]) -> list[VanishedBroker]:
    """Members the newest history cycle of ``history_cluster`` (a BROKER_NAMESRV entry) stored as
    down, less those in ``listed`` ((broker name, id) pairs the name server lists now: a listed one
    that does not answer is shown as unreachable where it is listed)."""
    listed = set(listed)
    history = metric_history.registered()
    if history is None:
        return []
    try:
        up = history.latest("up", "broker", history_cluster)
        heard = history.latest("last_heard_seconds", "broker", history_cluster)
    except DatabaseError as exc:  # the history is an aid here: the page still shows the name server's view
        log.warning("history of %s not readable: %s", history_cluster, exc)
        return []
    found = []
    for name, (sampled_at, value) in up.items():
        member = _parse(name)
        if value >= 1 or member is None or member in listed:
            continue
        seconds = heard.get(name)
        found.append(VanishedBroker(member[0], member[1], sampled_at, seconds[1] if seconds else None))
    return sorted(found, key=lambda b: (b.broker_name, b.broker_id))


def down_sets(vanished: list[VanishedBroker]) -> list[str]:
    """Names of the broker sets whose master is among ``vanished``: sets that take no writes."""
    return sorted({b.broker_name for b in vanished if b.is_master})
