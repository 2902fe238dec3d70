"""Alert rules, their events, silences and the notifications sent about events."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from .kinds import KIND_CHOICES, KINDS
from .patterns import MAX_PATTERN_LENGTH, matches, validate_pattern

SCOPE_FIELDS = ("cluster", "broker", "topic", "group")
MAX_MINUTES = 7 * 24 * 60


def _pattern_field() -> models.CharField:
    return models.CharField(max_length=MAX_PATTERN_LENGTH, blank=True, validators=[validate_pattern])


class ScopedMixin(models.Model):
    """Glob patterns over the names an event is about; empty patterns match anything."""

    cluster_pattern = _pattern_field()
    broker_pattern = _pattern_field()
    topic_pattern = _pattern_field()
    group_pattern = _pattern_field()

    class Meta:
        abstract = True

    def covers(self, subject: dict[str, str]) -> bool:
        return all(matches(getattr(self, f"{name}_pattern"), subject.get(name, "")) for name in SCOPE_FIELDS)

    @property
    def scope_text(self) -> str:
        parts = [f"{name}={getattr(self, f'{name}_pattern')}" for name in SCOPE_FIELDS]
        return " ".join(part for part in parts if not part.endswith("=")) or "everything"


class AlertRule(ScopedMixin):
    WARNING, CRITICAL = "warning", "critical"
    SEVERITY_CHOICES = [(WARNING, "warning"), (CRITICAL, "critical")]

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=32, choices=KIND_CHOICES)
    enabled = models.BooleanField(default=True)
    severity = models.CharField(max_length=16, choices=SEVERITY_CHOICES, default=WARNING)
    threshold = models.FloatField(validators=[MinValueValidator(0), MaxValueValidator(1e15)])
    # How long the condition must hold before the event fires (pending until then); 0 fires at once.
    for_minutes = models.PositiveIntegerField(default=5, validators=[MaxValueValidator(MAX_MINUTES)])
    # For kinds measured as a change (lag growing, dead letters arriving): over how long.
    window_minutes = models.PositiveIntegerField(
        default=10, validators=[MinValueValidator(1), MaxValueValidator(MAX_MINUTES)]
    )
    # Where notifications go besides the defaults of the settings (ALERT_WEBHOOK_URLS, ALERT_EMAIL_TO).
    webhook_url = models.URLField(max_length=500, blank=True)
    email_to = models.CharField(max_length=500, blank=True)  # comma-separated addresses
    # The operator's note (why the rule matters, what to do). The condition itself is said from the
    # fields (condition_text), so an edited threshold never leaves an old figure in a stored copy.
    description = models.TextField(max_length=1000, blank=True)
    builtin = models.BooleanField(default=False)  # one of the rules made on first start
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def kind_info(self):
        return KINDS[self.kind]

    @property
    def threshold_text(self) -> str:
        return KINDS[self.kind].format(self.threshold)

    @property
    def condition_text(self) -> str:
        """The rule's condition in words, from its current kind, threshold, window and duration."""
        kind = KINDS[self.kind]
        window = f"; window {self.window_minutes} min" if kind.uses_window else ""
        duration = f"for {self.for_minutes} min" if self.for_minutes else "firing at once"
        return f"{kind.label} {self.threshold_text} ({kind.threshold_label}{window}), {duration}."

    @property
    def description_text(self) -> str:
        """The condition, then the operator's note."""
        return f"{self.condition_text} {self.description}".strip()

    def email_recipients(self) -> list[str]:
        return [address.strip() for address in self.email_to.split(",") if address.strip()]


class AlertEvent(models.Model):
    """One rule's condition on one subject (a group, a broker), from pending to resolved."""

    PENDING, FIRING, RESOLVED = "pending", "firing", "resolved"
    STATE_CHOICES = [(PENDING, "pending"), (FIRING, "firing"), (RESOLVED, "resolved")]
    OPEN_STATES = (PENDING, FIRING)

    rule = models.ForeignKey(AlertRule, null=True, on_delete=models.SET_NULL, related_name="events")
    rule_name = models.CharField(max_length=100)  # kept when the rule is deleted
    severity = models.CharField(max_length=16, default=AlertRule.WARNING)
    subject = models.CharField(max_length=600)  # the canonical key, see alerts.evaluation.subject_key
    cluster = models.CharField(max_length=255, blank=True)
    broker = models.CharField(max_length=255, blank=True)
    topic = models.CharField(max_length=255, blank=True)
    group = models.CharField(max_length=255, blank=True)
    state = models.CharField(max_length=16, choices=STATE_CHOICES, default=PENDING)
    # The last measured figure; when resolved, the one that resolved it (None: no data did).
    value = models.FloatField(null=True, default=0)
    threshold = models.FloatField(default=0)  # the rule's, when the event started
    summary = models.CharField(max_length=500, blank=True)
    started_at = models.DateTimeField()  # when the condition was first seen true
    firing_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    last_evaluated_at = models.DateTimeField()
    resolution = models.CharField(max_length=200, blank=True)  # why it resolved, when not by itself
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.CharField(max_length=150, blank=True)
    ack_note = models.TextField(max_length=1000, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            # At most one open event per rule and subject, whatever races the evaluators have.
            models.UniqueConstraint(
                fields=["rule", "subject"],
                condition=Q(state__in=["pending", "firing"]),
                name="alerts_one_open_event",
            )
        ]
        indexes = [
            # The header badge: firing and not acknowledged, counted on every page.
            models.Index(fields=["state", "acknowledged_at"], name="alerts_event_state_ack"),
            models.Index(fields=["rule", "state"], name="alerts_event_rule_state"),
        ]

    def __str__(self) -> str:
        return f"{self.rule_name} {self.subject_text} {self.state}"

    @property
    def subject_fields(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in SCOPE_FIELDS if getattr(self, name)}

    @property
    def subject_text(self) -> str:
        return " ".join(f"{name} {value}" for name, value in self.subject_fields.items())

    @property
    def acknowledged(self) -> bool:
        return self.acknowledged_at is not None

    def _format(self, value: float) -> str:
        kind = KINDS.get(self.rule.kind) if self.rule else None
        return kind.format(value) if kind else f"{value:,.6g}"

    @property
    def value_text(self) -> str:
        return "none" if self.value is None else self._format(self.value)

    @property
    def threshold_text(self) -> str:
        return self._format(self.threshold)


class Silence(ScopedMixin):
    """No notification for events of ``rule`` (any rule when empty) in its scope until ``ends_at``."""

    rule = models.ForeignKey(
        AlertRule, null=True, blank=True, on_delete=models.CASCADE, related_name="silences"
    )
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(db_index=True)
    comment = models.CharField(max_length=500)
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-ends_at", "-id"]

    def __str__(self) -> str:
        return (
            f"silence of {self.rule or 'every rule'} ({self.scope_text}) until {self.ends_at:%Y-%m-%d %H:%M}"
        )

    def active_at(self, when) -> bool:
        return self.starts_at <= when < self.ends_at

    def silences(self, event: AlertEvent, when) -> bool:
        return (
            self.active_at(when)
            and (self.rule_id is None or self.rule_id == event.rule_id)
            and self.covers(event.subject_fields)
        )


class Notification(models.Model):
    """One message about one event (it started firing, or it resolved) to one receiver."""

    FIRING, RESOLVED = "firing", "resolved"
    WEBHOOK, EMAIL = "webhook", "email"
    QUEUED, DELIVERED, FAILED, SUPPRESSED = "queued", "delivered", "failed", "suppressed"
    STATUS_CHOICES = [(s, s) for s in (QUEUED, DELIVERED, FAILED, SUPPRESSED)]

    event = models.ForeignKey(AlertEvent, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=16, choices=[(FIRING, FIRING), (RESOLVED, RESOLVED)])
    channel = models.CharField(max_length=16, choices=[(WEBHOOK, WEBHOOK), (EMAIL, EMAIL)])
    target = models.CharField(max_length=500)  # the URL, or the addresses
    status = models.CharField(max_length=16, choices=STATUS_CHOICES, default=QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    detail = models.CharField(max_length=300, blank=True)  # why suppressed
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # Exactly one notification per event, transition and receiver.
            models.UniqueConstraint(
                fields=["event", "kind", "channel", "target"], name="alerts_one_notification"
            )
        ]
