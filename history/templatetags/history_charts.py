"""``{% history_charts_for page name broker_id as charts %}``: the history charts of a console page
with the URL of each one's JSON, for ``history/_charts.html`` (which the cluster, broker, topic and
group pages include). It only draws: the page's view found what it names (a broker member's id)."""

from __future__ import annotations

from urllib.parse import urlencode

from django import template
from django.urls import reverse

from history import catalogue, charts

register = template.Library()


@register.simple_tag
def history_charts_for(page: str, name: str = "", broker_id: int | str = 0) -> list[dict]:
    """The charts of ``page``; on a broker's page ``name`` is the broker set and ``broker_id`` the
    member's id in it (the history names a member ``brokerName:brokerId``)."""
    if page == "broker":
        name = catalogue.broker_key(name, broker_id)
    shown = []
    for chart in charts.CHARTS[page]:
        url = reverse("history:chart", args=[page, chart.key])
        if not chart.every_member:
            url += "?" + urlencode({"name": name})
        shown.append({"key": chart.key, "title": chart.title, "hint": chart.hint, "url": url, "name": name})
    return shown
