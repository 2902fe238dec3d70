"""A broker set in RocketMQ 5's controller mode, as real processes, with keyed producer load:
what the failover loop test (tests/integration/test_failover_loop.py) and the failover bench
(bench/ha_failover.py) share; like ``broker.local_cluster``, a launcher, not a test module.

``ControllerModeSet`` runs one controller (``python -m broker.controller``, or with ``embedded``
the name server's own, RocketMQ's ``enableControllerInNamesrv``), a name server and two brokers of
one broker set, both configured alike (``enableControllerMode``, ``SYNC_MASTER``,
``allAckInSyncStateSet``): the controller decides which of them is master. The figures it gives
are the controller's answers and the brokers' own; nothing here decides a role.

``KeyedLoad`` sends from several threads through one SDK producer with retries off, each message
with a key of its own sent once: an acknowledged key was written exactly once if the store is
right, and a failed send is given up (the application moves on with new messages).
"""

from __future__ import annotations

import bisect
import collections
import random
import statistics
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from broker.client import Producer
from broker.client.admin import MQAdmin
from broker.client.instance import MQClientInstance
from broker.common.acl_signature import SessionCredentials
from broker.common.message import Message
from broker.controller.client import ControllerClient, ControllerError, ReplicaInfo
from broker.local_cluster import (
    SMALL_STORE,
    EngineProcess,
    LocalCluster,
    embedded_controller_settings,
    free_port,
    start_controller,
    wait_until,
    write_conf,
)
from broker.remoting.client import EventLoopThread, SyncRemotingClient

BROKER_NAME = "broker-fo"
CLUSTER_NAME = "FailoverCluster"
TOPIC = "failover-topic"
QUEUES = 4
REPLICAS = ("fo-1", "fo-2")

# Short periods so a failover takes seconds, not RocketMQ's tens of seconds (its defaults:
# controllerHeartBeatTimeoutMills 10 s, scanNotActiveBrokerInterval 5 s, checkSyncStateSetPeriod
# 5 s, haMaxTimeSlaveNotCatchup 15 s). Key names are RocketMQ's.
CONTROLLER_SETTINGS: dict[str, object] = {
    "controllerDLegerGroup": "failover",
    "scanNotActiveBrokerInterval": 100,
    "controllerWriteTimeoutMillis": 2000,
}
BROKER_SETTINGS: dict[str, object] = {
    **SMALL_STORE,
    "brokerClusterName": CLUSTER_NAME,
    "brokerName": BROKER_NAME,
    "brokerRole": "SYNC_MASTER",
    "enableControllerMode": "true",
    "allAckInSyncStateSet": "true",
    "controllerHeartBeatTimeoutMills": 1500,
    "brokerHeartbeatInterval": 200,
    "syncBrokerMetadataPeriod": 1000,
    "checkSyncStateSetPeriod": 500,
    "syncControllerMetadataPeriod": 1000,
    "haMaxTimeSlaveNotCatchup": 3000,
    "haSendHeartbeatInterval": 500,
    "haHousekeepingInterval": 3000,
    "registerBrokerIntervalMillis": 500,
    "mappedFileSizeCommitLog": 4 * 1024 * 1024,
}


class ControllerModeSet:
    """One controller, a name server and the broker set ``REPLICAS`` in ``workdir``. Each broker
    keeps its conf, port and store, so a killed one restarts in place."""

    def __init__(
        self,
        workdir: Path,
        broker_settings: Mapping[str, object] | None = None,
        embedded: bool = False,
        credentials: SessionCredentials | None = None,
    ) -> None:
        self.workdir = workdir
        self.embedded = embedded
        self.credentials = credentials  # the admin account of brokers with aclEnable
        self.broker_settings = {**BROKER_SETTINGS, **(broker_settings or {})}
        self.controller: EngineProcess | None = None
        self.cluster: LocalCluster | None = None
        self.admin: MQAdmin | None = None
        self._loop = EventLoopThread("failover-controller-client")
        self._controller_client: ControllerClient | None = None

    # ---- life cycle ----

    def start(self) -> ControllerModeSet:
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            store = self.workdir / "controller"
            if self.embedded:
                namesrv = embedded_controller_settings(store, **CONTROLLER_SETTINGS)
                self.cluster = LocalCluster(self.workdir, CLUSTER_NAME, namesrv_settings=namesrv)
            else:
                conf = write_conf(
                    self.workdir / "controller.conf",
                    {
                        **CONTROLLER_SETTINGS,
                        "controllerDLegerPeers": f"n0-127.0.0.1:{free_port()}",
                        "controllerStorePath": store,
                    },
                )
                self.controller = start_controller(conf, free_port())
                self.cluster = LocalCluster(self.workdir, CLUSTER_NAME)
            self._controller_client = self._loop.run(_make_client(self.controller_addr))
            self.admin = MQAdmin(self.cluster.namesrv_addr, credentials=self.credentials)
            if self.credentials is not None:  # the cluster's own requests signed too
                self.cluster.admin.close()
                self.cluster.admin = SyncRemotingClient(self.credentials)
            for name in REPLICAS:
                settings = {**self.broker_settings, "controllerAddr": self.controller_addr}
                self.cluster.add_broker(name, settings)
            self.wait_for_master()
            self._create_topic()
            self.wait_in_sync()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.admin is not None:
            self.admin.close()
        if self._controller_client is not None:
            self._loop.run(self._controller_client.close())
        self._loop.stop()
        if self.cluster is not None:
            self.cluster.stop()
        if self.controller is not None:
            self.controller.stop()

    @property
    def controller_addr(self) -> str:
        if self.embedded:
            return self.namesrv_addr
        assert self.controller is not None
        return self.controller.addr

    @property
    def namesrv_addr(self) -> str:
        assert self.cluster is not None
        return self.cluster.namesrv_addr

    def broker(self, name: str) -> EngineProcess:
        assert self.cluster is not None
        return self.cluster.brokers[name]

    def logs(self) -> str:
        """Every process's output, for a failure's message."""
        parts = []
        if self.controller is not None:
            parts.append("--- controller\n" + "".join(self.controller.output[-200:]))
        if self.cluster is not None:
            parts.append("--- namesrv\n" + "".join(self.cluster.namesrv.output[-200:]))
            for name, process in self.cluster.brokers.items():
                parts.append(f"--- {name}\n" + "".join(process.output[-200:]))
        return "\n".join(parts)

    # ---- what the controller and the brokers say ----

    def replica_info(self) -> ReplicaInfo | None:
        """The broker set as the controller answers it; None while it cannot answer."""
        assert self._controller_client is not None
        try:
            return self._loop.run(self._controller_client.replica_info(BROKER_NAME), timeout=10)
        except ControllerError:
            return None

    def name_of(self, address: str) -> str | None:
        assert self.cluster is not None
        return next((n for n, p in self.cluster.brokers.items() if p.addr == address), None)

    def master(self) -> tuple[str, ReplicaInfo] | None:
        """The master's process name and the controller's answer, when it names one of ours."""
        info = self.replica_info()
        if info is None or info.master_id is None:
            return None
        name = self.name_of(info.master_address)
        return (name, info) if name is not None else None

    def wait_for_master(
        self, after_epoch: int = 0, not_name: str | None = None, timeout: float = 60, interval: float = 0.05
    ) -> tuple[str, ReplicaInfo]:
        """The master the controller names at an epoch above ``after_epoch`` (another than
        ``not_name``)."""

        def elected() -> tuple[str, ReplicaInfo] | None:
            found = self.master()
            if found is None or found[1].master_epoch <= after_epoch or found[0] == not_name:
                return None
            return found

        found = wait_until(
            elected, timeout=timeout, interval=interval, what=f"a master above epoch {after_epoch}"
        )
        assert found is not None  # with ``what``, wait_until raises rather than answer None
        return found

    def runtime(self, name: str) -> dict[str, str]:
        assert self.admin is not None
        return self.admin.broker_runtime_info(self.broker(name).addr)

    def wait_in_sync(self, timeout: float = 60) -> tuple[str, ReplicaInfo]:
        """Both replicas in the controller's in-sync set, the master's log end on its slave."""

        def all_in_sync() -> tuple[str, ReplicaInfo] | None:
            found = self.master()
            if found is None or len(found[1].sync_state_set) < len(REPLICAS):
                return None
            return found

        found = wait_until(all_in_sync, timeout=timeout, interval=0.1, what="both replicas in sync")
        assert found is not None  # with ``what``, wait_until raises rather than answer None
        self.wait_for_roles(found[0], timeout)
        return found

    def wait_for_roles(self, master: str, timeout: float = 60) -> None:
        """The brokers acting on the controller's word: ``master`` says it is one, the other a
        slave (a broker hears of its new role a moment after the controller decides)."""
        slave = self.slave_of(master)

        def acting() -> bool:
            return self.runtime(master).get("brokerRole", "").endswith("_MASTER") and (
                self.runtime(slave).get("brokerRole") == "SLAVE"
            )

        wait_until(
            acting, timeout=timeout, interval=0.1, what=f"{master} master and {slave} slave by their own word"
        )

    def slave_of(self, master: str) -> str:
        return next(name for name in REPLICAS if name != master)

    def wait_caught_up(self, master: str, timeout: float = 60) -> None:
        slave = self.slave_of(master)

        def caught_up() -> bool:
            end = self.runtime(master)["commitLogMaxOffset"]
            return self.runtime(slave)["commitLogMaxOffset"] == end

        wait_until(caught_up, timeout=timeout, interval=0.1, what=f"{slave} holding {master}'s log")

    # ---- failures ----

    def kill(self, name: str) -> float:
        """SIGKILL broker ``name``; the moment it was dead (monotonic)."""
        self.broker(name).kill()
        return time.monotonic()

    def restart(self, name: str) -> EngineProcess:
        assert self.cluster is not None
        return self.cluster.start_broker(name)

    # ---- reading back ----

    def stored_keys(self, name: str) -> dict[str, list[tuple[int, int]]]:
        """Every key of ``TOPIC`` in broker ``name``'s consume queues, with the (queue id, queue
        offset) of each message that carries it."""
        assert self.admin is not None
        addr = self.broker(name).addr
        found: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
        for queue_id in range(QUEUES):
            start = self.admin.min_offset(addr, TOPIC, queue_id)
            end = self.admin.max_offset(addr, TOPIC, queue_id)
            read = 0
            for message in self.admin.iter_queue_messages(addr, TOPIC, queue_id, start, end):
                found[" ".join(message.keys)].append((queue_id, message.queue_offset))  # one key each
                read += 1
            if read != end - start:
                raise AssertionError(f"{name} queue {queue_id}: read {read} of {start}..{end}")
        return found

    def _create_topic(self) -> None:
        """On the master; its slave copies the topic (metadata follows the master), so the topic
        is there whichever replica is master later."""
        assert self.admin is not None and self.cluster is not None
        master, _ = self.wait_for_master()
        self.wait_for_roles(master)
        self.admin.create_or_update_topic(self.broker(master).addr, TOPIC, QUEUES, QUEUES)
        self.cluster.wait_for_route(TOPIC)
        slave = self.slave_of(master)
        wait_until(
            lambda: TOPIC in self.admin.all_topic_configs(self.broker(slave).addr),  # type: ignore[union-attr]
            timeout=60,
            interval=0.2,
            what=f"{TOPIC} copied to {slave}",
        )


async def _make_client(address: str) -> ControllerClient:
    return ControllerClient([address])


@dataclass
class Ack:
    started: float  # when the send began (monotonic)
    answered: float
    key: str
    queue_id: int
    queue_offset: int


@dataclass
class ThreadRecord:
    acks: list[Ack] = field(default_factory=list)
    failed: int = 0  # exceptions: the broker gone, a timeout, no route
    errors: collections.Counter = field(default_factory=collections.Counter)  # their kinds
    not_ok: collections.Counter = field(default_factory=collections.Counter)  # answered, not SEND_OK


class KeyedLoad:
    """``threads`` threads sending one keyed message at a time through one producer (retries
    off, routes polled every ``route_interval_ms``). A failed send is counted and given up; the
    thread pauses ``backoff_s`` and goes on with a new key."""

    def __init__(
        self,
        namesrv_addr: str,
        threads: int = 4,
        route_interval_ms: int = 200,
        backoff_s: float = 0.02,
        pause_s: float = 0.0,
        body_bytes: int = 256,
    ) -> None:
        self.instance = MQClientInstance(
            namesrv_addr, f"failover-load-{random.randrange(1 << 30)}", heartbeat_interval_ms=1000,
            route_interval_ms=route_interval_ms,
        )  # fmt: skip
        self.producer = Producer("FAILOVER_LOAD", namesrv_addr, retry_times=0, instance=self.instance)
        self.records = [ThreadRecord() for _ in range(threads)]
        self.backoff_s, self.pause_s = backoff_s, pause_s
        self.body = b"f" * body_bytes
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(i,), name=f"failover-load-{i}", daemon=True)
            for i in range(threads)
        ]

    def start(self) -> KeyedLoad:
        self.producer.start()
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Stop sending (at once for a second call)."""
        if self._stop.is_set():
            return
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(30)
        if self._threads[0].ident is None:  # never started: the instance is ours alone to stop
            self.instance.shutdown()
        else:
            self.producer.shutdown()

    def _run(self, index: int) -> None:
        record = self.records[index]
        for seq in range(1 << 62):
            if self._stop.is_set():
                return
            key = f"k{index}-{seq}"
            message = Message(TOPIC, self.body)
            message.keys = key
            started = time.monotonic()
            try:
                result = self.producer.send(message)
            except Exception as exc:
                record.failed += 1
                record.errors[f"{type(exc).__name__}: {str(exc)[:160]}"] += 1
                self._stop.wait(self.backoff_s)
                continue
            if result.send_status == "SEND_OK":
                queue = result.message_queue
                record.acks.append(Ack(started, time.monotonic(), key, queue.queue_id, result.queue_offset))
            else:
                record.not_ok[result.send_status] += 1
            if self.pause_s:
                self._stop.wait(self.pause_s)

    # ---- figures ----

    def acks(self) -> list[Ack]:
        return [ack for record in self.records for ack in list(record.acks)]

    def first_ack_started_after(self, moment: float, thread: int | None = None) -> Ack | None:
        """The earliest answered ack of a send begun after ``moment`` (by every thread, or one):
        a send begun after a kill can only have been answered by the broker that took over."""
        records = self.records if thread is None else [self.records[thread]]
        first: Ack | None = None
        for record in records:
            acks = list(record.acks)  # appended by its thread meanwhile: a snapshot
            at = bisect.bisect_right([a.started for a in acks], moment)
            if at < len(acks) and (first is None or acks[at].answered < first.answered):
                first = acks[at]
        return first

    def every_thread_acked_after(self, moment: float) -> bool:
        return all(self.first_ack_started_after(moment, i) is not None for i in range(len(self.records)))

    @property
    def failed(self) -> int:
        return sum(r.failed for r in self.records)

    def errors(self, most: int = 5) -> list[tuple[str, int]]:
        """The commonest failed sends' errors."""
        total: collections.Counter = collections.Counter()
        for record in self.records:
            total.update(record.errors)
        return total.most_common(most)

    @property
    def not_ok(self) -> collections.Counter:
        total: collections.Counter = collections.Counter()
        for record in self.records:
            total.update(record.not_ok)
        return total


@dataclass
class FailoverRound:
    killed: str
    killed_at: float  # monotonic
    elected: str
    epoch: int
    elected_s: float  # kill -> the controller names the new master
    first_ack_s: float  # kill -> first acknowledged send begun after the kill


def kill_and_wait(replicas: ControllerModeSet, load: KeyedLoad, timeout: float = 60) -> FailoverRound:
    """SIGKILL the master; wait for the controller's new master and for the first acknowledged
    send begun after the kill. The killed broker is left down."""
    master, info = replicas.wait_for_master()
    killed_at = replicas.kill(master)
    elected, new_info = replicas.wait_for_master(
        info.master_epoch, not_name=master, timeout=timeout, interval=0.02
    )
    elected_s = time.monotonic() - killed_at
    ack = wait_until(
        lambda: load.first_ack_started_after(killed_at),
        timeout=timeout,
        interval=0.02,
        what="an acknowledged send after the failover",
    )
    assert ack is not None  # with ``what``, wait_until raises rather than answer None
    return FailoverRound(
        master, killed_at, elected, new_info.master_epoch, elected_s, ack.answered - killed_at
    )


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s, max {max(values):.2f} s"
