"""W2 + W14: topics — list with kind filter and search, create / update, delete, route, per-queue
status, consuming groups, a test message, a TPS sample for the chart."""

from __future__ import annotations

import time

from django.core.exceptions import BadRequest
from django.core.paginator import Paginator
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from broker.common.topic_kinds import KIND_LABELS, KINDS
from console.commands import serves, topics
from console.forms import PERM_CHOICES, SendMessageForm
from console.services.topic_by_set import topic_by_set
from console.services.vanished_brokers import down_sets, vanished_brokers
from console.views.common import perform
from core.cluster_access import admin_of, current_namesrv
from core.cluster_queries import is_system_topic_of, topic_consumers, topic_rows
from core.roles import VIEWER, require_role

PAGE_SIZE = 100


@require_GET
@require_role(VIEWER)
def topic_list(request):
    admin = admin_of(request)
    kind = request.GET.get("kind", "")
    if kind and kind not in KINDS:
        raise BadRequest(f"unknown topic kind {kind!r}; use one of {', '.join(KINDS)}")
    query = request.GET.get("q", "").strip()
    rows = topic_rows(admin)
    counts = {k: sum(1 for r in rows if k in r.kinds) for k in KINDS}
    shown = [
        r for r in rows if (not kind or kind in r.kinds) and (not query or query.lower() in r.name.lower())
    ]
    page = Paginator(shown, PAGE_SIZE).get_page(request.GET.get("page"))
    info = admin.cluster_info()
    context = {
        "page": page,
        "total": len(rows),
        "kind": kind,
        "query": query,
        "kinds": [(k, KIND_LABELS[k], counts[k]) for k in KINDS],
        "clusters": sorted(info.clusters),
        "masters": sorted((b.broker_name, b.master_addr) for b in info.brokers.values() if b.master_addr),
        "perm_choices": PERM_CHOICES,
    }
    template = (
        "console/_topic_table.html" if request.htmx and not request.htmx.boosted else "console/topics.html"
    )
    return render(request, template, context)


@require_GET
@require_role(VIEWER)
def topic_detail(request, topic: str):
    admin = admin_of(request)
    route = admin.topic_route(topic)
    by_set = topic_by_set(admin, topic, route)  # a set that does not answer costs its rows only
    status = by_set.status
    queue_data = route.queue_datas[0] if route.queue_datas else None
    context = {
        "topic": topic,
        "route": route,
        "status": status,
        "total_messages": sum(q.max_offset - q.min_offset for q in status.queues),
        "consumers": by_set.consumers,
        "consumers_error": by_set.consumers_error,
        "unreachable": by_set.unreachable,
        "send_form": SendMessageForm(),
        "system": is_system_topic_of(admin, topic),
        "perm_choices": PERM_CHOICES,
        "current": {
            "read_queue_nums": queue_data.read_queue_nums if queue_data else 8,
            "write_queue_nums": queue_data.write_queue_nums if queue_data else 8,
            "perm": queue_data.perm if queue_data else 6,
            "order": bool(route.order_topic_conf),
        },
        "masters": [(b.broker_name, b.master_addr) for b in route.broker_datas if b.master_addr],
        "clusters": sorted({b.cluster for b in route.broker_datas}),
        # Sets the name server dropped are missing from the route: say so rather than let a
        # topic that lost half its queues look whole.
        "down_sets": down_sets(vanished_brokers(current_namesrv(request), _listed_members(admin))),
    }
    return render(request, "console/topic_detail.html", context)


def _listed_members(admin) -> set[tuple[str, int]]:
    brokers = admin.cluster_info().brokers.values()
    return {(data.broker_name, broker_id) for data in brokers for broker_id in data.broker_addrs}


@require_POST
@serves("topic.save")
def topic_save(request):
    """Create a topic, or update its queue counts / permission: on one broker or every master of a cluster."""
    params = topics.SaveTopic.parse(request.POST)
    outcome = perform(request, "topic.save", params)
    return redirect("console:topic", topic=outcome.target) if outcome else redirect("console:topics")


@require_POST
@serves("topic.delete")
def topic_delete(request, topic: str):
    perform(request, "topic.delete", topics.DeleteTopic.parse(topic), missing_is_404=True)
    return redirect("console:topics")


@require_POST
@serves("topic.send")
def topic_send(request, topic: str):
    """Send one test message through the console's SDK producer, as mqadmin sendMessage does."""
    outcome = perform(request, "topic.send", topics.SendTestMessage.parse(topic, request.POST))
    if outcome:
        return redirect(reverse("console:message", args=[outcome.value.offset_msg_id]) + f"?topic={topic}")
    return redirect("console:topic", topic=topic)


@require_GET
@require_role(VIEWER)
def topic_tps_sample(request, topic: str):
    """Running totals: messages stored in the topic and consumed by each group (the page derives rates)."""
    admin = admin_of(request)
    status = admin.topic_status(topic)
    counters = {"produced": sum(q.max_offset for q in status.queues)}
    for consumer in topic_consumers(admin, topic):
        if not consumer.error:
            counters[f"consumed by {consumer.group}"] = consumer.consumed
    return JsonResponse({"at": int(time.time() * 1000), "counters": counters})
