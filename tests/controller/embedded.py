"""Test helpers: a name server process running a controller (``enableControllerInNamesrv``), and
brokers simulated through the ControllerClient (ids applied for, registered, heartbeating)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from broker.common.request_headers.controller import BrokerHeartbeatRequestHeader
from broker.controller.client import ControllerClient
from broker.local_cluster import (
    EngineProcess,
    embedded_controller_settings,
    free_port,
    start_namesrv,
    write_conf,
)

CLUSTER = "EmbeddedCluster"
HEARTBEAT_TIMEOUT_MS = 1500
HEARTBEAT_EVERY_S = 0.2


def controller_settings(root: Path, **extra: object) -> dict[str, object]:
    """namesrv.conf lines embedding a one-controller group that stores under ``root``."""
    return embedded_controller_settings(
        root / "controller-store",
        controllerDLegerGroup="embedded-group",
        controllerWriteTimeoutMillis=2000,
        **extra,
    )


def start_embedded_namesrv(root: Path, **extra: object) -> EngineProcess:
    root.mkdir(parents=True, exist_ok=True)
    return start_namesrv(write_conf(root / "namesrv.conf", controller_settings(root, **extra)), free_port())


async def until(predicate, timeout: float = 20.0, what: str = "a condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = await predicate()
        if answer:
            return answer
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


async def wait_for_leader(client: ControllerClient) -> None:
    async def leads() -> bool:
        try:
            return (await client.metadata()).is_leader
        except Exception:
            return False

    await until(leads, what="the controller to lead")


class BrokerSet:
    """The replicas of one broker set as the controller sees them: each applies for its id,
    registers and heartbeats (every 200 ms, while it is in ``beating``)."""

    def __init__(self, client: ControllerClient, broker_name: str, ids: list[int], base_port: int = 30000):
        self.client = client
        self.name = broker_name
        self.ids = ids
        self.base_port = base_port
        self.beating: set[int] = set()
        self._task: asyncio.Task | None = None

    def address(self, bid: int) -> str:
        return f"127.0.0.1:{self.base_port + bid}"

    async def join(self, bid: int):
        """RocketMQ 5.1's order: next id, apply for it, heartbeat, register."""
        assert await self.client.next_broker_id(CLUSTER, self.name) == bid
        await self.client.apply_broker_id(CLUSTER, self.name, bid, f"{self.address(bid)};{time.time_ns()}")
        self.beating.add(bid)
        await self._beat_once()
        if self._task is None:
            self._task = asyncio.create_task(self._beat_forever())
        return await self.client.register(CLUSTER, self.name, bid, self.address(bid))

    async def _beat_once(self) -> None:
        for bid in sorted(self.beating):
            header = BrokerHeartbeatRequestHeader(
                cluster_name=CLUSTER,
                broker_addr=self.address(bid),
                broker_name=self.name,
                broker_id=bid,
                heartbeat_timeout_mills=HEARTBEAT_TIMEOUT_MS,
            )
            await self.client.heartbeat(header)

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_EVERY_S)
            await self._beat_once()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
