"""W1: clusters and their brokers, runtime figures, broker config (view; update for admins), TPS;
the Replication section and, with RocketMQ 5's controller mode, a broker set's switchover (admins:
a confirmation step, then CONTROLLER_ELECT_MASTER designating the new master, audited)."""

from __future__ import annotations

import time
from itertools import groupby

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from broker.client.admin import MQClientError, NotFoundError
from broker.controller.client import ControllerError
from broker.controller.state import MAX_BROKER_ID
from console.forms import BrokerConfigForm
from console.services.broker_config_rows import config_rows, updatable_keys
from console.services.damaged_data import damaged_data
from console.services.replication import SwitchoverRefused, switchover, switchover_plan
from console.services.replication import replication_view as build_replication_view
from console.services.vanished_brokers import down_sets, vanished_brokers
from console.views.common import audited, invalid_form, run_action
from core.audit import audit
from core.cluster_access import admin_of, current_namesrv
from core.errors import error_page
from core.models import AuditRecord
from core.roles import VIEWER, require_permission, require_role

SWITCHOVER = "broker.switchover"
PURGE_DAMAGED = "broker.damaged.purge"


@require_GET
@require_role(VIEWER)
def cluster_page(request):
    admin = admin_of(request)
    replication = build_replication_view(admin)
    overview = replication.overview
    if request.headers.get("HX-Target") == "replication":  # the section's own refresh
        return render(request, "console/_replication.html", {"replication": replication})
    rows = overview.rows
    clusters = [
        {"name": name, "brokers": list(members)} for name, members in groupby(rows, key=lambda r: r.cluster)
    ]
    # Members the name server dropped (a stopped broker) are only known to the metric history.
    vanished = vanished_brokers(current_namesrv(request), {(r.broker_name, r.broker_id) for r in rows})
    context = {
        "clusters": clusters,
        "namesrv_addrs": admin.namesrv_addrs,
        "broker_count": len({(r.cluster, r.broker_name) for r in rows}),
        "total_in_tps": round(sum(r.in_tps for r in rows), 2),
        "total_out_tps": round(sum(r.out_tps for r in rows), 2),
        "replication": replication,
        "vanished": vanished,
        "down_sets": down_sets(vanished),
    }
    return render(request, "console/cluster.html", context)


def _broker_member_of(admin, addr: str) -> tuple[str, int]:
    """The broker name and id of the member listening at ``addr``."""
    brokers = admin.cluster_info().brokers
    for data in brokers.values():
        for broker_id, member_addr in data.broker_addrs.items():
            if member_addr == addr:
                return data.broker_name, broker_id
    namesrv = ";".join(admin.namesrv_addrs)
    raise NotFoundError(f"no broker at {addr} is registered on name server {namesrv}")


@require_GET
@require_role(VIEWER)
def broker_page(request, addr: str):
    admin = admin_of(request)
    broker_name, broker_id = _broker_member_of(admin, addr)
    state = admin.broker_config_state(addr)
    runtime = admin.broker_runtime_info(addr)
    context = {
        "addr": addr,
        "broker_name": broker_name,
        "broker_id": broker_id,  # the history's charts of this member (history/_charts.html)
        "runtime": runtime,
        "damaged": damaged_data(runtime),
        "config_rows": config_rows(state.values, state.pending),
        "updatable_keys": updatable_keys(),
        "form": BrokerConfigForm(),
    }
    return render(request, "console/broker.html", context)


@require_POST
@require_permission("broker.config.update")
def broker_config_update(request, addr: str):
    form = BrokerConfigForm(request.POST)
    if not form.is_valid():
        invalid_form(request, "broker.config.update", addr, form)
    key, value = form.cleaned_data["key"], form.cleaned_data["value"]
    admin = admin_of(request)
    run_action(
        request,
        "broker.config.update",
        addr,
        {key: value},
        lambda: admin.update_broker_config(addr, {key: value}),
        # The broker's own words: applied now, or written and needing a restart.
        lambda remark: f"Broker {addr}: {remark or f'{key} set to {value}'}",
    )
    return redirect("console:broker", addr=addr)


@require_POST
@require_permission(PURGE_DAMAGED)
@audited(PURGE_DAMAGED)
def broker_damaged_purge(request, addr: str):
    """Delete one quarantined range of damaged commit-log data (the broker's purge request), after
    the banner's confirmation. The messages whose bytes lay there are gone for good."""
    start = _posted_offset(request, "from")
    if request.POST.get("confirm") != "yes":
        raise BadRequest("purging damaged data must be confirmed (confirm=yes)")
    admin = admin_of(request)
    run_action(
        request,
        PURGE_DAMAGED,
        addr,
        {"from": start},
        lambda: admin.purge_damaged_commit_log(addr, start),
        lambda purged: f"Broker {addr}: {_purged_text(purged)}",
    )
    return redirect("console:broker", addr=addr)


def _purged_text(purged) -> str:
    done = "; ".join(
        f"{r.to_offset - r.from_offset} bytes from offset {r.from_offset} to {r.to_offset}" for r in purged
    )
    return f"purged {done}; the messages stored there are gone" if done else "nothing was left to purge"


def _posted_offset(request, name: str) -> int:
    text = (request.POST.get(name) or "").strip()
    if not text.isdigit() or len(text) > 19:
        raise BadRequest(f"{name} must be a commit-log offset (a whole number), not {text[:32]!r}")
    return int(text)


@require_GET
@require_role(VIEWER)
def broker_tps_sample(request):
    """Running put/get totals per broker master; the page turns consecutive samples into msgs/s."""
    admin = admin_of(request)
    counters: dict[str, int] = {}
    errors = []
    for data in sorted(admin.cluster_info().brokers.values(), key=lambda b: b.broker_name):
        if not data.master_addr:
            continue
        try:
            info = admin.broker_runtime_info(data.master_addr)
        except MQClientError as exc:
            errors.append(str(exc))
            continue
        counters[f"{data.broker_name} put"] = int(info.get("msgPutTotalTodayNow") or 0)
        counters[f"{data.broker_name} get"] = int(info.get("msgGetTotalTodayNow") or 0)
    return JsonResponse(
        {
            "at": int(time.time() * 1000),
            "counters": counters,
            "errors": errors,
            "namesrv": current_namesrv(request),
        }
    )


# -- switchover (controller mode) -----------------------------------------------------------------


def _controller_unavailable(request, exc: ControllerError):
    hint = (
        "Check that the controllers (CONSOLE_CONTROLLER_ADDR, or the brokers' controllerAddr) are "
        "running and reachable from the console; nothing was changed."
    )
    return error_page(request, 503, "Controller unavailable", str(exc), hint)


@require_permission(SWITCHOVER)
@require_GET
def switchover_confirm(request, broker_name: str, broker_id: int):
    """The confirmation step: the set as the controller sees it now, the replica to promote, and
    what would make the controller refuse."""
    admin = admin_of(request)
    try:
        plan = switchover_plan(admin, broker_name, broker_id)
    except SwitchoverRefused as exc:
        raise Http404(str(exc)) from None
    except ControllerError as exc:
        return _controller_unavailable(request, exc)
    return render(request, "console/switchover_confirm.html", {"plan": plan})


def _posted_id(request, name: str) -> int:
    text = (request.POST.get(name) or "").strip()
    if not text.isdigit() or not 0 <= int(text) < MAX_BROKER_ID:
        raise BadRequest(
            f"{name} must be a broker id (a whole number from 0 to {MAX_BROKER_ID - 1}), not {text[:32]!r}"
        )
    return int(text)


def _replica_text(identity) -> str:
    return f"{identity.broker_id} ({identity.broker_address})" if identity else "none"


@require_POST
@require_permission(SWITCHOVER)
@audited(SWITCHOVER)
def switchover_apply(request, broker_name: str):
    """Make the posted replica the master of ``broker_name``. The form carries the master epoch
    the confirmation showed: if the set changed master since, nothing is asked of the controller."""
    broker_id = _posted_id(request, "broker_id")
    expected_epoch = _posted_id(request, "master_epoch")
    if request.POST.get("confirm") != "yes":
        raise BadRequest("a switchover must be confirmed (confirm=yes, from its confirmation page)")
    admin = admin_of(request)
    try:
        plan = switchover_plan(admin, broker_name, broker_id)
    except SwitchoverRefused as exc:
        audit(request, SWITCHOVER, broker_name, {"to": broker_id}, AuditRecord.RESULT_FAILED, str(exc))
        raise Http404(str(exc)) from None
    except ControllerError as exc:
        audit(request, SWITCHOVER, broker_name, {"to": broker_id}, AuditRecord.RESULT_FAILED, str(exc))
        return _controller_unavailable(request, exc)
    params = {
        "broker_set": broker_name,
        "from": _replica_text(plan.current_master),
        "to": _replica_text(plan.target),
        "master_epoch": plan.replicas.master_epoch,
        "controllers": ";".join(plan.source.addresses),
    }
    if plan.replicas.master_epoch != expected_epoch:
        reason = (
            f"the master of {broker_name} changed since the confirmation (epoch {expected_epoch} then, "
            f"{plan.replicas.master_epoch} now, master {_replica_text(plan.current_master)}); review it again"
        )
        audit(request, SWITCHOVER, broker_name, params, AuditRecord.RESULT_FAILED, reason)
        messages.error(request, f"Switchover of {broker_name} not done: {reason}")
        return redirect("console:cluster")
    try:
        result = switchover(admin, plan)
    except ControllerError as exc:
        if exc.code is not None:
            reason = str(exc)
            shown = f"Switchover of {broker_name} to broker {broker_id} refused by the controller: {reason}"
        else:  # no answer: the leader may have decided before it went silent
            reason = f"no controller answered: {exc.remark}"
            shown = (
                f"Switchover of {broker_name} to broker {broker_id}: {reason}. It may or may not have "
                "happened; the Replication section shows the master the controllers name now."
            )
        audit(request, SWITCHOVER, broker_name, params, AuditRecord.RESULT_FAILED, reason)
        messages.error(request, shown)
        return redirect("console:cluster")
    was = f"{_replica_text(plan.current_master)} at epoch {plan.replicas.master_epoch}"
    text = (
        f"Broker {result.master_id} ({result.master_address}) is the master of {broker_name} at epoch "
        f"{result.master_epoch} (was {was})"
    )
    audit(request, SWITCHOVER, broker_name, params, AuditRecord.RESULT_OK, text)
    messages.success(request, text)
    return redirect("console:cluster")
