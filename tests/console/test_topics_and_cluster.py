"""W1, W2, W14 pages against the live cluster: cluster and broker views, topics and their actions."""

from __future__ import annotations

import json
import re

import pytest

from core.models import AuditRecord
from tests.cluster import CLI_CLUSTER as CLUSTER
from tests.cluster import route_settles

pytestmark = pytest.mark.django_db


def test_cluster_page_lists_both_brokers_with_runtime_figures(viewer_client, live_cluster):
    html = viewer_client.get("/cluster/").content.decode()
    assert CLUSTER in html
    for name, process in live_cluster.brokers.items():
        assert name in html and process.addr in html
    assert "master" in html and "pyrocket" in html  # version column
    assert "In today" in html and "Out today" in html  # with yesterday's counts beside them
    # Disk used: the brokers' own commitLogDiskRatio (their store's disk is never empty).
    disk_used = [float(v) for v in re.findall(r'<td class="num">(\d+\.\d) %</td>', html)]
    assert len(disk_used) == len(live_cluster.brokers) and all(0 < v <= 100 for v in disk_used), disk_used
    # Request wait: each broker's loop lag, in whole milliseconds.
    waits = re.findall(r'<td class="num request-wait">(\d+) ms</td>', html)
    assert "Request wait" in html and len(waits) == len(live_cluster.brokers), waits


def test_broker_page_shows_runtime_and_config(viewer_client, live_cluster):
    addr = live_cluster.brokers["broker-a"].addr
    page = viewer_client.get(f"/cluster/broker/{addr}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "brokerVersionDesc" in html and "brokerName" in html
    assert "Update</button>" not in html  # viewers see no config form


def test_broker_page_for_unknown_address_is_404_with_advice(viewer_client, live_cluster):
    page = viewer_client.get("/cluster/broker/127.0.0.1:1/")
    assert page.status_code == 404
    assert b"no broker at 127.0.0.1:1" in page.content


def test_admin_updates_broker_config_and_refusals_are_reported(admin_client_, admin, live_cluster):
    addr = live_cluster.brokers["broker-b"].addr
    page = admin_client_.get(f"/cluster/broker/{addr}/")
    assert b"Update</button>" in page.content
    response = admin_client_.post(
        f"/cluster/broker/{addr}/config", {"key": "defaultTopicQueueNums", "value": "6"}
    )
    assert response.status_code == 302
    assert admin.broker_config(addr)["defaultTopicQueueNums"] == "6"
    record = AuditRecord.objects.get(action="broker.config.update", result="ok")
    assert record.target == addr and record.parameters == {"defaultTopicQueueNums": "6"}
    # A key the broker cannot change at run time: refused by the broker, shown, audited as failed.
    refused = admin_client_.post(
        f"/cluster/broker/{addr}/config", {"key": "brokerName", "value": "x"}, follow=True
    )
    assert b"cannot change brokerName at run time" in refused.content
    assert AuditRecord.objects.filter(action="broker.config.update", result="failed").exists()
    bad = admin_client_.post(f"/cluster/broker/{addr}/config", {"key": "bad key!", "value": "1"})
    assert bad.status_code == 400 and b"key" in bad.content


def test_operator_cannot_update_broker_config(operator_client, live_cluster):
    addr = live_cluster.brokers["broker-a"].addr
    response = operator_client.post(f"/cluster/broker/{addr}/config", {"key": "deleteWhen", "value": "04"})
    assert response.status_code == 403
    assert AuditRecord.objects.get(action="broker.config.update").result == "denied"


def test_broker_tps_sample_has_put_and_get_counters(viewer_client, live_cluster):
    data = viewer_client.get("/cluster/tps.json").json()
    assert set(data["counters"]) == {"broker-a put", "broker-a get", "broker-b put", "broker-b get"}
    assert data["at"] > 0


def _save_topic(client, topic, **extra):
    form = {
        "topic": topic,
        "cluster": CLUSTER,
        "read_queue_nums": 4,
        "write_queue_nums": 4,
        "perm": 6,
        **extra,
    }
    return client.post("/topics/save", form)


def test_topic_lifecycle_create_update_send_delete(operator_client, admin):
    created = _save_topic(operator_client, "ConsoleLifecycle")
    assert created.status_code == 302 and created["Location"] == "/topics/ConsoleLifecycle/"
    assert route_settles(admin, "ConsoleLifecycle", {("broker-a", 4, 6), ("broker-b", 4, 6)})

    detail = operator_client.get("/topics/ConsoleLifecycle/").content.decode()
    assert "broker-a" in detail and "Send a test message" in detail and "Delete topic" in detail

    _save_topic(operator_client, "ConsoleLifecycle", write_queue_nums=2, read_queue_nums=2, perm=4)
    assert route_settles(admin, "ConsoleLifecycle", {("broker-a", 2, 4), ("broker-b", 2, 4)})

    _save_topic(operator_client, "ConsoleLifecycle", perm=6)
    assert route_settles(admin, "ConsoleLifecycle", {("broker-a", 4, 6), ("broker-b", 4, 6)})
    sent = operator_client.post(
        "/topics/ConsoleLifecycle/send", {"body": "hello console", "tags": "T", "keys": "k1"}
    )
    assert sent.status_code == 302 and sent["Location"].startswith("/messages/")
    message_page = operator_client.get(sent["Location"]).content.decode()
    assert "hello console" in message_page and "k1" in message_page

    deleted = operator_client.post("/topics/ConsoleLifecycle/delete")
    assert deleted.status_code == 302
    with pytest.raises(Exception, match="no route"):
        admin.topic_route("ConsoleLifecycle")
    actions = list(AuditRecord.objects.filter(target="ConsoleLifecycle").values_list("action", "result"))
    assert ("topic.delete", "ok") in actions and ("topic.send", "ok") in actions
    assert actions.count(("topic.save", "ok")) == 3


def test_send_to_a_chosen_broker_and_queue(operator_client, admin):
    _save_topic(operator_client, "ConsolePinned")
    assert route_settles(admin, "ConsolePinned", {("broker-a", 4, 6), ("broker-b", 4, 6)})
    sent = operator_client.post(
        "/topics/ConsolePinned/send",
        {"body": "pinned", "broker_name": "broker-b", "queue_id": "3"},
        follow=True,
    )
    assert b"to broker-b queue 3" in sent.content
    bad = operator_client.post(
        "/topics/ConsolePinned/send", {"body": "x", "broker_name": "broker-b", "queue_id": 99}
    )
    assert bad.status_code == 302
    record = AuditRecord.objects.filter(action="topic.send", result="failed").get()
    assert "queue 99 does not exist" in record.detail


def test_topic_list_search_and_kind_filters(viewer_client, operator_client):
    _save_topic(operator_client, "ConsoleFifoTopic", order="on")
    _save_topic(operator_client, "ConsolePlainTopic")
    page = viewer_client.get("/topics/").content.decode()
    assert "ConsoleFifoTopic" in page and "TBW102" in page
    fifo = viewer_client.get("/topics/?kind=fifo").content.decode()
    assert "ConsoleFifoTopic" in fifo and "ConsolePlainTopic" not in fifo
    system = viewer_client.get("/topics/?kind=system").content.decode()
    assert "TBW102" in system and CLUSTER in system and "ConsolePlainTopic" not in system
    normal = viewer_client.get("/topics/?kind=normal&q=consoleplain").content.decode()
    assert "ConsolePlainTopic" in normal and "TBW102" not in normal
    partial = viewer_client.get("/topics/?q=ConsoleFifo", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and "ConsoleFifoTopic" in partial
    none = viewer_client.get("/topics/?q=no-such-topic-anywhere").content.decode()
    assert "No topic matches" in none
    assert viewer_client.get("/topics/?kind=weird").status_code == 400


def test_topic_form_errors_are_400_with_reasons(operator_client):
    bad_name = _save_topic(operator_client, "bad topic!")
    assert bad_name.status_code == 400 and b"topic" in bad_name.content
    no_target = operator_client.post(
        "/topics/save", {"topic": "X1", "read_queue_nums": 1, "write_queue_nums": 1, "perm": 6}
    )
    assert no_target.status_code == 400 and b"choose a cluster or a broker" in no_target.content
    too_many = _save_topic(operator_client, "X2", read_queue_nums=5000)
    assert too_many.status_code == 400
    empty_body = operator_client.post("/topics/TBW102/send", {"body": ""})
    assert empty_body.status_code == 400
    assert AuditRecord.objects.filter(result="failed", detail__startswith="invalid input").count() == 4


def test_unknown_topic_detail_is_404(viewer_client, live_cluster):
    page = viewer_client.get("/topics/NoSuchTopicHere/")
    assert page.status_code == 404 and b"no route for topic" in page.content


def test_a_topic_url_that_names_no_topic_is_a_400_not_a_cluster_refusal(viewer_client, live_cluster):
    for path in ("/topics/a%20b/", "/topics/a%20b/tps.json"):
        page = viewer_client.get(path)
        assert page.status_code == 400, path
        assert b"Invalid topic" in page.content and b"Refused by the cluster" not in page.content


def test_topic_tps_sample_counts_produced_messages(operator_client, viewer_client, admin):
    _save_topic(operator_client, "ConsoleTps")
    assert route_settles(admin, "ConsoleTps", {("broker-a", 4, 6), ("broker-b", 4, 6)})
    before = viewer_client.get("/topics/ConsoleTps/tps.json").json()["counters"]["produced"]
    operator_client.post("/topics/ConsoleTps/send", {"body": "one"})
    operator_client.post("/topics/ConsoleTps/send", {"body": "two"})
    after = viewer_client.get("/topics/ConsoleTps/tps.json").json()["counters"]["produced"]
    assert after - before == 2
    missing = viewer_client.get("/topics/NoSuchTopicHere/tps.json", HTTP_ACCEPT="application/json")
    assert missing.status_code == 404 and "no route" in json.loads(missing.content)["error"]
