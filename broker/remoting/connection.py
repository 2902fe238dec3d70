"""One TCP connection speaking the remoting protocol, for servers and clients alike.

Both ends may send requests: the broker asks a producer about a transaction, a client answers
the broker's notification. A handler is either a coroutine function — the request then runs as
its own task, so a slow handler (a held long-polling pull) never blocks the requests behind it —
or a plain function that answers at once (a send on an ASYNC_FLUSH store) and may return an
awaitable when it has to wait after all; plain handlers cost no task and no extra loop turn. A
plain handler that returns None answers later, if at all, through ``send_response`` (a held
long-polling pull, answered when another connection's send stores a message).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from typing import cast

from broker.common.codes import ResponseCode
from broker.common.connection_limits import DEFAULT_FRAME_MAX_LENGTH
from broker.common.fastjson import JsonBodyError
from broker.common.request_headers.base import HeaderError

from .backlog_budget import BacklogBudget, PartialFrames
from .busy_poll import BusyPoll
from .command import RPC_ONEWAY, RPC_TYPE_RESPONSE, RemotingCommand, response_to
from .errors import FrameError, RemotingSendRequestError, RemotingTimeoutError
from .frame import FrameDecoder, encode_frame

log = logging.getLogger(__name__)
COMMANDS_PER_TURN = 16  # see RemotingConnection._take_turn
# A peer that sends faster than it is served (a flood of oneway sends, say) would otherwise have
# all it sent read into memory: a broker measured here held 400,000 unserved sends (1.1 GB) from
# four such clients. Reading stops once this many commands wait, or this many bytes were read
# since nothing waited, and starts again when all are served: TCP then holds the sender back, as
# a full socket buffer does. Nothing is refused or dropped (RocketMQ answers SYSTEM_BUSY when its
# send queue is full, which loses oneway sends).
MAX_BACKLOG_COMMANDS = 1024
MAX_BACKLOG_BYTES = 64 * 1024 * 1024
SWEEP_INTERVAL_S = 0.05  # how often waiting requests are checked against their deadlines

Handler = Callable[
    ["RemotingConnection", RemotingCommand],
    Awaitable[RemotingCommand | None] | RemotingCommand | None,
]


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
        max_frame_length: int = DEFAULT_FRAME_MAX_LENGTH,
        busy_poll: BusyPoll | None = None,
        serve_only_while_read: bool = False,
        budget: BacklogBudget | None = None,
        partial_frames: PartialFrames | None = None,
        on_open: Callable[[RemotingConnection], None] | None = None,
    ) -> None:
        self.processors = processors
        self.busy_poll = busy_poll  # shared by a server's connections: see busy_poll.py
        self.budget = budget  # a server's connections' backlogs together: see backlog_budget.py
        # A server's end: while the peer reads none of its answers (the transport's buffer over
        # its high-water mark), requests wait in the backlog instead of answers piling up in
        # memory — a client that pipelines pulls and never reads would otherwise be written
        # every answer. Not a client's end: it always reads its answers, or two ends that both
        # stopped would wait for each other.
        self.serve_only_while_read = serve_only_while_read
        self.on_close = on_close
        self.on_open = on_open  # a server's end: admits the peer (see guards.ConnectionCap) or closes
        self.decoder = FrameDecoder(max_frame_length)
        # A server's end: the unfinished frames of all its connections, bounded together.
        self.partial_frames = partial_frames
        self.partial_bytes = 0  # of this connection's unfinished frame, counted in partial_frames
        self.partial_progress = 0  # partial_frames.clock when that frame last grew
        # Reads so far: the server's idle sweep compares it with what it saw last time (cheaper
        # than reading a clock at every read).
        self.reads = 0
        self.answers_owed = 0  # requests a handler will answer later (held pulls): not idle
        self.transport: asyncio.Transport | None = None
        self.remote_addr = "?"
        self.peer_host: str | None = None  # the peer's address without its port
        self.counted_host: str | None = None  # the address whose place (per-address cap) it holds
        self.pending: dict[int, _FutureSlot | _CallbackSlot] = {}  # by opaque, until answered
        self._sweeper: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_event_loop()
        self.closed = self._loop.create_future()
        self._outgoing: list[bytes] = []
        self._reading = False  # inside _take_turn: the replies it produces leave together at its end
        self._corked = False  # a frame left at once this turn: the next ones wait for the next turn
        self._backlog: collections.deque[RemotingCommand] = collections.deque()  # received, not handled
        self._backlog_bytes = 0  # read since the backlog was last empty
        self.reading_paused = False  # the backlog is full: see MAX_BACKLOG_COMMANDS
        self._turn_scheduled = False
        self.attributes: dict = {}  # what the owner knows of the peer (client id, …)
        self._tasks: set[asyncio.Task] = set()
        self._writable: asyncio.Future | None = None  # while the transport's buffer is too full
        # A client's end with ACL credentials: signs every request it writes (see
        # broker.common.acl_signature.RequestSigner); None costs a server or an unsigned client
        # one test per request.
        self.sign: Callable[[RemotingCommand], None] | None = None

    # -- asyncio.Protocol --------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            host, port = peer[0], peer[1]
            self.peer_host = host
            self.remote_addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if self.on_open is not None:
            self.on_open(self)

    def data_received(self, data: bytes) -> None:
        self.reads += 1
        decoder = self.decoder
        try:
            commands = decoder.feed(data)
        except FrameError as exc:
            log.warning("closing the connection from %s: %s", self.remote_addr, exc)
            self._forget_unfinished_frame()
            self.close()
            return
        if decoder.refused:
            self._answer_refused()
        backlog, budget = self._backlog, self.budget
        if not backlog and self._backlog_bytes:  # (a partial frame read before)
            self._forget_backlog_bytes()
        self._backlog_bytes += len(data)
        backlog.extend(commands)
        if budget is not None:
            budget.bytes += len(data)
            budget.commands += len(commands)
        if self.busy_poll is not None:
            self.busy_poll.touch()
        if not self._turn_scheduled:
            self._take_turn()
        if backlog and (
            len(backlog) >= MAX_BACKLOG_COMMANDS
            or self._backlog_bytes >= MAX_BACKLOG_BYTES
            or (budget is not None and budget.exhausted())
        ):
            self._pause_reading()
        if self.partial_frames is not None and decoder.pending_bytes != self.partial_bytes:
            self._count_unfinished_frame(decoder.pending_bytes)

    def _count_unfinished_frame(self, pending: int) -> None:
        """This connection's unfinished frame grew, or finished: the server's total follows, and
        past its limit the frames that progressed least recently are dropped (PartialFrames)."""
        partial = self.partial_frames
        assert partial is not None  # (the caller checks)
        partial.bytes += pending - self.partial_bytes
        self.partial_bytes = pending
        if not pending:
            partial.holders.discard(self)
            return
        partial.clock += 1
        self.partial_progress = partial.clock
        partial.holders.add(self)
        if partial.bytes > partial.max_bytes:
            partial.evict()

    def _forget_unfinished_frame(self) -> None:
        self.decoder.discard()
        partial = self.partial_frames
        if partial is not None and self.partial_bytes:
            partial.bytes -= self.partial_bytes
            partial.holders.discard(self)
        self.partial_bytes = 0

    def drop_unfinished_frame(self, reason: str) -> None:
        """Too many bytes of unfinished frames over the server: close this connection, whose frame
        is one of those that progressed least recently (its memory is freed at once)."""
        log.warning("closing the connection from %s: %s", self.remote_addr, reason)
        self._forget_unfinished_frame()
        self.close()

    def _answer_refused(self) -> None:
        """Answer each request whose header held an unusable value with SYSTEM_ERROR and what was
        wrong (the decoder could read its opaque, so the client can match the answer)."""
        refused, self.decoder.refused = self.decoder.refused, []
        for opaque, serialize_type, reason in refused:
            log.warning("refused a request from %s: %s", self.remote_addr, reason)
            answer = RemotingCommand(
                ResponseCode.SYSTEM_ERROR, flag=RPC_TYPE_RESPONSE, opaque=opaque, remark=reason,
                serialize_type=serialize_type,
            )  # fmt: skip
            self._queue_frame(encode_frame(answer))

    def is_waiting(self) -> bool:
        """Whether something is in flight: requests read and not answered (a held pull, a handler
        at work) or requests of ours awaiting the peer's answer. Such a connection is not idle."""
        return bool(self._backlog or self._tasks or self.pending or self.answers_owed > 0)

    def _forget_backlog_bytes(self) -> None:
        """The backlog is empty: what was read into it no longer counts."""
        if self.budget is not None:
            self.budget.bytes -= self._backlog_bytes
        self._backlog_bytes = 0

    def _drop_backlog(self) -> None:
        """The peer is gone: nobody to answer what still waits."""
        if self.budget is not None:
            self.budget.commands -= len(self._backlog)
        self._backlog.clear()
        self._forget_backlog_bytes()

    def _take_turn(self) -> None:
        """Handle up to ``COMMANDS_PER_TURN`` received commands, send what they produced, and
        leave the rest to the next turn of the loop.

        A read may hold a hundred pipelined requests (or responses). Handled all at once, the
        peer hears nothing until the last is done and then has nothing to do while we work on
        its next burst: the two ends take turns instead of working at the same time. In groups,
        the first answers leave (and the peer sends more work) while later ones are served —
        and other connections get their turn in between."""
        self._turn_scheduled = False
        backlog = self._backlog
        if self.closed.done():
            self._drop_backlog()
            return
        if self._writable is not None and self.serve_only_while_read:
            return  # resume_writing takes the turn
        self._reading = True
        served = 0
        try:
            for _ in range(min(len(backlog), COMMANDS_PER_TURN)):
                cmd = backlog.popleft()
                served += 1
                if cmd.flag & RPC_TYPE_RESPONSE:  # ``is_response``, inline: every command
                    slot = self.pending.pop(cmd.opaque, None)
                    if slot is not None:
                        slot.set_result(cmd)
                else:
                    self._serve(cmd)
        finally:
            self._reading = False
            if self.budget is not None:
                self.budget.commands -= served
            if not backlog:
                self._forget_backlog_bytes()
            if backlog and not self._turn_scheduled and not self.closed.done():
                self._turn_scheduled = True
                self._loop.call_soon(self._take_turn)
        if self._outgoing:
            self._send_outgoing()
        if self.reading_paused and not backlog:
            self._resume_reading()

    def _pause_reading(self) -> None:
        transport = self.transport
        if not self.reading_paused and transport is not None and not transport.is_closing():
            self.reading_paused = True
            transport.pause_reading()

    def _resume_reading(self) -> None:
        self.reading_paused = False
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.resume_reading()

    def connection_lost(self, exc) -> None:
        self._forget_unfinished_frame()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        waiting, self.pending = list(self.pending.values()), {}
        for slot in waiting:
            slot.set_exception(RemotingSendRequestError(self.remote_addr, "the connection was closed"))
        if not self.closed.done():
            self.closed.set_result(None)
        self._drop_backlog()
        self.resume_writing()  # whoever waits to write hears of the end at its next write
        if self.on_close:
            self.on_close(self)

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        waiter, self._writable = self._writable, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self._backlog and not self._turn_scheduled and not self.closed.done():
            self._turn_scheduled = True  # requests held while the peer read nothing
            self._loop.call_soon(self._take_turn)

    def waiting_request_codes(self) -> list[int]:
        """The codes of the requests read but not served yet (a burst's later ones)."""
        return [cmd.code for cmd in self._backlog if not cmd.is_response]

    # -- requests from the peer ---------------------------------------------------------------
    def _serve(self, request: RemotingCommand) -> None:
        processors = self.processors
        handler = processors.handlers.get(request.code, processors.default)  # ``find``, inline: every request
        if handler is None:
            self._reply(request, response_to(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                              f" request type {request.code} not supported"))  # fmt: skip
            return
        try:
            outcome = handler(self, request)
        except Exception as exc:
            outcome = failure_response(request, exc)
        if outcome is None or type(outcome) is RemotingCommand:
            self._reply(request, outcome)
            return
        # What is left is an awaitable (``type() is`` above is cheaper than isinstance, but mypy
        # does not narrow by it).
        task = asyncio.ensure_future(
            self._finish(request, cast("Awaitable[RemotingCommand | None]", outcome))
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, request: RemotingCommand, pending: Awaitable) -> None:
        try:
            response = await pending
        except asyncio.CancelledError:
            return
        except Exception as exc:
            response = failure_response(request, exc)
        self._reply(request, response)

    def _reply(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        if response is None or request.flag & RPC_ONEWAY:
            if response is None and not request.flag & RPC_ONEWAY:
                self.answers_owed += 1  # answered later through send_response
            return
        transport = self.transport
        if transport is not None and not transport.is_closing():
            response.opaque = request.opaque
            response.serialize_type = request.serialize_type
            try:
                frame = encode_frame(response)
            except Exception as exc:  # e.g. a header number no Java peer could read
                frame = encode_frame(failure_response(request, exc))
            self._queue_frame(frame)

    def send_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Answer ``request`` later, from outside its handler (a held pull woken by a message
        another connection sent): written at once, as any frame sent outside a turn."""
        if not request.flag & RPC_ONEWAY:
            self.answers_owed -= 1
        self._reply(request, response)

    # -- sending ------------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def write(self, cmd: RemotingCommand) -> None:
        if not self.is_open:
            raise RemotingSendRequestError(self.remote_addr, "the connection is closed")
        if self.sign is not None:
            self.sign(cmd)
        self._queue_frame(encode_frame(cmd))

    def _queue_frame(self, frame: bytes) -> None:
        # A frame sent while nothing else is being sent leaves at once: a lone request (a sync
        # send, a consumer's next pull) or a held pull's answer does not wait a turn of the loop.
        # It corks the connection until the loop's next turn: the frames that follow it in this
        # turn (a burst of async sends), like the replies produced while reading a burst of
        # requests, are joined and leave in one send instead of a system call each.
        self._outgoing.append(frame)
        if self._reading or self._corked:
            return  # leaves at the end of the reading turn, or when the cork is pulled
        self._corked = True
        self._loop.call_soon(self._uncork)
        self._send_outgoing()

    def _uncork(self) -> None:
        self._corked = False
        self._send_outgoing()

    def _send_outgoing(self) -> None:
        frames, self._outgoing = self._outgoing, []
        transport = self.transport
        if frames and transport is not None and not transport.is_closing():  # ``is_open``, inline
            transport.write(frames[0] if len(frames) == 1 else b"".join(frames))

    async def invoke(self, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        future = self._loop.create_future()
        self._await_response(request, timeout_ms, _FutureSlot(future))
        try:
            self.write(request)
            return await future
        finally:
            self.pending.pop(request.opaque, None)

    def invoke_with_callback(
        self, request: RemotingCommand, timeout_ms: int, callback: ResponseCallback
    ) -> None:
        """Send ``request``; ``callback(response, None)`` or ``callback(None, error)`` runs on the loop.

        For hot paths (async sends): no future, no task and no coroutine per request.
        """
        slot = _CallbackSlot(callback, self.pending, request.opaque)
        self._await_response(request, timeout_ms, slot)
        try:
            self.write(request)
        except RemotingSendRequestError as exc:
            slot.set_exception(exc)

    def _await_response(self, request: RemotingCommand, timeout_ms: int, slot) -> None:
        """File ``slot`` under the request's opaque until its response, the connection's end or
        its deadline. Deadlines are enforced by one sweep of the table every ``SWEEP_INTERVAL_S``
        (as RocketMQ's scanResponseTable) rather than a timer per request: a timer costs more to
        arm and cancel than the rest of an async send."""
        slot.deadline = self._loop.time() + timeout_ms / 1000
        slot.timeout_ms, slot.code = timeout_ms, request.code
        self.pending[request.opaque] = slot
        if self._sweeper is None:
            self._sweeper = self._loop.call_later(SWEEP_INTERVAL_S, self._sweep)

    def _sweep(self) -> None:
        self._sweeper = None
        now = self._loop.time()
        expired = [(opaque, slot) for opaque, slot in self.pending.items() if slot.deadline <= now]
        for opaque, slot in expired:
            if self.pending.get(opaque) is slot:
                del self.pending[opaque]
            if not slot.done():
                slot.set_exception(RemotingTimeoutError(self.remote_addr, slot.timeout_ms, slot.code))
        if self.pending and not self.closed.done():
            self._sweeper = self._loop.call_later(SWEEP_INTERVAL_S, self._sweep)

    def invoke_oneway(self, request: RemotingCommand) -> None:
        request.flag |= 0x2
        self.write(request)

    async def drain(self) -> None:
        """For senders nobody answers (oneway): let a corked burst leave now, then wait while
        the transport holds more than its high-water mark (the peer takes no more — a broker
        whose backlog is full stops reading). Without it, a loop of oneway sends that never
        yields would keep every frame in memory and send none until it ended."""
        if len(self._outgoing) >= COMMANDS_PER_TURN:
            self._send_outgoing()
        waiter = self._writable
        if waiter is not None:
            await asyncio.shield(waiter)  # one sender cancelled must not wake the others

    def close(self) -> None:
        if self.transport is not None:
            self._send_outgoing()
            self.transport.close()


ResponseCallback = Callable[[RemotingCommand | None, Exception | None], None]


class _FutureSlot:
    """A waiting ``invoke``: its future, and when it must give up (see ``_await_response``)."""

    __slots__ = ("code", "deadline", "future", "timeout_ms")

    code: int
    deadline: float  # set with ``timeout_ms`` and ``code`` when the request is written
    timeout_ms: int

    def __init__(self, future: asyncio.Future) -> None:
        self.future = future

    def done(self) -> bool:
        return self.future.done()

    def set_result(self, response: RemotingCommand) -> None:
        if not self.future.done():
            self.future.set_result(response)

    def set_exception(self, error: Exception) -> None:
        if not self.future.done():
            self.future.set_exception(error)


class _CallbackSlot:
    """A waiting ``invoke_with_callback``: answers the same ``done``/``set_result``/
    ``set_exception`` calls as ``_FutureSlot``, so the response, close and timeout paths treat
    both alike."""

    __slots__ = ("_done", "callback", "code", "deadline", "opaque", "pending", "timeout_ms")

    code: int
    deadline: float  # set with ``timeout_ms`` and ``code`` when the request is written
    timeout_ms: int

    def __init__(self, callback: ResponseCallback, pending: dict, opaque: int) -> None:
        self.callback, self.pending, self.opaque = callback, pending, opaque
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, response: RemotingCommand) -> None:
        self._finish(response, None)

    def set_exception(self, error: Exception) -> None:
        self._finish(None, error)

    def _finish(self, response: RemotingCommand | None, error: Exception | None) -> None:
        if self._done:
            return
        self._done = True
        if self.pending.get(self.opaque) is self:
            del self.pending[self.opaque]
        try:
            self.callback(response, error)
        except Exception:  # one failing callback must not break the reading of the connection
            log.exception("a response callback failed")


def failure_response(request: RemotingCommand, exc: Exception) -> RemotingCommand:
    """SYSTEM_ERROR with the exception, for a handler that failed (logged here).

    A request the handler could not read (a header it could not decode, a body that is no JSON, a
    number that does not parse) is the sender's mistake, not the broker's: RocketMQ answers it
    SYSTEM_ERROR with the decoder's reason, and here it is logged in one line without a traceback,
    since a traceback per request would let anyone fill the broker's disk. This is the one place a
    ``HeaderError`` or ``JsonBodyError`` becomes an answer; handlers let them rise."""
    if isinstance(exc, JsonBodyError | HeaderError):
        log.warning("refused request code %d: %s", request.code, exc)
        return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
    log.error("handler for request code %d failed", request.code, exc_info=exc)
    return response_to(request, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
