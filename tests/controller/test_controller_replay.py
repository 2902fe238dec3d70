"""A replayed master heartbeat at a controller (issue 31, section 4): the controller embedded in a
real name server process, with ACL and ``aclReplayProtection=true``.

The broker side (the ControllerClient every broker uses, signing with its admin account) runs its
whole flow; a heartbeat of the master captured on the wire and resent after the master went silent
(as after a SIGKILL) is refused, so the in-sync slave is elected on time. Before the fix the replays
answered SUCCESS and kept the dead master alive: failover waited for the replays to stop (15 s in
the issue's run).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

import yaml

from broker.common.acl_signature import RequestSigner, SessionCredentials
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.request_headers.controller import BrokerHeartbeatRequestHeader
from broker.controller.client import ControllerClient
from broker.remoting.client import RemotingClient
from broker.remoting.command import RemotingCommand, create_request
from tests.controller.embedded import (
    CLUSTER,
    HEARTBEAT_TIMEOUT_MS,
    BrokerSet,
    start_embedded_namesrv,
    until,
    wait_for_leader,
)

NAME = "broker-replay"
ADMIN = SessionCredentials("ctl-admin-key", "ctl-admin-secret")


async def test_a_replayed_master_heartbeat_is_refused_and_failover_is_on_time(tmp_path):
    acl_file = tmp_path / "namesrv_acl.yml"
    account = {"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True}
    acl_file.write_text(yaml.safe_dump({"accounts": [account]}))
    namesrv = start_embedded_namesrv(
        tmp_path,
        aclEnable="true",
        aclFilePath=acl_file,
        aclReplayProtection="true",
        aclReplayWindowSeconds=60,
    )
    admin, sniffer = RemotingClient(ADMIN), RemotingClient()  # the sniffer sends frames as they are
    client = ControllerClient([namesrv.addr], admin)
    brokers = BrokerSet(client, NAME, [1, 2], base_port=31000)
    try:
        await wait_for_leader(client)
        assert (await brokers.join(1)).master_id == 1
        assert (await brokers.join(2)).master_id == 1
        info = await client.replica_info(NAME)
        in_sync, _ = await client.alter_sync_state_set(NAME, 1, 1, {1, 2}, info.sync_state_set_epoch)
        assert in_sync == {1, 2}

        header = BrokerHeartbeatRequestHeader(
            cluster_name=CLUSTER,
            broker_addr=brokers.address(1),
            broker_name=NAME,
            broker_id=1,
            heartbeat_timeout_mills=HEARTBEAT_TIMEOUT_MS,
        )
        beat = create_request(RC.BROKER_HEARTBEAT, header)
        RequestSigner(ADMIN)(beat)  # as the master's own client signs it
        assert (await sniffer.invoke(namesrv.addr, beat, 5000)).ok

        brokers.beating.discard(1)  # the master is killed; the attacker keeps replaying its beat
        silent_at = time.monotonic()
        answers: list[RemotingCommand] = []

        def resent():
            # Verbatim, or (before the fix: taken) with a nonce carved into an added field.
            fields = dict(beat.ext_fields or {})
            if answers and len(answers) % 2:
                nonce = fields["AclNonce"]
                fields.update(AclNonce=nonce[:-1], AclNonceZ=nonce[-1:])
            return dataclasses.replace(beat, ext_fields=fields)

        async def replaced():
            answers.append(await sniffer.invoke(namesrv.addr, resent(), 5000))
            info = await client.replica_info(NAME)
            return info if info.master_id == 2 else None

        await until(replaced, timeout=15, what="broker 2 to be elected despite the replays")
        failover_s = time.monotonic() - silent_at
        assert answers and {a.code for a in answers} == {ResponseCode.NO_PERMISSION}
        assert "AclNonce seen before" in (answers[0].remark or ""), answers[0].remark
        if len(answers) > 1:
            assert "AclSignatureV2 does not match" in (answers[1].remark or ""), answers[1].remark
        print(f"failover {failover_s:.2f} s after the last genuine beat, {len(answers)} replays refused")
    finally:
        await brokers.stop()
        await asyncio.gather(client.close(), sniffer.close(), admin.close(), return_exceptions=True)
        rc = namesrv.stop()
    assert rc == 0, "".join(namesrv.output)
