"""The rules a new installation starts with (made by a data migration, editable afterwards).

Thresholds follow RocketMQ's own limits where it has one: the broker refuses writes at 90% disk
(diskSpaceWarningLevelRatio), so the disk rule warns at 85%; a send waiting 200 ms in the queue is
refused (waitTimeMillsInSendQueue), so requests waiting 100 ms warn; a slave 256 MiB behind leaves
the in-sync set (haMaxGapNotInSync). A broker not heard from for two 30-s sampling cycles is down.

A description is a note that holds no figure of the rule: the pages and the Prometheus export say
the condition from the rule's fields (``AlertRule.condition_text``).
"""

from __future__ import annotations

MIB = 1024 * 1024

DEFAULT_RULES: list[dict] = [
    {"name": "Consumer group lag", "kind": "group_lag", "threshold": 10_000, "for_minutes": 5,
     "description": "Consumers do not keep up with the producers."},
    {"name": "Consumer group lag growing", "kind": "lag_growing", "threshold": 1_000, "for_minutes": 5,
     "window_minutes": 10, "description": "The group falls further behind: consumers slower than producers."},
    {"name": "Dead letters arriving", "kind": "dlq_receiving", "threshold": 0, "for_minutes": 0,
     "window_minutes": 5, "description": "Messages used up their retries: the group's dead-letter queue."},
    {"name": "Consumer not consuming", "kind": "consume_stalled", "threshold": 0, "for_minutes": 5,
     "description": "Consumers stopped or stuck."},
    {"name": "Broker down", "kind": "broker_down", "threshold": 60, "for_minutes": 0, "severity": "critical",
     "description": "The broker does not answer the sampler."},
    {"name": "Disk almost full", "kind": "disk_ratio", "threshold": 0.85, "for_minutes": 5,
     "severity": "critical",
     "description": "The broker refuses writes above diskSpaceWarningLevelRatio (90% by default)."},
    {"name": "Replication lag (bytes)", "kind": "replication_bytes", "threshold": 256 * MIB, "for_minutes": 5,
     "description": "A slave behind by over haMaxGapNotInSync leaves the in-sync set."},
    {"name": "Replication lag (seconds)", "kind": "replication_seconds", "threshold": 30, "for_minutes": 5,
     "description": "Measured as the age of the oldest message the slave lacks."},
    {"name": "Requests waiting", "kind": "request_wait", "threshold": 100, "for_minutes": 2,
     "description": "Sends are refused after waitTimeMillsInSendQueue (200 ms by default)."},
    {"name": "Transaction half messages piling up", "kind": "half_messages", "threshold": 1_000,
     "for_minutes": 10, "description": "Transactions left undecided: a check listener may be failing."},
]  # fmt: skip


def create_default_rules(rule_model) -> int:
    """Make the default rules that do not exist yet (by name); returns how many were made."""
    made = 0
    for spec in DEFAULT_RULES:
        _, created = rule_model.objects.get_or_create(name=spec["name"], defaults={**spec, "builtin": True})
        made += created
    return made
