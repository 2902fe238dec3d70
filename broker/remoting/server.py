"""asyncio remoting server: a listening socket and a table of request processors."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable

from broker.common.connection_limits import ConnectionLimits

from .backlog_budget import BacklogBudget, PartialFrames
from .busy_poll import BusyPoll
from .command import RemotingCommand
from .connection import Handler, ProcessorTable, RemotingConnection
from .guards import ConnectionCap, IdleSweep, ensure_descriptors
from .tls import ServerTls, TlsAcceptor

log = logging.getLogger(__name__)
# Connections the kernel completes before the loop accepts them (RocketMQ's serverSocketBacklog,
# 1024). asyncio's default of 100 made a burst of 2,000 connects wait for SYN retries (7 s).
SOCKET_BACKLOG = 1024


class RemotingServer:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: ConnectionLimits | None = None,
        busy_poll_window_s: float = 0.0,
        tls: ServerTls | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.limits = limits or ConnectionLimits()
        self.processors = ProcessorTable()
        self.connections: set[RemotingConnection] = set()
        self.close_listeners: list[Callable[[RemotingConnection], None]] = []
        self._server: asyncio.AbstractServer | None = None
        self.busy_poll_window_s = busy_poll_window_s
        self.busy_poll: BusyPoll | None = None
        self.backlog_budget = BacklogBudget()  # every connection's unserved requests together
        self.partial_frames = PartialFrames(self.limits.max_partial_frame_bytes)  # and unfinished frames
        self.cap = ConnectionCap(self.limits.max_connections, self.limits.max_connections_per_address)
        self.idle_sweep: IdleSweep | None = None
        # TLS (permissive or enforcing): its context is built here, so a certificate that cannot
        # be loaded stops the process at start; None (disabled) leaves every connection as it was.
        self.tls = TlsAcceptor(tls, self.limits.max_connections) if tls is not None and tls.enabled else None

    def register_processor(self, code: int, handler: Handler) -> None:
        self.processors.register(code, handler)

    def register_default_processor(self, handler: Handler) -> None:
        self.processors.default = handler

    async def start(self) -> int:
        """Listen; return the bound port (useful with port 0)."""
        loop = asyncio.get_running_loop()
        if self.busy_poll_window_s > 0:
            self.busy_poll = BusyPoll(self.busy_poll_window_s, loop)
        ensure_descriptors(self.limits.max_connections)
        if self.limits.channel_max_idle_s > 0:
            self.idle_sweep = IdleSweep(loop, self.limits.channel_max_idle_s, lambda: self.connections)
        factory = self._new_connection if self.tls is None else self.tls.wrap(self._new_connection, self.cap)
        self._server = await loop.create_server(
            factory, self.host, self.port, reuse_address=True, backlog=SOCKET_BACKLOG
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def _new_connection(self, admitted_host: str | None = None) -> asyncio.Protocol:
        """``admitted_host``: the address whose place the TLS acceptor took at accept (see
        tls.AddressGate); the connection holds it until it closes."""
        if len(self.connections) >= self.limits.max_connections:
            self.cap.release(admitted_host)
            return self.cap.refusal(len(self.connections))
        connection = RemotingConnection(
            self.processors,
            self._connection_closed,
            self.limits.frame_max_length,
            self.busy_poll,
            serve_only_while_read=True,
            budget=self.backlog_budget,
            partial_frames=self.partial_frames,
            on_open=self._connection_opened,
        )
        connection.counted_host = admitted_host
        self.connections.add(connection)
        return connection

    def _connection_opened(self, connection: RemotingConnection) -> None:
        """A plaintext port knows the peer's address only now (a TLS port took its place at
        accept): over its address's cap, the connection is closed before it reads anything, and
        never counted as open."""
        if connection.counted_host is not None:
            return
        if self.cap.admit(connection.peer_host, len(self.connections)):
            connection.counted_host = connection.peer_host
            return
        self.connections.discard(connection)
        connection.on_close = None
        connection.close()

    def _connection_closed(self, connection: RemotingConnection) -> None:
        self.connections.discard(connection)
        # Once: a connection whose handshake failed hears connection_lost without connection_made.
        self.cap.release(connection.counted_host)
        connection.counted_host = None
        for listener in self.close_listeners:
            try:
                listener(connection)
            except Exception:
                log.exception("connection-closed listener failed")

    def waiting_requests(self) -> Counter:
        """Request code → how many requests of it are read but not served yet, over every connection."""
        waiting: Counter[int] = Counter()
        for connection in self.connections:
            waiting.update(connection.waiting_request_codes())
        return waiting

    async def invoke(self, connection: RemotingConnection, request: RemotingCommand, timeout_ms: int):
        """Send a request to a connected client and await its response."""
        return await connection.invoke(request, timeout_ms)

    async def stop(self) -> None:
        if self.busy_poll is not None:
            self.busy_poll.stop()
        if self.idle_sweep is not None:
            self.idle_sweep.stop()
            self.idle_sweep = None
        if self._server is not None:
            self._server.close()
            if self.tls is not None:
                self.tls.close()
            for connection in list(self.connections):
                connection.close()
            await self._server.wait_closed()
            self._server = None
