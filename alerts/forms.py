"""Forms of the alert pages: a rule, a silence, an acknowledgement."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

from django import forms
from django.core.validators import URLValidator, validate_email

from core import clock

from .kinds import KINDS
from .models import AlertRule, Silence
from .patterns import validate_pattern
from .webhook_target import WebhookRefused, checked_addresses, split_url

MAX_RECIPIENTS = 10
MAX_SILENCE = timedelta(days=90)
SCOPE_LABELS = {
    "cluster": "Cluster (name server entry)",
    "broker": "Broker (brokerName:brokerId)",
    "group": "Consumer group",
}
MAX_WINDOW_MINUTES = 24 * 60  # a window is read from raw points, kept at least two days


class RuleForm(forms.ModelForm):
    webhook_url = forms.URLField(
        max_length=500,
        required=False,
        assume_scheme="https",
        validators=[URLValidator(schemes=["http", "https"])],
    )

    class Meta:
        model = AlertRule
        fields = [
            "name", "kind", "enabled", "severity", "threshold", "for_minutes", "window_minutes",
            "cluster_pattern", "broker_pattern", "group_pattern", "webhook_url", "email_to", "description",
        ]  # fmt: skip
        labels = {
            "for_minutes": "For (minutes)",
            "window_minutes": "Window (minutes)",
            **{f"{name}_pattern": label for name, label in SCOPE_LABELS.items()},
            "email_to": "E-mail to",
            "description": "Note",
        }
        help_texts = {
            "threshold": "The event starts when the figure is above this (see the kind for its unit).",
            "for_minutes": "How long the condition must hold before the event fires; 0 fires at once.",
            "window_minutes": "For lag growing and dead letters arriving: the change over this long.",
            "webhook_url": "Besides ALERT_WEBHOOK_URLS: a JSON POST (Alertmanager's webhook format), "
            "to a public address or one ALERT_WEBHOOK_ALLOWED_NETWORKS names.",
            "email_to": f"Besides ALERT_EMAIL_TO: addresses separated by commas (at most {MAX_RECIPIENTS}).",
            "description": "Why the rule matters or what to do. The condition is said from the fields above "
            "(on the rules page and in the Prometheus export), so leave its figures out.",
        }
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["threshold"].widget.attrs["step"] = "any"
        for name in SCOPE_LABELS:
            self.fields[f"{name}_pattern"].widget.attrs["placeholder"] = "any (glob: * and ?)"

    def clean_window_minutes(self) -> int:
        value = self.cleaned_data["window_minutes"]
        if value > MAX_WINDOW_MINUTES:
            raise forms.ValidationError(f"at most {MAX_WINDOW_MINUTES} minutes (one day)")
        return value

    def clean_webhook_url(self) -> str:
        """Refused when its host resolves to an address webhooks may not go to (see
        webhook_target); checked again at each send."""
        url = self.cleaned_data["webhook_url"]
        if not url:
            return url
        try:  # the URL validator let only http(s) through, but not every port
            _https, host, port, _path = split_url(url)
        except ValueError as exc:
            raise forms.ValidationError(f"not a usable http(s) URL: {exc}") from None
        try:
            checked_addresses(host, port)
        except WebhookRefused as exc:
            raise forms.ValidationError(str(exc)) from None
        except OSError:
            raise forms.ValidationError(f"{host} does not resolve from the console") from None
        return url

    def clean_email_to(self) -> str:
        addresses = [a.strip() for a in self.cleaned_data["email_to"].split(",") if a.strip()]
        if len(addresses) > MAX_RECIPIENTS:
            raise forms.ValidationError(f"at most {MAX_RECIPIENTS} addresses")
        for address in addresses:
            validate_email(address)
        return ", ".join(addresses)

    def clean(self) -> dict[str, Any]:
        super().clean()  # its result is typed Optional: read self.cleaned_data
        data = self.cleaned_data
        kind = KINDS.get(data.get("kind", ""))
        if kind is None:
            return data
        for name in SCOPE_LABELS:
            if data.get(f"{name}_pattern") and name not in kind.scope_fields:
                self.add_error(f"{name}_pattern", f"a {kind.subject} rule has no {name}: leave this empty")
        if kind.key == "disk_ratio" and data.get("threshold") is not None and data["threshold"] > 1:
            self.add_error("threshold", "disk usage is a ratio between 0 and 1 (0.85 is 85%)")
        return data


class SilenceForm(forms.ModelForm):
    class Meta:
        model = Silence
        fields = ["rule", "cluster_pattern", "broker_pattern", "group_pattern", "ends_at", "comment"]
        labels = {
            "rule": "Rule",
            "ends_at": "Ends at (UTC)",
            **{f"{name}_pattern": label for name, label in SCOPE_LABELS.items()},
        }
        help_texts = {"rule": "Empty: every rule.", "comment": "Why (shown on the silences page)."}
        widgets = {"ends_at": forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        rule = cast(forms.ModelChoiceField, self.fields["rule"])  # a foreign key's field
        rule.required = False
        rule.empty_label = "every rule"
        ends_at = cast(forms.DateTimeField, self.fields["ends_at"])
        ends_at.input_formats = ["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"]
        for name in SCOPE_LABELS:
            self.fields[f"{name}_pattern"].validators = [validate_pattern]
            self.fields[f"{name}_pattern"].widget.attrs["placeholder"] = "any (glob: * and ?)"

    def clean_ends_at(self):
        ends_at = self.cleaned_data["ends_at"]
        now = clock.now()
        if ends_at <= now:
            raise forms.ValidationError("the end must be in the future")
        if ends_at > now + MAX_SILENCE:
            raise forms.ValidationError(f"at most {MAX_SILENCE.days} days ahead")
        return ends_at


class AcknowledgeForm(forms.Form):
    note = forms.CharField(max_length=1000, widget=forms.Textarea(attrs={"rows": 2}),
                           help_text="What is being done about it (shown on the event).")  # fmt: skip
