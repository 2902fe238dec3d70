"""Controller mode's broker-side pieces, in process: the kept brokerId (against a real controller
on loopback), the master's lease, the in-sync set's rules, and broker.conf's controller keys."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from broker.common.conf_file import ConfError
from broker.controller.client import ControllerClient
from broker.controller.config import controller_config
from broker.controller.service import ControllerService
from broker.local_cluster import free_port
from broker.server.broker_identity import IdentityFileError, IdentityFiles
from broker.server.config import BrokerConfig
from broker.server.controller_lease import ControllerLease, lease_seconds, silence_refusal, unless_silenced
from broker.server.in_sync_set import InSyncTracker, SlaveAck
from broker.server.replicas_manager import NO_ROLE_YET, ReplicasManager
from broker.store.ha.master import SlaveProgress
from broker.store.results import PutMessageStatus
from broker.store.running_flags import RunningFlags

# -- broker.conf ------------------------------------------------------------------------------------


def test_controller_mode_keys_have_rocketmqs_defaults():
    config = BrokerConfig.from_properties({})
    assert not config.enable_controller_mode and config.controller_addrs == []
    assert (config.sync_broker_metadata_period, config.check_sync_state_set_period) == (5000, 5000)
    assert config.sync_controller_metadata_period == 10_000
    assert (config.controller_heart_beat_timeout_mills, config.broker_heartbeat_interval) == (10_000, 1000)
    assert not config.store.all_ack_in_sync_state_set and config.store.in_sync_replicas == 1
    assert config.store.ha_max_time_slave_not_catchup == 15_000
    assert config.as_properties()["allAckInSyncStateSet"] == "false"


def test_controller_mode_does_not_check_role_against_id(caplog):
    caplog.set_level("INFO", logger="broker.server.config")
    conf = {"enableControllerMode": "true", "controllerAddr": "127.0.0.1:9878;127.0.0.1:9879"}
    config = BrokerConfig.from_properties({**conf, "brokerId": "1", "brokerRole": "ASYNC_MASTER"})
    assert config.controller_addrs == ["127.0.0.1:9878", "127.0.0.1:9879"]
    assert "do not decide this broker's role" in caplog.text
    with pytest.raises(ConfError, match="brokerRole=ASYNC_MASTER needs brokerId=0"):
        BrokerConfig.from_properties({"brokerId": "1", "brokerRole": "ASYNC_MASTER"})


def test_broker_id_minus_one_is_controller_modes_own():
    """RocketMQ 5's controller quick-start files say brokerId=-1 (the controller assigns it);
    outside controller mode -1 fits no role and is refused."""
    conf = {"enableControllerMode": "true", "controllerAddr": "127.0.0.1:9878", "brokerId": "-1"}
    assert BrokerConfig.from_properties({**conf, "brokerRole": "SYNC_MASTER"}).broker_id == -1
    with pytest.raises(ConfError, match="needs brokerId=0"):
        BrokerConfig.from_properties({"brokerId": "-1"})
    with pytest.raises(ConfError, match="needs brokerId > 0"):
        BrokerConfig.from_properties({"brokerId": "-1", "brokerRole": "SLAVE"})
    with pytest.raises(ConfError, match="brokerId"):
        BrokerConfig.from_properties({"brokerId": "-2"})


@pytest.mark.parametrize(
    ("conf", "named"),
    [
        ({"enableControllerMode": "true"}, "controllerAddr"),
        ({"enableControllerMode": "yes"}, "enableControllerMode"),
        ({"controllerAddr": "nohost"}, "controllerAddr"),
        ({"checkSyncStateSetPeriod": "0"}, "checkSyncStateSetPeriod"),
        ({"brokerHeartbeatInterval": "-5"}, "brokerHeartbeatInterval"),
        ({"haMaxTimeSlaveNotCatchup": "soon"}, "haMaxTimeSlaveNotCatchup"),
        ({"inSyncReplicas": "0"}, "inSyncReplicas"),
        ({"allAckInSyncStateSet": "1"}, "allAckInSyncStateSet"),
        (
            {
                "enableControllerMode": "true",
                "controllerAddr": "127.0.0.1:1",
                "brokerHeartbeatInterval": "1000",
                "controllerHeartBeatTimeoutMills": "2000",
            },
            "controllerHeartBeatTimeoutMills",
        ),
    ],
)
def test_bad_controller_settings_are_refused_naming_the_key(conf, named):
    with pytest.raises(ConfError, match=named):
        BrokerConfig.from_properties(conf)


# -- the identity files ------------------------------------------------------------------------------


def test_identity_files_keep_the_applied_id(tmp_path):
    files = IdentityFiles(tmp_path / "brokerIdentity", "C", "b")
    assert files.applied() is None and files.pending() is None
    files.note_pending(3, "127.0.0.1:10911;1700000000000")
    pending = files.pending()
    assert pending is not None and pending.register_check_code == "127.0.0.1:10911;1700000000000"
    files.confirm(3)
    assert (tmp_path / "brokerIdentity").read_text() == "C#b#3"  # RocketMQ's BrokerMetadata format
    assert files.pending() is None
    applied = IdentityFiles(tmp_path / "brokerIdentity", "C", "b").applied()
    assert applied is not None and applied.broker_id == 3


def test_identity_file_of_another_set_or_garbage_is_refused(tmp_path):
    path = tmp_path / "brokerIdentity"
    IdentityFiles(path, "C", "other").confirm(2)
    with pytest.raises(IdentityFileError, match="another broker set"):
        IdentityFiles(path, "C", "b").applied()
    path.write_text("not an identity")
    with pytest.raises(IdentityFileError, match="cluster#brokerName#brokerId"):
        IdentityFiles(path, "C", "b").applied()
    path.write_bytes(b"C#b#1" + b"9" * 10_000)
    with pytest.raises(IdentityFileError, match="larger than"):
        IdentityFiles(path, "C", "b").applied()
    path.write_text("")  # a crash while creating it: as if it were not there
    assert IdentityFiles(path, "C", "b").applied() is None


@pytest.fixture
async def controller(tmp_path):
    conf = {
        "listenPort": "0",
        "controllerDLegerPeers": f"n0-127.0.0.1:{free_port()}",
        "controllerStorePath": str(tmp_path / "controller"),
        "scanNotActiveBrokerInterval": "100",
    }
    service = ControllerService(controller_config(conf))
    port = await service.start()
    address = f"127.0.0.1:{port}"
    client = ControllerClient([address])
    deadline = time.monotonic() + 20
    while not (await client.metadata()).is_leader:
        assert time.monotonic() < deadline, "the controller never led"
        await asyncio.sleep(0.05)
    await client.close()
    yield address
    await service.stop()


def _manager(tmp_path, name: str, controller: str, port: int) -> ReplicasManager:
    config = BrokerConfig.from_properties(
        {
            "brokerClusterName": "C",
            "brokerName": "b",
            "listenPort": str(port),
            "storePathRootDir": str(tmp_path / name),
            "enableControllerMode": "true",
            "controllerAddr": controller,
        }
    )
    store = SimpleNamespace(running_flags=RunningFlags(), max_physic_offset=0)
    broker = SimpleNamespace(
        config=config, store=store, replication=SimpleNamespace(epochs=None, server=None)
    )
    return ReplicasManager(broker)  # type: ignore[arg-type]


async def test_broker_id_is_applied_for_once_and_reused(tmp_path, controller):
    first = _manager(tmp_path, "one", controller, 10911)
    assert first.broker.store.running_flags.reason() == NO_ROLE_YET  # no writes before a role
    assert await first._obtain_broker_id() == 1
    second = _manager(tmp_path, "two", controller, 10921)
    assert await second._obtain_broker_id() == 2
    restarted = _manager(tmp_path, "one", controller, 10911)
    assert await restarted._obtain_broker_id() == 1  # from its file: the controller is not asked
    for manager in (first, second, restarted):
        await manager.client.close()


async def test_a_crash_between_asking_and_applying_applies_the_same_id(tmp_path, controller):
    crashed = _manager(tmp_path, "one", controller, 10911)
    crashed.identity.note_pending(await crashed.client.next_broker_id("C", "b"), "127.0.0.1:10911;1")
    await crashed.client.apply_broker_id("C", "b", 1, "127.0.0.1:10911;1")  # applied, then the crash
    restarted = _manager(tmp_path, "one", controller, 10911)
    assert await restarted._obtain_broker_id() == 1  # the same check code: the same broker retrying
    applied = restarted.identity.applied()
    assert restarted.identity.pending() is None and applied is not None and applied.broker_id == 1
    other = _manager(tmp_path, "two", controller, 10921)
    other.identity.note_pending(1, "127.0.0.1:10921;2")  # another broker claiming the same id
    with pytest.raises(Exception, match="held by another broker"):
        await other._obtain_broker_id()
    assert other.identity.pending() is None  # asked anew next time
    assert await other._obtain_broker_id() == 2
    for manager in (crashed, restarted, other):
        await manager.client.close()


# -- the lease -----------------------------------------------------------------------------------------


def test_lease_ends_well_before_the_controller_may_elect():
    assert lease_seconds(10_000) == pytest.approx(6.667, abs=0.001)
    assert lease_seconds(1500) == 1.0


async def test_lease_expires_unrenewed_and_comes_back_when_renewed():
    events = []
    lease = ControllerLease(lambda: 300, lambda: events.append("ended"), lambda: events.append("renewed"))
    assert lease.expired
    lease.renew(time.monotonic())
    assert events == ["renewed"] and not lease.expired
    await asyncio.sleep(0.1)
    lease.renew(time.monotonic())  # renewed in time: no end in between
    await asyncio.sleep(0.15)
    assert events == ["renewed"]
    deadline = time.monotonic() + 5
    while "ended" not in events:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    assert lease.expired and time.monotonic() >= lease.valid_until
    lease.renew(time.monotonic() - 1)  # an answer so late its lease is already over: still ended
    assert lease.expired
    lease.renew(time.monotonic())
    assert events == ["renewed", "ended", "renewed"]
    lease.cancel()


def _report(broker_id: int, seconds_ago: float, acked: int = 100) -> SlaveProgress:
    return SlaveProgress(broker_id, f"127.0.0.1:{broker_id}", acked, time.monotonic() - seconds_ago)


async def test_a_silent_master_needs_every_in_sync_slave_to_have_reported_lately():
    lease = ControllerLease(lambda: 1500, lambda: None, lambda: None)  # a 1 s lease
    alone = silence_refusal(frozenset(), [_report(2, 0)], lease, 300)
    assert "alone in its in-sync set" in alone and "heard nothing from the controller leader" in alone
    assert silence_refusal(frozenset({2, 3}), [_report(2, 0.1), _report(3, 0.5)], lease, 300) == ""
    stale = silence_refusal(frozenset({2, 3}), [_report(2, 0.1), _report(3, 1.5)], lease, 300)
    assert "in-sync slave(s) [3] have not reported within 1000 ms" in stale
    missing = silence_refusal(frozenset({2, 3}), [_report(2, 0.1), _report(3, 0, acked=-1)], lease, 300)
    assert "[3]" in missing  # connected, but no report since its handshake
    # Idle slaves report every haSendHeartbeatInterval: the window is two of them when longer.
    assert silence_refusal(frozenset({2}), [_report(2, 1.5)], lease, 1000) == ""


async def test_reports_read_after_the_broker_stalled_prove_nothing():
    """A SIGSTOPped master reads, on waking, the reports its slave sent before it was elected:
    they count only once received after the stall was noticed and settled."""
    lease = ControllerLease(lambda: 600, lambda: None, lambda: None)  # a 0.4 s lease
    lease.renew(time.monotonic())
    time.sleep(0.7)  # the loop (and the lease's pulse) does not run: a stall
    buffered = _report(2, 0)  # read just now, sent long ago
    lease.check_now()
    assert lease.expired and lease.silent and lease.reports_from > time.monotonic()
    refused = silence_refusal(frozenset({2}), [buffered], lease, 300)
    assert "[2]" in refused and "since this broker stalled" in refused
    await asyncio.sleep(0.25)
    assert silence_refusal(frozenset({2}), [_report(2, 0)], lease, 300) == ""  # a live slave reports
    assert not lease.confirm()  # still expired: silent until renewed and named master again
    lease.renew(time.monotonic())
    assert lease.confirm() and not lease.silent
    lease.cancel()


async def test_a_send_confirmed_by_one_slave_after_the_lease_ended_waits_for_every_member():
    """inSyncReplicas below the set's size: a send stored while the lease ran, whose slave
    confirms only after it ended (a frozen master reading the confirmation on waking), is not
    answered on that one slave's word: an election may follow, of a slave that lacks it."""
    lease = ControllerLease(lambda: 600, lambda: None, lambda: None)
    lease.renew(time.monotonic())
    loop = asyncio.get_running_loop()
    asked = []

    def every_member():
        asked.append("every member")
        return PutMessageStatus.FLUSH_SLAVE_TIMEOUT  # the elected slave no longer confirms

    one_slave = loop.create_future()
    answer = asyncio.ensure_future(unless_silenced(one_slave, lease, every_member))
    lease.valid_until = time.monotonic()  # the lease ends while the send waits
    one_slave.set_result(PutMessageStatus.PUT_OK)
    assert await answer is PutMessageStatus.FLUSH_SLAVE_TIMEOUT and asked == ["every member"]
    lease.renew(time.monotonic())
    assert lease.confirm()  # named master again: one slave's word is enough, as inSyncReplicas says
    confirmed = loop.create_future()
    confirmed.set_result(PutMessageStatus.PUT_OK)
    assert await unless_silenced(confirmed, lease, every_member) is PutMessageStatus.PUT_OK
    assert asked == ["every member"]
    lease.cancel()


# -- the in-sync set ------------------------------------------------------------------------------------


def test_a_caught_up_slave_joins_and_a_lagging_one_leaves():
    tracker = InSyncTracker(1, log_end=1000, now=0.0)
    check = tracker.check
    # A slave behind the master's end at the previous check does not join.
    assert check(frozenset({1}), [SlaveAck(2, 900)], 1000, 0, 1 << 20, 15, 1.0) == {1}
    # Caught up with where the master was: joining (sends wait for it from now on)...
    assert check(frozenset({1}), [SlaveAck(2, 1000)], 2000, 0, 1 << 20, 15, 2.0) == {1}
    assert tracker.waited_for(frozenset({1})) == {2}
    # ... and joins once it holds everything the master had then (answered before it was waited for).
    assert check(frozenset({1}), [SlaveAck(2, 1999)], 2500, 0, 1 << 20, 15, 3.0) == {1}
    assert check(frozenset({1}), [SlaveAck(2, 2000)], 2500, 0, 1 << 20, 15, 4.0) == {1, 2}
    # Not caught up since: stays for haMaxTimeSlaveNotCatchup, then leaves.
    assert check(frozenset({1, 2}), [SlaveAck(2, 2400)], 3000, 0, 1 << 20, 15, 10.0) == {1, 2}
    assert check(frozenset({1, 2}), [SlaveAck(2, 2400)], 4000, 0, 1 << 20, 15, 19.5) == {1}


def test_a_joining_slave_that_falls_behind_or_leaves_is_no_longer_waited_for():
    tracker = InSyncTracker(1, log_end=1000, now=0.0)
    assert tracker.check(frozenset({1}), [SlaveAck(2, 1000)], 3000, 0, 1 << 20, 15, 1.0) == {1}
    assert tracker.waited_for(frozenset({1})) == {2}
    assert tracker.check(frozenset({1}), [], 3000, 0, 1 << 20, 15, 2.0) == {1}
    assert tracker.waited_for(frozenset({1})) == frozenset()


def test_a_disconnected_member_leaves_and_a_slave_needs_the_current_epoch():
    tracker = InSyncTracker(1, log_end=500, now=0.0)
    assert tracker.check(frozenset({1, 2}), [], 500, 0, 1 << 20, 15, 1.0) == {1}
    # Caught up by offset, but not yet holding the current epoch's start (it has not cut its tail).
    tracker = InSyncTracker(1, log_end=500, now=0.0)
    assert tracker.check(frozenset({1}), [SlaveAck(3, 500)], 500, 600, 1 << 20, 15, 1.0) == {1}
    assert tracker.waited_for(frozenset({1})) == frozenset()
    # Too far behind the log's end (haMaxGapNotInSync), though it reached the previous end.
    tracker = InSyncTracker(1, log_end=500, now=0.0)
    assert tracker.check(frozenset({1}), [SlaveAck(3, 500)], 5000, 0, 1000, 15, 1.0) == {1}
    assert tracker.waited_for(frozenset({1})) == frozenset()


# -- GET_BROKER_EPOCH_CACHE ------------------------------------------------------------------------------


async def test_epoch_cache_answers_the_logs_epochs_or_none(tmp_path):
    from broker.common.codes import RequestCode
    from broker.common.epoch_entries import EpochEntryCache
    from broker.remoting.command import create_request
    from broker.server.epoch_cache import epoch_cache_handler
    from broker.store.ha.epochs import EpochFile

    config = BrokerConfig.from_properties({"brokerClusterName": "C", "brokerName": "b", "brokerId": "0"})
    broker = SimpleNamespace(
        config=config,
        store=SimpleNamespace(max_physic_offset=123),
        replication=SimpleNamespace(epochs=None),
        replicas=None,
    )
    handler = epoch_cache_handler(broker)  # type: ignore[arg-type]
    answer = await handler(None, create_request(RequestCode.GET_BROKER_EPOCH_CACHE))
    cache = EpochEntryCache.decode(answer.body)
    assert (cache.cluster_name, cache.broker_name, cache.broker_id, cache.epoch_list, cache.max_offset) == (
        "C",
        "b",
        0,
        (),
        123,
    )
    epochs = EpochFile(tmp_path / "epochFileCheckpoint")
    epochs.append(1, 0)
    epochs.append(3, 100)
    broker.replication.epochs = epochs
    broker.replicas = SimpleNamespace(broker_id=2)  # the controller's id for it, not broker.conf's
    cache = EpochEntryCache.decode(
        (await handler(None, create_request(RequestCode.GET_BROKER_EPOCH_CACHE))).body
    )
    assert cache.broker_id == 2
    assert [(e.epoch, e.start_offset, e.end_offset) for e in cache.epoch_list] == [
        (1, 0, 100),
        (3, 100, (1 << 63) - 1),
    ]


# -- which role the controller's answer gives ----------------------------------------------------------


class _FakeReplication:
    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.epochs = None
        self.server: _FakeServer | None = None

    async def become_master(self, epoch, _replica_wait):
        self.calls.append(("master", epoch))

    async def become_slave(self, own_id, master_id, master_addr, epoch):
        self.calls.append(("slave", master_id, epoch))

    async def fence(self):
        self.calls.append(("fence",))


def _role_manager(tmp_path) -> tuple[ReplicasManager, _FakeReplication, list[str]]:
    config = BrokerConfig.from_properties(
        {
            "brokerName": "b",
            "storePathRootDir": str(tmp_path),
            "enableControllerMode": "true",
            "controllerAddr": "127.0.0.1:1",
        }
    )
    replication, services = _FakeReplication(), []

    async def start_master_services():
        services.append("start")

    async def stop_master_services():
        services.append("stop")

    broker = SimpleNamespace(
        config=config,
        store=SimpleNamespace(running_flags=RunningFlags(), max_physic_offset=0),
        replication=replication,
        start_master_services=start_master_services,
        stop_master_services=stop_master_services,
        register_soon=lambda: None,
    )
    manager = ReplicasManager(broker)  # type: ignore[arg-type]
    manager.broker_id = 1
    manager.lease.renew(time.monotonic())
    return manager, replication, services


def _info(master_id, epoch, members=(), members_epoch=1):
    from broker.controller.client import ReplicaInfo

    return ReplicaInfo(
        master_id, f"127.0.0.1:{master_id}" if master_id else "", epoch, frozenset(members), members_epoch
    )


async def test_role_follows_newer_epochs_only(tmp_path):
    manager, replication, services = _role_manager(tmp_path)
    flags = manager.broker.store.running_flags
    await manager.apply(_info(None, 0))  # a new set, nobody elected yet: nothing decided
    assert replication.calls == [] and flags.reason() == NO_ROLE_YET
    await manager.apply(_info(2, 1))
    assert replication.calls[-1] == ("slave", 2, 1) and flags.writeable
    await manager.apply(_info(1, 3, {1}, 4))
    assert replication.calls[-1] == ("master", 3) and services[-1] == "start"
    assert manager.sync_state_set == {1} and manager.sync_state_set_epoch == 4
    await manager.apply(_info(2, 2))  # an older epoch: ignored
    assert replication.calls[-1] == ("master", 3)
    await manager.apply(_info(1, 3, {1, 2}, 5))  # the same epoch: only the in-sync set
    assert manager.sync_state_set == {1, 2} and replication.calls[-1] == ("master", 3)
    await manager.apply(_info(None, 4, {1, 2}, 5))  # the master cleared: writes stop
    assert replication.calls[-1] == ("fence",) and services[-1] == "stop"
    assert "name no master" in flags.reason()
    await manager.apply(_info(2, 5))
    assert replication.calls[-1] == ("slave", 2, 5) and flags.writeable
    manager.lease.cancel()
    await manager.client.close()


class _FakeServer:
    """The HA server as a silent master's send sees it: who is connected, what a send waits for."""

    def __init__(self, *reports: SlaveProgress) -> None:
        self.reports = list(reports)
        self.waits: list[tuple[int, object]] = []

    def slaves(self):
        return self.reports

    def wait_for_in_sync(self, end_offset, broker_ids):
        self.waits.append((end_offset, frozenset(broker_ids)))
        return PutMessageStatus.PUT_OK

    def wait_for_slave(self, end_offset):
        self.waits.append((end_offset, "any"))
        return PutMessageStatus.PUT_OK


async def test_a_silent_master_waits_for_every_in_sync_slave_whatever_in_sync_replicas_says(tmp_path):
    """inSyncReplicas=2 of a set of three: while the lease runs a send waits for one slave; once
    silent, for both (either may have been elected), and for a member proposed to the controller
    whose answer never came; alone, it is refused before the store."""
    from broker.controller.client import ControllerError

    manager, replication, _ = _role_manager(tmp_path)
    manager.broker.config.store.in_sync_replicas = 2
    await manager.apply(_info(1, 1, {1, 2, 3}, 2))
    replication.server = server = _FakeServer(_report(2, 0), _report(3, 0))
    flags = manager.broker.store.running_flags
    assert manager._replica_wait(100) is PutMessageStatus.PUT_OK
    assert server.waits[-1] == (100, "any")  # the lease runs: one slave, whichever
    manager.sync_state_set = frozenset({1, 2, 3, 4})  # 4: a member not connected
    manager.lease.valid_until = time.monotonic()
    manager.lease.check_now()  # the lease ends: silent
    assert manager.lease.silent and "in-sync slave(s) [4]" in flags.reason()  # refused up front
    assert manager._replica_wait(120) is PutMessageStatus.PUT_OK
    assert server.waits[-1] == (120, frozenset({2, 3, 4}))  # every member (a send already stored)
    manager.sync_state_set = frozenset({1, 2, 3})
    manager.fence_if_silent()
    assert flags.writeable  # both members report: writes go on

    async def alter_times_out(*_args):
        raise ControllerError(None, "timed out")

    manager.sync_state_set = frozenset({1, 2, 3})
    manager.client.alter_sync_state_set = alter_times_out  # type: ignore[method-assign]
    await manager._alter_sync_state_set(frozenset({1, 2, 3, 5}))
    manager._replica_wait(130)
    assert server.waits[-1] == (130, frozenset({2, 3, 5}))  # 5 may be in the controller's set
    manager.sync_state_set, manager._unsettled = frozenset({1}), frozenset()
    manager.fence_if_silent()
    assert "alone in its in-sync set" in flags.reason()
    assert manager._replica_wait(140) is PutMessageStatus.SLAVE_NOT_AVAILABLE
    # Heard again and named master at its epoch: writes as inSyncReplicas says, no refusal.
    manager.lease.renew(time.monotonic())
    assert manager.lease.silent and not flags.writeable  # an acknowledgement alone is not enough
    await manager.apply(_info(1, 1, {1, 2, 3}, 3))
    assert not manager.lease.silent and flags.writeable
    manager._replica_wait(150)
    assert server.waits[-1] == (150, "any")
    manager.lease.cancel()
    await manager.client.close()


async def test_an_elected_slave_stops_following_before_it_takes_writes():
    """The safety of a silent master rests on it: once elected, a slave acknowledges nothing more
    to its old master before its store takes a write of its own."""
    from broker.server.replication import BrokerReplication
    from broker.store.store_config import SLAVE, SYNC_MASTER

    order: list = []
    store_config = SimpleNamespace(broker_role=SLAVE)

    class FollowingClient:
        async def stop(self):
            await asyncio.sleep(0.01)  # its reports stop only once this returns
            order.append(("stopped following", store_config.broker_role))

    store = SimpleNamespace(
        replica_log=lambda: SimpleNamespace(cut_incomplete_tail=lambda: order.append("tail cut")),
        max_physic_offset=0,
        replica_wait=None,
        writability=SimpleNamespace(update=lambda: order.append(("writable as", store_config.broker_role))),
    )
    replication = BrokerReplication.__new__(BrokerReplication)
    replication.__dict__.update(
        broker=SimpleNamespace(
            store=store, config=SimpleNamespace(store=store_config, broker_id=2, broker_name="b")
        ),
        client=FollowingClient(),
        metadata=None,
        _finding_master=None,
        epochs=SimpleNamespace(last_epoch=lambda: 1, append=lambda e, _o: order.append(("epoch", e))),
        server=SimpleNamespace(listening=True),  # its HA port already open
        _binding=None,
    )
    await replication.become_master(2, lambda _end: PutMessageStatus.PUT_OK)
    assert order == [("stopped following", SLAVE), "tail cut", ("epoch", 2), ("writable as", SYNC_MASTER)]
    assert replication.client is None
