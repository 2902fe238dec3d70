"""Error pages say what happened: something that does not exist is 404 "Not found" naming it, on
every detail view (topic, group, message, dead letter, trace, broker); 503 "Cluster unavailable"
only when the cluster really does not answer (a killed broker, a stopped name server)."""

from __future__ import annotations

import re
import signal

import pytest
from django.test import Client
from django.urls import reverse

from broker.common.message import Message
from core import cluster_access
from tests.cluster import console_preset, start

pytestmark = pytest.mark.django_db

UNKNOWN_HOST_ID = "0A0B0C0D00002A9F00000000DEADBEEF"  # 10.11.12.13:10911, no broker of the cluster


def _title(response) -> str:
    return re.search(rb"<title>(.*?)</title>", response.content, re.S).group(1).decode()


def _assert_not_found(response, *names: str) -> None:
    assert response.status_code == 404, response.content
    assert "not found" in _title(response).lower(), _title(response)
    assert b"Cluster unavailable" not in response.content
    for name in names:
        assert name.encode() in response.content, name


def _no_message_id(admin) -> str:
    """An offsetMsgId naming a real broker of the cluster and an offset past its commit log."""
    addr = sorted(b.master_addr for b in admin.cluster_info().brokers.values())[0]
    ip, port = addr.split(":")
    host = bytes(int(p) for p in ip.split(".")).hex().upper() + f"{int(port):08X}"
    return f"{host}{2**40:016X}"


def test_unknown_topic_and_group_are_not_found(viewer_client, admin):
    _assert_not_found(viewer_client.get(reverse("console:topic", args=["NoSuchTopic19"])), "NoSuchTopic19")
    _assert_not_found(
        viewer_client.get(reverse("console:group", args=["no-such-group-19"])), "no-such-group-19"
    )


def test_unknown_message_ids_are_not_found(viewer_client, admin):
    missing = _no_message_id(admin)
    _assert_not_found(viewer_client.get(reverse("console:message", args=[missing])), missing)
    _assert_not_found(
        viewer_client.get(reverse("console:message", args=[UNKNOWN_HOST_ID])), "10.11.12.13:10911"
    )
    search = viewer_client.get(reverse("console:messages"), {"mode": "id", "msg_id": missing})
    _assert_not_found(search, missing)


def test_unknown_broker_is_not_found(viewer_client, admin):
    _assert_not_found(viewer_client.get(reverse("console:broker", args=["127.0.0.1:1"])), "127.0.0.1:1")


def test_unknown_dead_letter_is_not_found(viewer_client, admin):
    missing = _no_message_id(admin)
    for msg_id in (missing, UNKNOWN_HOST_ID):
        url = reverse("console:dlq_message", kwargs={"group": "some-group", "offset_msg_id": msg_id})
        _assert_not_found(viewer_client.get(url), msg_id)


def test_unknown_trace_is_not_found(viewer_client, admin):
    missing = _no_message_id(admin)
    _assert_not_found(viewer_client.get(reverse("console:trace"), {"msgId": missing}), missing)


def test_htmx_and_json_not_found_answers(viewer_client, admin):
    url = reverse("console:topic", args=["NoSuchTopic19"])
    fragment = viewer_client.get(url, headers={"HX-Request": "true"})
    assert fragment.status_code == 404 and b"<html" not in fragment.content
    assert b"NoSuchTopic19" in fragment.content
    answer = viewer_client.get(url, headers={"Accept": "application/json"})
    assert answer.status_code == 404 and answer.json()["title"] == "Not found"


@pytest.fixture
def stopped_cluster(tmp_path, settings, django_user_model):
    """A cluster with a topic and a message, then a viewer's client, for tests that stop it."""
    from broker.client import Producer

    cluster = start(console_preset(), tmp_path, brokers=("broker-down",))
    try:
        producer = Producer("ERROR_PAGES_PRODUCER", cluster.namesrv_addr).start()
        try:
            sent = producer.send(Message("DownTopic19", b"x"))
        finally:
            producer.shutdown()
        settings.BROKER_NAMESRV = cluster.namesrv_addr
        client = Client()
        client.force_login(django_user_model.objects.create_superuser("down-admin", password="x-not-used-1"))
        yield cluster, client, sent.offset_msg_id
    finally:
        cluster.stop()
        cluster_access.close_all()


def _assert_unavailable(response) -> None:
    assert response.status_code == 503, response.content
    assert _title(response).startswith("Cluster unavailable"), _title(response)
    assert b"not found" not in response.content.lower()


def test_a_stopped_cluster_is_unavailable_not_missing(stopped_cluster):
    cluster, client, offset_msg_id = stopped_cluster
    (broker_addr,) = cluster_access.admin_for(cluster.namesrv_addr).cluster_info().all_master_addrs()
    assert client.get(reverse("console:broker", args=[broker_addr])).status_code == 200
    assert client.get(reverse("console:topic", args=["DownTopic19"])).status_code == 200
    assert client.get(reverse("console:message", args=[offset_msg_id])).status_code == 200

    broker = cluster.brokers["broker-down"].proc
    broker.send_signal(signal.SIGSTOP)  # registered, its connections open, answering nothing
    try:
        _assert_unavailable(client.get(reverse("console:broker", args=[broker_addr])))
        _assert_unavailable(client.get(reverse("console:message", args=[offset_msg_id])))
        dlq_url = reverse("console:dlq_message", kwargs={"group": "g", "offset_msg_id": offset_msg_id})
        _assert_unavailable(client.get(dlq_url))
    finally:
        broker.send_signal(signal.SIGCONT)

    cluster.namesrv.stop()
    _assert_unavailable(client.get(reverse("console:topic", args=["DownTopic19"])))
    _assert_unavailable(client.get(reverse("console:group", args=["some-group"])))
    _assert_unavailable(client.get(reverse("console:trace"), {"msgId": offset_msg_id}))
