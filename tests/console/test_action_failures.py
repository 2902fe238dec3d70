"""Failure paths of the console's Delete topic and Skip backlog actions, through Django's test client
against a real name server and two real brokers: bad input, a missing target, the broker's own
refusal, a refused role and a forged request each get an answer that says why, an audit record, and
leave the cluster as it was."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages

from broker.client.producer import Producer
from broker.common.message import Message
from broker.local_cluster import wait_until
from core import cluster_access
from core.models import AuditRecord
from tests.cluster import CLI_CLUSTER as CLUSTER

pytestmark = pytest.mark.django_db


def topic_with_messages(admin, namesrv_addr: str, topic: str, count: int = 4) -> dict[tuple[str, int], int]:
    """``topic`` on both brokers (2 queues each) holding ``count`` messages; its max offset per queue."""
    for addr in admin.resolve_masters(None, CLUSTER):
        admin.create_or_update_topic(addr, topic, 2, 2)
    assert wait_until(lambda: len(_route_brokers(admin, topic)) == 2, timeout=20), "route of both brokers"
    producer = Producer(f"{topic}-producer", namesrv_addr).start()
    try:
        for i in range(count):
            producer.send(Message(topic=topic, body=f"body-{i}".encode()))
    finally:
        producer.shutdown()
    return queue_max_offsets(admin, topic)


def _route_brokers(admin, topic: str) -> set[str]:
    try:
        return {q.broker_name for q in admin.topic_route(topic).queue_datas}
    except Exception:
        return set()


def queue_max_offsets(admin, topic: str) -> dict[tuple[str, int], int]:
    return {(q.broker_name, q.queue_id): q.max_offset for q in admin.topic_status(topic).queues}


def only_record(action: str) -> AuditRecord:
    (record,) = AuditRecord.objects.filter(action=action)
    return record


def flashed(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


# -- Delete topic ------------------------------------------------------------------------------


def test_topic_delete_refuses_a_name_no_topic_can_have(operator_client, live_cluster):
    response = operator_client.post("/topics/bad%20name!/delete")
    assert response.status_code == 400, response.content
    page = response.content.decode()
    assert "Invalid topic" in page and "Nothing was changed" in page
    record = only_record("topic.delete")
    assert (record.result, record.target) == ("failed", "bad name!")
    assert record.detail.startswith("invalid input: Invalid topic")


def test_topic_delete_of_a_missing_topic_is_a_404_naming_it(operator_client, live_cluster):
    response = operator_client.post("/topics/NoSuchTopicToDelete/delete")
    assert response.status_code == 404, response.content
    page = response.content.decode()
    assert "Not found" in page and "NoSuchTopicToDelete" in page
    record = only_record("topic.delete")
    assert record.result == "failed" and "no route for topic 'NoSuchTopicToDelete'" in record.detail


def test_topic_delete_refused_to_a_viewer_and_a_forged_request_loses_nothing(
    viewer_client, csrf_operator_client, admin, live_cluster
):
    topic = "KeptTopicOnRefusal"
    offsets = topic_with_messages(admin, live_cluster.namesrv_addr, topic)
    assert sum(offsets.values()) == 4

    denied = viewer_client.post(f"/topics/{topic}/delete")
    assert denied.status_code == 403 and b"needs the operator role" in denied.content
    record = only_record("topic.delete")
    assert (record.result, record.username, record.target) == ("denied", "vera", f"/topics/{topic}/delete")

    forged = csrf_operator_client.post(f"/topics/{topic}/delete")  # no CSRF token
    assert forged.status_code == 403 and b"CSRF" in forged.content

    assert queue_max_offsets(admin, topic) == offsets
    assert _route_brokers(admin, topic) == {"broker-a", "broker-b"}


# -- Skip backlog ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def skip_topic(live_cluster):
    topic = "SkipBacklogTopic"
    topic_with_messages(cluster_access.admin_for(live_cluster.namesrv_addr), live_cluster.namesrv_addr, topic)
    return topic


@pytest.fixture
def lagging_group(admin, skip_topic):
    """A group with no consumer online, its offsets at the start of a topic holding 4 messages."""
    topic, group = skip_topic, "skip-backlog-lagging"
    admin.reset_offset_by_time(group, topic, 0, force=True)
    assert wait_until(lambda: admin.consumer_progress(group, topic).diff_total == 4, timeout=20)
    yield group, topic


def test_skip_backlog_refuses_a_name_no_group_can_have(operator_client, live_cluster):
    response = operator_client.post("/groups/bad%20group!/skip-backlog")
    assert response.status_code == 400, response.content
    assert b"Invalid group" in response.content and b"Nothing was changed" in response.content
    record = only_record("group.skip_backlog")
    assert (record.result, record.target) == ("failed", "bad group!")
    assert record.detail.startswith("invalid input: Invalid group")


def test_skip_backlog_of_a_missing_group_is_a_404_naming_it(operator_client, live_cluster):
    response = operator_client.post("/groups/no-such-group-to-skip/skip-backlog")
    assert response.status_code == 404, response.content
    page = response.content.decode()
    assert "Not found" in page and "no-such-group-to-skip" in page
    record = only_record("group.skip_backlog")
    assert record.result == "failed" and "has no consume progress on any broker" in record.detail


def test_skip_backlog_refused_to_a_viewer_and_a_forged_request_keeps_the_backlog(
    viewer_client, csrf_operator_client, admin, lagging_group
):
    group, topic = lagging_group
    denied = viewer_client.post(f"/groups/{group}/skip-backlog")
    assert denied.status_code == 403 and b"needs the operator role" in denied.content
    record = only_record("group.skip_backlog")
    assert (record.result, record.username) == ("denied", "vera")

    forged = csrf_operator_client.post(f"/groups/{group}/skip-backlog")
    assert forged.status_code == 403 and b"CSRF" in forged.content

    assert admin.consumer_progress(group, topic).diff_total == 4


def test_skip_backlog_of_a_lagging_group_moves_it_to_the_end(operator_client, admin, lagging_group):
    """The success path beside the refusals: the same fixture is skippable, so the refusals above
    kept a backlog that was really there."""
    group, topic = lagging_group
    response = operator_client.post(f"/groups/{group}/skip-backlog")
    assert response.status_code == 302 and response["Location"] == f"/groups/{group}/"
    assert admin.consumer_progress(group, topic).diff_total == 0
    assert only_record("group.skip_backlog").result == "ok"
    assert any(f"Backlog of {group} skipped on" in m for m in flashed(response))
