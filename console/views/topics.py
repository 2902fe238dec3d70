"""W2 + W14: topics — list with kind filter and search, create / update, delete, route, per-queue
status, consuming groups, a test message, a TPS sample for the chart."""

from __future__ import annotations

import time

from django.core.exceptions import BadRequest, ValidationError
from django.core.paginator import Paginator
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from broker.common.topic_kinds import KIND_LABELS, KINDS
from console.commands import serves, topics
from console.forms import PERM_CHOICES, SendMessageForm, check_topic
from console.queries import topics as queries
from console.queries import topology
from console.views.common import cluster_of, perform
from core.roles import VIEWER, require_role

PAGE_SIZE = 100


def _named_topic(topic: str) -> str:
    """The URL's topic when it is a topic name: anything else is the caller's mistake (a 400
    naming it), not a refusal by the cluster (the 503 asking the brokers would give)."""
    try:
        return check_topic(topic)
    except ValidationError as exc:
        raise BadRequest(f"Invalid topic: {' '.join(exc.messages)}") from None


@require_GET
@require_role(VIEWER)
def topic_list(request):
    cluster = cluster_of(request)
    kind = request.GET.get("kind", "")
    if kind and kind not in KINDS:
        raise BadRequest(f"unknown topic kind {kind!r}; use one of {', '.join(KINDS)}")
    query = request.GET.get("q", "").strip()
    rows = queries.all_topics(cluster)
    counts = {k: sum(1 for r in rows if k in r.kinds) for k in KINDS}
    shown = [
        r for r in rows if (not kind or kind in r.kinds) and (not query or query.lower() in r.name.lower())
    ]
    page = Paginator(shown, PAGE_SIZE).get_page(request.GET.get("page"))
    layout = topology.layout(cluster)
    context = {
        "page": page,
        "total": len(rows),
        "kind": kind,
        "query": query,
        "kinds": [(k, KIND_LABELS[k], counts[k]) for k in KINDS],
        "clusters": layout.clusters,
        "masters": layout.masters,
        "perm_choices": PERM_CHOICES,
    }
    template = (
        "console/_topic_table.html" if request.htmx and not request.htmx.boosted else "console/topics.html"
    )
    return render(request, template, context)


@require_GET
@require_role(VIEWER)
def topic_detail(request, topic: str):
    topic = _named_topic(topic)
    detail = queries.topic_detail(cluster_of(request), topic)
    route, by_set = detail.route, detail.by_set
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
        "system": detail.system,
        "perm_choices": PERM_CHOICES,
        "current": {
            "read_queue_nums": queue_data.read_queue_nums if queue_data else 8,
            "write_queue_nums": queue_data.write_queue_nums if queue_data else 8,
            "perm": queue_data.perm if queue_data else 6,
            "order": bool(route.order_topic_conf),
        },
        "masters": [(b.broker_name, b.master_addr) for b in route.broker_datas if b.master_addr],
        "clusters": sorted({b.cluster for b in route.broker_datas}),
        "down_sets": detail.down_sets,
    }
    return render(request, "console/topic_detail.html", context)


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
    counters = queries.topic_counters(cluster_of(request), _named_topic(topic))
    return JsonResponse({"at": int(time.time() * 1000), "counters": counters})
