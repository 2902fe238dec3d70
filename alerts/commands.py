"""Alert commands (operators): acknowledge an event, save (create or edit) or delete a rule, create
or expire a silence. Each runs through the one boundary (``core.boundary``): the role check and the
one audit record, refused, failed or done. A rejected form is an ``Invalid`` carrying the bound form
so the page shows it again with its errors (400)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from core import clock
from core.boundary import Actor, Cluster, Invalid, Missing, Outcome, Params, command
from core.command_line import by_id, form_fields, register

from .evaluation import close_events_of
from .forms import AcknowledgeForm, RuleForm, SilenceForm
from .models import AlertEvent, AlertRule, Silence


def printable(data) -> dict:
    """What a record keeps of submitted fields (each cut to 500 characters)."""
    return {key: value[:500] for key, value in data.items() if key != "csrfmiddlewaretoken"}


def _missing(what: str) -> Missing:
    return Missing(what, f"{what} does not exist (deleted meanwhile?)")


@dataclass(frozen=True)
class Acknowledge(Params):
    event_id: int
    data: Any = field(default_factory=dict)  # the submitted form (a QueryDict from a page)


@command("alerts.event.acknowledge")
def acknowledge(actor: Actor, cluster: Cluster, params: Acknowledge) -> Outcome:
    event = AlertEvent.objects.select_related("rule").filter(pk=params.event_id).first()
    if event is None:
        raise _missing(f"event {params.event_id}")
    form = AcknowledgeForm(params.data)
    target = f"event {event.pk} ({event.rule_name}: {event.subject_text})"
    if not form.is_valid() or event.acknowledged:
        detail = (
            form.errors.as_text()
            if not event.acknowledged
            else f"already acknowledged by {event.acknowledged_by}"
        )
        if event.acknowledged:
            form.add_error(None, detail)
        raise Invalid(
            detail, target=target, parameters=printable(params.data), detail=detail, form=(event, form)
        )
    event.acknowledged_at, event.acknowledged_by = clock.now(), actor.username
    event.ack_note = form.cleaned_data["note"]
    event.save(update_fields=["acknowledged_at", "acknowledged_by", "ack_note"])
    return Outcome(target, "", {"note": event.ack_note}, event)


@dataclass(frozen=True)
class SaveRule(Params):
    rule_id: int | None  # None: a new rule
    data: Any = field(default_factory=dict)


def existing_rule(rule_id: int) -> AlertRule:
    """The rule ``rule_id`` names; ``Missing`` when it is gone."""
    rule = AlertRule.objects.filter(pk=rule_id).first()
    if rule is None:
        raise _missing(f"rule {rule_id}")
    return rule


@command("alerts.rule.save")
def save_rule(actor: Actor, cluster: Cluster, params: SaveRule) -> Outcome:
    rule = None if params.rule_id is None else existing_rule(params.rule_id)
    was_enabled = rule.enabled if rule else False  # before validation writes the form into the rule
    form = RuleForm(params.data, instance=rule)
    target = rule.name if rule else str(params.data.get("name", ""))[:100]
    if not form.is_valid():
        errors = form.errors.as_text()
        raise Invalid(errors, target=target, parameters=printable(params.data), detail=errors, form=form)
    with transaction.atomic():
        saved = form.save(commit=False)
        saved.updated_by = actor.username
        saved.save()
        if was_enabled and not saved.enabled:
            close_events_of(saved, "rule disabled")
    changes = (
        {name: params.data.get(name, "") for name in form.changed_data} if rule else printable(params.data)
    )
    return Outcome(saved.name, "created" if rule is None else "updated", changes, saved)


@dataclass(frozen=True)
class DeleteRule(Params):
    rule_id: int


@command("alerts.rule.delete")
def delete_rule(actor: Actor, cluster: Cluster, params: DeleteRule) -> Outcome:
    rule = existing_rule(params.rule_id)
    name = rule.name
    with transaction.atomic():
        close_events_of(rule, "rule deleted")
        rule.delete()
    return Outcome(name, f"Rule {name!r} (id {params.rule_id}) deleted")


@dataclass(frozen=True)
class CreateSilence(Params):
    data: Any = field(default_factory=dict)


@command("alerts.silence.create")
def create_silence(actor: Actor, cluster: Cluster, params: CreateSilence) -> Outcome:
    form = SilenceForm(params.data)
    if not form.is_valid():
        errors = form.errors.as_text()
        raise Invalid(errors, target="", parameters=printable(params.data), detail=errors, form=form)
    silence = form.save(commit=False)
    silence.starts_at, silence.created_by = clock.now(), actor.username
    silence.save()
    return Outcome(str(silence), "", printable(params.data), silence)


@dataclass(frozen=True)
class ExpireSilence(Params):
    silence_id: int


@command("alerts.silence.expire")
def expire_silence(actor: Actor, cluster: Cluster, params: ExpireSilence) -> Outcome:
    silence = Silence.objects.filter(pk=params.silence_id).first()
    if silence is None:
        raise _missing(f"silence {params.silence_id}")
    now = clock.now()
    if silence.ends_at > now:
        silence.ends_at = max(now, silence.starts_at)
        silence.save(update_fields=["ends_at"])
    return Outcome(str(silence), "", {}, silence)


# The command-line forms (``manage.py console_command``): the ids the pages take from their URLs
# are fields; the rest are the page forms' fields, judged by the forms inside the commands.
register(
    "alerts.event.acknowledge",
    by_id("event_id", Acknowledge),
    ("event_id", *form_fields(AcknowledgeForm)),
)
register(
    "alerts.rule.save",
    by_id("rule_id", SaveRule, optional=True),
    ("rule_id", *form_fields(RuleForm)),
)
register("alerts.rule.delete", by_id("rule_id", lambda pk, _: DeleteRule(pk)), ("rule_id",))
register("alerts.silence.create", CreateSilence, form_fields(SilenceForm))
register("alerts.silence.expire", by_id("silence_id", lambda pk, _: ExpireSilence(pk)), ("silence_id",))
