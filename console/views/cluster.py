"""W1: clusters and their brokers, runtime figures, broker config (view; update for admins), TPS."""

from __future__ import annotations

import time
from itertools import groupby

from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from broker.client.admin import MQClientError, NotFoundError
from console.cluster_access import admin_of, current_namesrv
from console.forms import BrokerConfigForm
from console.roles import VIEWER, require_permission, require_role
from console.services.broker_config_rows import config_rows, updatable_keys
from console.services.cluster_queries import cluster_overview
from console.views.common import invalid_form, run_action


@require_GET
@require_role(VIEWER)
def cluster_page(request):
    admin = admin_of(request)
    overview = cluster_overview(admin)
    if request.headers.get("HX-Target") == "replication":  # the section's own refresh
        return render(request, "console/_replication.html", {"broker_sets": overview.broker_sets})
    rows = overview.rows
    clusters = [
        {"name": name, "brokers": list(members)} for name, members in groupby(rows, key=lambda r: r.cluster)
    ]
    context = {
        "clusters": clusters,
        "namesrv_addrs": admin.namesrv_addrs,
        "broker_count": len({(r.cluster, r.broker_name) for r in rows}),
        "total_in_tps": round(sum(r.in_tps for r in rows), 2),
        "total_out_tps": round(sum(r.out_tps for r in rows), 2),
        "broker_sets": overview.broker_sets,
    }
    return render(request, "console/cluster.html", context)


def _broker_name_of(admin, addr: str) -> str:
    name = admin.cluster_info().broker_name_of(addr)
    if name is None:
        namesrv = ";".join(admin.namesrv_addrs)
        raise NotFoundError(f"no broker at {addr} is registered on name server {namesrv}")
    return name


@require_GET
@require_role(VIEWER)
def broker_page(request, addr: str):
    admin = admin_of(request)
    broker_name = _broker_name_of(admin, addr)
    state = admin.broker_config_state(addr)
    context = {
        "addr": addr,
        "broker_name": broker_name,
        "runtime": admin.broker_runtime_info(addr),
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
