"""Pending transactions (commit / rollback by an operator) and delayed-message levels, against a
real broker with the delay and transaction services."""

from __future__ import annotations

import pytest
from django.urls import reverse

from broker.client.admin import NotFoundError
from broker.common.message import Message
from broker.local_cluster import wait_until
from core.models import AuditRecord
from tests.cluster import send, send_pending_transactions

pytestmark = pytest.mark.django_db

TX_TOPIC, TX_GROUP = "OpsPayments", "ops-tx-producer"


def _half_messages(cluster, keys):
    messages = []
    for key in keys:
        msg = Message(TX_TOPIC, f"payment {key}".encode())
        msg.keys, msg.tags = key, "pay"
        messages.append(msg)
    return dict(zip(keys, send_pending_transactions(cluster, TX_GROUP, messages), strict=True))


@pytest.fixture(scope="module")
def half_messages(cluster):
    """Pending half messages that stay pending: listed, never resolved."""
    return _half_messages(cluster, ("pay-commit", "pay-rollback"))


@pytest.fixture
def settled_messages(cluster):
    """Pending half messages of their own for the test that resolves them, so the listing finds
    the module's pending ones whichever test runs first."""
    return _half_messages(cluster, ("settle-commit", "settle-rollback"))


def _pending(client):
    return {r["keys"]: r for r in client.get(reverse("console:transactions")).context["rows"]}


def test_pending_half_messages_are_listed_with_group_age_and_checks(namesrv, half_messages, viewer_client):
    rows = _pending(viewer_client)
    assert set(rows) >= {"pay-commit", "pay-rollback"}
    row = rows["pay-commit"]
    assert (row["producer_group"], row["real_topic"], row["check_times"]) == (TX_GROUP, TX_TOPIC, 0)
    assert row["msg_id"] == half_messages["pay-commit"]
    assert row["age_s"] >= 0
    exported = viewer_client.get(reverse("console:transactions_export", kwargs={"fmt": "csv"}))
    assert exported["Content-Disposition"] == 'attachment; filename="pending-transactions.csv"'
    header, *lines = exported.content.decode().strip().splitlines()
    assert "producer_group" in header and any("pay-commit" in line for line in lines)
    bad = viewer_client.get(reverse("console:transactions_export", kwargs={"fmt": "xml"}))
    assert bad.status_code == 400


def test_operator_commits_and_rolls_back(namesrv, settled_messages, operator_client, admin):
    rows = _pending(operator_client)
    url = reverse("console:end_transaction")
    response = operator_client.post(
        url, {"offset_msg_id": rows["settle-commit"]["offset_msg_id"], "action": "commit"}
    )
    assert response.status_code == 302
    committed = wait_until(
        lambda: admin.query_message_by_key(TX_TOPIC, "settle-commit"), what="the committed message"
    )
    assert committed[0].body == b"payment settle-commit"
    operator_client.post(
        url, {"offset_msg_id": rows["settle-rollback"]["offset_msg_id"], "action": "rollback"}
    )
    remaining = _pending(operator_client)
    assert "settle-commit" not in remaining and "settle-rollback" not in remaining
    assert admin.query_message_by_key(TX_TOPIC, "settle-rollback") == []
    records = AuditRecord.objects.filter(action__startswith="transaction.").order_by("id")
    assert [(r.action, r.result, r.parameters["action"], r.parameters["producerGroup"]) for r in records] == [
        ("transaction.end", "ok", "commit", TX_GROUP),
        ("transaction.end", "ok", "rollback", TX_GROUP),
    ]
    # A second commit of the same (now resolved) message is refused, not applied twice.
    again = operator_client.post(
        url, {"offset_msg_id": rows["settle-commit"]["offset_msg_id"], "action": "commit"}
    )
    assert again.status_code == 400
    assert len(admin.query_message_by_key(TX_TOPIC, "settle-commit")) == 1
    refused = AuditRecord.objects.filter(action__startswith="transaction.").order_by("id").last()
    assert (refused.action, refused.result, refused.parameters["action"]) == (
        "transaction.end",
        "failed",
        "commit",
    )


def test_end_transaction_refuses_bad_input(namesrv, operator_client):
    url = reverse("console:end_transaction")
    assert operator_client.post(url, {"offset_msg_id": "", "action": "commit"}).status_code == 400
    assert operator_client.post(url, {"offset_msg_id": "AB", "action": "maybe"}).status_code == 400


def test_delayed_levels_show_pending_counts_and_messages(namesrv, viewer_client):
    send(namesrv, "OpsReminders", 2, keys="remind", DELAY=3)  # level 3 = 1 h in this cluster
    page = wait_until(
        lambda: (
            (r := viewer_client.get(reverse("console:delayed"))).context["brokers"][0]["pending"] >= 2 and r
        ),
        what="two pending delayed messages",
    )
    broker = page.context["brokers"][0]
    assert broker["error"] == ""
    levels = {level["level"]: level for level in broker["levels"]}
    assert [levels[n]["label"] for n in (1, 2, 3)] == ["1s", "2s", "1h"]
    assert levels[3]["pending"] == 2 and levels[3]["next_due_in_s"] > 3000
    detail = viewer_client.get(
        reverse("console:delayed_level", kwargs={"broker_name": broker["name"], "level": 3})
    )
    rows = detail.context["rows"]
    assert {r["real_topic"] for r in rows} == {"OpsReminders"}
    assert sorted(r["keys"] for r in rows) == ["remind-0", "remind-1"]
    assert all((r["due"] - r["stored"]).total_seconds() == 3600 for r in rows)
    exported = viewer_client.get(
        reverse(
            "console:delayed_level_export",
            kwargs={"broker_name": broker["name"], "level": 3, "fmt": "json"},
        )
    ).json()
    assert sorted(r["keys"] for r in exported) == ["remind-0", "remind-1"]
    assert all(r["due_timestamp"] - r["store_timestamp"] == 3_600_000 for r in exported)
    missing = viewer_client.get(
        reverse("console:delayed_level", kwargs={"broker_name": broker["name"], "level": 9})
    )
    assert missing.status_code == 400


def test_short_delay_level_drains(namesrv, viewer_client, admin):
    send(namesrv, "OpsSoon", 1, keys="soon", DELAY=1)

    def delivered():
        try:
            return admin.query_message_by_key("OpsSoon", "soon-0")
        except NotFoundError:  # the topic's route reaches the name server a moment after the send
            return None

    wait_until(delivered, what="delivery after 1 s")
    levels = viewer_client.get(reverse("console:delayed")).context["brokers"][0]["levels"]
    wait_until(
        lambda: (
            viewer_client.get(reverse("console:delayed")).context["brokers"][0]["levels"][0]["pending"] == 0
        ),
        what="level 1 drained",
    )
    assert levels[0]["max_offset"] >= 1
