"""W3, W4, W5, W14 against the live cluster with a real consumer and producer of the project's SDK."""

from __future__ import annotations

import csv
import io
import re

import pytest

from broker.client import CONSUME_FROM_FIRST_OFFSET
from broker.client.producer import Producer
from broker.client.push_consumer import PushConsumer
from broker.common.message import Message
from broker.local_cluster import wait_until
from core.models import AuditRecord
from tests.cluster import CLI_CLUSTER as CLUSTER
from tests.received_messages import ReceivedBodies

pytestmark = pytest.mark.django_db

TOPIC, GROUP, PRODUCER_GROUP = "ConsoleOrders", "console-group", "console-producer"


@pytest.fixture(scope="module")
def flow(live_cluster):
    """A topic on both brokers, a producer that sent 4 keyed messages and a consumer that read them."""
    from core.cluster_access import admin_for

    admin = admin_for(live_cluster.namesrv_addr)
    for addr in admin.resolve_masters(None, CLUSTER):
        admin.create_or_update_topic(addr, TOPIC, 2, 2)
    producer = Producer(PRODUCER_GROUP, live_cluster.namesrv_addr).start()
    sent = []
    for i in range(4):
        message = Message(topic=TOPIC, body=f'{{"order": {i}}}'.encode())
        message.keys = f"order-{i}"
        message.tags = "created"
        sent.append(producer.send(message))
    recorder = ReceivedBodies()
    consumer = PushConsumer(
        GROUP,
        live_cluster.namesrv_addr,
        consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        rebalance_interval_ms=500,
        persist_interval_ms=200,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(recorder.listener)
    consumer.start()
    recorder.wait_for(lambda bodies: len(bodies) >= 4)
    # Consumed offsets reach the brokers with the next persist: wait for the lag to read 0.
    assert wait_until(lambda: admin.consumer_progress(GROUP, TOPIC).diff_total == 0, timeout=20, interval=0.1)
    yield {"admin": admin, "sent": sent, "recorder": recorder, "consumer": consumer, "producer": producer}
    consumer.shutdown()
    producer.shutdown()


def test_group_list_shows_online_group_with_lag(viewer_client, flow):
    html = viewer_client.get("/groups/").content.decode()
    assert GROUP in html and "CLUSTERING" in html
    assert "TOOLS_CONSUMER" not in html  # system groups hidden unless asked
    partial = viewer_client.get(f"/groups/?q={GROUP}", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and GROUP in partial


def test_group_detail_queues_clients_and_subscriptions(viewer_client, flow):
    client_id = flow["consumer"].client_id if hasattr(flow["consumer"], "client_id") else ""
    html = viewer_client.get(f"/groups/{GROUP}/").content.decode()
    assert "Progress per queue" in html and TOPIC in html
    assert "broker-a" in html and "broker-b" in html
    assert "Online clients" in html and "Subscriptions" in html
    conn = flow["admin"].consumer_connection(GROUP)
    holder = conn.connections[0].client_id
    assert holder in html
    if client_id:
        assert client_id == holder
    assert html.count(holder) >= 2  # in the clients table and as holder of queues
    assert "Delete group" not in html  # viewer


def test_consumer_running_info_is_shaped_as_rocketmqs(flow):
    """What Java tools and the console read: subscriptions as a list of SubscriptionData, the held
    queues keyed by MessageQueue objects (fastjson's dialect) with their offsets."""
    admin = flow["admin"]
    client_id = admin.consumer_connection(GROUP).connections[0].client_id
    info = admin.consumer_running_info(GROUP, client_id)
    assert TOPIC in {subscription["topic"] for subscription in info["subscriptionSet"]}
    held: dict[str, list[tuple[str, int]]] = {dict(queue)["topic"]: [] for queue in info["mqTable"]}
    for queue, state in info["mqTable"].items():
        held[dict(queue)["topic"]].append((dict(queue)["brokerName"], dict(queue)["queueId"]))
        assert state["commitOffset"] >= 0
    assert sorted(held[TOPIC]) == [("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)]
    assert info["properties"]["consumerGroup"] == GROUP


def test_unknown_group_is_404(viewer_client, flow):
    page = viewer_client.get("/groups/no-such-group-x/")
    assert page.status_code == 404


def test_reset_preview_then_apply_then_skip_backlog(operator_client, flow):
    idle = "console-idle"
    admin = flow["admin"]
    # A group no broker knows is refused: resetting it would make it up.
    unknown = operator_client.post(f"/groups/{idle}/reset/apply", {"topic": TOPIC, "mode": "earliest"})
    assert unknown.status_code == 404 and b"is not configured on any broker" in unknown.content
    assert operator_client.get(f"/groups/{idle}/").status_code == 404
    made = {"group": idle, "cluster": CLUSTER, "retry_max_times": 1, "retry_queue_nums": 1}
    assert operator_client.post("/groups/save", made).status_code == 302
    assert (
        operator_client.post(f"/groups/{idle}/reset/apply", {"topic": TOPIC, "mode": "earliest"}).status_code
        == 302
    )
    assert wait_until(lambda: admin.consumer_progress(idle, TOPIC).diff_total == 4, timeout=20, interval=0.1)
    lagging = operator_client.get("/groups/").content.decode()
    assert idle in lagging

    preview = operator_client.get(f"/groups/{idle}/reset/preview", {"topic": TOPIC, "mode": "latest"})
    html = preview.content.decode()
    assert preview.status_code == 200
    assert "4 messages would be <strong>skipped</strong>" in html and "Apply this reset" in html
    assert admin.consumer_progress(idle, TOPIC).diff_total == 4  # a preview changes nothing

    in_future = operator_client.get(
        f"/groups/{idle}/reset/preview",
        {"topic": TOPIC, "mode": "timestamp", "timestamp": "2999-01-01T00:00"},
        HTTP_HX_REQUEST="true",
    )
    assert "<html" not in in_future.content.decode() and "skipped" in in_future.content.decode()

    assert operator_client.post(f"/groups/{idle}/skip-backlog").status_code == 302
    assert admin.consumer_progress(idle, TOPIC).diff_total == 0
    operator_client.post(
        f"/groups/{idle}/reset/apply", {"topic": TOPIC, "mode": "timestamp", "timestamp": "2000-01-01T00:00"}
    )
    assert admin.consumer_progress(idle, TOPIC).diff_total == 4
    results = set(AuditRecord.objects.filter(target=idle).values_list("action", "result"))
    assert results == {
        ("group.reset_offset", "failed"),
        ("group.save", "ok"),
        ("group.reset_offset", "ok"),
        ("group.skip_backlog", "ok"),
    }


def test_reset_input_errors(operator_client, viewer_client, flow):
    missing_time = operator_client.post(f"/groups/{GROUP}/reset/apply", {"topic": TOPIC, "mode": "timestamp"})
    assert missing_time.status_code == 400 and b"needs the time" in missing_time.content
    # A time before 1970 is negative, which resetOffsetByTime reads as "latest": refused.
    for before_1970 in ("1969-12-31T23:59", "0001-01-01T00:00"):
        form = {"topic": TOPIC, "mode": "timestamp", "timestamp": before_1970}
        preview = viewer_client.get(f"/groups/{GROUP}/reset/preview", form)
        assert preview.status_code == 400 and b"1970-01-01T00:00 UTC or later" in preview.content
        applied = operator_client.post(f"/groups/{GROUP}/reset/apply", form)
        assert applied.status_code == 400 and b"1970-01-01T00:00 UTC or later" in applied.content
    refused = AuditRecord.objects.filter(action="group.reset_offset", result=AuditRecord.RESULT_FAILED)
    assert refused.count() == 3  # the missing time and the two before 1970, one record each
    bad_mode = viewer_client.get(f"/groups/{GROUP}/reset/preview", {"topic": TOPIC, "mode": "sideways"})
    assert bad_mode.status_code == 400
    unknown_topic = viewer_client.get(
        f"/groups/{GROUP}/reset/preview", {"topic": "NoSuchTopicX", "mode": "latest"}
    )
    assert unknown_topic.status_code == 404


def test_group_create_update_and_delete(operator_client, flow):
    admin = flow["admin"]
    form = {
        "group": "console-made",
        "cluster": CLUSTER,
        "retry_max_times": 3,
        "retry_queue_nums": 1,
        "consume_enable": "on",
    }
    assert operator_client.post("/groups/save", form).status_code == 302
    for addr in admin.resolve_masters(None, CLUSTER):
        config = admin.all_subscription_groups(addr)["console-made"]
        assert config["retryMaxTimes"] == 3 and config["consumeEnable"] is True
        assert config["consumeBroadcastEnable"] is False
    html = operator_client.get("/groups/console-made/").content.decode()
    assert "retryMaxTimes" in html and "Delete group" in html
    assert operator_client.post("/groups/console-made/delete").status_code == 302
    for addr in admin.resolve_masters(None, CLUSTER):
        assert "console-made" not in admin.all_subscription_groups(addr)
    again = operator_client.post("/groups/console-made/delete", follow=True)
    assert b"failed" in again.content
    bad = operator_client.post("/groups/save", {**form, "retry_max_times": 999})
    assert bad.status_code == 400


def test_producers_page_finds_the_online_producer(viewer_client, flow):
    html = viewer_client.get("/producers/", {"topic": TOPIC, "group": PRODUCER_GROUP}).content.decode()
    assert "1 online producer of console-producer" in html
    nobody = viewer_client.get("/producers/", {"topic": TOPIC, "group": "nobody-here"}).content.decode()
    assert "No producer of group" in nobody
    assert viewer_client.get("/producers/", {"topic": "bad topic", "group": "g"}).status_code == 400


def test_messages_by_time_key_and_id(viewer_client, flow):
    by_time = viewer_client.get("/messages/", {"mode": "time", "topic": TOPIC}).content.decode()
    assert "4 messages" in by_time
    for result in flow["sent"]:
        assert result.msg_id in by_time
    by_key = viewer_client.get(
        "/messages/", {"mode": "key", "topic": TOPIC, "key": "order-2"}
    ).content.decode()
    assert "1 message" in by_key and flow["sent"][2].msg_id in by_key
    by_client_id = viewer_client.get(
        "/messages/", {"mode": "id", "topic": TOPIC, "msg_id": flow["sent"][1].msg_id}
    )
    assert flow["sent"][1].offset_msg_id in by_client_id.content.decode()
    by_offset_id = viewer_client.get("/messages/", {"mode": "id", "msg_id": flow["sent"][0].offset_msg_id})
    assert flow["sent"][0].msg_id in by_offset_id.content.decode()
    past = viewer_client.get(
        "/messages/", {"mode": "time", "topic": TOPIC, "begin": "2001-01-01T00:00", "end": "2001-01-02T00:00"}
    )
    assert "No message found" in past.content.decode()
    assert viewer_client.get("/messages/", {"mode": "id", "msg_id": "xyz"}).status_code == 400
    assert (
        viewer_client.get(
            "/messages/",
            {"mode": "time", "topic": TOPIC, "begin": "2001-01-02T00:00", "end": "2001-01-01T00:00"},
        ).status_code
        == 400
    )


def test_message_export_csv_and_json(viewer_client, flow):
    csv_response = viewer_client.get("/messages/", {"mode": "time", "topic": TOPIC, "export": "csv"})
    assert csv_response["Content-Type"].startswith("text/csv")
    assert 'filename="ConsoleOrders-time.csv"' in csv_response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(csv_response.content.decode())))
    assert sorted(r["keys"] for r in rows) == ["order-0", "order-1", "order-2", "order-3"]
    assert all(r["tags"] == "created" and r["body"].startswith('{"order"') for r in rows)
    json_response = viewer_client.get(
        "/messages/", {"mode": "key", "topic": TOPIC, "key": "order-3", "export": "json"}
    )
    data = json_response.json()
    assert (
        len(data) == 1
        and data[0]["msg_id"] == flow["sent"][3].msg_id
        and data[0]["properties"]["KEYS"] == "order-3"
    )
    assert (
        viewer_client.get("/messages/", {"mode": "time", "topic": TOPIC, "export": "xml"}).status_code == 400
    )


def test_message_detail_body_views_and_consumption_state(viewer_client, flow):
    sent = flow["sent"][0]
    html = viewer_client.get(f"/messages/{sent.offset_msg_id}/").content.decode()
    assert sent.msg_id in html and "order-0" in html
    assert "&quot;order&quot;: 0" in html  # pretty JSON view of the body
    assert "7b 22 6f 72" in html  # hex view: {"or
    assert GROUP in html and "CONSUMED" in html
    assert "Resend" not in html  # viewer


def test_resend_to_an_online_consumer(operator_client, flow):
    sent, recorder = flow["sent"][1], flow["recorder"]
    before = recorder.bodies.count(b'{"order": 1}')
    page = operator_client.get(f"/messages/{sent.offset_msg_id}/").content.decode()
    assert "Resend</button>" in page
    client_id = flow["admin"].consumer_connection(GROUP).connections[0].client_id
    response = operator_client.post(
        f"/messages/{sent.offset_msg_id}/resend", {"group": GROUP, "client_id": client_id}, follow=True
    )
    assert b"consumed again by" in response.content
    assert recorder.bodies.count(b'{"order": 1}') == before + 1
    record = AuditRecord.objects.get(action="message.resend")
    assert record.result == "ok" and record.parameters == {"group": GROUP, "client_id": client_id}
    gone = operator_client.post(
        f"/messages/{sent.offset_msg_id}/resend", {"group": GROUP, "client_id": "nobody@x"}
    )
    assert gone.status_code == 302
    assert AuditRecord.objects.filter(action="message.resend", result="failed").exists()


def test_group_list_pages_ask_only_for_their_groups(viewer_client, flow, monkeypatch):
    from console.views import groups as group_views

    for addr in flow["admin"].resolve_masters(None, CLUSTER):
        flow["admin"].create_or_update_subscription_group(addr, "console-paged")
    monkeypatch.setattr(group_views, "PAGE_SIZE", 1)
    first = viewer_client.get("/groups/").content.decode()
    assert "page 1 of" in first and "Next</a>" in first
    names_on_pages = []
    page = 1
    while True:
        html = viewer_client.get("/groups/", {"page": page}).content.decode()
        names_on_pages.append(len(re.findall(r'<td><a href="/groups/[^"?]+/">', html)))
        if "Next</a>" not in html:
            break
        page += 1
    assert page >= 2 and set(names_on_pages) == {1}


def test_reset_offset_defaults_to_the_subscribed_topic_and_still_offers_the_retry_topic(viewer_client, flow):
    """The group's live subscription (its consumer connection) names the topic to reset, not the
    retry topic every clustering consumer also subscribes to."""
    subscribed = {s.topic for s in flow["admin"].consumer_connection(GROUP).subscriptions}
    assert subscribed == {TOPIC, f"%RETRY%{GROUP}"}
    html = viewer_client.get(f"/groups/{GROUP}/").content.decode()
    select = (
        html.split('id="reset-offset"', 1)[1].split('<select name="topic"', 1)[1].split("</select>", 1)[0]
    )
    options = re.findall(r"<option( selected)?>([^<]*)</option>", select)
    assert options[0] == (" selected", TOPIC)
    assert ("", f"%RETRY%{GROUP}") in options
