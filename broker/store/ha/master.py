"""The master side of replication: ``HAServer`` accepts slaves on the HA port and streams each
its commit log from the offset it reports (RocketMQ's HAService + HAConnection, on asyncio).

Each connection has a reader (the slave's reports: where to send from, then how far it has
confirmed) and a writer (commit-log bytes in frames of at most ``haTransferBatchSize``, a
heartbeat when there is nothing to send). Either end silent for ``haHousekeepingInterval`` is
dropped. The writer wakes when new records are dispatched — a dispatch listener that exists only
while a slave is connected, so a master without slaves pays nothing per message.

Where a stream starts:
- a slave reporting 0 (an empty store) gets the whole retained log, from the master's oldest
  segment (RocketMQ: its newest), so that a slave can serve every message the master holds;
- a slave reporting an offset the master has gets everything after it;
- a slave reporting an offset beyond the master's end (it holds a tail the master does not have,
  e.g. written while it was master) is sent a heartbeat at the master's end, and cuts its tail
  there (``broker/store/replica.py``) before following.

Controller mode (``epochs`` given: RocketMQ 5's AutoSwitchHAConnection): a connection opens with
the slave's handshake (``protocol``): its brokerId, max offset and last epoch. A slave whose last
epoch is above this master's is refused — this master has been replaced, and must not make a
newer master's log follow its own. Otherwise the answer carries this master's epoch entries, max
and oldest offsets: the slave cuts its log where the two histories part (``slave.py``), reports,
and is streamed as above, each transfer tagged with its bytes' epoch and cut at epoch ends.

Signing in (``auth``, when the broker gives a policy): a connection that opens with a HELLO is
challenged; where the policy asks for a sign-in, one that does not sign in, or signs wrongly or as
no expected slave, is closed before a byte of the log is sent. Until it has opened it waits in a
bounded pool of its own, not in the slaves' places (``admission``). Its reports count only up to
what it held on connecting and the bytes handed to its socket since (``acks``).

For the in-sync set of controller mode (``broker/server``): ``slaves()`` says which brokerId is
connected, how far it confirmed and when it last reported; ``wait_for_in_sync`` /
``wait_for_slaves`` wait until every given slave has confirmed an offset (RocketMQ's
allAckInSyncStateSet).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING

from broker.store.results import PutMessageStatus

from .acks import AckWaiter, Delivery, SlaveProgress, time_out
from .admission import OPENING_DEADLINE, PendingPool
from .auth import (
    HELLO,
    HELLO_MAGIC,
    PROTOCOL_VERSION,
    REFUSED_FULL,
    HAAuthError,
    HAAuthPolicy,
    answer_frame,
    new_challenge,
    read_sign_in,
    refused_why,
    verify,
)
from .auth import OK as AUTH_OK
from .protocol import (
    EPOCH_ITEM,
    EPOCH_TRANSFER_HEADER,
    HANDSHAKE,
    HANDSHAKE_ANSWER,
    HANDSHAKE_MAGIC,
    HANDSHAKE_VERSION,
    REPORT,
    STATUS_OK,
    STATUS_STALE_MASTER,
    TRANSFER_HEADER,
    HAProtocolError,
)

if TYPE_CHECKING:
    from broker.remoting.tls import TlsAcceptor
    from broker.store.message_store import MessageStore

    from .epochs import EpochFile

log = logging.getLogger(__name__)

# Slaves one master serves at most (RocketMQ sets no limit; a broker set has a handful); the
# connections still opening have a pool of their own (``admission``).
MAX_CONNECTIONS = 16
UNKNOWN_BROKER_ID = -1  # a classic (non-controller) slave does not say its brokerId


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
        self.broker_id = UNKNOWN_BROKER_ID  # signed in as, or from the handshake (controller mode)
        self.authenticated = False  # signed in (``auth``)
        self._warned_beyond = False
        self.last_report = time.monotonic()
        self.held = -1  # what it held on connecting (its first report, at most this master's end)
        self.delivery = Delivery(writer.transport.get_write_buffer_size)
        self.next_transfer = -1
        self._reported = asyncio.Event()
        self.new_data = asyncio.Event()  # set by the server on each dispatched record
        self._tasks: list[asyncio.Task] = []

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        self.writer.close()

    async def serve(self) -> None:
        try:
            pending = await self._opening()
            if pending is None or not self.server.admit(self):
                return
            tasks = self._tasks = [
                asyncio.create_task(self._read_reports(pending)),
                asyncio.create_task(self._transfer()),
            ]
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.info("slave %s disconnected (%s)", self.address, exc)
        except HAProtocolError as exc:
            log.warning("slave %s refused: %s", self.address, exc)
        except Exception:
            log.exception("replication to slave %s failed", self.address)
        finally:
            for task in self._tasks:
                task.cancel()
            self.writer.close()

    async def _read_exactly(self, size: int, what: str) -> bytes:
        timeout = self.server.store.config.ha_housekeeping_interval / 1000
        try:
            return await asyncio.wait_for(self.reader.readexactly(size), timeout)
        except TimeoutError:
            raise HAProtocolError(f"sent no {what} within {timeout:g} s (haHousekeepingInterval)") from None

    async def _open(self) -> bytes | None:
        """The connection's opening: the sign-in (when the slave sends one; required where the
        policy asks for it), then controller mode's handshake. The first report when it was read
        already (else b""); None when the handshake was refused."""
        first = await self._read_exactly(REPORT.size, "report or handshake")
        if HELLO.unpack(first)[0] == HELLO_MAGIC:
            await self._sign_in(first)
            first = b""
        elif self.server.auth is not None and self.server.auth.required:
            raise HAProtocolError(
                f"sent no HA sign-in, and this master requires one ({self.server.auth.describe}): "
                "nothing streamed"
            )
        if self.server.epochs is None:
            return first
        # Without a sign-in, the handshake's first 8 bytes were read already.
        handshake = first + await self._read_exactly(HANDSHAKE.size - len(first), "handshake")
        return b"" if await self._handshake(handshake) else None

    async def _opening(self) -> bytes | None:
        """``_open`` within ``OPENING_DEADLINE`` of accept (``admission``); None: refused, or late."""
        try:
            return await asyncio.wait_for(self._open(), OPENING_DEADLINE)
        except TimeoutError:
            log.info("HA connection %s did not open within %g s of connecting: closed",
                     self.address, OPENING_DEADLINE)  # fmt: skip
            return None

    async def _read_reports(self, pending: bytes) -> None:
        config = self.server.store.config
        while True:
            if pending:
                data, pending = pending, b""
            else:
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
            self._take_report(offset)

    def _take_report(self, offset: int) -> None:
        """A report: where to stream from (the first), and what the slave confirms — never more
        than it can hold: what it said it had on connecting, up to this master's end at that time,
        and the bytes this connection handed to its socket since (not those still in the
        transport's buffer). Anything beyond is not counted (a slave ahead of this master cuts its
        tail first; anyone else is lying)."""
        self.last_report = time.monotonic()
        if self.request_offset < 0:
            self.request_offset = offset
            self.held = min(offset, self.server.store.max_physic_offset)
            self._reported.set()
        confirmable = max(self.held, self.delivery.delivered())
        if offset > confirmable:
            if not self._warned_beyond:
                self._warned_beyond = True
                log.warning("slave %s confirmed offset %d, beyond what it can hold (%d): not counted",
                            self.address, offset, confirmable)  # fmt: skip
            return
        self.ack_offset = offset
        self.server.slave_acked(self, offset)

    async def _sign_in(self, hello: bytes) -> None:
        """The slave's sign-in (``auth``): challenged, checked, answered; HAProtocolError when
        refused (the connection is closed, nothing streamed)."""
        policy = self.server.auth
        if HELLO.unpack(hello)[1] != PROTOCOL_VERSION:
            raise HAProtocolError(f"HA sign-in of version {HELLO.unpack(hello)[1]}, not {PROTOCOL_VERSION}")
        required = policy is not None and policy.required
        challenge, nonce = new_challenge(required)
        self.writer.write(challenge)
        await self.writer.drain()
        if policy is None or not required:
            return
        try:
            sign_in = await read_sign_in(self._read_exactly)
        except HAAuthError as exc:
            raise HAProtocolError(f"HA sign-in refused: {exc}") from None
        status = verify(policy, sign_in, nonce)
        if status == AUTH_OK and self.server.full:
            status = REFUSED_FULL  # said, so that the slave's haLastError tells why
        self.writer.write(answer_frame(status))
        await self.writer.drain()
        if status != AUTH_OK:
            raise HAProtocolError(refused_why(policy, sign_in, status))
        self.authenticated, self.broker_id = True, sign_in.broker_id
        log.info("slave %s signed in as brokerId %d of %s (%s)", self.address, sign_in.broker_id,
                 sign_in.broker_name, policy.describe)  # fmt: skip

    async def _handshake(self, data: bytes) -> bool:
        """Controller mode: the slave's handshake answered; False when refused."""
        epochs = self.server.epochs
        assert epochs is not None
        magic, version, _flags, broker_id, max_offset, last_epoch = HANDSHAKE.unpack(data)
        if magic != HANDSHAKE_MAGIC or version != HANDSHAKE_VERSION:
            raise HAProtocolError(
                f"slave {self.address} sent no controller-mode handshake (magic {magic:#x}, version "
                f"{version}): is it running without enableControllerMode?"
            )
        if broker_id < 0 or max_offset < 0 or last_epoch < 0:
            raise HAProtocolError(
                f"slave {self.address} handshake out of range: brokerId {broker_id}, offset "
                f"{max_offset}, epoch {last_epoch}"
            )
        self._check_claimed_id(broker_id)
        store, own_epoch = self.server.store, epochs.last_epoch()
        self.broker_id = broker_id
        if last_epoch > own_epoch:
            log.warning(
                "slave %s (brokerId %d) refused: its last epoch %d is above this master's %d, so "
                "this master has been replaced and must not lead it",
                self.address, broker_id, last_epoch, own_epoch,
            )  # fmt: skip
            self.writer.write(
                HANDSHAKE_ANSWER.pack(HANDSHAKE_MAGIC, HANDSHAKE_VERSION, STATUS_STALE_MASTER, 0, 0, 0)
            )
            await self.writer.drain()
            return False
        entries = epochs.entries()
        answer = HANDSHAKE_ANSWER.pack(
            HANDSHAKE_MAGIC, HANDSHAKE_VERSION, STATUS_OK, store.max_physic_offset,
            store.min_physic_offset, len(entries),
        )  # fmt: skip
        self.writer.write(answer + b"".join(EPOCH_ITEM.pack(e.epoch, e.start_offset) for e in entries))
        await self.writer.drain()
        log.info(
            "slave %s (brokerId %d, offset %d, epoch %d) handshake answered with %d epochs, max offset %d",
            self.address, broker_id, max_offset, last_epoch, len(entries), store.max_physic_offset,
        )  # fmt: skip
        return True

    def _check_claimed_id(self, broker_id: int) -> None:
        """A handshake's brokerId must be the one signed in with, and one this master expects."""
        if self.authenticated and broker_id != self.broker_id:
            raise HAProtocolError(f"signed in as brokerId {self.broker_id}, handshake says {broker_id}")
        policy = self.server.auth
        why = policy.expects(None, broker_id) if policy is not None else None
        if why is not None:
            raise HAProtocolError(f"handshake as brokerId {broker_id} refused: {why}")

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
            batch, tag = config.ha_transfer_batch_size, None
            if self.server.epochs is not None:
                tag = self.server.epochs.span_of(self.next_transfer)
                batch = min(batch, tag[2] - self.next_transfer)
            data = store.commit_log_data(self.next_transfer, batch)
            now = time.monotonic()
            if data:
                frame = self._header(len(data), tag) + data
                writer.write(frame)
                self.next_transfer += len(data)
                self.delivery.wrote(len(frame), self.next_transfer)
            elif now - last_write >= config.ha_send_heartbeat_interval / 1000:
                frame = self._header(0, tag)
                writer.write(frame)
                self.delivery.wrote(len(frame))
            else:
                try:
                    await asyncio.wait_for(self.new_data.wait(), config.ha_send_heartbeat_interval / 1000)
                except TimeoutError:
                    pass
                continue
            last_write = now
            await writer.drain()

    def _header(self, size: int, tag: tuple[int, int, int] | None) -> bytes:
        if tag is None:
            return TRANSFER_HEADER.pack(self.next_transfer, size)
        return EPOCH_TRANSFER_HEADER.pack(self.next_transfer, size, tag[0], tag[1])


class HAServer:
    """The HA port of a master: every connected slave, and how far each has confirmed."""

    def __init__(
        self,
        store: MessageStore,
        host: str,
        port: int,
        *,
        epochs: EpochFile | None = None,
        auth: HAAuthPolicy | None = None,
        tls: TlsAcceptor | None = None,
    ) -> None:
        self.store = store
        self.host, self.port = host, port
        # Who may replicate (None: anyone, as RocketMQ's HA port), and the port's TLS (the
        # broker's tls.server.* settings; None: plaintext).
        self.auth = auth
        self.tls = tls
        # Controller mode: this broker's epoch list (None: RocketMQ's classic HA protocol).
        self.epochs = epochs
        self._ack_waiters: list[AckWaiter] = []
        self.connections: list[HAConnection] = []  # opened: the slaves
        self.pending = PendingPool()  # accepted, not opened yet
        self._server: asyncio.Server | None = None
        self._listening = False
        # The furthest offset any slave has confirmed (RocketMQ's push2SlaveMaxOffset).
        self.push_to_slave_max_offset = 0
        # SYNC_MASTER: sends waiting for a slave, by end offset (appends come in offset order).
        self._waiting: deque[tuple[int, asyncio.Future[PutMessageStatus]]] = deque()

    @property
    def listening(self) -> bool:
        return self._server is not None

    async def start(self) -> int:
        loop = asyncio.get_running_loop()

        def plain() -> asyncio.Protocol:
            return asyncio.StreamReaderProtocol(asyncio.StreamReader(), self._accept)

        if self.tls is None:
            factory = plain
        else:  # the pending pool (admission.py) bounds connections here, not a per-address gate
            from broker.remoting.tls import UNGATED

            factory = self.tls.wrap(lambda _host: plain(), UNGATED)
        self._server = await loop.create_server(factory, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("HA port %s:%d accepts slaves", self.host, self.port)
        return self.port

    @property
    def full(self) -> bool:
        return len(self.connections) >= MAX_CONNECTIONS

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = HAConnection(self, reader, writer)
        log.info("HA connection from %s", connection.address)
        self.pending.add(connection)  # may close the oldest pending one
        try:
            await connection.serve()
        finally:
            self.pending.discard(connection)
            if connection in self.connections:
                self._left(connection)

    def _left(self, connection: HAConnection) -> None:
        self.connections.remove(connection)
        self._listen_for_data()
        while not self.connections and self._waiting:  # nobody left to confirm them
            time_out(self._waiting.popleft()[1])
        if connection.broker_id != UNKNOWN_BROKER_ID:
            log.info("slave brokerId %d (%s) disconnected", connection.broker_id, connection.address)

    def admit(self, connection: HAConnection) -> bool:
        """An opened connection takes a slave's place; False (refused) when all are taken: each
        streams the whole log, and a flood of them must not take the broker down."""
        self.pending.discard(connection)
        if self.full:
            log.warning("HA port: %d slaves connected already, %s refused", len(self.connections),
                        connection.address)  # fmt: skip
            return False
        self.connections.append(connection)
        self._listen_for_data()
        return True

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
        if self._ack_waiters:
            self._wake_ack_waiters()

    # -- which slave confirmed what (controller mode's in-sync set) ------------------------------
    def slaves(self) -> list[SlaveProgress]:
        """Every connected slave: brokerId, address, confirmed offset, when it last reported."""
        return [SlaveProgress(c.broker_id, c.address, c.ack_offset, c.last_report) for c in self.connections]

    def acked_offsets(self) -> dict[int, int]:
        """The furthest offset each brokerId confirmed, over its connections (a reconnecting
        slave may briefly have two)."""
        acked: dict[int, int] = {}
        for c in self.connections:
            if c.broker_id != UNKNOWN_BROKER_ID and c.ack_offset > acked.get(c.broker_id, -1):
                acked[c.broker_id] = c.ack_offset
        return acked

    def _all_acked(self, offset: int, broker_ids: frozenset[int]) -> bool:
        acked = self.acked_offsets()
        return all(acked.get(broker_id, -1) >= offset for broker_id in broker_ids)

    def _wake_ack_waiters(self) -> None:
        waiting = []
        for waiter in self._ack_waiters:
            if waiter.future.done():
                continue
            if self._all_acked(waiter.offset, waiter.broker_ids):
                waiter.future.set_result(PutMessageStatus.PUT_OK)
            else:
                waiting.append(waiter)
        self._ack_waiters = waiting

    def wait_for_in_sync(
        self, end_offset: int, broker_ids: frozenset[int] | set[int]
    ) -> PutMessageStatus | asyncio.Future[PutMessageStatus]:
        """A stored message's status when every slave in ``broker_ids`` (the in-sync set without
        this master) must have it (RocketMQ's allAckInSyncStateSet): PUT_OK when all have
        confirmed ``end_offset`` (at once with no slave listed); else a future resolved to PUT_OK
        when the last of them confirms, or to FLUSH_SLAVE_TIMEOUT after ``slaveTimeout``.
        Usable as the store's ``replica_wait`` with the set bound in (functools.partial)."""
        ids = frozenset(broker_ids)
        if self._all_acked(end_offset, ids):
            return PutMessageStatus.PUT_OK
        loop = asyncio.get_running_loop()
        future: asyncio.Future[PutMessageStatus] = loop.create_future()
        self._ack_waiters.append(AckWaiter(end_offset, ids, future))
        loop.call_later(self.store.config.slave_timeout / 1000, time_out, future)
        for connection in self.connections:  # stream it now rather than at the next wake-up
            connection.new_data.set()
        return future

    async def wait_for_slaves(
        self, offset: int, broker_ids: frozenset[int] | set[int], timeout: float
    ) -> bool:
        """Whether every slave in ``broker_ids`` confirmed ``offset`` within ``timeout`` seconds."""
        outcome = self.wait_for_in_sync(offset, broker_ids)
        if isinstance(outcome, PutMessageStatus):
            return outcome is PutMessageStatus.PUT_OK
        try:
            return await asyncio.wait_for(asyncio.shield(outcome), timeout) is PutMessageStatus.PUT_OK
        except TimeoutError:
            return False
        finally:
            if not outcome.done():
                outcome.set_result(PutMessageStatus.FLUSH_SLAVE_TIMEOUT)

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
        loop.call_later(config.slave_timeout / 1000, time_out, future)
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
            # What a slave must sign in with ("nothing": the port is open).
            "haSignIn": self.auth.describe if self.auth is not None and self.auth.required else "nothing",
            "haSlaveCount": str(len(confirmed)),
            "haPushToSlaveMaxOffset": str(self.push_to_slave_max_offset),
            # Bytes the furthest slave lacks, and the age of the oldest message it lacks (-1 when
            # no slave is connected).
            "haSlaveBehindBytes": str(end - furthest) if confirmed else "-1",
            "haSlaveBehindMillis": str(self.behind_millis(furthest)) if confirmed else "-1",
            "haSlaveAckOffsets": ";".join(f"{addr}={offset}" for addr, offset in sorted(confirmed.items())),
        }

    async def stop(self) -> None:
        """Close the port and every connection; ``start`` may open it again (a role switch)."""
        while self._waiting:
            time_out(self._waiting.popleft()[1])
        for waiter in self._ack_waiters:
            time_out(waiter.future)
        self._ack_waiters = []
        if self._server is not None:
            self._server.close()
        if self.tls is not None:
            self.tls.close()
        for connection in [*self.connections, *self.pending.all()]:
            connection.close()
        # Until every connection has stopped reading the store, which is shut down next.
        deadline = time.monotonic() + 5
        while self.connections and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
