"""The metric catalogue: every figure the sampler stores, keyed by (metric, scope).

Scopes: ``broker`` (name ``brokerName:brokerId``, see ``broker_key``), ``topic``, ``group`` and
``cluster`` (the RocketMQ cluster name). ``kind`` is ``gauge`` (a level: lag, TPS, disk) or
``counter`` (a running total that only grows until its broker restarts; ``counter_increase`` is
its growth between two readings, which rates, rollups and ``query.daily_totals`` all sum). Pages,
alert rules and exports name metrics from here only.
"""

from __future__ import annotations

from dataclasses import dataclass

SCOPES = ("broker", "topic", "group", "cluster")


@dataclass(frozen=True)
class Metric:
    metric: str
    scope: str
    unit: str
    description: str
    kind: str = "gauge"

    @property
    def key(self) -> tuple[str, str]:
        return (self.metric, self.scope)


CATALOGUE: tuple[Metric, ...] = (
    # -- brokers (every member: masters and slaves) ----------------------------------------------
    Metric("up", "broker", "bool", "1 when the broker answered the cycle's runtime request, 0 when not"),
    Metric(
        "last_heard_seconds",
        "broker",
        "s",
        "Seconds since the broker last answered the sampler (0 while it answers)",
    ),
    Metric(
        "tps_in",
        "broker",
        "msg/s",
        "Messages put per second since the previous sample (put counter's growth)",
    ),
    Metric(
        "tps_out",
        "broker",
        "msg/s",
        "Messages read per second since the previous sample (read counter's growth)",
    ),
    Metric("messages_in", "broker", "msg", "Messages put since the broker first started", "counter"),
    Metric("messages_out", "broker", "msg", "Messages read since the broker first started", "counter"),
    Metric("disk_ratio", "broker", "ratio", "Used fraction of the commit-log disk (0-1)"),
    Metric("store_writable", "broker", "bool", "1 while the store takes writes, 0 while it refuses them"),
    Metric("request_wait_ms", "broker", "ms", "How long a request arriving now waits before it is served"),
    Metric(
        "replication_lag_bytes",
        "broker",
        "bytes",
        "Commit-log bytes the furthest slave lacks (on a master), or the slave itself lacks",
    ),
    Metric(
        "replication_lag_seconds",
        "broker",
        "s",
        "Age of the oldest message the furthest slave does not have yet (on a master)",
    ),
    Metric(
        "half_messages",
        "broker",
        "msg",
        "Transaction half messages the broker's checker has not yet passed (prepared, unresolved or "
        "resolved after the checker's position)",
    ),
    # -- topics ----------------------------------------------------------------------------------
    Metric("tps_in", "topic", "msg/s", "Messages written per second between the last two samples"),
    Metric(
        "messages",
        "topic",
        "msg",
        "Messages written to the topic (sum of its queues' max offsets)",
        "counter",
    ),
    Metric("stored", "topic", "msg", "Messages the topic holds now (max minus min offset, all queues)"),
    # -- consumer groups -------------------------------------------------------------------------
    Metric("lag", "group", "msg", "Messages not yet consumed (the brokers' consume stats)"),
    Metric(
        "consume_tps",
        "group",
        "msg/s",
        "Messages consumed per second: its committed offsets' progress between the last two samples",
    ),
    Metric(
        "consumed",
        "group",
        "msg",
        "The group's committed offsets summed over every queue (it grows as the group consumes)",
        "counter",
    ),
    Metric("clients", "group", "count", "Online consumers of the group"),
    Metric("dlq_messages", "group", "msg", "Messages in the group's dead-letter topic (%DLQ%group) now"),
    # -- clusters (RocketMQ cluster name) --------------------------------------------------------
    Metric("brokers_up", "cluster", "count", "Broker members that answered the cycle"),
    Metric("brokers_down", "cluster", "count", "Broker members that did not answer the cycle"),
    Metric("tps_in", "cluster", "msg/s", "Messages put per second since the previous sample, all masters"),
    Metric("tps_out", "cluster", "msg/s", "Messages read per second since the previous sample, all masters"),
    Metric("messages_in", "cluster", "msg", "Messages put since start, all masters", "counter"),
    Metric("messages_out", "cluster", "msg", "Messages read since start, all masters", "counter"),
    Metric("lag", "cluster", "msg", "Messages not yet consumed, all non-system groups"),
    Metric("half_messages", "cluster", "msg", "Transaction half messages not yet passed, all masters"),
)

BY_KEY: dict[tuple[str, str], Metric] = {m.key: m for m in CATALOGUE}


def get(metric: str, scope: str) -> Metric:
    """The catalogue entry; ``KeyError`` naming the pair when there is none (a typo in a rule or a
    page must fail loudly, not chart nothing)."""
    try:
        return BY_KEY[(metric, scope)]
    except KeyError:
        raise KeyError(f"no metric {metric!r} of scope {scope!r} in the history catalogue") from None


def is_counter(metric: str, scope: str) -> bool:
    """Whether the pair is a stored counter (False for a metric no longer in the catalogue)."""
    entry = BY_KEY.get((metric, scope))
    return entry is not None and entry.kind == "counter"


def counter_increase(before: float, now: float) -> float:
    """How much a counter grew between two readings. One that went down restarted (its broker
    restarted, its topic was recreated): it counted its new value from zero."""
    return now - before if now >= before else now


def broker_key(broker_name: str, broker_id: int | str) -> str:
    """A broker member's name in history: stable across restarts and address changes."""
    return f"{broker_name}:{broker_id}"


def is_master(key: str) -> bool:
    """Whether a ``broker_key`` names a master (brokerId 0): a slave's puts are its master's."""
    return key.endswith(":0")
