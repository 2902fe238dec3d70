"""The master side of replication: ``HAServer`` accepts slaves on the HA port and streams each
its commit log from the offset it reports (RocketMQ's HAService + HAConnection, on asyncio).

Each connection has a reader (the slave's reports: where to send from, then how far it has
confirmed) and a writer (commit-log bytes in frames of at most ``haTransferBatchSize``, a
heartbeat when there is nothing to send). Either end silent for ``haHousekeepingInterval`` is
dropped. The writer wakes when new records are dispatched — a dispatch listener that exists only
while a slave is connected, so a master without slaves pays nothing per message.

Where a stream starts:
- a slave reporting 0 (an empty store) gets the whole retained log, from the master's oldest
  segment. RocketMQ starts it at the master's newest segment instead; here a slave must be able
  to serve every message the master holds when it is the one left to read from;
- a slave reporting an offset the master has gets everything after it;
- a slave reporting an offset beyond the master's end (it holds a tail the master does not have,
  e.g. written while it was master) is sent a heartbeat at the master's end, and cuts its tail
  there (``broker/store/replica.py``) before following.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING

from broker.store.results import PutMessageStatus

from .protocol import REPORT, TRANSFER_HEADER

if TYPE_CHECKING:
    from broker.store.message_store import MessageStore

log = logging.getLogger(__name__)

# Slaves one master serves at most (RocketMQ sets no limit; a broker set has a handful).
MAX_CONNECTIONS = 16


class HAConnection:
    """One slave: its reports in, the commit log out."""

    def __init__(self, server: HAServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.address = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.request_offset = -1  # the first report: where the stream starts
        self.ack_offset = -1  # the latest report: everything below it is on the slave
        self.next_transfer = -1
        self._reported = asyncio.Event()
        self.new_data = asyncio.Event()  # set by the server on each dispatched record
        self._tasks: list[asyncio.Task] = []

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        self.writer.close()

    async def serve(self) -> None:
        tasks = self._tasks = [
            asyncio.create_task(self._read_reports()),
            asyncio.create_task(self._transfer()),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.info("slave %s disconnected (%s)", self.address, exc)
        except Exception:
            log.exception("replication to slave %s failed", self.address)
        finally:
            for task in tasks:
                task.cancel()
            self.writer.close()

    async def _read_reports(self) -> None:
        config = self.server.store.config
        while True:
            try:
                data = await asyncio.wait_for(
                    self.reader.readexactly(REPORT.size), config.ha_housekeeping_interval / 1000
                )
            except TimeoutError:
                log.warning("slave %s silent for %d ms: connection closed (haHousekeepingInterval)",
                            self.address, config.ha_housekeeping_interval)  # fmt: skip
                return
            (offset,) = REPORT.unpack(data)
            if offset < 0:
                log.warning("slave %s reported offset %d: connection closed", self.address, offset)
                return
            self.ack_offset = offset
            if self.request_offset < 0:
                self.request_offset = offset
                self._reported.set()
            self.server.slave_acked(self, offset)

    def _start_offset(self) -> int:
        store = self.server.store
        reported, end = self.request_offset, store.max_physic_offset
        if reported == 0:
            start = store.min_physic_offset
        elif reported > end:
            log.warning("slave %s is ahead (%d, this master ends at %d): it will cut its tail",
                        self.address, reported, end)  # fmt: skip
            start = end
        else:
            start = reported
        if start < store.min_physic_offset:
            # Sent from the oldest offset held, the slave sees the gap and says so (its figures).
            oldest = store.min_physic_offset
            log.error("slave %s needs offset %d, which this master no longer holds (oldest %d): "
                      "its store must be emptied to follow", self.address, start, oldest)  # fmt: skip
            start = oldest
        log.info("replicating to slave %s from offset %d (it reported %d)", self.address, start, reported)
        return start

    async def _transfer(self) -> None:
        await self._reported.wait()
        store, writer = self.server.store, self.writer
        self.next_transfer = self._start_offset()
        last_write = 0.0
        while True:
            config = store.config
            self.new_data.clear()  # before reading: a record dispatched after this wakes us
            data = store.commit_log_data(self.next_transfer, config.ha_transfer_batch_size)
            now = time.monotonic()
            if data:
                writer.write(TRANSFER_HEADER.pack(self.next_transfer, len(data)) + data)
                self.next_transfer += len(data)
            elif now - last_write >= config.ha_send_heartbeat_interval / 1000:
                writer.write(TRANSFER_HEADER.pack(self.next_transfer, 0))
            else:
                try:
                    await asyncio.wait_for(self.new_data.wait(), config.ha_send_heartbeat_interval / 1000)
                except TimeoutError:
                    pass
                continue
            last_write = now
            await writer.drain()


class HAServer:
    """The HA port of a master: every connected slave, and how far each has confirmed."""

    def __init__(self, store: MessageStore, host: str, port: int) -> None:
        self.store = store
        self.host, self.port = host, port
        self.connections: list[HAConnection] = []
        self._server: asyncio.Server | None = None
        self._listening = False
        # The furthest offset any slave has confirmed (RocketMQ's push2SlaveMaxOffset).
        self.push_to_slave_max_offset = 0
        # SYNC_MASTER: sends waiting for a slave, by end offset (appends come in offset order).
        self._waiting: deque[tuple[int, asyncio.Future[PutMessageStatus]]] = deque()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("HA port %s:%d accepts slaves", self.host, self.port)
        return self.port

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.connections) >= MAX_CONNECTIONS:
            # Each connection streams the whole log: a flood of them must not take the broker down.
            log.warning("HA port: %d connections already, one more refused", len(self.connections))
            writer.close()
            return
        connection = HAConnection(self, reader, writer)
        log.info("slave connected from %s", connection.address)
        self.connections.append(connection)
        self._listen_for_data()
        try:
            await connection.serve()
        finally:
            self.connections.remove(connection)
            self._listen_for_data()
            while not self.connections and self._waiting:  # nobody left to confirm them
                _time_out(self._waiting.popleft()[1])

    def _listen_for_data(self) -> None:
        """Wake writers on each dispatched record while (and only while) a slave is connected."""
        listeners = self.store.reput.listeners
        if self.connections and not self._listening:
            listeners.append(self._on_dispatch)
        elif not self.connections and self._listening:
            listeners.remove(self._on_dispatch)
        self._listening = bool(self.connections)

    def _on_dispatch(self, _request) -> None:
        for connection in self.connections:
            if not connection.new_data.is_set():
                connection.new_data.set()

    def slave_acked(self, connection: HAConnection, offset: int) -> None:
        if offset > self.push_to_slave_max_offset:
            self.push_to_slave_max_offset = offset
        waiting = self._waiting
        while waiting and waiting[0][0] <= offset:
            future = waiting.popleft()[1]
            if not future.done():
                future.set_result(PutMessageStatus.PUT_OK)

    # -- SYNC_MASTER ---------------------------------------------------------------------------
    def wait_for_slave(self, end_offset: int) -> PutMessageStatus | asyncio.Future[PutMessageStatus]:
        """A stored message's replication status (RocketMQ's isSlaveOK + GroupTransferService):
        SLAVE_NOT_AVAILABLE when no slave is connected or the furthest is ``haMaxGapNotInSync``
        or more behind; PUT_OK when one has confirmed ``end_offset``; else a future that a slave's
        confirmation resolves to PUT_OK, or ``slaveTimeout`` to FLUSH_SLAVE_TIMEOUT."""
        config = self.store.config
        confirmed = max((c.ack_offset for c in self.connections), default=-1)
        if confirmed < 0 or self.store.max_physic_offset - confirmed >= config.ha_max_gap_not_in_sync:
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        if confirmed >= end_offset:
            return PutMessageStatus.PUT_OK
        waiting = self._waiting
        while waiting and waiting[0][1].done():  # timed out (in order: one timeout for all)
            waiting.popleft()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[PutMessageStatus] = loop.create_future()
        waiting.append((end_offset, future))
        loop.call_later(config.slave_timeout / 1000, _time_out, future)
        for connection in self.connections:  # stream it now rather than at the next wake-up
            connection.new_data.set()
        return future

    def confirmed_offsets(self) -> dict[str, int]:
        """How far each connected slave has confirmed (its address: its latest report)."""
        return {c.address: c.ack_offset for c in self.connections if c.ack_offset >= 0}

    def behind_millis(self, confirmed: int) -> int:
        """How long ago the oldest message a slave lacks was stored (0 when it lacks none)."""
        stored = self.store.store_timestamp_at(confirmed)
        return max(0, int(time.time() * 1000) - stored) if stored >= 0 else 0

    def runtime_info(self) -> dict[str, str]:
        confirmed = self.confirmed_offsets()
        end = self.store.max_physic_offset
        furthest = max(confirmed.values()) if confirmed else -1
        return {
            "haListenPort": str(self.port),
            "haSlaveCount": str(len(confirmed)),
            "haPushToSlaveMaxOffset": str(self.push_to_slave_max_offset),
            # Bytes the furthest slave lacks, and the age of the oldest message it lacks (-1 when
            # no slave is connected).
            "haSlaveBehindBytes": str(end - furthest) if confirmed else "-1",
            "haSlaveBehindMillis": str(self.behind_millis(furthest)) if confirmed else "-1",
            "haSlaveAckOffsets": ";".join(f"{addr}={offset}" for addr, offset in sorted(confirmed.items())),
        }

    async def stop(self) -> None:
        while self._waiting:
            _time_out(self._waiting.popleft()[1])
        if self._server is not None:
            self._server.close()
        for connection in list(self.connections):
            connection.close()
        # Until every connection has stopped reading the store, which is shut down next.
        deadline = time.monotonic() + 5
        while self.connections and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if self._server is not None:
            await self._server.wait_closed()


def _time_out(future: asyncio.Future[PutMessageStatus]) -> None:
    if not future.done():
        future.set_result(PutMessageStatus.FLUSH_SLAVE_TIMEOUT)
