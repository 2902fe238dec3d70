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
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from broker.store.mapped_file import SegmentAllocationError
from broker.store.replica import ReplicationError

from .protocol import MAX_TRANSFER_BODY, REPORT, TRANSFER_HEADER, HAProtocolError, parse_host_port

if TYPE_CHECKING:
    from broker.store.message_store import MessageStore

log = logging.getLogger(__name__)

RETRY_INTERVAL_S = 5.0  # RocketMQ's HAClient waits 5 s after a failed connection or transfer
CONNECT_TIMEOUT_S = 3.0


class HAClient:
    def __init__(self, store: MessageStore, static_master: str = "") -> None:
        self.store = store
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

    # -- where the master is -------------------------------------------------------------------
    def update_master_address(self, ha_address: str) -> None:
        """The master's HA address from a registration answer (ignored with haMasterAddress)."""
        if self.static_master or not ha_address or ha_address == self.master_address:
            return
        log.info("master HA address: %s (was %s)", ha_address, self.master_address or "unknown")
        self.master_address = ha_address
        self._wake.set()

    # -- life cycle ------------------------------------------------------------------------------
    def start(self) -> None:
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
            address = self.master_address
            if address:
                await self._follow(address)
            elif not first:  # the first registration answer may bring it: no complaint before
                self._failed("no master HA address yet: set haMasterAddress, or register the master "
                             "of this brokerName with the name servers")  # fmt: skip
            first = False
            self._wake.clear()
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
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError, ValueError) as exc:
            self.connect_failures += 1
            self._failed(f"cannot connect to the master's HA port {address}: {exc or type(exc).__name__}")
            return
        log.info("connected to the master's HA port %s", address)
        self.connected, self.last_error, self.last_read = True, "", time.monotonic()
        reporter = asyncio.create_task(self._report_periodically(writer))
        try:
            self._report(writer)
            await self._receive(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            self._failed(f"the master {address} closed the connection ({exc or type(exc).__name__})")
        except (HAProtocolError, ReplicationError, SegmentAllocationError) as exc:
            self._failed(f"from {address}: {exc}")
        finally:
            self.connected = False
            reporter.cancel()
            writer.close()

    def _report(self, writer: asyncio.StreamWriter) -> None:
        writer.write(REPORT.pack(self.store.max_physic_offset))

    async def _report_periodically(self, writer: asyncio.StreamWriter) -> None:
        while True:
            await asyncio.sleep(self.store.config.ha_send_heartbeat_interval / 1000)
            self._report(writer)

    async def _receive(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        replica = self.store.replica_log()
        while True:
            timeout = self.store.config.ha_housekeeping_interval / 1000
            try:
                header = await asyncio.wait_for(reader.readexactly(TRANSFER_HEADER.size), timeout)
            except TimeoutError:
                raise HAProtocolError(
                    f"the master sent nothing for {timeout:g} s (haHousekeepingInterval)"
                ) from None
            offset, size = TRANSFER_HEADER.unpack(header)
            if not 0 <= size <= MAX_TRANSFER_BODY or offset < 0:
                raise HAProtocolError(f"a transfer of {size} bytes at offset {offset}: connection closed")
            self.master_offset, self.last_read = offset + size, time.monotonic()
            end = self.store.max_physic_offset
            truncated = offset < end
            if truncated:
                replica.truncate(offset)  # a tail the master does not have
                end = self.store.max_physic_offset
            if offset > end and self.store.commitlog.files.last_file is not None:
                raise ReplicationError(
                    f"the master sends from offset {offset} but this commit log ends at {end}: "
                    "the bytes between are on neither side"
                )
            if size:
                body = await asyncio.wait_for(reader.readexactly(size), timeout)
                replica.append(offset, body)
                self._report(writer)
            elif truncated:
                self._report(writer)  # tell the master where the cut left this log

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
