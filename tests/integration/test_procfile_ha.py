"""``make run-ha`` (issue 22): Procfile.ha's own lines, run as processes in a temp var dir, start a
name server, a controller and the two brokers of one broker set in controller mode, their conf
files created on first start by the command that creates make run's. The controller makes one
broker master and the other its slave; the slave holds what the master stores; the master
SIGKILLed, the controller makes the slave master and sends go on; the killed broker restarted
rejoins as slave, and mqadmin electMaster switches the master back."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from broker.client import Producer
from broker.client.admin import MQAdmin
from broker.client.errors import MQClientError
from broker.common.conf_file import load_conf, parse_properties
from broker.common.message import Message
from broker.controller.config import controller_config
from broker.local_cluster import ROOT, wait_until
from broker.server.config import BrokerConfig
from tests.browser.ha_stack import REPLICAS, HaStack
from tests.browser.make_run_stack import procfile_commands

pytestmark = pytest.mark.timeout(300)
TOPIC = "ProcfileHa"


def _send(stack: HaStack, count: int, first: int = 0) -> None:
    # Retries on: a send that meets the old master's closed connection goes again (RocketMQ's
    # default), as an application of make run-ha would.
    producer = Producer("PROCFILE_HA_PRODUCER", stack.namesrv_addr).start()
    try:
        for i in range(first, first + count):
            assert producer.send(Message(TOPIC, b"%04d" % i * 64)).send_status == "SEND_OK"
    finally:
        producer.shutdown()


def _role(admin: MQAdmin, addr: str) -> str | None:
    """The role a broker reports, None while it does not answer (restarting)."""
    try:
        return admin.broker_runtime_info(addr).get("brokerRole")
    except MQClientError:
        return None


def _caught_up(admin: MQAdmin, master: str, slave: str) -> bool:
    end = admin.broker_runtime_info(master)["commitLogMaxOffset"]
    return admin.broker_runtime_info(slave)["commitLogMaxOffset"] == end != "0"


def _ensure(var_dir, *args: str) -> str:
    """``manage.py ensure_broker_conf`` as Procfile.ha's lines run it; its output."""
    env = {**os.environ, "CONSOLE_VAR_DIR": str(var_dir), "BROKER_NAMESRV": "127.0.0.1:19876"}
    done = subprocess.run(
        [sys.executable, "manage.py", "ensure_broker_conf", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_run_ha_files_are_accepted_by_the_controller_and_the_brokers(tmp_path):
    """The files make run-ha creates parse as the engine reads them: one controller, and two
    brokers of one set in controller mode naming it, each on its own port and store."""
    assert "(created)" in _ensure(tmp_path, "--controller")
    conf = tmp_path / "controller.conf"
    # Edited before the brokers' files exist (the operator's to edit): they follow its port.
    conf.write_text(conf.read_text().replace("listenPort=9878", "listenPort=19878"))
    controller = controller_config(load_conf(str(conf), {}))
    assert (controller.listen_port, len(controller.peers)) == (19878, 1)
    assert controller.store_path == (tmp_path / "controller").resolve()

    brokers = []
    for replica in (1, 2):
        assert "(created)" in _ensure(tmp_path, "--replica", str(replica))
        brokers.append(BrokerConfig.load(str(tmp_path / f"broker-ha-{replica}.conf")))
    assert "(existing, left as it is)" in _ensure(tmp_path, "--replica", "1")
    for broker in brokers:
        assert broker.enable_controller_mode and broker.controller_addrs == ["127.0.0.1:19878"]
        assert (broker.store.broker_role, broker.store.all_ack_in_sync_state_set) == ("SYNC_MASTER", True)
        assert (broker.broker_cluster_name, broker.broker_name) == ("DefaultCluster", "broker-a")
        assert broker.namesrv_addrs == ["127.0.0.1:19876"]
    one, two = brokers
    # Their HA ports take sign-ins with one random secret, kept in the var dir for its owner only.
    secret_file = tmp_path / "ha-auth-secret"
    assert one.ha_auth_secret == two.ha_auth_secret == secret_file.read_text().strip()
    assert len(one.ha_auth_secret) >= 32 and secret_file.stat().st_mode & 0o077 == 0
    assert (one.listen_port, two.listen_port) == (10911, 10921)
    assert one.store_path_root_dir != two.store_path_root_dir
    assert not (tmp_path / "broker.conf").exists()  # make run's file is not make run-ha's


# Slow: seven processes on fixed-offset ports (a broker's HA port is its port + 1), whose free-port
# choice can race other tests'.
@pytest.mark.slow
def test_procfile_ha_runs_a_controller_mode_set_that_fails_over(tmp_path):
    stack = HaStack(tmp_path)
    try:
        stack.start()
        confs = {
            n: parse_properties((stack.var_dir / f"broker-ha-{n[-1]}.conf").read_text()) for n in REPLICAS
        }
        one, two = confs.values()
        for conf in confs.values():
            assert conf["enableControllerMode"] == "true"
            assert conf["controllerAddr"] == stack.controller_addr
            assert (conf["brokerRole"], conf["allAckInSyncStateSet"]) == ("SYNC_MASTER", "true")
        for key in ("brokerClusterName", "brokerName", "mappedFileSizeCommitLog", "namesrvAddr"):
            assert one[key] == two[key], key
        assert one["storePathRootDir"] != two["storePathRootDir"]
        assert "archiveUri" in one and "archiveUri" not in two  # one copy of each sealed segment
        assert not (stack.var_dir / "broker.conf").exists()  # make run's broker is not make run-ha's

        master, slave = REPLICAS
        with MQAdmin(stack.namesrv_addr) as admin:
            wait_until(
                lambda: _role(admin, stack.addrs[slave]) == "SLAVE",
                timeout=60,
                interval=0.2,
                what="broker2 a slave",
            )
            _send(stack, 100)
            wait_until(
                lambda: _caught_up(admin, stack.addrs[master], stack.addrs[slave]),
                timeout=30,
                interval=0.2,
                what="the slave holding the master's log",
            )
            assert admin.broker_runtime_info(stack.addrs[master])["brokerRole"] == "SYNC_MASTER"
            # Only an in-sync replica may be elected: the master adds its caught-up slave to the
            # set at its next check (checkSyncStateSetPeriod, 5 s).
            wait_until(lambda: len(stack.in_sync()) == 2, timeout=60, interval=0.2, what="both in sync")

            # Automatic failover: the master killed, the controller makes broker2 master.
            stack.kill(master)
            wait_until(lambda: stack.master() == slave, timeout=60, interval=0.2, what="broker2 elected")
            _send(stack, 50, first=100)
            assert admin.broker_runtime_info(stack.addrs[slave])["brokerRole"] == "SYNC_MASTER"

            # The old master, restarted, rejoins as slave and catches up.
            stack.spawn(master)
            wait_until(
                lambda: _role(admin, stack.addrs[master]) == "SLAVE",
                timeout=60,
                interval=0.2,
                what="broker1 back as slave",
            )
            wait_until(
                lambda: _caught_up(admin, stack.addrs[slave], stack.addrs[master]),
                timeout=60,
                interval=0.2,
                what="broker1 holding broker2's log",
            )
            wait_until(lambda: len(stack.in_sync()) == 2, timeout=60, interval=0.2, what="broker1 in sync")
            data = admin.cluster_info().brokers["broker-a"]
            assert data.broker_addrs[0] == stack.addrs[slave]
            assert set(data.broker_addrs.values()) == set(stack.addrs.values())

            # A switchover back, as the README shows it: mqadmin electMaster with broker1's id
            # (a slave registers under its controller id).
            broker1_id = next(i for i, addr in data.broker_addrs.items() if addr == stack.addrs[master])
            elect = subprocess.run(
                [sys.executable, "-m", "broker.cli", "electMaster", "-a", stack.controller_addr,
                 "-c", "DefaultCluster", "-bn", "broker-a", "-b", str(broker1_id)],
                cwd=ROOT, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert elect.returncode == 0, elect.stdout + elect.stderr
            wait_until(
                lambda: stack.master() == master, timeout=60, interval=0.2, what="broker1 master again"
            )
            _send(stack, 20, first=150)
    finally:
        stack.stop()
    # The console's processes are make run's.
    ha, single = procfile_commands(ROOT / "Procfile.ha"), procfile_commands()
    assert {name: ha[name] for name in ("namesrv", "web", "worker", "beat")} == {
        name: single[name] for name in ("namesrv", "web", "worker", "beat")
    }
