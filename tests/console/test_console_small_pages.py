"""Issue 32 item 7, the console's small pages: /admin/ in the staff users' navigation, the ACL page
of brokers running without ACL, system topics offered no Send or Delete (and refused by the server),
the reset-offset form's default topic."""

from __future__ import annotations

import pytest

from broker.local_cluster import wait_until
from core.models import AuditRecord
from tests.cluster import CLI_CLUSTER, create_user
from tests.console.conftest import PASSWORD

pytestmark = pytest.mark.django_db
REPLY_TOPIC = f"{CLI_CLUSTER}_REPLY_TOPIC"  # every broker of the cluster registers it at start


def _nav(html: str) -> str:
    return html.split('class="mainnav"')[1].split("</nav>")[0]


def test_django_admin_is_in_the_navigation_of_staff_users_only(client, admin_client_, live_cluster):
    assert 'href="/admin/"' not in _nav(admin_client_.get("/audit/").content.decode())
    staff = create_user("stella", "admin", PASSWORD)
    staff.is_staff = True
    staff.save()
    client.force_login(staff)
    assert 'href="/admin/"' in _nav(client.get("/audit/").content.decode())


# -- system topics: no Send or Delete offered, and the server refuses them --------------------------


def _stored(admin, topic: str) -> int:
    return sum(q.max_offset for q in admin.topic_status(topic).queues)


def _row(page: str, topic: str) -> str:
    return page.split(f'<a href="/topics/{topic}/">{topic}</a>', 1)[1].split("</tr>", 1)[0]


def test_system_topics_offer_no_send_or_delete_and_the_server_refuses_both(operator_client, admin):
    plain = "SmallPagesPlainTopic"
    made = operator_client.post(
        "/topics/save",
        {"topic": plain, "cluster": CLI_CLUSTER, "read_queue_nums": 2, "write_queue_nums": 2, "perm": 6},
    )
    assert made.status_code == 302
    wait_until(lambda: _routed(admin, plain), timeout=10)
    page = operator_client.get("/topics/").content.decode()
    assert "#send-message" in _row(page, plain) and f"/topics/{plain}/delete" in _row(page, plain)
    # The auto-create key, the cluster and broker names, and the cluster's reply topic.
    for topic in ("TBW102", CLI_CLUSTER, "broker-a", REPLY_TOPIC):
        row = _row(page, topic)
        assert "#send-message" not in row and f"/topics/{topic}/delete" not in row, topic
        detail = operator_client.get(f"/topics/{topic}/").content.decode()
        assert "Delete topic" not in detail and "Send a test message" not in detail, topic
        assert "system topic" in detail

    before = _stored(admin, "TBW102")
    sent = operator_client.post("/topics/TBW102/send", {"body": "not for a system topic"})
    assert sent.status_code == 400 and "TBW102 is a system topic" in sent.content.decode()
    assert _stored(admin, "TBW102") == before
    replies = _stored(admin, REPLY_TOPIC)
    sent = operator_client.post(f"/topics/{REPLY_TOPIC}/send", {"body": "not for a system topic"})
    assert sent.status_code == 400 and f"{REPLY_TOPIC} is a system topic" in sent.content.decode()
    assert _stored(admin, REPLY_TOPIC) == replies
    for topic in ("TBW102", CLI_CLUSTER):
        deleted = operator_client.post(f"/topics/{topic}/delete")
        assert deleted.status_code == 400 and f"{topic} is a system topic" in deleted.content.decode()
        assert admin.topic_route(topic).queue_datas  # still routed
    refusals = AuditRecord.objects.filter(result=AuditRecord.RESULT_FAILED).values_list("action", "target")
    assert set(refusals) == {
        ("topic.send", "TBW102"),
        ("topic.send", REPLY_TOPIC),
        ("topic.delete", "TBW102"),
        ("topic.delete", CLI_CLUSTER),
    }


def _routed(admin, topic: str) -> bool:
    try:
        return bool(admin.topic_route(topic).queue_datas)
    except Exception:  # no route yet
        return False


def test_retry_and_dead_letter_topics_are_the_brokers_to_make_and_write(operator_client, admin):
    """A message sent by hand to %DLQ%G or %RETRY%G would pass for a real dead letter or retry, and
    a topic.save would make such a topic up: both refused (400) before anything is sent."""
    for topic in ("%DLQ%SmallPagesG", "%RETRY%SmallPagesG"):
        saved = operator_client.post(
            "/topics/save",
            {"topic": topic, "cluster": CLI_CLUSTER, "read_queue_nums": 1, "write_queue_nums": 1, "perm": 6},
        )
        assert saved.status_code == 400
        assert "is a retry or dead-letter topic" in saved.content.decode()
        sent = operator_client.post(f"/topics/{topic}/send", {"body": "a fake dead letter"})
        assert sent.status_code == 400
        assert not _routed(admin, topic)
    refusals = AuditRecord.objects.filter(result=AuditRecord.RESULT_FAILED).values_list("action", "target")
    assert sorted(refusals) == sorted(
        (action, topic)
        for action in ("topic.save", "topic.send")
        for topic in ("%DLQ%SmallPagesG", "%RETRY%SmallPagesG")
    )
