"""The CONTROLLER_GET_SYNC_STATE_DATA body both ways, and what a reader does with answers that are
not what a controller writes: refused with a reason, never half-read."""

from __future__ import annotations

import json

import pytest

from broker.controller.client import ControllerClient, ControllerError
from broker.controller.replicas_info import ReplicasBodyError, decode_table, encode_table
from broker.controller.state import ReplicaView
from broker.remoting.client import RemotingClient
from tests.cli.fake_server import FakeServer, ok


def test_what_the_controller_writes_reads_back():
    view = ReplicaView(
        "c", "bs", 1, "127.0.0.1:1", 3, frozenset({1, 2}), 5, {1: "127.0.0.1:1", 2: "h:2", 4: "h:4"}
    )
    table = decode_table(encode_table([view], lambda name: {1: None, 4: None}))
    replicas = table["bs"]
    assert (
        replicas.cluster_name,
        replicas.master_id,
        replicas.master_epoch,
        replicas.sync_state_set_epoch,
    ) == (
        "c",
        1,
        3,
        5,
    )
    assert [(r.broker_id, r.broker_address, r.alive) for r in replicas.in_sync] == [
        (1, "127.0.0.1:1", True),
        (2, "h:2", False),
    ]
    assert [(r.broker_id, r.alive) for r in replicas.not_in_sync] == [(4, True)]
    assert replicas.sync_state_set == {1, 2}
    # A set without a master (none alive to elect).
    empty = ReplicaView("c", "none", None, "", 0, frozenset(), 0, {})
    assert decode_table(encode_table([empty], lambda name: {}))["none"].master_id is None


@pytest.mark.parametrize(
    ("body", "wanted"),
    [
        (b"not json", "not JSON"),
        (b"[]", "must be an object"),
        (b'{"replicasInfoTable": []}', "replicasInfoTable"),
        (b'{"replicasInfoTable": {"a": 1}}', "not an object"),
        (b'{"replicasInfoTable": {"a": {"masterEpoch": "3"}}}', "masterEpoch must be an integer"),
        (b'{"replicasInfoTable": {"a": {"inSyncReplicas": {}}}}', "inSyncReplicas must be a list"),
        (b'{"replicasInfoTable": {"a": {"inSyncReplicas": [{"brokerId": -5}]}}}', "out of range"),
        (b'{"replicasInfoTable": {"a": {"inSyncReplicas": [{"brokerId": 1, "alive": "yes"}]}}}', "alive"),
        (b'{"replicasInfoTable": {"a": {"masterAddress": 7}}}', "masterAddress must be a string"),
        (
            json.dumps({"replicasInfoTable": {"a": {"notInSyncReplicas": [{"brokerId": 1}] * 65}}}).encode(),
            "64",
        ),
    ],
)
def test_malformed_bodies_are_refused_with_the_reason(body, wanted):
    with pytest.raises(ReplicasBodyError, match=wanted):
        decode_table(body)


async def test_the_client_refuses_a_malformed_answer_from_a_controller():
    fake = FakeServer()
    fake.on(1005, lambda ext, body: ok(controllerLeaderAddress=fake.addr, isLeader="true"))
    fake.on(1006, lambda ext, body: ok(b'{"replicasInfoTable": {"a": {"masterEpoch": true}}}'))
    fake.on(1004, lambda ext, body: ok(b'{"syncStateSet": "1,2"}', masterBrokerId="1", masterEpoch="1"))
    remoting = RemotingClient()
    client = ControllerClient([fake.addr], remoting)
    try:
        with pytest.raises(ControllerError, match="sync state answer is malformed: masterEpoch"):
            await client.sync_state_data()
        with pytest.raises(ControllerError, match="syncStateSet is not a list of broker ids"):
            await client.replica_info("a")
    finally:
        await remoting.close()
        fake.close()
