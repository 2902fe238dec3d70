"""The controller embedded in the name server (``enableControllerInNamesrv=true``), a real name
server process: a broker set registered through the ControllerClient becomes visible, a master
that stops heartbeating is replaced, the name server's own requests keep working on the same port,
the ACL checks controller requests, and a bad controller key stops the name server at start."""

from __future__ import annotations

import subprocess
import sys
import time

import yaml

from broker.common.acl_signature import SessionCredentials
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.request_headers.controller import (
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
)
from broker.controller.client import ControllerClient
from broker.local_cluster import ROOT, free_port, start_namesrv, write_conf
from broker.remoting.client import RemotingClient
from broker.remoting.command import create_request
from tests.controller.embedded import (
    BrokerSet,
    controller_settings,
    start_embedded_namesrv,
    until,
    wait_for_leader,
)

NAME = "broker-emb"


async def test_a_broker_set_registers_and_fails_over_on_the_name_servers_port(tmp_path):
    namesrv = start_embedded_namesrv(tmp_path)
    client = ControllerClient([namesrv.addr])
    brokers = BrokerSet(client, NAME, [1, 2])
    try:
        await wait_for_leader(client)
        meta = await client.metadata()
        # The controller answers on the name server's port and names it as its address.
        assert (meta.group, meta.leader_id, meta.leader_address) == ("embedded-group", "n0", namesrv.addr)
        assert meta.peers == {"n0": namesrv.addr}

        first = await brokers.join(1)
        assert (first.master_id, first.master_address, first.master_epoch) == (1, brokers.address(1), 1)
        second = await brokers.join(2)
        assert second.master_id == 1 and second.sync_state_set == {1}
        # The master adds its caught-up slave to the in-sync set.
        in_sync, set_epoch = await client.alter_sync_state_set(NAME, 1, 1, {1, 2}, first.sync_state_set_epoch)
        assert in_sync == {1, 2}

        table = await client.sync_state_data([NAME, "no-such-set"])
        assert list(table) == [NAME]
        seen = table[NAME]
        assert (seen.master_id, seen.master_address, seen.master_epoch) == (1, brokers.address(1), 1)
        assert seen.sync_state_set_epoch == set_epoch and seen.not_in_sync == ()
        assert [(r.broker_id, r.broker_address, r.alive) for r in seen.in_sync] == [
            (1, brokers.address(1), True),
            (2, brokers.address(2), True),
        ]

        # The name server's own requests still work on the same port.
        remoting = RemotingClient()
        try:
            info = await remoting.invoke(namesrv.addr, create_request(RC.GET_BROKER_CLUSTER_INFO), 5000)
            assert info.ok, info.remark
        finally:
            await remoting.close()

        # The master goes silent: the embedded controller's scan elects the in-sync slave.
        brokers.beating.discard(1)
        silent_at = time.monotonic()

        async def replaced():
            info = await client.replica_info(NAME)
            return info if info.master_id == 2 else None

        after = await until(replaced, what="broker 2 to be elected")
        failover_s = time.monotonic() - silent_at
        assert (after.master_address, after.master_epoch) == (brokers.address(2), 2)
        table = await client.sync_state_data()
        dead = [r for r in (*table[NAME].in_sync, *table[NAME].not_in_sync) if r.broker_id == 1]
        assert dead and not dead[0].alive
        print(f"embedded controller: new master {failover_s:.2f} s after the old one's last heartbeat")
    finally:
        await brokers.stop()
        await client.close()
        rc = namesrv.stop()
    assert rc == 0, "".join(namesrv.output)


async def test_a_name_server_without_the_key_runs_no_controller(tmp_path):
    namesrv = start_namesrv()
    remoting = RemotingClient()
    try:
        response = await remoting.invoke(namesrv.addr, create_request(RC.CONTROLLER_GET_METADATA_INFO), 5000)
        assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    finally:
        await remoting.close()
        namesrv.stop()


def test_a_bad_controller_key_stops_the_name_server_at_start(tmp_path):
    settings = {"listenPort": free_port(), **controller_settings(tmp_path, controllerDLegerSelfId="n7")}
    conf = write_conf(tmp_path / "namesrv.conf", settings)
    done = subprocess.run(
        [sys.executable, "-m", "broker.namesrv", "-c", str(conf)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "controllerDLegerSelfId='n7' is not one of controllerDLegerPeers" in done.stderr


ADMIN = SessionCredentials("ctl-admin-key", "ctl-admin-secret")
USER = SessionCredentials("ctl-user-key", "ctl-user-secret")


async def test_with_acl_on_controller_writes_need_an_admin_and_reads_a_signature(tmp_path):
    acl_file = tmp_path / "namesrv_acl.yml"
    accounts = [
        {"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True},
        {"accessKey": USER.access_key, "secretKey": USER.secret_key},
    ]
    acl_file.write_text(yaml.safe_dump({"accounts": accounts}))
    namesrv = start_embedded_namesrv(tmp_path, aclEnable="true", aclFilePath=acl_file)
    anonymous, user, admin = RemotingClient(), RemotingClient(USER), RemotingClient(ADMIN)
    admin_client = ControllerClient([namesrv.addr], admin)
    try:

        async def call(remoting, code, header=None, body=b""):
            return await remoting.invoke(namesrv.addr, create_request(code, header, body), 5000)

        # Who leads is open to anyone (brokers and tools find the leader with it).
        assert (await call(anonymous, RC.CONTROLLER_GET_METADATA_INFO)).ok
        await wait_for_leader(admin_client)
        beat = BrokerHeartbeatRequestHeader(
            cluster_name="c", broker_addr="127.0.0.1:30001", broker_name=NAME, broker_id=1
        )
        elect = ElectMasterRequestHeader(NAME, "c", 1, designate_elect=True)
        for remoting, reason in ((anonymous, "no AccessKey"), (user, "needs an admin account")):
            for code, header in ((RC.BROKER_HEARTBEAT, beat), (RC.CONTROLLER_ELECT_MASTER, elect)):
                refused = await call(remoting, code, header)
                assert refused.code == ResponseCode.NO_PERMISSION and reason in refused.remark, refused.remark
        # Replica reads: any account of the file, not an unsigned client.
        refused = await call(anonymous, RC.CONTROLLER_GET_SYNC_STATE_DATA)
        assert refused.code == ResponseCode.NO_PERMISSION
        assert (await call(user, RC.CONTROLLER_GET_SYNC_STATE_DATA)).ok
        # The admin account runs a broker's whole flow.
        brokers = BrokerSet(admin_client, NAME, [1])
        try:
            assert (await brokers.join(1)).master_id == 1
        finally:
            await brokers.stop()
        # The name server's open route reads are unchanged.
        assert (await call(anonymous, RC.GET_BROKER_CLUSTER_INFO)).ok
    finally:
        for remoting in (anonymous, user, admin):
            await remoting.close()
        rc = namesrv.stop()
    assert rc == 0, "".join(namesrv.output)
