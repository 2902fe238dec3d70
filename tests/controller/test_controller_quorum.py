"""Three controller processes agreeing through Raft (issue 22 acceptance 6).

Brokers are simulated by a client that applies for ids, registers and heartbeats over the wire.
A master that stops heartbeating is replaced from the in-sync set with a higher epoch; with the
Raft leader killed, elections go on; with two of three controllers killed, no election happens
and writes are refused, and no epoch is ever reported with two masters.
"""

from __future__ import annotations

import time

import pytest

from broker.common.codes import ResponseCode
from broker.local_cluster import wait_until
from broker.remoting.command import RemotingCommand
from tests.controller.wire import HEARTBEAT_TIMEOUT_MS, ControllerGroup, SimulatedBrokers, Wire

NAME = "broker-a"


@pytest.fixture
def group(tmp_path):
    # With a password, as any group whose Raft ports leave loopback must have: pysyncobj's
    # encrypted transport is the one exercised.
    controllers = ControllerGroup(tmp_path, size=3, extra={"controllerRaftPassword": "test-raft-secret"})
    controllers.start()
    wire = Wire(controllers)
    brokers = SimulatedBrokers(wire, NAME, [1, 2, 3])
    yield controllers, wire, brokers
    brokers.stop()
    wire.close()
    controllers.stop()


def master_is(wire: Wire, accept, timeout: float = 30):
    """Wait until the leader reports a (master, epoch, in-sync set) ``accept`` takes."""
    return wait_until(
        lambda: (info := wire.replica_info(NAME)) is not None and accept(*info) and info,
        timeout=timeout,
        what="the expected master",
    )


def test_failover_with_leader_loss_and_no_election_without_quorum(group):
    controllers, wire, brokers = group
    first_leader = wait_until(wire.leader, timeout=30, what="a controller leader")

    brokers.start()  # heartbeats first, so the first registered broker can be elected at once
    registered = brokers.register(1)
    assert registered is not None and registered.ok, registered
    for bid in (2, 3):
        response = brokers.register(bid)
        assert response is not None and response.ok, response
    master, epoch, in_sync = master_is(wire, lambda m, e, s: m is not None)
    assert (master, epoch, in_sync) == (1, 1, [1])

    # The master reports both slaves in sync.
    altered = brokers.alter_sync_state_set(1, 1, [1, 2, 3], 1)
    assert altered is not None and altered.ok, altered
    assert altered.field("newSyncStateSetEpoch") == "2"

    # Master 1 stops heartbeating: a new master from the in-sync set, at a higher epoch.
    brokers.beating.discard(1)
    master, epoch, in_sync = master_is(wire, lambda m, e, s: m in (2, 3) and e == 2)
    assert in_sync == [master]
    # The old master is fenced, whatever epochs it sends.
    fenced = brokers.alter_sync_state_set(1, 1, [1, 2], 2)
    assert fenced is not None and fenced.code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH, fenced
    other = 5 - master  # the in-sync slave that is left of 2 and 3
    altered = brokers.alter_sync_state_set(master, 2, [master, other], 3)
    assert altered is not None and altered.ok, altered

    # Kill the Raft leader: a new one is elected and elections still work.
    controllers.kill(first_leader)
    second_leader = wait_until(wire.leader, timeout=30, what="a new controller leader")
    assert second_leader != first_leader
    brokers.beating.discard(master)
    master, epoch, in_sync = master_is(wire, lambda m, e, s: m == other and e == 3)
    assert in_sync == [other]

    # Manual switchover: only to an alive member of the in-sync set.
    brokers.beating.add(1)
    wait_until(
        lambda: (r := brokers.alter_sync_state_set(other, 3, [other, 1], 5)) is not None and r.ok, timeout=10
    )
    refused = brokers.switchover(5 - other)  # alive? no: it stopped heartbeating, and it is not in sync
    assert refused is not None and refused.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, refused
    switched = brokers.switchover(1)
    assert switched is not None and switched.ok, switched
    assert switched.field("masterBrokerId") == "1" and switched.field("masterEpoch") == "4"
    master_is(wire, lambda m, e, s: (m, e, s) == (1, 4, [1]))
    altered = brokers.alter_sync_state_set(1, 4, [1, other], 7)
    assert altered is not None and altered.ok, altered

    # Kill the second leader too: one controller of three is left, no quorum.
    controllers.kill(second_leader)
    last = controllers.running()
    assert len(last) == 1
    brokers.beating.discard(1)  # the master goes silent: with a quorum this would elect
    wait_until(
        lambda: brokers.switchover(other) is None, timeout=15, what="writes refused by the last controller"
    )
    response = wire.call(last[0], _elect_request(other))
    assert response is not None and response.code == ResponseCode.CONTROLLER_NOT_LEADER, response
    assert "leader" in (response.remark or "")
    # Give the lone controller well over a heartbeat timeout and several scans: no master line.
    deadline = time.monotonic() + 3 * HEARTBEAT_TIMEOUT_MS / 1000
    before = len(controllers.procs[last[0]].output)
    wait_until(lambda: time.monotonic() > deadline, timeout=10)
    lines = controllers.procs[last[0]].output[before:]
    assert not [line for line in lines if f"broker set {NAME}: master" in line], lines

    # A killed controller comes back with its journal: the quorum returns with every committed
    # event (master 1 at epoch 4, not re-elected meanwhile), and elections resume.
    brokers.beating.add(1)
    controllers.start(first_leader)
    master_is(wire, lambda m, e, s: (m, e) == (1, 4) and sorted(s) == sorted([1, other]), timeout=40)
    brokers.beating.discard(1)
    master_is(wire, lambda m, e, s: m == other and e == 5, timeout=40)
    assert not wire.split_brain, wire.split_brain


def _elect_request(bid: int):
    from broker.common.codes import RequestCode
    from broker.common.request_headers.controller import ElectMasterRequestHeader
    from broker.remoting.command import create_request

    return create_request(
        RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(NAME, "c", bid, designate_elect=True)
    )


@pytest.mark.slow
def test_repeated_leader_kills_and_master_failovers(group):
    """Five rounds: the Raft leader is SIGKILLed and restarted, then the master goes silent; each
    time a new master comes from the in-sync set at the next epoch. Prints the failover times."""
    controllers, wire, brokers = group
    wait_until(wire.leader, timeout=30, what="a controller leader")
    brokers.start()
    for bid in (1, 2, 3):
        response = brokers.register(bid)
        assert response is not None and response.ok, response
    master, epoch, _ = master_is(wire, lambda m, e, s: m is not None)
    set_epoch = 1
    failovers = []
    for _ in range(5):

        def altered_set(m: int = master, e: int = epoch, s: int = set_epoch) -> RemotingCommand | None:
            r = brokers.alter_sync_state_set(m, e, [1, 2, 3], s)
            return r if r is not None and r.ok else None

        altered = wait_until(altered_set, timeout=20, what="the in-sync set altered")
        set_epoch = altered.int_field("newSyncStateSetEpoch")
        leader = wait_until(wire.leader, timeout=30, what="a controller leader")
        controllers.kill(leader)
        wait_until(wire.leader, timeout=30, what="a new controller leader")
        controllers.start(leader)
        brokers.beating.discard(master)
        silent_at = time.monotonic()
        old, old_epoch = master, epoch
        master, epoch, in_sync = master_is(
            wire, lambda m, e, s, o=old, oe=old_epoch: m not in (None, o) and e == oe + 1
        )
        failovers.append(time.monotonic() - silent_at)
        assert in_sync == [master]
        brokers.beating.add(old)
        set_epoch += 1  # the election reset the set to the new master alone
    assert not wire.split_brain, wire.split_brain
    print(
        f"failover seconds after the master's last heartbeat (timeout {HEARTBEAT_TIMEOUT_MS} ms): "
        + ", ".join(f"{s:.2f}" for s in failovers)
    )


@pytest.mark.slow
def test_a_frozen_leader_that_wakes_up_never_makes_a_second_master(group):
    """The Raft leader is frozen (SIGSTOP, as a long GC pause or a partition would), the others
    elect a leader and a new master; the old leader wakes up believing it leads: whatever it
    answers, no epoch ever has two masters, and its stale decisions never commit."""
    controllers, wire, brokers = group
    leader = wait_until(wire.leader, timeout=30, what="a controller leader")
    brokers.start()
    for bid in (1, 2, 3):
        response = brokers.register(bid)
        assert response is not None and response.ok, response
    master_is(wire, lambda m, e, s: (m, e) == (1, 1))
    altered = brokers.alter_sync_state_set(1, 1, [1, 2, 3], 1)
    assert altered is not None and altered.ok, altered

    controllers.pause(leader)
    try:
        wait_until(wire.leader, timeout=30, what="a leader among the two others")
        brokers.beating.discard(1)
        master, _, _ = master_is(wire, lambda m, e, s: m in (2, 3) and e == 2)
    finally:
        controllers.resume(leader)
    # The woken controller's answers (stale or not) and the group's: one master per epoch, and
    # the group converges on the new master.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        wire.replica_info(NAME)
        response = wire.call(leader, _replica_request(), 1000)
        if response is not None and response.ok:
            epoch_seen = response.int_field("masterEpoch")
            raw = response.field("masterBrokerId")
            wire.seen_masters.setdefault(epoch_seen, int(raw) if raw else None)
            assert wire.seen_masters[epoch_seen] == (int(raw) if raw else None), (epoch_seen, raw)
    master_is(wire, lambda m, e, s: (m, e) == (master, 2))
    assert not wire.split_brain, wire.split_brain


def _replica_request():
    from broker.common.codes import RequestCode
    from broker.common.request_headers.controller import GetReplicaInfoRequestHeader
    from broker.remoting.command import create_request

    return create_request(RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(NAME))
