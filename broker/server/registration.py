"""Keeping every name server informed: REGISTER_BROKER at start, every 30 s and after changes.

Each name server is registered with on its own (as RocketMQ's registerBrokerAll, which sends to
all of them at once): one that does not answer holds only its own registration, never another's.
The body is built and compressed on a worker thread, once per topic-table version: at 20,000
groups it is 40,000 topics, seconds of work that would otherwise stall every client of the loop.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.common import fastjson
from broker.common.crc import crc32
from broker.common.errors import MQBrokerError, MQError
from broker.common.register_body import encode_compressed_body
from broker.common.request_headers import RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader
from broker.remoting.errors import RemotingError

from .outer_api import BrokerOuterAPI

if TYPE_CHECKING:
    from .controller import BrokerController

log = logging.getLogger(__name__)
# How long a request that created a topic waits for the name servers to hear of it before it is
# answered anyway (the registration goes on): clients give a heartbeat or a send 3 s.
REGISTERED_WAIT_S = 2.0
# A name server that could not be reached is tried again this soon (one started after us).
RETRY_S = 1.0

# What a body was built from: the topic table's data version and whether it is compressed.
_BodyKey = tuple[int, int, bool]


@dataclass
class _NameServer:
    addr: str
    done: int = 0  # the last registration number it ended (answered, refused or failed)
    down: bool = False  # its last registration found no answer: nobody waits for it meanwhile
    wake: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class _Body:
    key: _BodyKey
    body: bytes
    crc: int


class NamesrvRegistration:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.outer = BrokerOuterAPI(broker.config)
        self._servers = [_NameServer(addr) for addr in broker.config.namesrv_addrs]
        self._tasks: list[asyncio.Task] = []
        self._wanted = 0  # registrations asked for: each name server's turn takes the latest
        self._waiting: list[tuple[int, asyncio.Future]] = []  # (registration awaited, its waiter)
        self._body: _Body | None = None
        self._building: tuple[_BodyKey, asyncio.Future[_Body]] | None = None

    def _header(
        self, body: bytes, crc: int | None = None, compressed: bool | None = None
    ) -> RegisterBrokerRequestHeader:
        """As RocketMQ's broker fills it: the body's CRC32 in ``bodyCrc32``, which the name
        server checks (a body altered on the way is refused, not registered)."""
        config = self.broker.config
        return RegisterBrokerRequestHeader(
            broker_name=config.broker_name,
            broker_addr=config.broker_addr,
            cluster_name=config.broker_cluster_name,
            ha_server_addr=config.ha_server_addr,
            broker_id=config.broker_id,
            # The body's own form: compressedRegister may change while a body is built.
            compressed=self.broker.config.compressed_register if compressed is None else compressed,
            body_crc32=crc32(body) if crc is None else crc,
        )

    def _skipped(self) -> bool:
        """In controller mode, a broker registers only once the controllers have named a role
        (as RocketMQ 5: a broker registers when its role changes)."""
        replicas = self.broker.replicas
        return replicas is not None and not replicas.role_changes

    async def register_all(self) -> bool:
        """Register with every name server at once; False when any of them could not be reached."""
        self._wanted += 1
        number = self._wanted
        return all(await asyncio.gather(*(self._register(server, number) for server in self._servers)))

    async def _register(self, server: _NameServer, number: int) -> bool:
        """Registration ``number`` with one name server; False when it could not be reached."""
        reached = True
        if not self._skipped():
            try:
                body = await self._encoded()
                header = self._header(body.body, body.crc, compressed=body.key[2])
                response = await self.outer.register_broker(server.addr, header, body.body)
                self.broker.replication.registered(server.addr, response)
            except MQBrokerError as exc:
                log.warning("name server %s refused the registration: %s", server.addr, exc.remark)
            except RemotingError as exc:
                log.warning("cannot register with name server %s: %s", server.addr, exc)
                reached = False
            except Exception:  # a body that could not be built: this turn failed, the loop goes on
                log.exception("registration with name server %s failed", server.addr)
                reached = False
        server.done, server.down = max(server.done, number), not reached
        self._release()
        return reached

    async def _encoded(self) -> _Body:
        """The body of the topic table as it is now: built on a worker thread once per data
        version, shared by the name servers that ask while it is built."""
        version = self.broker.topics.data_version.to_json()  # before the table is read: never newer
        key = (int(version["timestamp"]), int(version["counter"]), self.broker.config.compressed_register)
        if self._body is not None and self._body.key == key:
            return self._body
        if self._building is None or self._building[0] != key:
            self._building = (key, asyncio.ensure_future(asyncio.to_thread(self._build, key)))
        building = self._building[1]
        try:
            self._body = await asyncio.shield(building)
        except Exception:
            if self._building is not None and self._building[1] is building:
                self._building = None  # the next turn builds again rather than keep the failure
            raise
        return self._body

    def _build(self, key: _BodyKey) -> _Body:
        """On a worker thread: the table's copy (under its lock), its encoding and CRC."""
        wrapper = self.broker.topics.serialize_wrapper()
        if key[2]:
            body = encode_compressed_body(wrapper["topicConfigTable"], wrapper["dataVersion"])
        else:
            body = fastjson.dumps({"topicConfigSerializeWrapper": wrapper, "filterServerList": []})
        return _Body(key, body, crc32(body))

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._loop(server)) for server in self._servers]

    def soon(self) -> None:
        for server in self._servers:
            server.wake.set()

    async def registered(self) -> None:
        """Register now and return once every name server has ended a registration begun after
        this call (answered, refused or failed), not waiting for one whose last registration
        found no answer; or after REGISTERED_WAIT_S: as RocketMQ's broker, which registers a
        topic a heartbeat, send or send-back creates before answering, so clients find its
        route at once."""
        waiter = asyncio.get_running_loop().create_future()
        self._wanted += 1
        self._waiting.append((self._wanted, waiter))
        self._release()  # no name server to wait for (none configured, or none answers)
        self.soon()
        try:
            await asyncio.wait_for(waiter, REGISTERED_WAIT_S)
        except TimeoutError:
            log.warning("the name servers have not confirmed a new topic in %.0f s", REGISTERED_WAIT_S)

    def _release(self, everyone: bool = False) -> None:
        """Wake whoever waits for a registration each name server has ended or cannot answer."""
        still = []
        for number, waiter in self._waiting:
            if everyone or all(server.done >= number or server.down for server in self._servers):
                if not waiter.done():
                    waiter.set_result(None)
            else:
                still.append((number, waiter))
        self._waiting = still

    async def _loop(self, server: _NameServer) -> None:
        while True:
            # Read each turn: registerBrokerIntervalMillis may change at run time.
            interval = self.broker.config.register_broker_interval_millis / 1000
            try:
                await asyncio.wait_for(
                    server.wake.wait(), min(interval, RETRY_S) if server.down else interval
                )
            except TimeoutError:
                pass
            server.wake.clear()  # before the number is taken: a later ask wakes the next turn
            await self._register(server, self._wanted)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)  # no registration after the unregister
        self._release(everyone=True)  # no registration is coming: nobody waits for one
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
        await asyncio.gather(*(unregister(server.addr) for server in self._servers))
        await self.outer.close()
