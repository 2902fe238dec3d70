"""The cluster page's replication view (issue 22) against a real master and slave: the broker
set groups both, each with the role its broker reports, and the lag the page shows is the one the
brokers' runtime info answers (GET_BROKER_RUNTIME_INFO through the admin client). A stopped slave
leaves its master with "no slave connected"; a stopped master leaves its slave "disconnected"."""

from __future__ import annotations

import os
import re
import signal

import pytest

from broker.client import Producer
from broker.common.message import Message
from broker.local_cluster import wait_until
from core import cluster_access
from core.cluster_queries import ReplicaMember, _slave_lag_millis
from core.formatting import duration_ms, iec_bytes
from tests.cluster import create_user, start_master_slave

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]

MASTER, SLAVE = "broker-ha", "broker-ha-s"


@pytest.fixture(scope="module")
def ha(tmp_path_factory):
    # The master drops a silent slave after 60 s, not the preset's 5: a frozen slave stays its
    # slave (with a lag that stands still) while a page waits for the frozen one to time out.
    settings = {"haHousekeepingInterval": 60_000}
    cluster = start_master_slave(tmp_path_factory.mktemp("console-ha"), master_settings=settings)
    yield cluster
    cluster_access.close_all()
    cluster.stop()


@pytest.fixture
def viewer(db, settings, ha):
    from django.test import Client

    settings.BROKER_NAMESRV = ha.namesrv_addr
    client = Client()
    client.force_login(create_user("rita", "viewer", "replication viewer password 7"))
    return client


def _runtime(ha, name: str) -> dict[str, str]:
    return cluster_access.admin_for(ha.namesrv_addr).broker_runtime_info(ha.brokers[name].addr)


def _rows(html: str) -> dict[str, str]:
    """The replication section's rows of the broker set, by broker id."""
    block = html.split(f'data-broker-set="{MASTER}"', 1)[1].split("</table>", 1)[0]
    return dict(re.findall(r'<tr data-broker-id="(\d+)"(.*?)</tr>', block, re.S))


def _data(row: str, cls: str, attr: str) -> str:
    match = re.search(rf'class="num {cls}" data-{attr}="(-?\d+)"', row)
    assert match, row
    return match.group(1)


def _page_once_listed(viewer, broker_ids: set[str], what: str) -> str:
    """The cluster page once its broker set lists exactly ``broker_ids`` (the name server drops a
    stopped broker when its connection closes)."""

    def page() -> str | None:
        html = viewer.get("/cluster/").content.decode()
        return html if set(_rows(html)) == broker_ids else None

    return wait_until(page, timeout=30, interval=0.3, what=what)


def test_master_and_slave_in_one_broker_set_with_the_brokers_own_lag(viewer, ha):
    _send(ha, 50)

    def caught_up() -> bool:  # the engine's own figures: same log end, nothing behind on either side
        master, slave = _runtime(ha, MASTER), _runtime(ha, SLAVE)
        return (
            master["commitLogMaxOffset"] == slave["commitLogMaxOffset"] != "0"
            and master["haSlaveBehindBytes"] == "0"
            and slave["haBehindMasterBytes"] == "0"
        )

    wait_until(caught_up, timeout=30, interval=0.2, what="the slave caught up with the master")
    html = viewer.get("/cluster/").content.decode()
    master_info, slave_info = _runtime(ha, MASTER), _runtime(ha, SLAVE)
    rows = _rows(html)
    assert set(rows) == {"0", "1"}, rows
    assert 'data-role="ASYNC_MASTER"' in rows["0"] and master_info["brokerRole"] == "ASYNC_MASTER"
    assert 'data-role="SLAVE"' in rows["1"] and slave_info["brokerRole"] == "SLAVE"
    assert ha.brokers[MASTER].addr in rows["0"] and ha.brokers[SLAVE].addr in rows["1"]
    assert "1 slave connected" in rows["0"] and master_info["haSlaveCount"] == "1"
    ack_addr, ack_offset = master_info["haSlaveAckOffsets"].split("=")
    assert f"{ack_addr} has up to {ack_offset}" in rows["0"]
    assert ack_offset == master_info["commitLogMaxOffset"] == slave_info["commitLogMaxOffset"]
    assert "connected to master" in rows["1"] and slave_info["haMasterConnected"] == "true"
    # Lag in bytes and time, as the brokers report them.
    assert _data(rows["1"], "lag-bytes", "bytes") == slave_info["haBehindMasterBytes"] == "0"
    assert _data(rows["0"], "lag-bytes", "bytes") == master_info["haSlaveBehindBytes"] == "0"
    assert _data(rows["0"], "lag-time", "millis") == master_info["haSlaveBehindMillis"] == "0"
    assert _data(rows["1"], "lag-time", "millis") == "0" and "0 ms" in rows["1"]
    assert ">0 B</td>" in rows["1"]  # human-readable
    # The section refreshes itself: the same URL answers it alone to htmx.
    part = viewer.get("/cluster/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="replication").content.decode()
    assert part.lstrip().startswith("<h2>Replication</h2>") and "<html" not in part
    assert set(_rows(part)) == {"0", "1"}


def _send(ha, count: int) -> None:
    producer = Producer("CONSOLE_HA_PRODUCER", ha.namesrv_addr).start()
    try:
        for i in range(count):
            assert producer.send(Message("console-ha-topic", b"replicated %d" % i)).send_status == "SEND_OK"
    finally:
        producer.shutdown()


def _lag_samples(text: str, family: str) -> dict[str, float]:
    """broker_id -> value of ``family`` for this module's broker set, from /metrics."""
    samples = {}
    for labels, value in re.findall(rf"^{family}\{{(.*?)\}} (\S+)$", text, re.M):
        fields = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if fields.get("broker") == MASTER:
            samples[fields["broker_id"]] = float(value)
    return samples


def test_metrics_exports_the_lag_of_the_master_and_of_each_slave(viewer, ha, settings):
    """/metrics (issue 22): the bytes each slave lacks (its own haBehindMasterBytes, one series per
    slave, labelled with its broker id), the bytes and seconds its master's furthest slave lacks."""
    settings.CONSOLE_METRICS_CACHE_SECONDS = 0
    _send(ha, 10)

    def caught_up() -> bool:
        master, slave = _runtime(ha, MASTER), _runtime(ha, SLAVE)
        return master["haSlaveBehindBytes"] == "0" and slave["haBehindMasterBytes"] == "0"

    wait_until(caught_up, timeout=30, interval=0.2, what="the slave caught up")
    text = viewer.get("/metrics").content.decode()
    assert _lag_samples(text, "rocketmq_broker_replication_lag_bytes") == {"0": 0.0, "1": 0.0}
    assert _lag_samples(text, "rocketmq_broker_replication_lag_seconds") == {"0": 0.0}


def test_a_frozen_slaves_lag_is_its_masters_own_figure(viewer, ha):
    """A slave that stops reading (SIGSTOP) keeps its connection: the master's lag figures grow
    non-zero and the page shows them as the master reports them; the frozen slave is unreachable."""

    def connected() -> bool:
        slave_connected = _runtime(ha, SLAVE)["haMasterConnected"] == "true"
        return slave_connected and _runtime(ha, MASTER)["haSlaveCount"] == "1"

    wait_until(connected, timeout=30, interval=0.2, what="the slave connected")
    slave = ha.brokers[SLAVE].proc
    os.kill(slave.pid, signal.SIGSTOP)
    try:
        _send(ha, 20)
        before = _runtime(ha, MASTER)
        html = viewer.get("/cluster/").content.decode()  # waits out the frozen slave's timeout
        after = _runtime(ha, MASTER)
    finally:
        os.kill(slave.pid, signal.SIGCONT)
    behind = before["haSlaveBehindBytes"]
    assert int(behind) > 0 and after["haSlaveBehindBytes"] == behind and after["haSlaveCount"] == "1"
    rows = _rows(html)
    assert _data(rows["0"], "lag-bytes", "bytes") == behind
    page_millis = int(_data(rows["0"], "lag-time", "millis"))
    assert int(before["haSlaveBehindMillis"]) <= page_millis <= int(after["haSlaveBehindMillis"])
    assert "1 slave connected" in rows["0"] and "unreachable" in rows["1"]


def test_stopped_slave_then_stopped_master_show_their_states(viewer, ha):
    ha.brokers[SLAVE].stop()
    wait_until(lambda: _runtime(ha, MASTER)["haSlaveCount"] == "0", timeout=30, interval=0.2,
               what="the master without its slave")  # fmt: skip
    rows = _rows(_page_once_listed(viewer, {"0"}, "the slave gone from the name server"))
    assert "no slave connected" in rows["0"]
    assert _runtime(ha, MASTER)["haSlaveBehindBytes"] == "-1"  # the broker's "nothing to measure"
    ha.start_broker(SLAVE)
    wait_until(lambda: _runtime(ha, SLAVE).get("haMasterConnected") == "true", timeout=30, interval=0.2,
               what="the slave connected again")  # fmt: skip
    ha.brokers[MASTER].stop()
    wait_until(lambda: _runtime(ha, SLAVE)["haMasterConnected"] == "false", timeout=30, interval=0.2,
               what="the slave without its master")  # fmt: skip
    html = _page_once_listed(viewer, {"1"}, "the master gone from the name server")
    row = _rows(html)["1"]
    assert "disconnected" in row and 'data-role="SLAVE"' in row
    assert f"No master of {MASTER} is registered" in html
    assert 'class="num lag-bytes">\u2013' in row  # no figure while disconnected (the broker says -1)
    assert _runtime(ha, SLAVE)["haBehindMasterBytes"] == "-1"
    # No name server: the section's refresh gets the error funnel's fragment (swapped in its place
    # until a later refresh succeeds), not a page.
    ha.namesrv.stop()
    part = viewer.get("/cluster/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="replication")
    assert part.status_code == 503 and b"<html" not in part.content
    assert ha.namesrv_addr.encode() in part.content


def _member(broker_id: int, **runtime: str) -> ReplicaMember:
    return ReplicaMember(broker_id, f"127.0.0.1:{10911 + broker_id}", dict(runtime))


def test_a_slaves_lag_in_time_comes_from_its_masters_figures():
    master = _member(0, brokerRole="SYNC_MASTER", haSlaveCount="1", haSlaveBehindBytes="4096",
                     haSlaveBehindMillis="2500")  # fmt: skip
    slave = _member(1, brokerRole="SLAVE", haMasterConnected="true", haBehindMasterBytes="4096")
    _slave_lag_millis(master, slave)
    assert (slave.behind_millis, slave.behind_millis_is_bound) == (2500, False)
    # Several slaves: the master measures its furthest one, a bound for the others.
    master.runtime["haSlaveCount"] = "2"
    other = _member(2, brokerRole="SLAVE", haMasterConnected="true", haBehindMasterBytes="100")
    _slave_lag_millis(master, other)
    assert (other.behind_millis, other.behind_millis_is_bound) == (2500, True)
    caught_up = _member(3, brokerRole="SLAVE", haMasterConnected="true", haBehindMasterBytes="0")
    _slave_lag_millis(master, caught_up)
    assert caught_up.behind_millis == 0
    gone = _member(4, brokerRole="SLAVE", haMasterConnected="false", haBehindMasterBytes="-1")
    _slave_lag_millis(master, gone)
    assert gone.behind_millis is None and gone.behind_bytes is None
    master.runtime["haSlaveAckOffsets"] = "127.0.0.1:5001=4096;[::1]:5002=100;bad;x=-1"
    assert master.ack_offsets == [("127.0.0.1:5001", 4096), ("[::1]:5002", 100)]
    assert [duration_ms(v) for v in (0, 850, 2500, 185_000, 7_800_000, -1)] == [
        "0 ms", "850 ms", "2.5 s", "3 min 5 s", "2 h 10 min", ""]  # fmt: skip
    assert [iec_bytes(v) for v in (0, 1023, 4096, 5_000_000, 3 * 2**30, -1, "x")] == [
        "0 B", "1023 B", "4.0 KiB", "4.8 MiB", "3.0 GiB", "", ""]  # fmt: skip
