"""Broker sets registered on a real controller by hand, for the console's tests (issue 22): a
controller process, and per replica a remoting server standing for its broker (it answers
GET_BROKER_EPOCH_CACHE and takes the controller's role-change notification), an id applied for and
registered through ``ControllerClient``, heartbeats while it is marked alive."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from broker.common.codes import RequestCode
from broker.common.epoch_entries import EpochEntry, EpochEntryCache
from broker.common.request_headers.controller import BrokerHeartbeatRequestHeader
from broker.controller.client import ControllerClient
from broker.local_cluster import wait_until
from broker.remoting.client import EventLoopThread
from broker.remoting.command import response_to
from broker.remoting.server import RemotingServer
from tests.controller.wire import ControllerGroup

CLUSTER = "HaCluster"
HEARTBEAT_TIMEOUT_MS = 1500


@contextmanager
def running_controller(workdir: Path) -> Iterator[ControllerGroup]:
    """One controller process (a Raft group of one), once it leads."""
    group = ControllerGroup(workdir, size=1)
    group.start()
    loop = EventLoopThread("controller-probe")
    client = ControllerClient([group.listen["n0"]])
    try:
        wait_until(
            lambda: loop.run(client.metadata()).is_leader,
            timeout=30,
            interval=0.2,
            what="the controller to lead",
        )
        yield group
    finally:
        loop.run(client.close())
        loop.stop()
        group.stop()


class HandSet:
    """One broker set registered on the controller by hand: for each replica a remoting server
    standing for its broker, an id applied for and registered, heartbeats while it is marked alive."""

    def __init__(self, controllers: list[str], name: str) -> None:
        self.name = name
        self.loop = EventLoopThread(f"hand-{name}")
        self.client = ControllerClient(controllers)
        # One client per controller for heartbeats, each sent without waiting for the others: a
        # controller that does not answer must not delay the beats the others need.
        self._beaters = [ControllerClient([c], self.client.remoting) for c in controllers]
        self.servers: dict[int, RemotingServer] = {}
        self.addrs: dict[int, str] = {}
        self.epochs: dict[int, list[EpochEntry]] = {}
        self.notified: list[dict] = []
        self.beating: set[int] = set()
        self._beat: concurrent.futures.Future[None] | None = None
        self._in_flight: set[asyncio.Task] = set()

    def add(self, bid: int) -> str:
        async def start() -> str:
            server = RemotingServer("127.0.0.1", 0)
            server.register_processor(RequestCode.GET_BROKER_EPOCH_CACHE, self._epoch_cache(bid))
            server.register_processor(
                RequestCode.NOTIFY_BROKER_ROLE_CHANGED,
                lambda conn, request: self.notified.append(dict(request.ext_fields)),
            )
            port = await server.start()
            self.servers[bid] = server
            return f"127.0.0.1:{port}"

        self.addrs[bid] = addr = self.loop.run(start())
        self.loop.run(self.client.apply_broker_id(CLUSTER, self.name, bid, f"{addr};1"))
        self.loop.run(self.client.register(CLUSTER, self.name, bid, addr))
        return addr

    def _epoch_cache(self, bid: int):
        def answer(conn, request):
            entries = tuple(self.epochs.get(bid, ()))
            end = entries[-1].start_offset + 4096 if entries else 0
            body = EpochEntryCache(CLUSTER, self.name, bid, entries, end).encode()
            return response_to(request, body=body)

        return answer

    def start_beating(self) -> None:
        async def beat_forever() -> None:
            while True:
                for bid in sorted(self.beating):
                    header = BrokerHeartbeatRequestHeader(
                        cluster_name=CLUSTER,
                        broker_addr=self.addrs[bid],
                        broker_name=self.name,
                        broker_id=bid,
                        heartbeat_timeout_mills=HEARTBEAT_TIMEOUT_MS,
                    )
                    for beater in self._beaters:
                        task = asyncio.create_task(beater.heartbeat(header))
                        self._in_flight.add(task)
                        task.add_done_callback(self._in_flight.discard)
                await asyncio.sleep(0.2)

        self._beat = asyncio.run_coroutine_threadsafe(beat_forever(), self.loop.loop)

    def replicas(self):
        return self.loop.run(self.client.sync_state_data([self.name]))[self.name]

    def alter_in_sync(self, master: int, master_epoch: int, ids: set[int], set_epoch: int):
        return self.loop.run(
            self.client.alter_sync_state_set(self.name, master, master_epoch, ids, set_epoch)
        )

    def stop(self) -> None:
        if self._beat is not None:
            self._beat.cancel()

        async def close() -> None:
            for task in list(self._in_flight):
                task.cancel()
            await asyncio.gather(*self._in_flight, return_exceptions=True)
            for server in self.servers.values():
                await server.stop()
            await self.client.close()

        self.loop.run(close())
        self.loop.stop()


def three_replicas(controllers: list[str], name: str) -> HandSet:
    """A set of three: 1 the master (epoch 1; its epoch cache says since offset 0), 1 and 2 in
    sync and alive, 3 registered but silent."""
    replicas = HandSet(controllers, name)
    try:
        replicas.add(1)
        replicas.beating.add(1)
        replicas.start_beating()
        wait_until(
            lambda: replicas.replicas().master_id == 1, timeout=30, interval=0.1, what="broker 1 elected"
        )
        replicas.add(2)
        replicas.add(3)
        replicas.beating.add(2)
        wait_until(
            lambda: next(r.alive for r in replicas.replicas().not_in_sync if r.broker_id == 2),
            timeout=30,
            interval=0.1,
            what="broker 2 alive",
        )
        replicas.alter_in_sync(1, 1, {1, 2}, 1)
        replicas.epochs[1] = [EpochEntry(1, 0)]
    except BaseException:
        replicas.stop()
        raise
    return replicas
