"""W1: clusters and their brokers, runtime figures, broker config (view; update for admins), TPS;
the Replication section and, with RocketMQ 5's controller mode, a broker set's switchover (admins:
a confirmation step, then CONTROLLER_ELECT_MASTER designating the new master, audited)."""

from __future__ import annotations

import time
from itertools import groupby

from django.contrib import messages
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from broker.common.errors import ControllerError
from console.commands import Refused, brokers, serves
from console.forms import BrokerConfigForm
from console.queries import brokers as queries
from console.services.broker_config_rows import config_rows, updatable_keys
from console.services.damaged_data import damaged_data
from console.services.replication import SwitchoverRefused
from console.services.vanished_brokers import down_sets
from console.views.common import cluster_of, perform, run
from core.boundary import leads_to
from core.errors import error_page
from core.roles import VIEWER, require_role


@require_GET
@require_role(VIEWER)
def cluster_page(request):
    cluster = cluster_of(request)
    replication = queries.replication(cluster)
    overview = replication.overview
    if request.headers.get("HX-Target") == "replication":  # the section's own refresh
        return render(request, "console/_replication.html", {"replication": replication})
    rows = overview.rows
    clusters = [
        {"name": name, "brokers": list(members)} for name, members in groupby(rows, key=lambda r: r.cluster)
    ]
    # Members the name server dropped (a stopped broker) are only known to the metric history.
    vanished = queries.vanished(cluster, {(r.broker_name, r.broker_id) for r in rows})
    context = {
        "clusters": clusters,
        "namesrv_addrs": queries.namesrv_addrs(cluster),
        "broker_count": len({(r.cluster, r.broker_name) for r in rows}),
        "total_in_tps": round(sum(r.in_tps for r in rows), 2),
        "total_out_tps": round(sum(r.out_tps for r in rows), 2),
        "replication": replication,
        "vanished": vanished,
        "down_sets": down_sets(vanished),
    }
    return render(request, "console/cluster.html", context)


@require_GET
@require_role(VIEWER)
def broker_page(request, addr: str):
    view = queries.broker(cluster_of(request), addr)
    state, runtime = view.config, view.runtime
    context = {
        "addr": addr,
        "broker_name": view.broker_name,
        "broker_id": view.broker_id,  # the history's charts of this member (history/_charts.html)
        "runtime": runtime,
        "damaged": damaged_data(runtime),
        "config_rows": config_rows(state.values, state.pending),
        "updatable_keys": updatable_keys(),
        "form": BrokerConfigForm(),
    }
    return render(request, "console/broker.html", context)


@require_POST
@serves("broker.config.update")
def broker_config_update(request, addr: str):
    perform(request, "broker.config.update", brokers.UpdateBrokerConfig.parse(addr, request.POST))
    return redirect("console:broker", addr=addr)


@require_POST
@serves(brokers.PURGE_DAMAGED)
def broker_damaged_purge(request, addr: str):
    """Delete one quarantined range of damaged commit-log data, after the banner's confirmation."""
    perform(request, brokers.PURGE_DAMAGED, brokers.PurgeDamaged.parse(addr, request.POST))
    return redirect("console:broker", addr=addr)


@require_GET
@require_role(VIEWER)
def broker_tps_sample(request):
    """Running put/get totals per broker master; the page turns consecutive samples into msgs/s."""
    cluster = cluster_of(request)
    counters, errors = queries.put_get_totals(cluster)
    return JsonResponse(
        {
            "at": int(time.time() * 1000),
            "counters": counters,
            "errors": errors,
            "namesrv": cluster.namesrv,
        }
    )


# -- switchover (controller mode) -----------------------------------------------------------------


def _controller_unavailable(request, exc: ControllerError):
    hint = (
        "Check that the controllers (CONSOLE_CONTROLLER_ADDR, or the brokers' controllerAddr) are "
        "running and reachable from the console; nothing was changed."
    )
    return error_page(request, 503, "Controller unavailable", str(exc), hint)


@leads_to(brokers.SWITCHOVER)
@require_GET
def switchover_confirm(request, broker_name: str, broker_id: int):
    """The confirmation step: the set as the controller sees it now, the replica to promote, and
    what would make the controller refuse."""
    try:
        plan = queries.switchover_confirmation(cluster_of(request), broker_name, broker_id)
    except SwitchoverRefused as exc:
        raise Http404(str(exc)) from None
    except ControllerError as exc:
        return _controller_unavailable(request, exc)
    return render(request, "console/switchover_confirm.html", {"plan": plan})


@require_POST
@serves(brokers.SWITCHOVER)
def switchover_apply(request, broker_name: str):
    """Make the posted replica the master of ``broker_name`` (``console.commands.brokers``)."""
    try:
        outcome = run(request, brokers.SWITCHOVER, brokers.Switchover.parse(broker_name, request.POST))
    except brokers.SetNotFound as exc:
        raise Http404(exc.shown) from None
    except Refused as exc:
        messages.error(request, exc.shown)
        return redirect("console:cluster")
    except ControllerError as exc:
        return _controller_unavailable(request, exc)
    messages.success(request, outcome.detail)
    return redirect("console:cluster")
