"""Issue 31 §1, the console's part: a broker with damaged commit-log data (100 bytes overwritten in a
stopped broker's first segment, then found by a read) shows a banner on its page with the range the
broker quarantined, /metrics carries the broker's figures, and only an admin purges the range —
confirmed, audited, and the banner and figures gone afterwards, as the broker itself then says."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from broker.client.admin import MQAdmin
from broker.client.producer import Producer
from broker.common.message import Message
from core import cluster_access
from core.models import AuditRecord
from tests.cluster import ONE_BROKER, cluster_fixture, logged_in_client
from tests.store.damage_fixtures import body_of, overwrite

pytestmark = pytest.mark.django_db

TOPIC = "DamagedPageTopic"
SEGMENT = 1024 * 1024
SCRAPER_TOKEN = "damaged-data-scraper-token"
PASSWORD = "correct horse battery staple 42"
cluster = cluster_fixture(ONE_BROKER.with_settings(mappedFileSizeCommitLog=SEGMENT), topics={TOPIC: 1})
viewer = logged_in_client("dora", "viewer", PASSWORD)
operator = logged_in_client("oleg", "operator", PASSWORD)
admin_user = logged_in_client("adele", "admin", PASSWORD)


def _read_everything(admin: MQAdmin, addr: str) -> None:
    offset = 0
    while True:
        result = admin.pull_messages(addr, TOPIC, 0, offset, 32)
        if result.next_begin_offset <= offset or result.status == "NO_NEW_MSG":
            return
        offset = result.next_begin_offset


@pytest.fixture(scope="module")
def filled(cluster):
    """Two segments and a bit of 1 KiB messages in the broker's log."""
    producer = Producer("DamagedPageProducer", cluster.namesrv_addr).start()
    try:
        sent = 0
        while sent * 1100 < 2 * SEGMENT + SEGMENT // 4:
            results = producer.send_batch([Message(TOPIC, body_of(sent + i)) for i in range(32)])
            assert all(r.send_status == "SEND_OK" for r in results)
            sent += 32
    finally:
        producer.shutdown()
    yield cluster
    cluster_access.close_all()


@pytest.fixture
def damaged(filled):
    """A quarantined range on the broker: when none is open (a purge test ran first), a clean stop,
    100 bytes overwritten in the first segment at a spot not hit before, a restart and a read that
    finds the damage. (broker address, the range as the broker reports it)."""
    addr = filled.broker_addr
    if _engine_runtime(filled, addr)["commitLogDamagedRanges"] == "0":
        name = next(iter(filled.brokers))
        assert filled.brokers[name].stop() == 0
        _damaged_spots.append(SEGMENT // 4 * len(_damaged_spots) + SEGMENT // 8)
        overwrite(filled.workdir / "store", _damaged_spots[-1])
        filled.start_broker(name)
    admin = MQAdmin(filled.namesrv_addr)
    try:
        _read_everything(admin, addr)
        (detail,) = json.loads(admin.broker_runtime_info(addr)["commitLogDamagedDetail"])
    finally:
        admin.close()
    cluster_access.close_all()  # the console's clients knew the broker before its restart
    return addr, detail


_damaged_spots: list[int] = []  # where the module's tests overwrote the first segment so far


@pytest.fixture(autouse=True)
def _console_on_the_damaged_cluster(cluster, settings):
    settings.BROKER_NAMESRV = cluster.namesrv_addr
    settings.CONSOLE_METRICS_CACHE_SECONDS = 0
    settings.CONSOLE_METRICS_TOKEN = SCRAPER_TOKEN


def _engine_runtime(cluster, addr: str) -> dict[str, str]:
    admin = MQAdmin(cluster.namesrv_addr)
    try:
        return admin.broker_runtime_info(addr)
    finally:
        admin.close()


def _metric(name: str, addr: str) -> float | None:
    text = Client().get("/metrics", headers={"Authorization": f"Bearer {SCRAPER_TOKEN}"}).content.decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and f'addr="{addr}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def test_the_banner_and_metrics_show_the_range_the_broker_quarantined(damaged, viewer):
    addr, detail = damaged
    page = viewer.get(f"/cluster/broker/{addr}/").content.decode()
    assert 'id="damaged-data"' in page and "Damaged commit-log data: 1 range," in page
    assert f"{detail['to'] - detail['from']} bytes" in page
    assert f'<td class="mono">{detail["from"]}</td><td class="mono">{detail["to"]}</td>' in page
    assert "Purge</button>" not in page  # a viewer is shown no purge
    assert _metric("rocketmq_broker_commitlog_damaged_ranges", addr) == 1.0
    assert _metric("rocketmq_broker_commitlog_damaged_bytes", addr) == detail["to"] - detail["from"]


def test_only_an_admin_may_purge_and_a_purge_must_be_confirmed(damaged, operator, admin_user):
    addr, detail = damaged
    url = f"/cluster/broker/{addr}/damaged/purge"
    assert operator.post(url, {"from": detail["from"], "confirm": "yes"}).status_code == 403
    unconfirmed = admin_user.post(url, {"from": detail["from"]})
    assert unconfirmed.status_code == 400 and b"must be confirmed" in unconfirmed.content
    assert admin_user.post(url, {"from": "12ab", "confirm": "yes"}).status_code == 400
    records = AuditRecord.objects.filter(action="broker.damaged.purge")
    assert [r.result for r in records.order_by("id")][-2:] == [AuditRecord.RESULT_FAILED] * 2


def test_a_purge_of_an_offset_no_range_starts_at_is_refused_and_nothing_purged(cluster, damaged, admin_user):
    addr, detail = damaged
    url = f"/cluster/broker/{addr}/damaged/purge"
    response = admin_user.post(url, {"from": detail["from"] + 1, "confirm": "yes"}, follow=True)
    assert "no quarantined damaged range starts at commit-log offset" in response.content.decode()
    failed = AuditRecord.objects.filter(action="broker.damaged.purge").latest("id")
    assert failed.result == AuditRecord.RESULT_FAILED and failed.target == addr
    assert _engine_runtime(cluster, addr)["commitLogDamagedRanges"] == "1"


def test_an_admin_purges_the_range_and_the_broker_reports_none(cluster, damaged, admin_user):
    addr, detail = damaged
    url = f"/cluster/broker/{addr}/damaged/purge"
    response = admin_user.post(url, {"from": detail["from"], "confirm": "yes"}, follow=True)
    page = response.content.decode()
    assert response.status_code == 200 and 'id="damaged-data"' not in page
    assert f"{detail['to'] - detail['from']} bytes from offset {detail['from']}" in page
    done = AuditRecord.objects.filter(action="broker.damaged.purge").latest("id")
    assert done.result == AuditRecord.RESULT_OK and done.parameters == {"from": detail["from"]}
    runtime = _engine_runtime(cluster, addr)
    assert (runtime["commitLogDamagedRanges"], runtime["commitLogDamagedBytes"]) == ("0", "0")
    assert _metric("rocketmq_broker_commitlog_damaged_ranges", addr) == 0.0
