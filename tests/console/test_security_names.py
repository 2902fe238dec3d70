"""The console renders any name that reaches it, and every link to a named thing leads back to it.

Brokers now refuse names outside RocketMQ's set where they enter (and drop such group configs
when they load ``subscriptionGroup.json``), so odd names reach the console the ways that are left:

- an older broker state: ``consumerOffset.json`` written before the check (with the broker's own
  class) names odd groups, and a real broker reports them as the topic's consumers;
- a peer that checks less (an older broker, another implementation): its answers are stood in for
  by adding the odd names to what the real broker answered, at the one service call a list page
  makes (``group_index``, ``topic_consumers``); everything else, the views, the templates and every
  further request about the names, is real;
- links and requests made with odd names directly, through the real views and the real cluster:
  a request the cluster refuses is answered with its reason, never a server error.
"""

from __future__ import annotations

import dataclasses
import re
from html import unescape
from urllib.parse import unquote, urlsplit

import pytest
from django.test import Client
from django.urls import Resolver404, URLPattern, URLResolver, get_resolver, resolve, reverse
from hypothesis import given, settings
from hypothesis import strategies as st

import console.queries.groups
import console.queries.topics
from broker.common.json_config_file import ConsumerOffsetTable
from console.url_names import name_to_segment, segment_to_name
from core import cluster_access, cluster_queries
from tests.cluster import CLI, create_user, start
from tests.console.conftest import PASSWORD

pytestmark = pytest.mark.django_db

TOPIC = "OddNamesTopic"
ODD_NAMES = [
    "a/b",
    "%",
    "<script>alert(1)</script>",
    "grüße-组-🚀",
    "g" * 130,
    "..",
    ".",
    "~2F",
    "a b?c#d&e=f",
    "back\\slash",
    "quote\"and'apos",
    "new\nline",
]
MSG_ID = "7F00000100002A9F0000000000000000"


@pytest.fixture(scope="module")
def odd_cluster(tmp_path_factory):
    """One broker whose stored consumer offsets name every odd group on ``TOPIC`` (so the broker
    reports them as the topic's consumers)."""
    workdir = tmp_path_factory.mktemp("odd-names")
    cluster = start(CLI, workdir, brokers=("broker-a",))
    try:
        cluster.create_topic(TOPIC, 1)
        process = cluster.brokers["broker-a"]
        assert process.stop() == 0
        config_dir = workdir / "broker-a" / "config"
        offsets = ConsumerOffsetTable(config_dir)
        offsets.load()
        for name in ODD_NAMES:
            offsets.commit(name, TOPIC, 0, 0)
        offsets.persist()
        cluster.start_broker("broker-a")
        cluster.wait_for_route(TOPIC)
        yield cluster
    finally:
        cluster_access.close_all()
        cluster.stop()


@pytest.fixture
def client(odd_cluster, settings):
    settings.BROKER_NAMESRV = odd_cluster.namesrv_addr
    client = Client()
    client.force_login(create_user("odd-admin", "admin", PASSWORD))
    return client


def _links(html: str, view_name: str) -> dict[str, str]:
    """href -> the name it carries, for every link of ``html`` to the view ``console:<view_name>``."""
    found = {}
    for href in re.findall(r'href="([^"]+)"', html):
        path = unquote(urlsplit(unescape(href)).path)
        try:
            match = resolve(path)
        except Resolver404:  # links elsewhere (static files) are not about a name
            continue
        if match.view_name == f"console:{view_name}":
            found[href] = next(iter(match.kwargs.values()))
    return found


def test_the_group_list_shows_every_odd_name_with_a_link_back_to_it(client, monkeypatch):
    def with_odd_names(admin):
        index = cluster_queries.group_index(admin)  # the real broker's answer, plus a peer's odd names
        return dataclasses.replace(index, names=sorted({*index.names, *ODD_NAMES}))

    monkeypatch.setattr(console.queries.groups, "group_index", with_odd_names)
    response = client.get("/groups/", {"q": ""})
    assert response.status_code == 200, response.content[:300]
    html = response.content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    linked = set(_links(html, "group").values())
    assert set(ODD_NAMES) <= linked, set(ODD_NAMES) - linked


def test_the_topic_page_links_every_consumer_the_broker_reports(client, odd_cluster):
    """Straight from the older broker state: whatever groups the broker reports, odd or not."""
    admin = cluster_access.admin_for(odd_cluster.namesrv_addr)
    reported = {c.group for c in cluster_queries.topic_consumers(admin, TOPIC)}
    response = client.get(reverse("console:topic", args=[TOPIC]))
    assert response.status_code == 200, response.content[:300]
    assert reported <= set(_links(response.content.decode(), "group").values())


def test_the_topic_page_lists_odd_consumers_with_links_back_to_them(client, monkeypatch):
    def with_odd_names(admin, topic):
        consumers = cluster_queries.topic_consumers(admin, topic)
        known = {c.group for c in consumers}
        extra = [cluster_queries.TopicConsumer(n, error="refused") for n in ODD_NAMES if n not in known]
        return consumers + extra

    monkeypatch.setattr(console.queries.topics, "topic_consumers", with_odd_names)
    response = client.get(reverse("console:topic", args=[TOPIC]))
    assert response.status_code == 200, response.content[:300]
    html = response.content.decode()
    assert "<script>alert(1)</script>" not in html
    assert set(ODD_NAMES) <= set(_links(html, "group").values())


def _named_patterns(resolver=None, namespace=""):
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            yield from _named_patterns(entry, entry.namespace or namespace)
        elif isinstance(entry, URLPattern) and any(
            type(c).__name__ == "NameConverter" for c in entry.pattern.converters.values()
        ):
            yield f"{namespace}:{entry.name}", entry


@pytest.mark.parametrize("name", ODD_NAMES, ids=[f"name{i}" for i in range(len(ODD_NAMES))])
def test_every_page_about_an_odd_name_answers_without_a_server_error(client, name):
    """Each URL that carries a name, with the odd name in it, as a GET (a page) and as a POST (an
    action: refused by the cluster or the console's checks, with the reason)."""
    answered = {}
    for view_name, pattern in _named_patterns():
        kwargs = {
            key: name if type(conv).__name__ == "NameConverter" else ("csv" if key == "fmt" else 1)
            for key, conv in pattern.pattern.converters.items()
        }
        url = reverse(view_name, kwargs=kwargs)
        assert resolve(unquote(url)).kwargs == kwargs, url  # the link leads back to the same name
        for method in ("get", "post"):
            status = getattr(client, method)(url, {"topic": TOPIC, "mode": "latest"}).status_code
            answered[(method, view_name)] = status
            assert status < 500 or status == 503, (method, url, status)
    assert answered[("get", "console:group")] in {200, 404, 503}


def test_a_group_opened_by_name_on_the_dlq_page_keeps_its_name(client):
    response = client.get("/ops/dlq/", {"group": "a/b"})
    # Dead letters of an illegal group cannot exist (its %DLQ% topic is illegal): refused, with why.
    assert response.status_code == 400 and b"bad consumer group name" in response.content
    ok = client.get("/ops/dlq/", {"group": "legal-group"})
    assert ok.status_code == 302 and ok["Location"] == "/ops/dlq/legal-group/"


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=0, max_size=200))
def test_any_name_round_trips_through_its_url(name):
    url = reverse("console:group", args=[name])
    assert resolve(unquote(url)).kwargs == {"group": name}
    assert segment_to_name(name_to_segment(name)) == name
    segment = url.split("/")[2]
    assert segment not in {".", "..", ""} and unquote(segment).lower() not in {".", ".."}


def test_valid_names_keep_their_urls():
    for name in ("TBW102", "%RETRY%group-1", "%DLQ%g_2", "a|b"):
        assert name_to_segment(name) == name
    assert reverse("console:topic", args=["%RETRY%g"]) == "/topics/%25RETRY%25g/"


@pytest.mark.parametrize("segment", ["a~", "~2", "~zz", "~2f", "~~"])
def test_a_malformed_escape_is_no_page(segment, db):
    viewer = Client()
    viewer.force_login(create_user("escape-viewer", "viewer", PASSWORD))
    assert viewer.get(f"/groups/{segment}/").status_code == 404
