"""``{% history_charts_for page name as charts %}``: the history charts of a console page with the
URL of each one's JSON, for ``history/_charts.html`` (which the cluster, broker, topic and group
pages include)."""

from __future__ import annotations

from urllib.parse import urlencode

from django import template
from django.urls import reverse

from broker.client.admin import MQClientError
from core.cluster_access import admin_of
from history import catalogue, charts

register = template.Library()


def broker_member(request, broker_name: str, addr: str) -> str:
    """A broker member's history name (``brokerName:brokerId``) from the address its page shows;
    the master's when the name server no longer lists the address."""
    try:
        data = admin_of(request).cluster_info().brokers.get(broker_name)
    except MQClientError:
        data = None
    for broker_id, member_addr in data.broker_addrs.items() if data else ():
        if member_addr == addr:
            return catalogue.broker_key(broker_name, broker_id)
    return catalogue.broker_key(broker_name, 0)


@register.simple_tag(takes_context=True)
def history_charts_for(context, page: str, name: str = "", addr: str = "") -> list[dict]:
    if page == "broker":
        name = broker_member(context["request"], name, addr)
    shown = []
    for chart in charts.CHARTS[page]:
        url = reverse("history:chart", args=[page, chart.key])
        if not chart.every_member:
            url += "?" + urlencode({"name": name})
        shown.append({"key": chart.key, "title": chart.title, "hint": chart.hint, "url": url, "name": name})
    return shown
