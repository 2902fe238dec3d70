"""What a rule can watch: one entry per kind of rule, saying what its subject is (a group or a
broker), what its threshold means, and which scope patterns apply. How each kind is measured
lives in ``alerts.observe``; this module is the vocabulary the forms, pages and defaults share."""

from __future__ import annotations

from dataclasses import dataclass

GROUP, BROKER = "group", "broker"


@dataclass(frozen=True)
class Kind:
    key: str
    label: str
    subject: str  # GROUP or BROKER: what one event is about
    # What the number compared against is, with its unit; descriptions say it in parentheses, so
    # it holds none of its own.
    threshold_label: str
    uses_window: bool = False  # measured as a change over the rule's window
    unit: str = ""  # "bytes" and "ratio" are shown as such (256 MiB, 85%); others as plain numbers

    def format(self, value: float) -> str:
        """A figure of this kind as the pages show it."""
        if self.unit == "bytes":
            for unit in ("B", "KiB", "MiB", "GiB"):
                if abs(value) < 1024 or unit == "GiB":
                    return f"{value:.3g} {unit}" if unit != "B" else f"{value:.0f} B"
                value /= 1024
        if self.unit == "ratio":
            return f"{value * 100:.3g}%"
        return f"{value:,.6g}"

    @property
    def scope_fields(self) -> tuple[str, ...]:
        """The scope patterns that mean something for this kind's subjects."""
        return ("cluster", "group") if self.subject == GROUP else ("cluster", "broker")


KINDS: dict[str, Kind] = {
    kind.key: kind
    for kind in (
        Kind("group_lag", "Consumer group lag above", GROUP, "messages behind"),
        Kind("lag_growing", "Consumer group lag growing", GROUP, "messages of growth over the window", True),
        Kind("dlq_receiving", "Dead letters arriving", GROUP, "new dead letters over the window", True),
        Kind("consume_stalled", "Not consuming while lagging", GROUP, "messages behind, with 0 consume TPS"),
        Kind("broker_down", "Broker down or not heard from", BROKER, "seconds since last heard"),
        Kind("disk_ratio", "Disk usage above", BROKER, "ratio of the store disk used, 0 to 1", unit="ratio"),
        Kind(
            "replication_bytes",
            "Replication lag above (bytes)",
            BROKER,
            "bytes the slave is behind",
            unit="bytes",
        ),
        Kind("replication_seconds", "Replication lag above (seconds)", BROKER, "seconds the slave is behind"),
        Kind("request_wait", "Requests waiting in queue", BROKER, "milliseconds at the head of the queue"),
        Kind("half_messages", "Transaction half messages piling up", BROKER, "undecided half messages"),
    )
}

KIND_CHOICES = [(kind.key, kind.label) for kind in KINDS.values()]
