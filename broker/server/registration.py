"""Keeping every name server informed: REGISTER_BROKER at start, every 30 s and after changes."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker.common.crc import crc32
from broker.common.errors import MQBrokerError, MQError
from broker.common.request_headers import RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader
from broker.remoting import fastjson
from broker.remoting.errors import RemotingError

from .outer_api import BrokerOuterAPI

if TYPE_CHECKING:
    from .controller import BrokerController

log = logging.getLogger(__name__)
# How long a request that created a topic waits for the name servers to hear of it before it is
# answered anyway (the registration goes on): clients give a heartbeat or a send 3 s.
REGISTERED_WAIT_S = 2.0


class NamesrvRegistration:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.outer = BrokerOuterAPI(broker.config)
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._begun = 0  # registrations the loop has begun
        self._waiting: list[tuple[int, asyncio.Future]] = []  # (registration awaited, its waiter)

    def _header(self, body: bytes) -> RegisterBrokerRequestHeader:
        """As RocketMQ's broker fills it: the body's CRC32 in ``bodyCrc32``, which the name
        server checks (a body altered on the way is refused, not registered)."""
        config = self.broker.config
        return RegisterBrokerRequestHeader(
            broker_name=config.broker_name,
            broker_addr=config.broker_addr,
            cluster_name=config.broker_cluster_name,
            ha_server_addr=config.ha_server_addr,
            broker_id=config.broker_id,
            compressed=False,
            body_crc32=crc32(body),
        )

    async def register_all(self) -> bool:
        """Register with every name server; False when any of them could not be reached. In
        controller mode, only once the controllers have named a role (as RocketMQ 5: a broker
        registers when its role changes)."""
        replicas = self.broker.replicas
        if replicas is not None and not replicas.role_changes:
            return True
        reached = True
        body = fastjson.dumps(
            {"topicConfigSerializeWrapper": self.broker.topics.serialize_wrapper(), "filterServerList": []}
        )
        header = self._header(body)
        for addr in self.broker.config.namesrv_addrs:
            try:
                self.broker.replication.registered(addr, await self.outer.register_broker(addr, header, body))
            except MQBrokerError as exc:
                log.warning("name server %s refused the registration: %s", addr, exc.remark)
            except RemotingError as exc:
                log.warning("cannot register with name server %s: %s", addr, exc)
                reached = False
        return reached

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    def soon(self) -> None:
        self._wake.set()

    async def registered(self) -> None:
        """Register now and return once a registration begun after this call has ended (reached
        or not), or after REGISTERED_WAIT_S: as RocketMQ's broker, which registers a topic a
        heartbeat, send or send-back creates before answering, so clients find its route at once."""
        waiter = asyncio.get_running_loop().create_future()
        # The one running now may have read the topics before the caller's change: the next one.
        self._waiting.append((self._begun + 1, waiter))
        self._wake.set()
        try:
            await asyncio.wait_for(waiter, REGISTERED_WAIT_S)
        except TimeoutError:
            log.warning("the name servers have not confirmed a new topic in %.0f s", REGISTERED_WAIT_S)

    def _release(self, ended: int) -> None:
        """Wake whoever waits for registration ``ended`` or an earlier one."""
        still = []
        for number, waiter in self._waiting:
            if number > ended:
                still.append((number, waiter))
            elif not waiter.done():
                waiter.set_result(None)
        self._waiting = still

    async def _loop(self) -> None:
        while True:
            # Read each turn: registerBrokerIntervalMillis may change at run time.
            interval = self.broker.config.register_broker_interval_millis / 1000
            self._begun += 1
            try:
                reached = await self.register_all()
            finally:
                self._release(self._begun)
            try:
                # A name server that was down (started after us) is retried within a second.
                await asyncio.wait_for(self._wake.wait(), interval if reached else min(interval, 1.0))
            except TimeoutError:
                pass
            self._wake.clear()

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
        self._release(self._begun + 1)  # no registration is coming: nobody waits for one
        config = self.broker.config
        header = UnRegisterBrokerRequestHeader(
            broker_name=config.broker_name,
            broker_addr=config.broker_addr,
            cluster_name=config.broker_cluster_name,
            broker_id=config.broker_id,
        )

        async def unregister(addr: str) -> None:
            try:
                await self.outer.unregister_broker(addr, header)
            except MQError as exc:  # unreachable or refused: the name server drops us when we go quiet
                log.warning("cannot unregister from name server %s: %s", addr, exc)

        # All at once: name servers that are gone (stopped by the same `compose down`) cost one
        # connect timeout in all, not one each, of the 10 s a container engine waits.
        await asyncio.gather(*(unregister(addr) for addr in config.namesrv_addrs))
        await self.outer.close()
