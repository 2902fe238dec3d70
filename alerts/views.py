"""Alert pages (W15): events (filter by state and rule, acknowledge), rules (CRUD), silences.

Reading needs the viewer role; every change needs the operator role (``core.roles.ACTIONS``), is
refused with a 403 saying so otherwise, and leaves an audit record, refused, failed or done.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core import clock
from core.boundary import Invalid, found, run_local, serves
from core.public import VIEWER, require_role

from . import commands
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


@serves("alerts.event.acknowledge")
@require_POST
def event_acknowledge(request, event_id: int):
    params = commands.Acknowledge(event_id, request.POST)
    try:
        outcome = run_local(request, "alerts.event.acknowledge", params)
    except Invalid as exc:
        event, form = exc.form
        return render(request, "alerts/event_detail.html", _event_context(event, form), status=400)
    return redirect("alerts:event_detail", event_id=outcome.value.pk)


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


@serves("alerts.rule.save")
@require_http_methods(["GET", "POST"])
def rule_create(request):
    return _rule_form(request, None)


@serves("alerts.rule.save")
@require_http_methods(["GET", "POST"])
def rule_edit(request, rule_id: int):
    return _rule_form(request, rule_id)


def _rule_form(request, rule_id: int | None) -> HttpResponse:
    if request.method != "POST":
        rule = None if rule_id is None else found(lambda: commands.existing_rule(rule_id))
        context = {"form": RuleForm(instance=rule), "rule": rule, "kinds": KINDS.values()}
        return render(request, "alerts/rule_form.html", context)
    try:
        run_local(request, "alerts.rule.save", commands.SaveRule(rule_id, request.POST))
    except Invalid as exc:
        rule = exc.form.instance if rule_id is not None else None
        context = {"form": exc.form, "rule": rule, "kinds": KINDS.values()}
        return render(request, "alerts/rule_form.html", context, status=400)
    return redirect("alerts:rules")


@serves("alerts.rule.delete")
@require_POST
def rule_delete(request, rule_id: int):
    run_local(request, "alerts.rule.delete", commands.DeleteRule(rule_id))
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


@serves("alerts.silence.create")
@require_http_methods(["GET", "POST"])
def silence_create(request):
    if request.method != "POST":
        form = SilenceForm(initial=_silence_initial(request.GET.get("event", "")))
        return render(request, "alerts/silence_form.html", {"form": form})
    try:
        run_local(request, "alerts.silence.create", commands.CreateSilence(request.POST))
    except Invalid as exc:
        return render(request, "alerts/silence_form.html", {"form": exc.form}, status=400)
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


@serves("alerts.silence.expire")
@require_POST
def silence_expire(request, silence_id: int):
    run_local(request, "alerts.silence.expire", commands.ExpireSilence(silence_id))
    return redirect("alerts:silences")
