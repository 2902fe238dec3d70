"""Issue 22, automatic failover with real processes: brokers in controller mode (RocketMQ 5's
ReplicasManager) beside a controller and a name server. The controller names the master; a
SIGKILLed master is replaced by its slave, which takes writes and registers as brokerId 0; the old
master comes back as a slave and cuts what it wrote that the new master lacks; a master cut off
from the controller stops taking writes when its lease ends; a switchover moves the master."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from broker.client import Producer
from broker.common import fastjson
from broker.common.codes import RequestCode, ResponseCode
from broker.common.epoch_entries import EpochEntryCache
from broker.common.message import Message
from broker.common.request_headers import GetRouteInfoRequestHeader
from broker.local_cluster import SMALL_STORE, free_port, start_controller, wait_until, write_conf
from tests.cluster import Cluster

CLUSTER = "CtlCluster"
SET = "broker-ctl"
TOPIC = "ctl-topic"
HEARTBEAT_TIMEOUT_MS = 1500

BROKER_SETTINGS = {
    "brokerName": SET,
    "autoCreateTopicEnable": "true",
    "autoCreateSubscriptionGroup": "true",
    **SMALL_STORE,
    "mappedFileSizeCommitLog": 1048576,
    "registerBrokerIntervalMillis": 500,
    "haSendHeartbeatInterval": 300,
    "haHousekeepingInterval": 3000,
    "enableControllerMode": "true",
    "brokerHeartbeatInterval": 200,
    "controllerHeartBeatTimeoutMills": HEARTBEAT_TIMEOUT_MS,
    "syncBrokerMetadataPeriod": 500,
    "checkSyncStateSetPeriod": 300,
    "syncControllerMetadataPeriod": 2000,
    "haMaxTimeSlaveNotCatchup": 3000,
}


class ControllerCluster:
    """A controller, a name server and brokers of one set in controller mode."""

    def __init__(self, workdir: Path, controller_settings: dict | None = None, start: bool = True) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.controller_port = free_port()
        self.controller_conf = write_conf(
            workdir / "controller.conf",
            {
                "listenPort": self.controller_port,
                "controllerDLegerPeers": f"n0-127.0.0.1:{free_port()}",
                "controllerStorePath": workdir / "controller",
                "scanNotActiveBrokerInterval": 100,
                **(controller_settings or {}),
            },
        )
        self.controller = start_controller(self.controller_conf) if start else None
        self.cluster = Cluster(workdir, CLUSTER)

    def start_controller(self) -> None:
        self.controller = start_controller(self.controller_conf)

    @property
    def controller_addr(self) -> str:
        return f"127.0.0.1:{self.controller_port}"

    def add(self, name: str, **settings: object):
        return self.cluster.add_broker(
            name, {**BROKER_SETTINGS, "controllerAddr": self.controller_addr, **settings}
        )

    def addr(self, name: str) -> str:
        return self.cluster.brokers[name].addr

    def runtime(self, name: str) -> dict[str, str]:
        response = self.cluster.request(RequestCode.GET_BROKER_RUNTIME_INFO, addr=self.addr(name))
        assert response.ok, response.remark
        return json.loads(response.body)["table"]

    def role(self, name: str) -> str:
        try:
            return self.runtime(name)["brokerRole"]
        except Exception:
            return "?"

    def master(self, names) -> str | None:
        """The one of ``names`` that is a writable master, if exactly one is."""
        masters = [n for n in names if self.role(n) == "SYNC_MASTER"]
        return masters[0] if len(masters) == 1 else None

    def route_ids(self) -> dict[int, str]:
        header = GetRouteInfoRequestHeader(TOPIC)
        response = self.cluster.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, header, addr=self.cluster.namesrv_addr
        )
        if not response.ok:
            return {}
        for data in fastjson.loads(response.body)["brokerDatas"]:
            if data["brokerName"] == SET:
                return {int(k): v for k, v in data["brokerAddrs"].items()}
        return {}

    def epochs(self, name: str) -> EpochEntryCache:
        response = self.cluster.request(RequestCode.GET_BROKER_EPOCH_CACHE, addr=self.addr(name))
        assert response.ok, response.remark
        return EpochEntryCache.decode(response.body)

    def stop(self) -> None:
        self.cluster.stop()
        if self.controller is not None:
            self.controller.stop()


@pytest.fixture
def ctl(tmp_path):
    cluster = ControllerCluster(tmp_path)
    yield cluster
    cluster.stop()


def _send(namesrv: str, bodies: list[str], group: str = "CTL_PRODUCER") -> list[str]:
    producer = Producer(group, namesrv).start()
    try:
        return [producer.send(Message(TOPIC, body.encode())).send_status for body in bodies]
    finally:
        producer.shutdown()


def _try_send(producer: Producer, body: bytes) -> bool:
    try:
        return producer.send(Message(TOPIC, body)).send_status == "SEND_OK"
    except Exception:
        time.sleep(0.2)
        return False


def _store_max(ctl: ControllerCluster, name: str) -> int:
    return int(ctl.runtime(name)["commitLogMaxOffset"])


def _send_request(body: bytes):
    """A SEND_MESSAGE of ``body`` to queue 0 of the topic."""
    from broker.common.request_headers import SendMessageRequestHeader
    from broker.remoting.command import create_request

    header = SendMessageRequestHeader(
        producer_group="CTL_DIRECT",
        topic=TOPIC,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=0,
        born_timestamp=int(time.time() * 1000),
        flag=0,
        properties="",
        reconsume_times=0,
    )
    return create_request(RequestCode.SEND_MESSAGE, header, body)


def _send_one(ctl: ControllerCluster, name: str, body: bytes):
    """SEND_MESSAGE straight to one broker (not through the route): its answer."""
    return ctl.cluster.admin.invoke(ctl.addr(name), _send_request(body))


def test_one_master_one_slave_and_failover(ctl):
    ctl.add("b1")
    assert wait_until(lambda: ctl.role("b1") == "SYNC_MASTER", 20), ctl.runtime("b1")
    ctl.add("b2")
    assert wait_until(
        lambda: ctl.role("b2") == "SLAVE" and ctl.runtime("b2").get("masterBrokerId") == "1", 20
    )
    info = ctl.runtime("b1")
    assert info["controllerBrokerId"] == "1" and info["masterEpoch"] == "1"
    assert ctl.runtime("b2")["controllerBrokerId"] == "2"

    assert _send(ctl.cluster.namesrv_addr, [f"m{i}" for i in range(50)]) == ["SEND_OK"] * 50
    assert wait_until(lambda: _store_max(ctl, "b2") == _store_max(ctl, "b1") > 0, 20)
    # The slave joins the in-sync set once caught up.
    assert wait_until(lambda: ctl.runtime("b1")["syncStateSet"] == "1,2", 20), ctl.runtime("b1")
    # A slave refuses sends.
    refused = _send_one(ctl, "b2", b"x")
    assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE

    from broker.client.instance import MQClientInstance

    # Routes polled every second (RocketMQ's pollNameServerInterval, 30 s by default: a producer
    # finds the new master at its next poll, as RocketMQ's does).
    instance = MQClientInstance(ctl.cluster.namesrv_addr, "ctl-long-lived", route_interval_ms=1000)
    producer = Producer("CTL_LONG_LIVED", ctl.cluster.namesrv_addr, instance=instance).start()
    try:
        assert producer.send(Message(TOPIC, b"before the kill")).send_status == "SEND_OK"
        ctl.cluster.brokers["b1"].proc.send_signal(signal.SIGKILL)
        ctl.cluster.brokers["b1"].proc.wait(10)
        killed = time.monotonic()
        assert wait_until(lambda: ctl.role("b2") == "SYNC_MASTER", 30), ctl.runtime("b2")
        failover_s = time.monotonic() - killed
        assert ctl.runtime("b2")["masterEpoch"] == "2"
        assert wait_until(lambda: ctl.route_ids().get(0) == ctl.addr("b2"), 20), ctl.route_ids()
        # The same producer resumes on its own (its route refreshed from the name server).
        resumed = wait_until(lambda: _try_send(producer, b"after the kill"), 60)
        resumed_s = time.monotonic() - killed
        print(
            f"failover: b2 master {failover_s:.2f} s after b1's SIGKILL, producer back at {resumed_s:.2f} s"
        )
        assert resumed
    finally:
        producer.shutdown()
    assert _send(ctl.cluster.namesrv_addr, [f"after{i}" for i in range(20)]) == ["SEND_OK"] * 20

    # The old master returns as a slave of the new one and catches up.
    ctl.cluster.start_broker("b1")
    assert wait_until(lambda: ctl.role("b1") == "SLAVE", 20), ctl.runtime("b1")
    assert wait_until(lambda: _store_max(ctl, "b1") == _store_max(ctl, "b2"), 20)
    epochs = [(e.epoch, e.start_offset) for e in ctl.epochs("b2").epoch_list]
    print("new master's epochs:", epochs, "old master's:", ctl.epochs("b1").epoch_list)
    assert [e for e, _ in epochs] == [1, 2] and epochs[1][1] > 0
    assert ctl.epochs("b1").epoch_list == ctl.epochs("b2").epoch_list


def _update_config(ctl: ControllerCluster, name: str, **settings: object) -> None:
    body = "".join(f"{k}={v}\n" for k, v in settings.items()).encode()
    response = ctl.cluster.request(RequestCode.UPDATE_BROKER_CONFIG, body=body, addr=ctl.addr(name))
    assert response.ok, response.remark


def _commit_log(ctl: ControllerCluster, name: str) -> bytes:
    """The broker's commit log up to its end, read from its files."""
    end = _store_max(ctl, name)
    directory = ctl.cluster.workdir / name / "commitlog"
    data = b"".join(p.read_bytes() for p in sorted(directory.iterdir()))
    return data[:end]


def _bodies(ctl: ControllerCluster, name: str) -> list[str]:
    """Every message body of the topic on one broker, pulled straight from its queues."""
    from broker.common.message_codec import decode_messages
    from broker.common.pull_sysflag import FLAG_SUBSCRIPTION

    bodies = []
    for queue_id in range(4):
        offset = 0
        while True:
            header = {
                "consumerGroup": "CTL_READER",
                "topic": TOPIC,
                "queueId": queue_id,
                "queueOffset": offset,
                "maxMsgNums": 32,
                "sysFlag": FLAG_SUBSCRIPTION,
                "commitOffset": 0,
                "suspendTimeoutMillis": 0,
                "subscription": "*",
                "subVersion": 0,
            }
            response = ctl.cluster.request(RequestCode.PULL_MESSAGE, header, addr=ctl.addr(name))
            if response.code != ResponseCode.SUCCESS:
                break
            messages = decode_messages(response.body)
            bodies += [m.body.decode() for m in messages]
            offset = int(response.field("nextBeginOffset"))
    return bodies


def test_old_master_rejoins_and_cuts_its_divergent_tail(ctl):
    """Acceptance 3. With allAckInSyncStateSet off (RocketMQ's default), a master answers sends
    its in-sync slave does not have yet. Here the slave is stopped while still in the in-sync
    set (the master's check is slowed so it does not drop it first), the master takes a tail
    the slave lacks and is killed; the slave, restarted alone, is elected from the in-sync set
    and takes new writes. The old master then rejoins as a slave: it cuts the tail (which no
    consumer of the new master ever sees) and ends with the new master's log, byte for byte."""
    ctl.add("b1")
    assert wait_until(lambda: ctl.role("b1") == "SYNC_MASTER", 20)
    ctl.add("b2")
    first = [f"first-{i}" for i in range(40)]
    assert _send(ctl.cluster.namesrv_addr, first) == ["SEND_OK"] * len(first)
    assert wait_until(lambda: ctl.runtime("b1")["syncStateSet"] == "1,2", 20), ctl.runtime("b1")
    assert wait_until(lambda: _store_max(ctl, "b2") == _store_max(ctl, "b1"), 20)
    _update_config(ctl, "b1", checkSyncStateSetPeriod=3_600_000)
    time.sleep(0.5)  # a check already asleep with the old period runs once more, with b2 connected
    assert ctl.cluster.brokers["b2"].stop() == 0

    tail = [f"tail-{i}" for i in range(25)]
    assert _send(ctl.cluster.namesrv_addr, tail) == ["SEND_OK"] * len(tail)
    tail_end = _store_max(ctl, "b1")
    ctl.cluster.brokers["b1"].kill()

    ctl.cluster.start_broker("b2")
    assert wait_until(lambda: ctl.role("b2") == "SYNC_MASTER", 30), ctl.runtime("b2")
    cut_at = _store_max(ctl, "b2")
    assert cut_at < tail_end
    second = [f"second-{i}" for i in range(30)]
    assert _send(ctl.cluster.namesrv_addr, second, "CTL_PRODUCER_2") == ["SEND_OK"] * len(second)
    assert wait_until(lambda: ctl.route_ids().get(0) == ctl.addr("b2"), 20), ctl.route_ids()

    ctl.cluster.start_broker("b1")
    assert wait_until(lambda: ctl.role("b1") == "SLAVE", 20), ctl.runtime("b1")
    assert wait_until(lambda: _store_max(ctl, "b1") == _store_max(ctl, "b2"), 20)
    assert _commit_log(ctl, "b1") == _commit_log(ctl, "b2")
    new_master = _bodies(ctl, "b2")
    assert sorted(new_master) == sorted(first + second)  # each once, the cut tail nowhere
    assert sorted(_bodies(ctl, "b1")) == sorted(new_master)
    assert ctl.epochs("b1").epoch_list == ctl.epochs("b2").epoch_list


def test_master_cut_off_from_the_controller_refuses_writes_after_its_lease(ctl):
    ctl.add("b1")
    assert wait_until(lambda: ctl.role("b1") == "SYNC_MASTER", 20)
    assert _send_one(ctl, "b1", b"before").code == ResponseCode.SUCCESS
    ctl.controller.proc.send_signal(signal.SIGSTOP)  # a partition: nothing answers, nothing fails fast
    try:
        answers = []
        assert wait_until(lambda: answers.append(_send_one(ctl, "b1", b"cut off")) or answers[-1].code, 10)
        refused = answers[-1]
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, refused.remark
        assert "heard nothing from the controller leader within its lease" in refused.remark
        assert ctl.runtime("b1")["controllerLeaseExpired"] == "true"
    finally:
        ctl.controller.proc.send_signal(signal.SIGCONT)
    # Heard again (and still the master: nobody else could be elected), it takes writes again.
    assert wait_until(lambda: _send_one(ctl, "b1", b"back").code == ResponseCode.SUCCESS, 20)
    assert ctl.runtime("b1")["controllerLeaseExpired"] == "false"


def test_switchover_moves_the_master_and_both_brokers_switch(ctl):
    import asyncio

    from broker.controller.client import ControllerClient

    ctl.add("b1")
    assert wait_until(lambda: ctl.role("b1") == "SYNC_MASTER", 20)
    ctl.add("b2")
    assert wait_until(lambda: ctl.runtime("b1")["syncStateSet"] == "1,2", 20), ctl.runtime("b1")
    assert _create_topic(ctl, "b1", "before-switchover").code == ResponseCode.SUCCESS
    assert _create_topic(ctl, "b2", "before-switchover").code == ResponseCode.SYSTEM_ERROR

    async def switchover():
        client = ControllerClient([ctl.controller_addr])
        try:
            return await client.elect(SET, 2, designate=True)
        finally:
            await client.close()

    info = asyncio.run(switchover())
    assert info.master_id == 2
    assert wait_until(lambda: ctl.role("b2") == "SYNC_MASTER" and ctl.role("b1") == "SLAVE", 20)
    assert ctl.runtime("b1")["masterBrokerId"] == "2"
    assert _send(ctl.cluster.namesrv_addr, [f"s{i}" for i in range(10)]) == ["SEND_OK"] * 10
    assert wait_until(lambda: ctl.route_ids() == {0: ctl.addr("b2"), 1: ctl.addr("b1")}, 20), ctl.route_ids()
    assert wait_until(lambda: _store_max(ctl, "b1") == _store_max(ctl, "b2"), 20)
    assert _send_one(ctl, "b1", b"x").code == ResponseCode.SERVICE_NOT_AVAILABLE
    # The slave-only handlers follow the role: topics are created on the new master only.
    assert _create_topic(ctl, "b1", "after-switchover").code == ResponseCode.SYSTEM_ERROR
    assert _create_topic(ctl, "b2", "after-switchover").code == ResponseCode.SUCCESS


def _create_topic(ctl: ControllerCluster, name: str, topic: str):
    from broker.common.request_headers import CreateTopicRequestHeader

    header = CreateTopicRequestHeader(topic, "TBW102", 4, 4, 6, "SINGLE_TAG")
    return ctl.cluster.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header, addr=ctl.addr(name))


def test_controller_unreachable_at_start_no_writes_until_it_answers(tmp_path):
    ctl = ControllerCluster(tmp_path, start=False)
    try:
        b1 = ctl.add("b1")  # it serves (reads) while it waits for a controller
        assert wait_until(
            lambda: any("cannot register with the controllers" in line for line in b1.output), 20
        )
        info = ctl.runtime("b1")
        assert info["controllerState"] == "INITIAL" and info["brokerRole"] == "SLAVE"
        assert _send_one(ctl, "b1", b"too early").code == ResponseCode.SERVICE_NOT_AVAILABLE
        ctl.start_controller()
        assert wait_until(lambda: ctl.role("b1") == "SYNC_MASTER", 30), ctl.runtime("b1")
        assert wait_until(lambda: _send_one(ctl, "b1", b"now").code == ResponseCode.SUCCESS, 20)
        assert ctl.runtime("b1")["controllerBrokerId"] == "1"
    finally:
        ctl.stop()


def test_all_ack_in_sync_state_set_waits_for_every_member(ctl):
    """allAckInSyncStateSet: a send is answered once every in-sync slave has it; a member that
    stops acknowledging costs FLUSH_SLAVE_TIMEOUT until it leaves the set (haMaxTimeSlaveNotCatchup),
    and it rejoins once it has caught up."""
    settings = {"allAckInSyncStateSet": "true", "slaveTimeout": 1000}
    ctl.add("b1", **settings)
    assert wait_until(lambda: ctl.role("b1") == "SYNC_MASTER", 20)
    ctl.add("b2", **settings)
    assert wait_until(lambda: ctl.runtime("b1")["syncStateSet"] == "1,2", 20), ctl.runtime("b1")
    assert _send_one(ctl, "b1", b"both have it").code == ResponseCode.SUCCESS
    assert _store_max(ctl, "b2") == _store_max(ctl, "b1")  # answered only once the slave had it

    slave = ctl.cluster.brokers["b2"].proc
    slave.send_signal(signal.SIGSTOP)
    try:
        assert _send_one(ctl, "b1", b"the slave is frozen").code == ResponseCode.FLUSH_SLAVE_TIMEOUT
        assert wait_until(lambda: ctl.runtime("b1")["syncStateSet"] == "1", 20), ctl.runtime("b1")
        assert _send_one(ctl, "b1", b"the master alone is in sync").code == ResponseCode.SUCCESS
    finally:
        slave.send_signal(signal.SIGCONT)
    assert wait_until(lambda: ctl.runtime("b1")["syncStateSet"] == "1,2", 30), ctl.runtime("b1")
    assert _send_one(ctl, "b1", b"both again").code == ResponseCode.SUCCESS
    assert _store_max(ctl, "b2") == _store_max(ctl, "b1")


@pytest.mark.slow
def test_three_controllers_the_leader_killed_the_master_stays_and_failover_still_works(tmp_path):
    """Brokers heartbeat all three controllers: when the Raft leader dies, the next leader already
    hears the master alive (no election, at most a short pause of writes while the master's lease
    waits for the new leader's acknowledgement), and it replaces a master killed afterwards."""
    from tests.controller.wire import ControllerGroup, Wire

    (tmp_path / "controllers").mkdir()
    group = ControllerGroup(tmp_path / "controllers", size=3)
    group.start()
    ctl = ControllerCluster(tmp_path, start=False)
    wire = Wire(group)
    addrs = ";".join(group.listen.values())
    try:
        assert wait_until(wire.leader, 30), "no controller leader"
        ctl.add("b1", controllerAddr=addrs)
        assert wait_until(lambda: ctl.role("b1") == "SYNC_MASTER", 30), ctl.runtime("b1")
        ctl.add("b2", controllerAddr=addrs)
        assert wait_until(lambda: ctl.runtime("b1")["syncStateSet"] == "1,2", 30), ctl.runtime("b1")
        epoch = ctl.runtime("b1")["masterEpoch"]

        leader = wire.leader()
        assert leader is not None
        group.kill(leader)
        assert wait_until(lambda: wire.leader() not in (None, leader), 30), "no new controller leader"
        assert wait_until(lambda: _send_one(ctl, "b1", b"new leader").code == ResponseCode.SUCCESS, 30)
        assert ctl.role("b1") == "SYNC_MASTER" and ctl.runtime("b1")["masterEpoch"] == epoch

        ctl.cluster.brokers["b1"].kill()
        assert wait_until(lambda: ctl.role("b2") == "SYNC_MASTER", 30), ctl.runtime("b2")
        assert int(ctl.runtime("b2")["masterEpoch"]) == int(epoch) + 1
        assert wait_until(lambda: _send_one(ctl, "b2", b"after").code == ResponseCode.SUCCESS, 30)
        assert not wire.split_brain
    finally:
        ctl.stop()
        group.stop()


@pytest.mark.slow
def test_a_hanging_controller_does_not_hold_the_masters_heartbeats(tmp_path):
    """A follower controller frozen (SIGSTOP: connections open, nothing answered) must not delay
    the heartbeats to the others: the master keeps its lease and takes every write meanwhile."""
    from tests.controller.wire import ControllerGroup, Wire

    (tmp_path / "controllers").mkdir()
    group = ControllerGroup(tmp_path / "controllers", size=3)
    group.start()
    ctl = ControllerCluster(tmp_path, start=False)
    wire = Wire(group)
    try:
        leader = wait_until(wire.leader, 30)
        assert leader, "no controller leader"
        follower = next(pid for pid in group.listen if pid != leader)
        # The frozen one first in controllerAddr: asked first, it would hold a lookup in turn.
        order = [follower, *(pid for pid in group.listen if pid != follower)]
        ctl.add("b1", controllerAddr=";".join(group.listen[pid] for pid in order))
        assert wait_until(lambda: ctl.role("b1") == "SYNC_MASTER", 30), ctl.runtime("b1")
        assert wait_until(lambda: _send_one(ctl, "b1", b"warm").code == ResponseCode.SUCCESS, 20)
        group.pause(follower)
        deadline = time.monotonic() + 4 * HEARTBEAT_TIMEOUT_MS / 1000
        codes = []
        while time.monotonic() < deadline:
            codes.append(_send_one(ctl, "b1", b"while a controller hangs").code)
            time.sleep(0.05)
        group.resume(follower)
        assert set(codes) == {ResponseCode.SUCCESS}, ctl.runtime("b1")
        assert ctl.runtime("b1")["controllerLeaseExpired"] == "false"
    finally:
        ctl.stop()
        group.stop()


@pytest.fixture
def ctl_quiet(tmp_path):
    """The controller does not notify role changes: brokers learn them by polling."""
    cluster = ControllerCluster(tmp_path, {"notifyBrokerRoleChanged": "false"})
    yield cluster
    cluster.stop()


def test_a_frozen_master_replaced_meanwhile_writes_nothing_when_it_wakes(ctl_quiet):
    """A master frozen (SIGSTOP: a long pause) while the controller elects its slave: a send that
    waited in its socket is refused when it wakes (its lease ended while it slept, before the
    loop runs the expiry timer); its heartbeats are acknowledged again at once, but it takes no
    write until it polls the replica info (every 4 s here, no notification) and becomes the new
    master's slave."""
    import threading

    from broker.remoting.client import SyncRemotingClient

    ctl = ctl_quiet
    ctl.add("b1", syncBrokerMetadataPeriod=4000)
    assert wait_until(lambda: ctl.role("b1") == "SYNC_MASTER", 20)
    ctl.add("b2")
    assert wait_until(lambda: ctl.runtime("b1")["syncStateSet"] == "1,2", 20), ctl.runtime("b1")
    # A connection made before the freeze (as a producer's is): what arrives on it is read as
    # soon as the broker wakes, in the same turn of its loop as its overdue timers.
    client = SyncRemotingClient()
    assert client.invoke(ctl.addr("b1"), _send_request(b"before the freeze")).code == ResponseCode.SUCCESS
    frozen = ctl.cluster.brokers["b1"].proc
    frozen.send_signal(signal.SIGSTOP)
    try:
        assert wait_until(lambda: ctl.role("b2") == "SYNC_MASTER", 30), ctl.runtime("b2")
        answers = []

        def send_to_frozen() -> None:
            answers.append(client.invoke(ctl.addr("b1"), _send_request(b"to the stale master"), 15_000))

        sender = threading.Thread(target=send_to_frozen)
        sender.start()
        time.sleep(0.5)  # the request waits in the frozen broker's socket
    finally:
        frozen.send_signal(signal.SIGCONT)
    sender.join(20)
    assert answers and answers[0].code == ResponseCode.SERVICE_NOT_AVAILABLE, answers and answers[0].remark
    # Its heartbeats are acknowledged again at once, but that does not make it master again:
    # every send is refused until it is the new master's slave (and after).
    codes = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and ctl.role("b1") != "SLAVE":
        codes.append(client.invoke(ctl.addr("b1"), _send_request(b"stale")).code)
    client.close()
    assert ctl.role("b1") == "SLAVE", ctl.runtime("b1")
    assert set(codes) <= {ResponseCode.SERVICE_NOT_AVAILABLE}, codes
    assert ctl.runtime("b1")["masterBrokerId"] == "2"


def test_a_failed_change_of_role_is_tried_again(ctl):
    """The elected slave cannot open its HA port (taken by another process): it refuses writes,
    says why, keeps trying, and serves once the port is free (issue 31: it used to take writes
    with no HA listener after its first retry)."""
    import re
    import socket

    ctl.add("b1")
    assert wait_until(lambda: ctl.role("b1") == "SYNC_MASTER", 20)
    ctl.add("b2")
    assert wait_until(lambda: ctl.runtime("b1")["syncStateSet"] == "1,2", 20), ctl.runtime("b1")
    ha_port = int(re.search(r"haListenPort=(\d+)", ctl.cluster.confs["b2"].read_text()).group(1))
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", ha_port))
    squatter.listen()
    try:
        ctl.cluster.brokers["b1"].kill()
        assert wait_until(lambda: "cannot be bound" in ctl.runtime("b2")["writeRefusedReason"], 30)
        refused = _send_one(ctl, "b2", b"not yet")
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE and f":{ha_port}" in refused.remark
    finally:
        squatter.close()
    assert wait_until(lambda: ctl.role("b2") == "SYNC_MASTER", 30), ctl.runtime("b2")
    assert wait_until(lambda: _send_one(ctl, "b2", b"now").code == ResponseCode.SUCCESS, 20)
    assert ctl.runtime("b2")["writeRefusedReason"] == ""
    socket.create_connection(("127.0.0.1", ha_port), timeout=5).close()  # the HA port is served


def test_a_broker_started_with_broker_id_minus_one_registers_with_the_controllers_id(ctl):
    """RocketMQ's controller quick-start sets brokerId=-1. The name server refuses a negative
    id; such a broker registers only once the controller gave it one, so it is still routed to."""
    ctl.add("q1", brokerId=-1)
    assert wait_until(lambda: ctl.role("q1") == "SYNC_MASTER", 20), ctl.runtime("q1")

    def registered() -> dict:
        answer = ctl.cluster.request(RequestCode.GET_BROKER_CLUSTER_INFO, addr=ctl.cluster.namesrv_addr)
        brokers = fastjson.loads(answer.body)["brokerAddrTable"] if answer.ok else {}
        return brokers.get(SET, {}).get("brokerAddrs", {})

    assert wait_until(lambda: registered() == {"0": ctl.addr("q1")}, 20), registered()
    assert "refused the registration" not in "".join(ctl.cluster.brokers["q1"].output)
