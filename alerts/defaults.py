"""The rules a new installation starts with (made by a data migration, editable afterwards).

Thresholds follow RocketMQ's own limits where it has one: the broker refuses writes at 90% disk
(diskSpaceWarningLevelRatio), so the disk rule warns at 85%; a send waiting 200 ms in the queue is
refused (waitTimeMillsInSendQueue), so requests waiting 100 ms warn; a slave 256 MiB behind leaves
the in-sync set (haMaxGapNotInSync). A broker not heard from for two 30-s sampling cycles is down.
"""

from __future__ import annotations

MIB = 1024 * 1024

DEFAULT_RULES: list[dict] = [
    {"name": "Consumer group lag", "kind": "group_lag", "threshold": 10_000, "for_minutes": 5,
     "description": "A group is more than 10,000 messages behind for 5 minutes."},
    {"name": "Consumer group lag growing", "kind": "lag_growing", "threshold": 1_000, "for_minutes": 5,
     "window_minutes": 10, "description": "A group's lag grew by over 1,000 in 10 minutes, for 5 minutes."},
    {"name": "Dead letters arriving", "kind": "dlq_receiving", "threshold": 0, "for_minutes": 0,
     "window_minutes": 5, "description": "New messages in a group's dead-letter queue within 5 minutes."},
    {"name": "Consumer not consuming", "kind": "consume_stalled", "threshold": 0, "for_minutes": 5,
     "description": "A group has lag but consumed nothing for 5 minutes (consumers stopped or stuck)."},
    {"name": "Broker down", "kind": "broker_down", "threshold": 60, "for_minutes": 0, "severity": "critical",
     "description": "A broker did not answer the sampler for over a minute."},
    {"name": "Disk almost full", "kind": "disk_ratio", "threshold": 0.85, "for_minutes": 5,
     "severity": "critical",
     "description": "The store disk is over 85% used; the broker refuses writes at 90%."},
    {"name": "Replication lag (bytes)", "kind": "replication_bytes", "threshold": 256 * MIB, "for_minutes": 5,
     "description": "A slave is over 256 MiB behind its master (out of the in-sync set)."},
    {"name": "Replication lag (seconds)", "kind": "replication_seconds", "threshold": 30, "for_minutes": 5,
     "description": "The oldest message a slave lacks is over 30 s old."},
    {"name": "Requests waiting", "kind": "request_wait", "threshold": 100, "for_minutes": 2,
     "description": "Requests wait over 100 ms in the broker's queue; sends are refused at 200 ms."},
    {"name": "Transaction half messages piling up", "kind": "half_messages", "threshold": 1_000,
     "for_minutes": 10, "description": "Over 1,000 undecided transaction half messages for 10 minutes."},
]  # fmt: skip


def create_default_rules(rule_model) -> int:
    """Make the default rules that do not exist yet (by name); returns how many were made."""
    made = 0
    for spec in DEFAULT_RULES:
        _, created = rule_model.objects.get_or_create(name=spec["name"], defaults={**spec, "builtin": True})
        made += created
    return made
