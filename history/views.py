"""History pages (W16): the charts' JSON for the cluster, broker, topic and group pages, and the
history page (top 10 topics and groups by TPS and by lag, messages in and out per day).

Every reader of the console (viewer and up) may read history. Query parameters are few and bounded
(a window of ``charts.WINDOWS``, a name of at most ``MAX_NAME`` characters, a number of days up to
the rollups' retention); anything else is a 400 that says what was wrong. The cluster is the
session's name server (``current_namesrv``), as on every console page. A database that fails to
answer is a 503 with its reason, which the chart shows in place of the canvas.
"""

from __future__ import annotations

import logging
import math
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import BadRequest
from django.db import DatabaseError
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from broker.common.system_names import is_system_group
from broker.common.topic_kinds import NORMAL, cluster_system_topics, topic_kinds
from core.cluster_access import current_namesrv
from core.roles import VIEWER, require_role
from history import catalogue, charts, query
from history.models import Cycle, Series

log = logging.getLogger(__name__)

MAX_NAME = 255  # Series.name's length: a longer name can have no history
TOP_N = 10
TOP_WINDOWS = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7)}
# (metric, scope, heading, unit) of the history page's top-10 tables.
TOP_TABLES = (
    ("tps_in", "topic", "Topics by TPS", "msg/s"),
    ("consume_tps", "group", "Groups by consume TPS", "msg/s"),
    ("lag", "group", "Groups by lag", "msg"),
)


def sample_seconds() -> int:
    return int(getattr(settings, "HISTORY_SAMPLE_SECONDS", 30))


def max_days() -> int:
    return max(1, math.ceil(float(getattr(settings, "HISTORY_ROLLUP_DAYS", 30))))


def _window(request, choices) -> str:
    window = request.GET.get("window", "hour")
    if window not in choices:
        raise BadRequest(f"window must be one of {', '.join(choices)}, not {window[:32]!r}")
    return window


def _name(request) -> str:
    name = request.GET.get("name", "")
    if not name:
        raise BadRequest("name is required: the broker (brokerName:brokerId), topic or group to chart")
    if len(name) > MAX_NAME or not name.isprintable():
        raise BadRequest(f"name must be at most {MAX_NAME} printable characters")
    return name


def _days(request) -> int:
    text = request.GET.get("days", "30")
    limit = max_days()
    if not text.isdigit() or not 1 <= int(text) <= limit:
        raise BadRequest(
            f"days must be a whole number from 1 to {limit} (the rollups' retention), not {text[:32]!r}"
        )
    return int(text)


def _unavailable(exc: DatabaseError) -> JsonResponse:
    log.warning("history: query failed: %s", exc)
    return JsonResponse(
        {"title": "History unavailable", "error": f"the history database did not answer: {exc}"}, status=503
    )


@require_GET
@require_role(VIEWER)
def chart_json(request, page: str, chart: str):
    """One chart's lines: ``?window=hour|day|week`` and, except on the cluster page, ``?name=``."""
    spec = charts.find(page, chart)
    if spec is None:
        raise Http404(f"no history chart {chart!r} on the {page} page")
    window = _window(request, charts.WINDOWS)
    name = "" if spec.every_member else _name(request)
    try:
        data = charts.chart_data(spec, name, window, current_namesrv(request))
    except DatabaseError as exc:
        return _unavailable(exc)
    data["sample_seconds"] = sample_seconds()
    return JsonResponse(data)


@require_GET
@require_role(VIEWER)
def daily_json(request):
    """Messages put and read per day, all masters of the cluster: ``?days=1..30``."""
    days = _days(request)
    try:
        rows = _daily_rows(days, current_namesrv(request))
    except DatabaseError as exc:
        return _unavailable(exc)
    return JsonResponse({"days": rows, "sample_seconds": sample_seconds()})


def _daily_rows(days: int, cluster: str) -> list[dict]:
    # Summed per master, not from the cluster's total: when one master restarts its counter starts
    # again at 0 while the others go on, and only a broker's own counter tells a restart.
    masters = [name for name in query.names("messages_in", "broker", cluster) if catalogue.is_master(name)]
    put = query.daily_totals("messages_in", "broker", days, cluster=cluster, names=masters)
    read = dict(query.daily_totals("messages_out", "broker", days, cluster=cluster, names=masters))
    return [
        {"day": day.isoformat(), "in": round(total), "out": round(read.get(day, 0.0))} for day, total in put
    ]


def _internal_names(cluster: str) -> frozenset[str]:
    """The topics every broker registers after its cluster and broker names (RocketMQ's own)."""
    names = Series.objects.filter(cluster=cluster, scope__in=("broker", "cluster"))
    clusters, brokers = {cluster}, set()
    for scope, name in names.values_list("scope", "name").distinct():
        if scope == "broker":
            brokers.add(name.rsplit(":", 1)[0])
        else:
            clusters.add(name)
    return cluster_system_topics(frozenset(clusters), frozenset(brokers))


def _top(metric: str, scope: str, window: timedelta, cluster: str, internal: frozenset[str]):
    """The top ``TOP_N`` of the operators' own topics and groups, above zero: RocketMQ's system,
    retry and dead-letter topics and system groups are left out (as the Topics page's default
    filter does), and an idle name says nothing about what is busiest."""
    # System names are a dozen or so per cluster: asking for more than enough keeps one query.
    ranked = query.top(metric, scope, TOP_N + 100, window, cluster=cluster)
    if scope == "topic":
        kept = [(n, v) for n, v in ranked if topic_kinds(n, cluster_and_broker_names=internal) == [NORMAL]]
    else:
        kept = [(n, v) for n, v in ranked if not is_system_group(n)]
    return [(name, value) for name, value in kept if value > 0][:TOP_N]


def _top_tables(cluster: str, window: str) -> list[dict]:
    internal = _internal_names(cluster)
    return [
        {
            "title": title,
            "unit": unit,
            "scope": scope,
            "rows": _top(metric, scope, TOP_WINDOWS[window], cluster, internal),
        }
        for metric, scope, title, unit in TOP_TABLES
    ]


def _per_cycle(cycle: Cycle | None, what: str, compute):
    """History changes once a sampling cycle: a ranking over 1,000 topics (seconds over a day of
    points) is computed once per cycle and kept until the next cycle is stored."""
    if cycle is None:
        return compute()
    key = f"history:{cycle.cluster}:{cycle.pk}:{cycle.taken_at.timestamp()}:{what}"
    value = cache.get(key)
    if value is None:
        value = compute()
        cache.set(key, value, timeout=max(60, 2 * sample_seconds()))
    return value


@require_GET
@require_role(VIEWER)
def history_page(request):
    """Top 10 topics and groups over ``?window=`` and messages per day over the rollups' retention."""
    window = _window(request, TOP_WINDOWS)
    cluster = current_namesrv(request)
    context = {
        "window": window,
        "windows": list(TOP_WINDOWS),
        "days": max_days(),
        "sample_seconds": sample_seconds(),
        "cluster": cluster,
    }
    try:
        cycle = Cycle.objects.filter(cluster=cluster).order_by("-taken_at").first()
        context["cycle"] = cycle
        context["tables"] = _per_cycle(cycle, f"top:{window}", lambda: _top_tables(cluster, window))
        context["daily"] = _per_cycle(cycle, "daily", lambda: _daily_rows(max_days(), cluster))
    except DatabaseError as exc:
        log.warning("history: query failed: %s", exc)
        context["error"] = f"The history database did not answer: {exc}"
    return render(request, "history/history.html", context)
