"""Remoting clients: an asyncio one with a connection per address, and a blocking facade.

The SDK, the CLI and the console call brokers and name servers through these. Server-initiated
requests (the broker notifying a consumer) reach the processors registered here.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from broker.common.acl_signature import RequestSigner, SessionCredentials
from broker.common.hosts import HostPort, parse_host

from .command import RemotingCommand
from .connection import Handler, ProcessorTable, RemotingConnection
from .errors import RemotingConnectError
from .tls import PLAINTEXT, ClientTls, describe_connect_failure

T = TypeVar("T")

DEFAULT_TIMEOUT_MS = 3000
CONNECT_TIMEOUT_S = 3


def split_addr(addr: str) -> HostPort:
    try:
        return parse_host(addr)
    except ValueError:
        raise RemotingConnectError(addr, "the address must be host:port") from None


class RemotingClient:
    def __init__(
        self, credentials: SessionCredentials | None = None, *, tls: ClientTls | None = None
    ) -> None:
        """``credentials``: sign every request with this ACL account (RocketMQ's
        AclClientRPCHook); without, requests go unsigned. ``tls``: connect over TLS when it is
        enabled (plaintext without); a certificate file that cannot be loaded raises
        ``TlsConfigError`` here, not at the first request."""
        self.processors = ProcessorTable()
        self.tls = tls or PLAINTEXT
        self._ssl: ssl.SSLContext | None = self.tls.context()
        self.credentials = credentials
        self._signer = RequestSigner(credentials) if credentials is not None else None
        self._connections: dict[str, RemotingConnection] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def register_processor(self, code: int, handler: Handler) -> None:
        self.processors.register(code, handler)

    async def connection(self, addr: str) -> RemotingConnection:
        existing = self._connections.get(addr)
        if existing is not None and existing.is_open:
            return existing
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            existing = self._connections.get(addr)
            if existing is not None and existing.is_open:
                return existing
            host, port = split_addr(addr)
            loop = asyncio.get_running_loop()
            # TLS: the server's certificate is checked against ``host`` (an IP address matches
            # the certificate's IP entries).
            hostname = host if self._ssl is not None else None
            try:
                _, connection = await asyncio.wait_for(
                    loop.create_connection(
                        lambda: RemotingConnection(self.processors),
                        host,
                        port,
                        ssl=self._ssl,
                        server_hostname=hostname,
                    ),
                    CONNECT_TIMEOUT_S,
                )
            except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
                reason = describe_connect_failure(exc, self.tls) if self._ssl is not None else None
                raise RemotingConnectError(addr, reason or str(exc) or type(exc).__name__) from None
            connection.sign = self._signer
            self._connections[addr] = connection
            return connection

    def cached_connection(self, addr: str) -> RemotingConnection | None:
        """The open connection to ``addr`` if there is one (no connecting, no awaiting)."""
        existing = self._connections.get(addr)
        return existing if existing is not None and existing.is_open else None

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> RemotingCommand:
        connection = await self.connection(addr)
        return await connection.invoke(request, timeout_ms)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Returns once the request is written, or queued for writing while the peer keeps up."""
        connection = await self.connection(addr)
        connection.invoke_oneway(request)
        await connection.drain()

    def close_connection(self, addr: str) -> None:
        connection = self._connections.pop(addr, None)
        if connection is not None:
            connection.close()

    async def close(self) -> None:
        for connection in list(self._connections.values()):
            connection.close()
        self._connections.clear()


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (several times faster per request), else the standard loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class EventLoopThread:
    """An asyncio loop on a daemon thread, for blocking APIs over the async core."""

    def __init__(self, name: str = "remoting-loop") -> None:
        self.loop = _new_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)


class SyncRemotingClient:
    """Blocking calls over a ``RemotingClient`` that lives on its own loop thread."""

    def __init__(
        self, credentials: SessionCredentials | None = None, *, tls: ClientTls | None = None
    ) -> None:
        self._loop_thread = EventLoopThread("sync-remoting-client")
        try:
            self.client: RemotingClient = self._loop_thread.run(self._make(credentials, tls))
        except BaseException:  # TlsConfigError: no thread left behind
            self._loop_thread.stop()
            raise

    @staticmethod
    async def _make(credentials: SessionCredentials | None, tls: ClientTls | None) -> RemotingClient:
        return RemotingClient(credentials, tls=tls)

    def invoke(
        self, addr: str, request: RemotingCommand, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> RemotingCommand:
        return self._loop_thread.run(self.client.invoke(addr, request, timeout_ms))

    def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        self._loop_thread.run(self.client.invoke_oneway(addr, request))

    def close(self) -> None:
        try:
            self._loop_thread.run(self.client.close(), timeout=5)
        finally:
            self._loop_thread.stop()
