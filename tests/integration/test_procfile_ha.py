"""``make run-ha`` (issue 22): Procfile.ha's own lines, run as processes in a temp var dir, start a
name server, a master and a slave of one broker set; the slave's broker.conf is created on first
start by the command that creates make run's, and the slave replicates what the master stores."""

from __future__ import annotations

import pytest

from broker.client import Producer
from broker.client.admin import MQAdmin
from broker.common.conf_file import parse_properties
from broker.common.message import Message
from broker.local_cluster import ROOT, wait_until
from tests.browser.ha_stack import HaStack
from tests.browser.make_run_stack import procfile_commands

pytestmark = pytest.mark.timeout(180)


# Slow: six processes on fixed-offset ports, whose free-port choice can race other tests' (seen
# once as "address already in use" in a full run).
@pytest.mark.slow
def test_procfile_ha_starts_a_slave_that_replicates_its_master(tmp_path):
    stack = HaStack(tmp_path)
    try:
        stack.start()
        master_conf = parse_properties((stack.var_dir / "broker.conf").read_text())
        slave_conf = parse_properties((stack.var_dir / "broker-slave.conf").read_text())
        assert (slave_conf["brokerId"], slave_conf["brokerRole"]) == ("1", "SLAVE")
        for key in ("brokerClusterName", "brokerName", "mappedFileSizeCommitLog", "namesrvAddr"):
            assert slave_conf[key] == master_conf[key], key
        assert slave_conf["storePathRootDir"] != master_conf["storePathRootDir"]
        assert "archiveUri" not in slave_conf  # the master archives its segments, once

        producer = Producer("PROCFILE_HA_PRODUCER", stack.namesrv_addr).start()
        try:
            for i in range(100):
                assert producer.send(Message("ProcfileHa", b"%04d" % i * 64)).send_status == "SEND_OK"
        finally:
            producer.shutdown()
        with MQAdmin(stack.namesrv_addr) as admin:

            def caught_up() -> bool:
                master = admin.broker_runtime_info(stack.broker_addr)
                slave = admin.broker_runtime_info(stack.slave_addr)
                return slave["commitLogMaxOffset"] == master["commitLogMaxOffset"] != "0"

            wait_until(caught_up, timeout=30, interval=0.2, what="the slave holding the master's log")
            slave = admin.broker_runtime_info(stack.slave_addr)
            assert (slave["brokerRole"], slave["haMasterConnected"]) == ("SLAVE", "true")
            assert admin.broker_runtime_info(stack.broker_addr)["haSlaveCount"] == "1"
            data = admin.cluster_info().brokers[master_conf["brokerName"]]
            assert data.broker_addrs == {0: stack.broker_addr, 1: stack.slave_addr}
    finally:
        stack.stop()
    # The console's processes are make run's.
    ha, single = procfile_commands(ROOT / "Procfile.ha"), procfile_commands()
    assert {name: ha[name] for name in ("namesrv", "web", "worker", "beat")} == {
        name: single[name] for name in ("namesrv", "web", "worker", "beat")
    }
