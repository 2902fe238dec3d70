"""One controller (a Raft group of one) in this process, spoken to over real sockets: the
request codes, their refusals, the role-change notification, and controller.conf's checks."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest

from broker.common.codes import RequestCode, ResponseCode
from broker.common.conf_file import ConfError
from broker.common.request_headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from broker.controller.client import ControllerClient, ControllerError
from broker.controller.config import controller_config
from broker.controller.service import ControllerService
from broker.controller.state import ReplicaView
from broker.local_cluster import ROOT, free_port
from broker.remoting.client import RemotingClient
from broker.remoting.command import create_request
from broker.remoting.server import RemotingServer

NAME = "broker-b"


async def until(predicate, timeout: float = 20.0, what: str = "a condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = await predicate()
        if answer:
            return answer
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


@pytest.fixture
async def controller(tmp_path):
    conf = {
        "listenPort": "0",
        "controllerDLegerPeers": f"n0-127.0.0.1:{free_port()}",
        "controllerStorePath": str(tmp_path / "store"),
        "scanNotActiveBrokerInterval": "100",
        "controllerWriteTimeoutMillis": "2000",
    }
    service = ControllerService(controller_config(conf))
    port = await service.start()
    client = RemotingClient()
    addr = f"127.0.0.1:{port}"

    async def call(code, header=None, body=b""):
        return await client.invoke(addr, create_request(code, header, body), 5000)

    async def leads():
        response = await call(RequestCode.CONTROLLER_GET_METADATA_INFO)
        return response.field("isLeader") == "true"

    await until(leads, what="the single controller to lead")
    yield service, call
    await client.close()
    await service.stop()


def heartbeat(address: str, bid: int, timeout_ms: int = 1500) -> BrokerHeartbeatRequestHeader:
    return BrokerHeartbeatRequestHeader(
        cluster_name="c",
        broker_addr=address,
        broker_name=NAME,
        broker_id=bid,
        heartbeat_timeout_mills=timeout_ms,
    )


async def test_registration_election_notification_and_refusals(controller):
    _, call = controller
    # A real remoting server standing for the broker, to receive NOTIFY_BROKER_ROLE_CHANGED.
    notified: asyncio.Queue = asyncio.Queue()
    broker = RemotingServer("127.0.0.1", 0)
    broker.register_processor(
        RequestCode.NOTIFY_BROKER_ROLE_CHANGED, lambda conn, request: notified.put_nowait(request)
    )
    broker_port = await broker.start()
    try:
        address = f"127.0.0.1:{broker_port}"
        meta = await call(RequestCode.CONTROLLER_GET_METADATA_INFO)
        assert meta.ok and meta.field("controllerLeaderId") == "n0" and meta.field("group") == "group1"

        next_id = await call(
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader("c", NAME)
        )
        assert next_id.field("nextBrokerId") == "1"
        applied = await call(
            RequestCode.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader("c", NAME, 1, f"{address};1")
        )
        assert applied.ok, applied.remark
        taken = await call(
            RequestCode.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader("c", NAME, 1, "127.0.0.1:1;9")
        )
        assert taken.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID and "held by another" in taken.remark
        unapplied = await call(
            RequestCode.CONTROLLER_REGISTER_BROKER,
            RegisterBrokerToControllerRequestHeader("c", NAME, 7, "h:1"),
        )
        assert unapplied.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST

        # Registered but silent: no master yet (nobody alive to elect).
        silent = await call(
            RequestCode.CONTROLLER_REGISTER_BROKER,
            RegisterBrokerToControllerRequestHeader("c", NAME, 1, address),
        )
        assert silent.ok and silent.field("masterBrokerId") is None
        # It heartbeats: the leader's scan makes it the set's first master and tells it.
        assert (await call(RequestCode.BROKER_HEARTBEAT, heartbeat(address, 1))).ok
        note = await asyncio.wait_for(notified.get(), 20)
        assert note.field("masterBrokerId") == "1" and note.field("masterEpoch") == "1"
        assert note.field("masterAddress") == address
        assert json.loads(note.body) == {"syncStateSet": [1], "syncStateSetEpoch": 1}
        info = await call(RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(NAME))
        assert (info.field("masterBrokerId"), info.field("masterEpoch")) == ("1", "1")

        # A second replica applies and registers; the master may add it only while it is alive.
        assert (
            await call(
                RequestCode.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader("c", NAME, 2, "h:2;1")
            )
        ).ok
        body = json.dumps({"syncStateSet": [1, 2], "syncStateSetEpoch": 1}).encode()
        dead = await call(
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, AlterSyncStateSetRequestHeader(NAME, 1, 1), body
        )
        assert dead.code == ResponseCode.CONTROLLER_BROKER_NOT_ALIVE, dead.remark
        assert (await call(RequestCode.BROKER_HEARTBEAT, heartbeat("h:2", 2))).ok
        assert (await call(RequestCode.BROKER_HEARTBEAT, heartbeat(address, 1))).ok
        altered = await call(
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, AlterSyncStateSetRequestHeader(NAME, 1, 1), body
        )
        assert altered.ok and altered.field("newSyncStateSetEpoch") == "2", altered.remark
        data = await call(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=json.dumps([NAME]).encode())
        entry = json.loads(data.body)["replicasInfoTable"][NAME]
        assert entry["masterBrokerId"] == 1 and entry["syncStateSetEpoch"] == 2
        assert entry["inSyncReplicas"] == [
            {"brokerName": NAME, "brokerId": 1, "brokerAddress": address, "alive": True},
            {"brokerName": NAME, "brokerId": 2, "brokerAddress": "h:2", "alive": True},
        ]
        assert entry["notInSyncReplicas"] == []

        # Elect without designation while the master is alive: it stays (RocketMQ's answer).
        still = await call(RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(NAME, "c", 2))
        assert (
            still.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST and still.field("masterBrokerId") == "1"
        )
        # Switchover to broker 2; the old master's next change is fenced.
        switched = await call(
            RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(NAME, "c", 2, designate_elect=True)
        )
        assert (
            switched.ok and switched.field("masterBrokerId") == "2" and switched.field("masterEpoch") == "2"
        )
        assert json.loads(switched.body)["brokerMemberGroup"]["brokerAddrs"]["2"] == "h:2"
        note = await asyncio.wait_for(notified.get(), 20)
        assert note.field("masterBrokerId") == "2"
        fenced = await call(
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            AlterSyncStateSetRequestHeader(NAME, 1, 1),
            json.dumps({"syncStateSet": [1, 2], "syncStateSetEpoch": 3}).encode(),
        )
        assert fenced.code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
    finally:
        await broker.stop()


MALFORMED = [
    (RequestCode.BROKER_HEARTBEAT, {"clusterName": "c", "brokerName": NAME}, b"", "brokerAddr"),
    (
        RequestCode.BROKER_HEARTBEAT,
        {"clusterName": "c", "brokerName": "../x", "brokerAddr": "h:1", "brokerId": "1"},
        b"",
        "not a legal name",
    ),
    (
        RequestCode.BROKER_HEARTBEAT,
        {"clusterName": "c", "brokerName": NAME, "brokerAddr": "h:1"},
        b"",
        "brokerId",
    ),
    (RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": "a" * 200}, b"", "not a legal name"),
    (
        RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        {"brokerName": NAME, "masterBrokerId": "1", "masterEpoch": "x"},
        b"{}",
        "not a number",
    ),
    (
        RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        {"brokerName": NAME, "masterBrokerId": "1", "masterEpoch": "1"},
        b'{"syncStateSet": "1", "syncStateSetEpoch": 1}',
        "SyncStateSet",
    ),
    (
        RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        {"brokerName": NAME, "masterBrokerId": "1", "masterEpoch": "1"},
        b"not json",
        "SyncStateSet",
    ),
    (
        RequestCode.CONTROLLER_ELECT_MASTER,
        {"brokerName": NAME, "designateElect": "true"},
        b"",
        "needs brokerId",
    ),
    (
        RequestCode.CONTROLLER_APPLY_BROKER_ID,
        {
            "clusterName": "c",
            "brokerName": NAME,
            "appliedBrokerId": "3",
            "registerCheckCode": "no address;1",
        },
        b"",
        "host:port",
    ),
    (RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, {}, b'{"a": 1}', "JSON list"),
]


async def test_malformed_requests_get_a_clear_refusal(controller):
    _, call = controller
    for code, fields, body, wanted in MALFORMED:
        response = await call(code, fields, body)
        assert response.code == ResponseCode.CONTROLLER_INVALID_REQUEST, (
            code,
            response.code,
            response.remark,
        )
        assert wanted in (response.remark or ""), (code, response.remark)


async def test_reads_through_the_log_and_unknown_sets(tmp_path):
    conf = {
        "listenPort": "0",
        "controllerDLegerPeers": f"n0-127.0.0.1:{free_port()}",
        "controllerStorePath": "",  # nothing on disk
        "isProcessReadEvent": "true",
    }
    service = ControllerService(controller_config(conf))
    port = await service.start()
    client = RemotingClient()
    try:
        addr = f"127.0.0.1:{port}"

        async def info():
            request = create_request(
                RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(NAME)
            )
            response = await client.invoke(addr, request, 5000)
            return response if response.code != ResponseCode.CONTROLLER_NOT_LEADER else None

        unknown = await until(info, what="a leader answering")
        assert unknown.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST
        request = create_request(
            RequestCode.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader("c", NAME, 1, "h:1;1")
        )
        assert (await client.invoke(addr, request, 5000)).ok
        known = await info()
        assert known is not None and known.ok and known.field("masterBrokerId") is None
        assert json.loads(known.body) == {"syncStateSet": [], "syncStateSetEpoch": 0}
    finally:
        await client.close()
        await service.stop()


@pytest.mark.parametrize(
    ("conf", "wanted"),
    [
        ({"controllerDLegerPeers": "n0-127.0.0.1:9877;n1-127.0.0.1:9879"}, "use 1, 3 or 5"),
        ({"controllerDLegerPeers": "n0-127.0.0.1"}, "id-host:port"),
        ({"controllerDLegerPeers": "n0-127.0.0.1:9877", "controllerDLegerSelfId": "n5"}, "not one of"),
        (
            {
                "controllerDLegerPeers": "n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3",
                "controllerDLegerSelfId": "n0",
            },
            "controllerPeerListenAddrs lacks",
        ),
        (  # a group without a password, loopback or not: its Raft port would run anyone's pickle
            {
                "controllerDLegerPeers": "n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3",
                "controllerPeerListenAddrs": "n0-127.0.0.1:4;n1-127.0.0.1:5;n2-127.0.0.1:6",
            },
            "set controllerRaftPassword",
        ),
        ({"scanNotActiveBrokerInterval": "0"}, "positive"),
        ({"enableElectUncleanMaster": "maybe"}, "true or false"),
    ],
)
def test_bad_controller_conf_is_refused(conf, wanted):
    with pytest.raises(ConfError, match=wanted):
        controller_config(conf)


def test_the_process_exits_2_on_a_bad_conf(tmp_path):
    conf = tmp_path / "controller.conf"
    conf.write_text(
        "controllerDLegerPeers=n0-10.1.2.3:9877;n1-10.1.2.4:9877;n2-10.1.2.5:9877\n"
        "controllerPeerListenAddrs=n0-10.1.2.3:9878;n1-10.1.2.4:9878;n2-10.1.2.5:9878\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "broker.controller", "-c", str(conf)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "controllerRaftPassword" in done.stderr


async def test_the_broker_side_client_follows_the_flow_and_raises_refusals(controller):
    service, _ = controller
    client = ControllerClient(["127.0.0.1:1", f"127.0.0.1:{service.server.port}"])  # the first is down
    try:
        assert await client.find_leader() == f"127.0.0.1:{service.server.port}"
        bid = await client.next_broker_id("c", NAME)
        await client.apply_broker_id("c", NAME, bid, "h:7;1")
        beat = heartbeat("h:7", bid)
        assert await client.heartbeat(beat) == 1  # one of two controllers is reachable
        info = await client.register("c", NAME, bid, "h:7")
        assert (info.master_id, info.master_address, info.master_epoch) == (bid, "h:7", 1)
        assert info.sync_state_set == {bid}
        with pytest.raises(ControllerError) as refused:
            await client.alter_sync_state_set(NAME, bid, 1, {bid, 9}, info.sync_state_set_epoch)
        assert refused.value.code == ResponseCode.CONTROLLER_BROKER_NOT_ALIVE
        with pytest.raises(ControllerError) as still:
            await client.elect(NAME, bid)
        assert still.value.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
        assert (await client.replica_info(NAME)).master_epoch == 1
        with pytest.raises(ControllerError) as unknown:
            await client.replica_info("no-such-set")
        assert unknown.value.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST
    finally:
        await client.close()


async def test_a_restarted_controller_keeps_its_committed_state(tmp_path):
    conf = {
        "listenPort": "0",
        "controllerDLegerPeers": f"n0-127.0.0.1:{free_port()}",
        "controllerStorePath": str(tmp_path / "store"),
    }
    for round_ in range(2):
        service = ControllerService(controller_config(conf))
        port = await service.start()
        client = ControllerClient([f"127.0.0.1:{port}"])
        try:
            await until(lambda c=client: _leads(c), what="the controller to lead")
            if round_ == 0:
                await client.apply_broker_id("c", NAME, 1, "h:1;1")
                await client.apply_broker_id("c", NAME, 2, "h:2;1")
                assert await client.heartbeat(heartbeat("h:2", 2, timeout_ms=60_000)) == 1
                assert (await client.register("c", NAME, 2, "h:2")).master_id == 2
            else:
                info = await client.replica_info(NAME)
                assert (info.master_id, info.master_epoch, info.sync_state_set) == (2, 1, {2})
                assert await client.next_broker_id("c", NAME) == 3
        finally:
            await client.close()
            await service.stop()


async def _leads(client: ControllerClient) -> bool:
    try:
        await client.find_leader()
    except ControllerError:
        return False
    return True


def test_a_new_leader_judges_a_master_it_never_heard_from_by_the_sets_own_timeout(tmp_path):
    """The controller and the master killed together: the restarted controller, which never heard
    from the master, waited its built-in 10 s before electing the slave, not the 3 s the set's
    brokers give in their heartbeats (controllerHeartBeatTimeoutMills; attack on issue 32 item 8).
    The decision is taken at given instants, so no clock is involved."""
    conf = {
        "listenPort": "0",
        "controllerDLegerPeers": f"n0-127.0.0.1:{free_port()}",
        "controllerStorePath": str(tmp_path / "store"),
    }
    service = ControllerService(controller_config(conf))
    led_from = 1000.0
    service._leader_since = led_from
    service.liveness.beat(NAME, 1, "h:1", timeout_ms=3000, now=led_from + 0.5)  # the slave only
    view = ReplicaView("c", NAME, 2, "h:2", 1, frozenset({1, 2}), 1, {1: "h:1", 2: "h:2"})
    assert not service._master_lost(view, led_from + 2.9)
    assert service._master_lost(view, led_from + 3.1)
    # No broker of the set heard from: the default timeout still applies (no one to elect anyway).
    service.liveness.beats.clear()
    assert not service._master_lost(view, led_from + 9.9)
    assert service._master_lost(view, led_from + 10.1)
