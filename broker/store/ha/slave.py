"""The slave side of replication: ``HAClient`` follows the master's commit log (RocketMQ's
HAClient, on asyncio).

It connects to the master's HA address — ``haMasterAddress`` when set, else the one the name
server answers a registration with — reports its commit-log max offset, appends every transfer
at the offset the master names (``broker/store/replica.py``), reports again after each batch and
every ``haSendHeartbeatInterval``, and drops a master silent for ``haHousekeepingInterval``.

What the master names decides what happens:
- its offset is this log's end: append the body;
- it is below this log's end: this slave holds a tail its master does not have — it is cut there
  (logged with both offsets and the bytes dropped) and replication follows;
- it is beyond this log's end: a gap no append can fill — the connection is dropped and the
  error logged and kept as a figure, retried every 5 s (RocketMQ's wait after a failure).

Nothing received is trusted further than that: a body size above ``MAX_TRANSFER_BODY`` or bytes
that are no records close the connection.

Controller mode (``epochs`` given: RocketMQ 5's AutoSwitchHAClient) starts each connection with a
handshake (``protocol``): this broker's brokerId, max offset and last epoch go to the master, its
epoch entries and offsets come back. The point where the two logs stop agreeing
(``EpochFile.find_consistent_point``: the newest epoch both hold, to the nearer of its two ends)
is where this log, its consume queues and index (``ReplicaLog.truncate``) and its epoch list are
cut — whether the divergent tail is shorter or longer than what the new master wrote since. The
master's entries up to that point are adopted, the later ones arrive with the bytes (each
transfer names its epoch). Sharing no epoch with the master (or needing bytes it no longer holds)
drops the whole log, which is then copied from the master's oldest offset. A master that refuses
this broker (its epoch is older than this broker's: it has been replaced) is logged and retried.
``update_master_address`` ends the current connection, so the next one handshakes with the new
master.

Given ``credentials``, each connection opens with the sign-in (``auth``) before anything else; a
refusal is logged and kept as the figure (``haLastError``), and retried. Given ``ssl_context``,
the connection is TLS, the master's certificate checked against the HA address's host.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from typing import TYPE_CHECKING

from broker.common.epoch_entries import MAX_ENTRIES
from broker.store.mapped_file import SegmentAllocationError
from broker.store.replica import ReplicationError

from .auth import (
    ANSWER,
    CHALLENGE,
    HELLO,
    HELLO_MAGIC,
    PROTOCOL_VERSION,
    HACredentials,
    refusal_text,
    sign_in_frame,
)
from .auth import OK as SIGNED_IN
from .auth import OPEN as CHALLENGE_OPEN
from .epochs import MAX_EPOCH, EpochFileError, as_entries, validated
from .protocol import (
    EPOCH_ITEM,
    EPOCH_TRANSFER_HEADER,
    HANDSHAKE,
    HANDSHAKE_ANSWER,
    HANDSHAKE_MAGIC,
    HANDSHAKE_VERSION,
    MAX_TRANSFER_BODY,
    REPORT,
    STATUS_OK,
    STATUS_STALE_MASTER,
    TRANSFER_HEADER,
    HAProtocolError,
    parse_host_port,
)

if TYPE_CHECKING:
    from broker.common.epoch_entries import EpochEntry
    from broker.store.message_store import MessageStore

    from .epochs import EpochFile

log = logging.getLogger(__name__)

NO_SIGN_IN_HINT = (
    "; if the master asks for an HA sign-in, give this slave its haAuthSecret (or, with ACL on "
    "the master, innerAccessKey/innerSecretKey)"
)
RETRY_INTERVAL_S = 5.0  # RocketMQ's HAClient waits 5 s after a failed connection or transfer
CONNECT_TIMEOUT_S = 3.0


class HAClient:
    def __init__(
        self,
        store: MessageStore,
        static_master: str = "",
        *,
        epochs: EpochFile | None = None,
        broker_id: int = 0,
        credentials: HACredentials | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.store = store
        # What this slave signs in with (``auth``; None: it does not), and TLS to the master.
        self.credentials = credentials
        self.ssl_context = ssl_context
        # Controller mode: this broker's epoch list and brokerId (None: RocketMQ's classic HA).
        self.epochs = epochs
        self.broker_id = broker_id
        # haMasterAddress wins over what the name server says (RocketMQ: then the registration
        # answer no longer updates it).
        self.static_master = static_master
        self.master_address = static_master
        self.connected = False
        self.connect_failures = 0
        self.last_error = ""
        self.master_offset = -1  # where the master's latest frame said it was
        self.last_read = 0.0
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._last_logged = 0.0
        self._writer: asyncio.StreamWriter | None = None  # the current connection's
        self.handshakes = 0  # controller mode: handshakes completed
        self.signed_in = 0  # sign-ins the master accepted
        self.last_cut = -1  # where the latest handshake cut this log (-1: it cut nothing)

    # -- where the master is -------------------------------------------------------------------
    def update_master_address(self, ha_address: str) -> None:
        """The master's HA address from a registration answer (ignored with haMasterAddress)."""
        if self.static_master or not ha_address or ha_address == self.master_address:
            return
        log.info("master HA address: %s (was %s)", ha_address, self.master_address or "unknown")
        self.master_address = ha_address
        self._wake.set()
        if self._writer is not None:  # the old master's connection ends; the new one handshakes
            self._writer.close()

    # -- life cycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Follow the master (again after ``stop``: a role switch back to slave)."""
        if self._task is not None and not self._task.done():
            return
        self._stopping = False
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        self._stopping = True
        task = self._task
        if task is None:
            return
        # On Python 3.11, asyncio.wait_for swallows a cancellation that arrives as the read it
        # waits on fails (the master closing the connection as both are stopped at once): the
        # loop below would then retry forever. So cancel until the task has ended, and the run
        # loop also stops at its next turn.
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=0.1)
        if not task.cancelled() and task.exception() is not None:
            log.warning("the replication client ended with an error: %s", task.exception())

    async def _run(self) -> None:
        first = True
        while not self._stopping:
            self._wake.clear()  # before following: an address changed meanwhile is not missed
            address = self.master_address
            if address:
                await self._follow(address)
            elif not first:  # the first registration answer may bring it: no complaint before
                self._failed("no master HA address yet: set haMasterAddress, or register the master "
                             "of this brokerName with the name servers")  # fmt: skip
            first = False
            if self._stopping:
                break
            try:
                await asyncio.wait_for(self._wake.wait(), RETRY_INTERVAL_S)
            except TimeoutError:
                pass

    def _failed(self, error: str) -> None:
        """A clear line in the log (at most every 5 s) and the figure, never a crash."""
        self.last_error = error
        now = time.monotonic()
        if now - self._last_logged >= RETRY_INTERVAL_S:
            self._last_logged = now
            log.error("replication from the master stopped: %s", error)

    async def _follow(self, address: str) -> None:
        try:
            host, port = parse_host_port(address)
            tls = self.ssl_context
            connecting = asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls else None)
            reader, writer = await asyncio.wait_for(connecting, CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError, ValueError) as exc:
            self.connect_failures += 1
            self._failed(f"cannot connect to the master's HA port {address}: {exc or type(exc).__name__}")
            return
        if address != self.master_address:  # changed while connecting: follow the new one
            writer.close()
            return
        log.info("connected to the master's HA port %s", address)
        self.last_read = time.monotonic()
        self._writer = writer
        reporter = None
        try:
            if self.credentials is not None:
                await self._sign_in(reader, writer)
            if self.epochs is not None:
                await self._handshake(reader, writer)
            self.connected, self.last_error = True, ""
            reporter = asyncio.create_task(self._report_periodically(writer))
            self._report(writer)
            await self._receive(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            if address != self.master_address:
                log.info("left the master %s for %s", address, self.master_address)
            else:
                hint = "" if self.credentials else NO_SIGN_IN_HINT
                self._failed(
                    f"the master {address} closed the connection ({exc or type(exc).__name__}){hint}"
                )
        except (HAProtocolError, ReplicationError, SegmentAllocationError, EpochFileError) as exc:
            self._failed(f"from {address}: {exc}")
        except OSError as exc:  # the epoch file could not be written (a full disk, say)
            self._failed(f"following {address}: {exc}")
        except Exception as exc:  # a bug: logged with its traceback, and retried rather than dead
            log.exception("replication from %s failed", address)
            self._failed(f"following {address}: {type(exc).__name__}: {exc}")
        finally:
            self.connected = False
            self._writer = None
            if reporter is not None:
                reporter.cancel()
            writer.close()

    # -- signing in (``auth``) ---------------------------------------------------------------------
    async def _sign_in(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """HELLO, the master's challenge, the signed answer; HAProtocolError when refused."""
        assert self.credentials is not None
        writer.write(HELLO.pack(HELLO_MAGIC, PROTOCOL_VERSION, 0))
        timeout = self.store.config.ha_housekeeping_interval / 1000
        try:
            magic, version, status, nonce = CHALLENGE.unpack(
                await asyncio.wait_for(reader.readexactly(CHALLENGE.size), timeout)
            )
            if magic != HELLO_MAGIC or version != PROTOCOL_VERSION:
                raise HAProtocolError("the master does not answer an HA sign-in (magic, version)")
            if status == CHALLENGE_OPEN:
                return  # an open port: nothing to prove
            writer.write(sign_in_frame(self.credentials, nonce))
            magic, version, status = ANSWER.unpack(
                await asyncio.wait_for(reader.readexactly(ANSWER.size), timeout)
            )
        except TimeoutError:
            raise HAProtocolError(f"no answer to the HA sign-in within {timeout:g} s") from None
        if magic != HELLO_MAGIC or status != SIGNED_IN:
            raise HAProtocolError(refusal_text(status))
        self.signed_in += 1

    # -- controller mode: where this log and the master's agree -----------------------------------
    async def _handshake(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        epochs, store = self.epochs, self.store
        assert epochs is not None
        mine = epochs.last_epoch()
        hello = HANDSHAKE.pack(
            HANDSHAKE_MAGIC, HANDSHAKE_VERSION, 0, self.broker_id, store.max_physic_offset, mine
        )
        writer.write(hello)
        timeout = store.config.ha_housekeeping_interval / 1000
        try:
            answer = await asyncio.wait_for(reader.readexactly(HANDSHAKE_ANSWER.size), timeout)
            magic, version, status, master_max, master_min, count = HANDSHAKE_ANSWER.unpack(answer)
            if magic != HANDSHAKE_MAGIC or version != HANDSHAKE_VERSION:
                raise HAProtocolError(
                    "the master does not answer a controller-mode handshake (is it running without "
                    "enableControllerMode?)"
                )
            if status == STATUS_STALE_MASTER:
                raise HAProtocolError(
                    f"the master refuses this slave: this broker's last epoch {mine} is above the "
                    "master's, so that master has been replaced"
                )
            if status != STATUS_OK:
                raise HAProtocolError(f"the master answered the handshake with status {status}")
            if not (0 <= count <= MAX_ENTRIES and 0 <= master_min <= master_max):
                raise HAProtocolError(
                    f"handshake answer out of range: {count} epochs, offsets {master_min}..{master_max}"
                )
            body = await asyncio.wait_for(reader.readexactly(count * EPOCH_ITEM.size), timeout)
        except TimeoutError:
            raise HAProtocolError(f"no handshake answer within {timeout:g} s") from None
        try:
            items = validated([EPOCH_ITEM.unpack_from(body, i * EPOCH_ITEM.size) for i in range(count)])
        except EpochFileError as exc:
            raise HAProtocolError(f"the master's epochs are no epoch list: {exc}") from None
        if items and items[-1][1] > master_max:
            raise HAProtocolError(
                f"the master's last epoch starts at {items[-1][1]}, beyond its end {master_max}"
            )
        self.master_offset, self.last_read = master_max, time.monotonic()
        self._align(as_entries(items), master_max, master_min)
        self.handshakes += 1

    def _align(self, theirs: tuple[EpochEntry, ...], master_max: int, master_min: int) -> None:
        """Cut this log where it stops agreeing with the master's, and take the master's epochs
        up to there."""
        epochs, store = self.epochs, self.store
        assert epochs is not None
        replica, end = store.replica_log(), store.max_physic_offset
        point = epochs.find_consistent_point(theirs, master_max, end)
        self.last_cut = -1
        if point < 0 or (point < master_min and store.commitlog.files.files):
            if store.commitlog.files.files:
                why = (
                    "shares no epoch with"
                    if point < 0
                    else f"agrees up to {point}, below the oldest offset of"
                )
                log.warning(
                    "this log (%d..%d, epochs %s) %s the master (epochs %s, %d..%d): it is dropped "
                    "and copied whole from the master",
                    store.min_physic_offset, end, _brief(epochs.entries()), why, _brief(theirs),
                    master_min, master_max,
                )  # fmt: skip
                replica.clear()
                self.last_cut = 0
            point = 0
        elif point < end:
            log.warning(
                "this log ends at %d, the master's agrees with it up to %d (epochs here %s, master %s): "
                "the %d bytes after are cut",
                end, point, _brief(epochs.entries()), _brief(theirs), end - point,
            )  # fmt: skip
            replica.truncate(point)
            self.last_cut = point
        else:
            log.info("this log (to %d) agrees with the master's (to %d): nothing to cut", end, master_max)
        kept = store.max_physic_offset
        epochs.replace_with(e for e in theirs if e.start_offset <= kept)

    def _report(self, writer: asyncio.StreamWriter) -> None:
        writer.write(REPORT.pack(self.store.max_physic_offset))

    async def _report_periodically(self, writer: asyncio.StreamWriter) -> None:
        while True:
            await asyncio.sleep(self.store.config.ha_send_heartbeat_interval / 1000)
            self._report(writer)

    async def _receive(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        replica, epochs = self.store.replica_log(), self.epochs
        frame = TRANSFER_HEADER if epochs is None else EPOCH_TRANSFER_HEADER
        epoch = epoch_start = 0
        while True:
            timeout = self.store.config.ha_housekeeping_interval / 1000
            try:
                header = await asyncio.wait_for(reader.readexactly(frame.size), timeout)
            except TimeoutError:
                raise HAProtocolError(
                    f"the master sent nothing for {timeout:g} s (haHousekeepingInterval)"
                ) from None
            if epochs is None:
                offset, size = TRANSFER_HEADER.unpack(header)
            else:
                offset, size, epoch, epoch_start = EPOCH_TRANSFER_HEADER.unpack(header)
                self._check_epoch(epochs, offset, epoch, epoch_start)
            if not 0 <= size <= MAX_TRANSFER_BODY or offset < 0:
                raise HAProtocolError(f"a transfer of {size} bytes at offset {offset}: connection closed")
            self.master_offset, self.last_read = offset + size, time.monotonic()
            end = self.store.max_physic_offset
            truncated = offset < end
            if truncated:
                replica.truncate(offset)  # a tail the master does not have
                end = self.store.max_physic_offset
                if epochs is not None:
                    epochs.truncate_suffix(end)
            if offset > end and self.store.commitlog.files.last_file is not None:
                raise ReplicationError(
                    f"the master sends from offset {offset} but this commit log ends at {end}: "
                    "the bytes between are on neither side"
                )
            if size:
                body = await asyncio.wait_for(reader.readexactly(size), timeout)
                replica.append(offset, body)
            if epochs is not None and epoch > epochs.last_epoch():
                epochs.append(epoch, epoch_start)  # the bytes from epoch_start on are that epoch's
            if size or truncated:
                self._report(writer)  # after a cut: tell the master where it left this log

    @staticmethod
    def _check_epoch(epochs: EpochFile, offset: int, epoch: int, epoch_start: int) -> None:
        if not 0 <= epoch <= MAX_EPOCH or not 0 <= epoch_start <= max(offset, 0):
            raise HAProtocolError(f"a transfer at {offset} tagged epoch {epoch} from {epoch_start}")
        if 0 < epoch < epochs.last_epoch():
            raise HAProtocolError(
                f"a transfer at {offset} written at epoch {epoch}, older than this broker's last "
                f"epoch {epochs.last_epoch()}"
            )

    # -- figures ---------------------------------------------------------------------------------
    def runtime_info(self) -> dict[str, str]:
        known = self.connected and self.master_offset >= 0
        behind = max(0, self.master_offset - self.store.max_physic_offset) if known else -1
        return {
            "haMasterAddress": self.master_address,
            "haMasterConnected": str(self.connected).lower(),
            "haConnectFailures": str(self.connect_failures),
            "haLastError": self.last_error,
            "haMasterOffset": str(self.master_offset),
            # Bytes the master said it had that this slave has not yet (-1 while not connected or
            # before the first frame).
            "haBehindMasterBytes": str(behind),
        }


def _brief(entries: tuple[EpochEntry, ...]) -> str:
    """Entries for a log line: the last few, as epoch@start."""
    shown = " ".join(f"{e.epoch}@{e.start_offset}" for e in entries[-5:])
    return ("... " if len(entries) > 5 else "") + (shown or "none")
