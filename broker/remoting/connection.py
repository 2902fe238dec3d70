"""One TCP connection speaking the remoting protocol, for servers and clients alike.

Both ends may send requests: the broker asks a producer about a transaction, a client answers
the broker's notification. Each incoming request runs as its own task, so a slow handler (a
held long-polling pull) never blocks the requests behind it on the same connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from .codes import ResponseCode
from .command import RemotingCommand, response_to
from .errors import FrameError, RemotingSendRequestError, RemotingTimeoutError
from .frame import DEFAULT_MAX_FRAME, FrameDecoder, encode_frame

log = logging.getLogger(__name__)

Handler = Callable[["RemotingConnection", RemotingCommand], Awaitable[RemotingCommand | None]]


class ProcessorTable:
    """Request code → handler, with a default for codes nobody registered."""

    def __init__(self) -> None:
        self.handlers: dict[int, Handler] = {}
        self.default: Handler | None = None

    def register(self, code: int, handler: Handler) -> None:
        self.handlers[int(code)] = handler

    def find(self, code: int) -> Handler | None:
        return self.handlers.get(code, self.default)


class RemotingConnection(asyncio.Protocol):
    def __init__(
        self,
        processors: ProcessorTable,
        on_close: Callable[[RemotingConnection], None] | None = None,
        max_frame: int = DEFAULT_MAX_FRAME,
    ) -> None:
        self.processors = processors
        self.on_close = on_close
        self.decoder = FrameDecoder(max_frame)
        self.transport: asyncio.Transport | None = None
        self.remote_addr = "?"
        self.pending: dict[int, asyncio.Future] = {}
        self.closed = asyncio.get_event_loop().create_future()
        self.attributes: dict = {}  # what the owner knows of the peer (client id, …)
        self._tasks: set[asyncio.Task] = set()

    # -- asyncio.Protocol --------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            host, port = peer[0], peer[1]
            self.remote_addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def data_received(self, data: bytes) -> None:
        try:
            commands = self.decoder.feed(data)
        except FrameError as exc:
            log.warning("closing the connection from %s: %s", self.remote_addr, exc)
            self.close()
            return
        for cmd in commands:
            if cmd.is_response:
                future = self.pending.pop(cmd.opaque, None)
                if future is not None and not future.done():
                    future.set_result(cmd)
            else:
                task = asyncio.ensure_future(self._handle(cmd))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def connection_lost(self, exc) -> None:
        for future in self.pending.values():
            if not future.done():
                future.set_exception(RemotingSendRequestError(self.remote_addr, "the connection was closed"))
        self.pending.clear()
        if not self.closed.done():
            self.closed.set_result(None)
        if self.on_close:
            self.on_close(self)

    # -- requests from the peer ---------------------------------------------------------------
    async def _handle(self, request: RemotingCommand) -> None:
        handler = self.processors.find(request.code)
        if handler is None:
            response = response_to(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                   f" request type {request.code} not supported")  # fmt: skip
        else:
            try:
                response = await handler(self, request)
            except asyncio.CancelledError:
                return
            except Exception as exc:
                log.exception("handler for request code %d failed", request.code)
                response = response_to(request, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if response is not None and not request.is_oneway:
            response.opaque = request.opaque
            response.serialize_type = request.serialize_type
            self.write(response)

    # -- sending ------------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def write(self, cmd: RemotingCommand) -> None:
        if not self.is_open:
            raise RemotingSendRequestError(self.remote_addr, "the connection is closed")
        self.transport.write(encode_frame(cmd))

    async def invoke(self, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.pending[request.opaque] = future
        # A plain timer on the future: cheaper than asyncio.wait_for, which wraps every request
        # in a task of its own.
        timer = loop.call_later(
            timeout_ms / 1000, _expire, future, self.remote_addr, timeout_ms, request.code
        )
        try:
            self.write(request)
            return await future
        finally:
            timer.cancel()
            self.pending.pop(request.opaque, None)

    def invoke_oneway(self, request: RemotingCommand) -> None:
        request.flag |= 0x2
        self.write(request)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _expire(future: asyncio.Future, addr: str, timeout_ms: int, code: int) -> None:
    if not future.done():
        future.set_exception(RemotingTimeoutError(addr, timeout_ms, code))
