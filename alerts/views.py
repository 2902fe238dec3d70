"""Alert pages (W15): events (filter by state and rule, acknowledge), rules (CRUD), silences.

Reading needs the viewer role; every change needs the operator role (``core.roles.ACTIONS``), is
refused with a 403 saying so otherwise, and leaves an audit record, refused, failed or done.
"""

from __future__ import annotations

from typing import NoReturn

from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core import clock
from core.public import VIEWER, AuditRecord, audit, require_permission, require_role

from .evaluation import close_events_of
from .forms import AcknowledgeForm, RuleForm, SilenceForm
from .kinds import KINDS
from .models import AlertEvent, AlertRule, Silence

STATE_FILTERS = {
    "open": AlertEvent.OPEN_STATES,
    "firing": (AlertEvent.FIRING,),
    "pending": (AlertEvent.PENDING,),
    "resolved": (AlertEvent.RESOLVED,),
    "all": None,
}
EVENTS_PER_PAGE = 50


# -- events ---------------------------------------------------------------------------------------
@require_role(VIEWER)
@require_GET
def event_list(request):
    state = request.GET.get("state", "open")
    if state not in STATE_FILTERS:
        state = "open"
    events = AlertEvent.objects.all()
    if STATE_FILTERS[state]:
        events = events.filter(state__in=STATE_FILTERS[state])
    rule_id = request.GET.get("rule", "")
    rule = AlertRule.objects.filter(pk=int(rule_id)).first() if rule_id.isdigit() else None
    if rule is not None:
        events = events.filter(rule=rule)
    if request.GET.get("unacknowledged"):
        events = events.filter(acknowledged_at__isnull=True)
    page = Paginator(events, EVENTS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "state": state,
        "states": list(STATE_FILTERS),
        "rule": rule,
        "rules": AlertRule.objects.only("id", "name"),
        "unacknowledged": bool(request.GET.get("unacknowledged")),
        "now": clock.now(),
    }
    return render(request, "alerts/events.html", context)


@require_role(VIEWER)
@require_GET
def event_detail(request, event_id: int):
    event = get_object_or_404(AlertEvent.objects.select_related("rule"), pk=event_id)
    return render(request, "alerts/event_detail.html", _event_context(event, AcknowledgeForm()))


def _event_context(event: AlertEvent, form: AcknowledgeForm) -> dict:
    now = clock.now()
    silences = [
        s for s in Silence.objects.filter(starts_at__lte=now, ends_at__gt=now) if s.silences(event, now)
    ]
    return {
        "event": event,
        "notifications": event.notifications.all(),
        "silenced_by": silences,
        "form": form,
        "kind": KINDS[event.rule.kind] if event.rule else None,
    }


@require_permission("alerts.event.acknowledge")
@require_POST
def event_acknowledge(request, event_id: int):
    event = AlertEvent.objects.select_related("rule").filter(pk=event_id).first()
    if event is None:
        _not_found(request, "alerts.event.acknowledge", f"event {event_id}")
    form = AcknowledgeForm(request.POST)
    target = f"event {event.pk} ({event.rule_name}: {event.subject_text})"
    if not form.is_valid() or event.acknowledged:
        detail = (
            form.errors.as_text()
            if not event.acknowledged
            else f"already acknowledged by {event.acknowledged_by}"
        )
        audit(
            request,
            "alerts.event.acknowledge",
            target,
            _printable(request.POST),
            AuditRecord.RESULT_FAILED,
            detail,
        )
        if event.acknowledged:
            form.add_error(None, detail)
        return render(request, "alerts/event_detail.html", _event_context(event, form), status=400)
    event.acknowledged_at, event.acknowledged_by = clock.now(), request.user.get_username()
    event.ack_note = form.cleaned_data["note"]
    event.save(update_fields=["acknowledged_at", "acknowledged_by", "ack_note"])
    audit(request, "alerts.event.acknowledge", target, {"note": event.ack_note})
    return redirect("alerts:event_detail", event_id=event.pk)


# -- rules ----------------------------------------------------------------------------------------
@require_role(VIEWER)
@require_GET
def rule_list(request):
    rules = list(AlertRule.objects.all())
    open_counts: dict[int, int] = {}
    for rule_id, state in AlertEvent.objects.filter(state__in=AlertEvent.OPEN_STATES).values_list(
        "rule_id", "state"
    ):
        if state == AlertEvent.FIRING:
            open_counts[rule_id] = open_counts.get(rule_id, 0) + 1
    rows = [(rule, open_counts.get(rule.pk, 0)) for rule in rules]
    return render(request, "alerts/rules.html", {"rows": rows, "kinds": KINDS})


@require_permission("alerts.rule.save")
@require_http_methods(["GET", "POST"])
def rule_create(request):
    return _rule_form(request, None)


@require_permission("alerts.rule.save")
@require_http_methods(["GET", "POST"])
def rule_edit(request, rule_id: int):
    rule = AlertRule.objects.filter(pk=rule_id).first()
    if rule is None:
        _not_found(request, "alerts.rule.save", f"rule {rule_id}")
    return _rule_form(request, rule)


def _rule_form(request, rule: AlertRule | None) -> HttpResponse:
    was_enabled = rule.enabled if rule else False  # before validation writes the form into the rule
    form = RuleForm(request.POST or None, instance=rule)
    context = {"form": form, "rule": rule, "kinds": KINDS.values()}
    if request.method != "POST":
        return render(request, "alerts/rule_form.html", context)
    target = rule.name if rule else request.POST.get("name", "")[:100]
    if not form.is_valid():
        audit(request, "alerts.rule.save", target, _printable(request.POST), AuditRecord.RESULT_FAILED,
              form.errors.as_text())  # fmt: skip
        return render(request, "alerts/rule_form.html", context, status=400)
    with transaction.atomic():
        saved = form.save(commit=False)
        saved.updated_by = request.user.get_username()
        saved.save()
        if was_enabled and not saved.enabled:
            close_events_of(saved, "rule disabled")
    changes = (
        {name: request.POST.get(name, "") for name in form.changed_data} if rule else _printable(request.POST)
    )
    audit(request, "alerts.rule.save", saved.name, changes, detail="created" if rule is None else "updated")
    return redirect("alerts:rules")


@require_permission("alerts.rule.delete")
@require_POST
def rule_delete(request, rule_id: int):
    rule = AlertRule.objects.filter(pk=rule_id).first()
    if rule is None:
        _not_found(request, "alerts.rule.delete", f"rule {rule_id}")
    name = rule.name
    with transaction.atomic():
        close_events_of(rule, "rule deleted")
        rule.delete()
    audit(request, "alerts.rule.delete", name)
    return redirect("alerts:rules")


# -- silences -------------------------------------------------------------------------------------
@require_role(VIEWER)
@require_GET
def silence_list(request):
    now = clock.now()
    silences = Silence.objects.select_related("rule")
    return render(
        request,
        "alerts/silences.html",
        {
            "active": silences.filter(ends_at__gt=now).order_by("ends_at"),
            "ended": silences.filter(ends_at__lte=now)[:50],
            "now": now,
        },
    )


@require_permission("alerts.silence.create")
@require_http_methods(["GET", "POST"])
def silence_create(request):
    initial = _silence_initial(request.GET.get("event", ""))
    form = SilenceForm(request.POST or None, initial=initial)
    if request.method != "POST":
        return render(request, "alerts/silence_form.html", {"form": form})
    if not form.is_valid():
        audit(request, "alerts.silence.create", "", _printable(request.POST), AuditRecord.RESULT_FAILED,
              form.errors.as_text())  # fmt: skip
        return render(request, "alerts/silence_form.html", {"form": form}, status=400)
    silence = form.save(commit=False)
    silence.starts_at, silence.created_by = clock.now(), request.user.get_username()
    silence.save()
    audit(request, "alerts.silence.create", str(silence), _printable(request.POST))
    return redirect("alerts:silences")


def _silence_initial(event_id: str) -> dict:
    """A silence offered from an event's page covers that rule and subject, for two hours."""
    from datetime import timedelta

    initial: dict[str, object] = {
        "ends_at": (clock.now() + timedelta(hours=2)).replace(second=0, microsecond=0)
    }
    event = AlertEvent.objects.filter(pk=int(event_id)).first() if event_id.isdigit() else None
    if event is not None:
        initial["rule"] = event.rule_id
        initial.update({f"{name}_pattern": value for name, value in event.subject_fields.items()})
    return initial


@require_permission("alerts.silence.expire")
@require_POST
def silence_expire(request, silence_id: int):
    silence = Silence.objects.filter(pk=silence_id).first()
    if silence is None:
        _not_found(request, "alerts.silence.expire", f"silence {silence_id}")
    now = clock.now()
    if silence.ends_at > now:
        silence.ends_at = max(now, silence.starts_at)
        silence.save(update_fields=["ends_at"])
    audit(request, "alerts.silence.expire", str(silence))
    return redirect("alerts:silences")


def _not_found(request, action: str, what: str) -> NoReturn:
    reason = f"{what} does not exist (deleted meanwhile?)"
    audit(request, action, what, result=AuditRecord.RESULT_FAILED, detail=reason)
    raise Http404(reason)


def _printable(post) -> dict:
    return {key: value[:500] for key, value in post.items() if key != "csrfmiddlewaretoken"}
