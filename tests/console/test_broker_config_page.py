"""The console's broker-config page tells the truth: which value the broker runs with, whether a
key applies at once or after a restart, a value waiting for the restart, and the broker's own
refusal of a bad value (issue 19 item 4)."""

from __future__ import annotations

import re

from core.models import AuditRecord


def _row(content: bytes, key: str) -> str:
    match = re.search(rf"<tr[^>]*>\s*<th[^>]*>{key}</th>.*?</tr>", content.decode(), re.S)
    assert match, f"no row for {key}"
    return match.group(0)


def test_restart_keys_show_as_pending_and_live_keys_as_applied(admin_client_, admin, live_cluster):
    addr = live_cluster.brokers["broker-a"].addr
    running = admin.broker_config(addr)["rebalanceLockMaxLiveTime"]
    page = admin_client_.post(
        f"/cluster/broker/{addr}/config", {"key": "rebalanceLockMaxLiveTime", "value": "61000"}, follow=True
    )
    assert b"needs restart: rebalanceLockMaxLiveTime=61000" in page.content  # the broker's answer
    row = _row(page.content, "rebalanceLockMaxLiveTime")
    assert f">{running}" in row and "needs restart" in row and "61000" in row and "after restart" in row
    assert 'class="pending-restart"' in row

    page = admin_client_.post(
        f"/cluster/broker/{addr}/config", {"key": "shortPollingTimeMills", "value": "900"}, follow=True
    )
    assert b"applied now: shortPollingTimeMills=900" in page.content
    row = _row(page.content, "shortPollingTimeMills")
    assert ">900" in row and "at once" in row and "needs restart" not in row


def test_a_bad_value_is_refused_by_the_broker_and_nothing_changes(admin_client_, admin, live_cluster):
    addr = live_cluster.brokers["broker-b"].addr
    before = admin.broker_config(addr)["diskMaxUsedSpaceRatio"]
    page = admin_client_.post(
        f"/cluster/broker/{addr}/config", {"key": "diskMaxUsedSpaceRatio", "value": "abc"}, follow=True
    )
    assert b"diskMaxUsedSpaceRatio=&#x27;abc&#x27; is not valid: not a whole number" in page.content
    assert admin.broker_config(addr)["diskMaxUsedSpaceRatio"] == before
    assert AuditRecord.objects.get(action="broker.config.update").result == AuditRecord.RESULT_FAILED


def test_viewers_see_how_each_key_applies(viewer_client, live_cluster):
    addr = live_cluster.brokers["broker-a"].addr
    page = viewer_client.get(f"/cluster/broker/{addr}/")
    assert page.status_code == 200
    assert "at once" in _row(page.content, "maxMessageSize")
    assert "after restart" in _row(page.content, "messageDelayLevel")
    assert "broker.conf only" in _row(page.content, "brokerName")
    assert "10 to 95" in _row(page.content, "diskMaxUsedSpaceRatio")
