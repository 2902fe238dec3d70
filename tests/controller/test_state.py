"""The controller's state machine and election policy, without Raft or sockets."""

from __future__ import annotations

import pickle

from broker.common.codes import ResponseCode
from broker.controller.election import Liveness, choose_master
from broker.controller.state import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    ElectMasterEvent,
    Event,
    ReplicasState,
    ReplicaView,
    UpdateBrokerAddressEvent,
)

NAME = "broker-a"


def three_replicas() -> ReplicasState:
    state = ReplicasState()
    for bid in (1, 2, 3):
        addr = f"127.0.0.1:{10910 + bid}"
        assert state.apply(ApplyBrokerIdEvent("c", NAME, bid, f"{addr};1", addr)).ok
    return state


def view_of(state: ReplicasState) -> ReplicaView:
    """The set's view, which every test here has made."""
    view = state.view(NAME)
    assert view is not None
    return view


def elect(state: ReplicasState, bid: int | None, designated: bool = False):
    view = view_of(state)
    return state.apply(ElectMasterEvent(NAME, bid, view.master_epoch, designated))


def alive(*ids: int, epoch: int = 0, offsets: dict[int, int] | None = None):
    live = Liveness()
    for bid in ids:
        live.beat(NAME, bid, f"h:{bid}", epoch=epoch, max_offset=(offsets or {}).get(bid, 0), now=100.0)
    return live.alive_ids(NAME, now=100.0)


def test_apply_broker_id_is_idempotent_for_the_same_broker_and_refused_for_another():
    state = three_replicas()
    again = state.apply(ApplyBrokerIdEvent("c", NAME, 1, "127.0.0.1:10911;1", "127.0.0.1:10911"))
    assert again.ok
    other = state.apply(ApplyBrokerIdEvent("c", NAME, 1, "127.0.0.1:9999;2", "127.0.0.1:9999"))
    assert other.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID
    assert view_of(state).replicas[1] == "127.0.0.1:10911"
    assert state.next_broker_id(NAME) == 4
    assert state.next_broker_id("unknown") == 1
    bad = state.apply(ApplyBrokerIdEvent("c", NAME, 0, "x;1", "x:1"))
    assert bad.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID


def test_register_updates_an_applied_address_only():
    state = three_replicas()
    assert state.apply(UpdateBrokerAddressEvent(NAME, 2, "127.0.0.1:20000")).ok
    assert view_of(state).replicas[2] == "127.0.0.1:20000"
    missing = state.apply(UpdateBrokerAddressEvent(NAME, 9, "127.0.0.1:1"))
    assert missing.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST


def test_election_bumps_epochs_and_resets_the_sync_state_set_to_the_new_master():
    state = three_replicas()
    first = elect(state, 1)
    assert first.ok
    assert (first.view.master_id, first.view.master_epoch) == (1, 1)
    assert first.view.sync_state_set == {1}
    assert first.view.sync_state_set_epoch == 1
    assert first.view.master_address == "127.0.0.1:10911"
    # An election decided against an older epoch is refused when applied (another came first).
    stale = state.apply(ElectMasterEvent(NAME, 2, 0))
    assert stale.code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
    assert view_of(state).master_id == 1


def test_alter_sync_state_set_fencing():
    state = three_replicas()
    elect(state, 1)
    ok = state.apply(AlterSyncStateSetEvent(NAME, 1, 1, 1, frozenset({1, 2})))
    assert (
        ok.ok
        and ok.view is not None
        and ok.view.sync_state_set == {1, 2}
        and ok.view.sync_state_set_epoch == 2
    )
    # A stale sync-state-set epoch (the master read epoch 1, it is 2 now).
    stale = state.apply(AlterSyncStateSetEvent(NAME, 1, 1, 1, frozenset({1, 2, 3})))
    assert stale.code == ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
    # Broker 2 becomes master: the old master 1, even with its old epochs, is fenced.
    assert elect(state, 2, designated=True).ok
    old = state.apply(AlterSyncStateSetEvent(NAME, 1, 1, 2, frozenset({1, 3})))
    assert old.code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
    # The new master at the wrong master epoch is fenced too.
    wrong_epoch = state.apply(AlterSyncStateSetEvent(NAME, 2, 1, 3, frozenset({2, 3})))
    assert wrong_epoch.code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
    lacks_master = state.apply(AlterSyncStateSetEvent(NAME, 2, 2, 3, frozenset({3})))
    assert lacks_master.code == ResponseCode.CONTROLLER_INVALID_REPLICAS
    unknown = state.apply(AlterSyncStateSetEvent(NAME, 2, 2, 3, frozenset({2, 7})))
    assert unknown.code == ResponseCode.CONTROLLER_INVALID_REPLICAS
    view = view_of(state)
    assert (view.master_id, view.master_epoch, view.sync_state_set, view.sync_state_set_epoch) == (
        2,
        2,
        {2},
        3,
    )


def test_no_eligible_replica_leaves_the_set_without_a_master_and_keeps_the_in_sync_set():
    state = three_replicas()
    elect(state, 1)
    state.apply(AlterSyncStateSetEvent(NAME, 1, 1, 1, frozenset({1, 2})))
    # Master 1 and in-sync 2 are dead; 3 is alive but was never in sync: nobody may be master.
    choice = choose_master(view_of(state), alive(3))
    assert choice.ok and choice.master_id is None
    cleared = elect(state, None)
    assert cleared.ok
    view = view_of(state)
    assert view.master_id is None and view.master_epoch == 2  # the old master is fenced
    assert view.sync_state_set == {1, 2}
    # The old master (alive again, in sync) may come back; 3 still may not.
    assert choose_master(view, alive(1, 3)).master_id == 1
    again = choose_master(view, {})
    assert again.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE


def test_unclean_election_only_when_enabled():
    state = three_replicas()
    elect(state, 1)
    view = view_of(state)
    assert choose_master(view, alive(3)).master_id is None
    assert choose_master(view, alive(3), elect_unclean=True).master_id == 3


def test_policy_prefers_alive_in_sync_replicas_with_the_freshest_log():
    state = three_replicas()
    elect(state, 1)
    state.apply(AlterSyncStateSetEvent(NAME, 1, 1, 1, frozenset({1, 2, 3})))
    view = view_of(state)
    assert choose_master(view, alive(2, 3, offsets={2: 100, 3: 500})).master_id == 3
    assert choose_master(view, alive(2, 3)).master_id == 2  # a tie: the lowest id
    still = choose_master(view, alive(1, 2))
    assert still.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST


def test_a_new_set_elects_any_alive_replica_first():
    state = three_replicas()
    choice = choose_master(view_of(state), alive(2, 3))
    assert choice.ok and choice.master_id == 2
    none = choose_master(view_of(state), {})
    assert none.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE


def test_switchover_rules():
    state = three_replicas()
    elect(state, 1)
    state.apply(AlterSyncStateSetEvent(NAME, 1, 1, 1, frozenset({1, 2})))
    view = view_of(state)
    assert choose_master(view, alive(1, 2, 3), designated=2).master_id == 2
    not_in_sync = choose_master(view, alive(1, 2, 3), designated=3)
    assert not_in_sync.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert "sync state set" in (not_in_sync.remark or "")
    dead = choose_master(view, alive(1, 3), designated=2)
    assert dead.code == ResponseCode.CONTROLLER_BROKER_NOT_ALIVE
    itself = choose_master(view, alive(1, 2), designated=1)
    assert itself.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    unknown = choose_master(view, alive(1, 2), designated=9)
    assert unknown.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED


def test_liveness_expires_by_each_brokers_own_timeout():
    live = Liveness(default_timeout_ms=10_000)
    live.beat(NAME, 1, "a:1", timeout_ms=500, now=0.0)
    live.beat(NAME, 2, "a:2", now=0.0)
    assert set(live.alive_ids(NAME, now=0.4)) == {1, 2}
    assert set(live.alive_ids(NAME, now=0.6)) == {2}
    assert not live.alive(NAME, 1, now=0.6)


def test_a_stalled_controller_ages_heartbeats_from_before_its_stall():
    """A controller that did not run (SIGSTOP) for 3 s must not take a master that heartbeats
    every 0.2 s for dead: it heard nobody meanwhile. A beat heard after the stall stays as it is."""
    live = Liveness()
    live.beat(NAME, 1, "a:1", timeout_ms=1500, now=10.0)
    live.beat(NAME, 2, "a:2", timeout_ms=1500, now=13.0)
    assert not live.alive(NAME, 1, now=13.0)
    live.stalled(3.0, now=13.0)
    assert set(live.alive_ids(NAME, now=13.0)) == {1, 2}
    beat = live.get(NAME, 2)
    assert beat is not None and beat.at == 13.0  # capped at now: not alive any longer than it was heard
    assert not live.alive(NAME, 1, now=14.6)  # and dead a timeout after, as before the stall


def test_replaying_the_same_events_gives_the_same_state_and_it_survives_pickling():
    events: list[Event] = [
        ApplyBrokerIdEvent("c", NAME, 1, "a:1;1", "a:1"),
        ApplyBrokerIdEvent("c", NAME, 2, "a:2;1", "a:2"),
        ElectMasterEvent(NAME, 1, 0),
        AlterSyncStateSetEvent(NAME, 1, 1, 1, frozenset({1, 2})),
        ElectMasterEvent(NAME, 2, 1, True),
        ElectMasterEvent(NAME, 1, 1),  # stale: refused on every replica alike
    ]
    one, two = ReplicasState(), ReplicasState()
    codes_one = [one.apply(e).code for e in events]
    codes_two = [two.apply(pickle.loads(pickle.dumps(e))).code for e in events]
    assert codes_one == codes_two
    assert codes_one[-1] == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
    assert one.view(NAME) == two.view(NAME)
    restored = pickle.loads(pickle.dumps(one))
    assert restored.view(NAME) == one.view(NAME)
