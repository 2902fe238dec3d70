"""Pipelined requests are served in turns of ``COMMANDS_PER_TURN``, in order, answers sent per
turn; a connection whose backlog is full stops reading until it is served."""

import asyncio

from broker.remoting import connection as connection_module
from broker.remoting.backlog_budget import BacklogBudget
from broker.remoting.command import create_request, response_to
from broker.remoting.connection import (
    COMMANDS_PER_TURN,
    MAX_BACKLOG_COMMANDS,
    ProcessorTable,
    RemotingConnection,
)
from broker.remoting.frame import FrameDecoder, encode_frame
from tests.listener_failures import wait_until_async

ECHO, SLOW = 700, 701


class RecordingTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 1) if name == "peername" else default

    def close(self) -> None:
        pass


def answered(transport: RecordingTransport) -> list[str | None]:
    """The ``n`` field of every frame written, in order (answers, or requests this end sent)."""
    decoder = FrameDecoder()
    return [cmd.field("n") for data in transport.writes for cmd in decoder.feed(data)]


def connection_with(transport: RecordingTransport, **options) -> RemotingConnection:
    table = ProcessorTable()
    table.register(ECHO, lambda conn, request: response_to(request, ext_fields={"n": request.field("n")}))

    async def slow(conn, request):
        await asyncio.sleep(0.01)
        return response_to(request, ext_fields={"n": request.field("n")})

    table.register(SLOW, slow)
    connection = RemotingConnection(table, **options)
    connection.connection_made(transport)
    return connection


async def test_a_burst_is_answered_in_turns_and_in_order():
    transport = RecordingTransport()
    connection = connection_with(transport)
    burst = 2 * COMMANDS_PER_TURN + 3
    connection.data_received(b"".join(encode_frame(create_request(ECHO, {"n": i})) for i in range(burst)))
    # The first turn answered its share at once, in one write; the rest waits for the loop.
    assert len(transport.writes) == 1
    assert answered(transport) == [str(i) for i in range(COMMANDS_PER_TURN)]
    # Frames that arrive meanwhile queue behind the backlog instead of overtaking it.
    connection.data_received(encode_frame(create_request(ECHO, {"n": "late"})))
    assert answered(transport) == [str(i) for i in range(COMMANDS_PER_TURN)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert answered(transport) == [str(i) for i in range(burst)] + ["late"]
    assert len(transport.writes) == 3  # one write per turn, not one per answer


async def test_waiting_handlers_do_not_hold_up_the_turns():
    transport = RecordingTransport()
    connection = connection_with(transport)
    frames = [encode_frame(create_request(SLOW, {"n": "slow"}))]
    frames += [encode_frame(create_request(ECHO, {"n": i})) for i in range(3)]
    connection.data_received(b"".join(frames))
    assert answered(transport) == ["0", "1", "2"]
    assert await wait_until_async(lambda: len(answered(transport)) > 3, 5)
    assert answered(transport) == ["0", "1", "2", "slow"]


async def test_a_lone_request_leaves_at_once_and_a_burst_after_it_leaves_in_one_write():
    transport = RecordingTransport()
    connection = connection_with(transport)
    connection.write(create_request(ECHO, {"n": "lone"}))
    assert answered(transport) == ["lone"]  # no turn of the loop awaited (a sync send)
    for i in range(5):  # the rest of this turn's burst (async sends) is joined…
        connection.write(create_request(ECHO, {"n": i}))
    assert len(transport.writes) == 1
    await asyncio.sleep(0)
    assert answered(transport) == ["lone", "0", "1", "2", "3", "4"]
    assert len(transport.writes) == 2  # …into one write at the next turn
    connection.write(create_request(ECHO, {"n": "later"}))  # a new turn: at once again
    assert answered(transport)[-1] == "later"
    assert len(transport.writes) == 3


async def test_a_later_answer_outside_a_turn_leaves_at_once():
    transport = RecordingTransport()
    connection = connection_with(transport)
    request = create_request(ECHO, {"n": "held"})
    connection.send_response(request, response_to(request, ext_fields={"n": "held"}))
    assert answered(transport) == ["held"]


async def test_the_requests_a_turn_left_waiting_are_reported_by_code_until_served():
    transport = RecordingTransport()
    connection = connection_with(transport)
    burst = [create_request(ECHO, {"n": i}) for i in range(COMMANDS_PER_TURN + 3)]
    burst[-1] = create_request(SLOW, {"n": "slow"})
    late_answer = response_to(create_request(ECHO, {}))  # an answer in the backlog is no request
    connection.data_received(b"".join(encode_frame(cmd) for cmd in burst) + encode_frame(late_answer))
    assert connection.waiting_request_codes() == [ECHO, ECHO, SLOW]
    for _ in range(3):
        await asyncio.sleep(0)
    assert connection.waiting_request_codes() == []


class PausableTransport(RecordingTransport):
    """Records when the connection stops and starts reading."""

    def __init__(self) -> None:
        super().__init__()
        self.reading: list[bool] = []

    def pause_reading(self) -> None:
        self.reading.append(False)

    def resume_reading(self) -> None:
        self.reading.append(True)


def echo_frames(count: int, size: int = 0) -> bytes:
    return b"".join(encode_frame(create_request(ECHO, {"n": i}, b"b" * size)) for i in range(count))


async def test_a_full_backlog_stops_reading_until_every_waiting_request_is_served():
    transport = PausableTransport()
    connection = connection_with(transport)
    burst = MAX_BACKLOG_COMMANDS + COMMANDS_PER_TURN  # more than a turn serves: the rest waits
    connection.data_received(echo_frames(burst))
    assert transport.reading == [False] and connection.reading_paused
    for _ in range(burst):  # a turn at a time, while anything still waits: still not reading
        if len(answered(transport)) >= burst - COMMANDS_PER_TURN:
            break
        await asyncio.sleep(0)
        assert transport.reading == [False]
    for _ in range(3):
        await asyncio.sleep(0)
    assert answered(transport) == [str(i) for i in range(burst)]
    assert transport.reading == [False, True] and not connection.reading_paused


async def test_a_backlog_under_the_limits_keeps_reading():
    transport = PausableTransport()
    connection = connection_with(transport)
    for _ in range(3):  # bursts the turns keep up with
        connection.data_received(echo_frames(COMMANDS_PER_TURN * 4))
        for _ in range(5):
            await asyncio.sleep(0)
    assert len(answered(transport)) == 3 * COMMANDS_PER_TURN * 4
    assert transport.reading == []


async def test_bytes_read_while_requests_wait_stop_reading_too(monkeypatch):
    monkeypatch.setattr(connection_module, "MAX_BACKLOG_BYTES", 64 * 1024)
    transport = PausableTransport()
    connection = connection_with(transport)
    connection.data_received(echo_frames(COMMANDS_PER_TURN + 1, size=1024))  # 17 KiB: reading on
    assert transport.reading == []
    connection.data_received(echo_frames(COMMANDS_PER_TURN * 3, size=1024))  # 65 KiB since empty
    assert transport.reading == [False]
    for _ in range(10):
        await asyncio.sleep(0)
    assert len(answered(transport)) == COMMANDS_PER_TURN * 4 + 1
    assert transport.reading == [False, True]


async def test_a_server_holds_requests_while_its_peer_reads_no_answers():
    transport = RecordingTransport()
    connection = connection_with(transport, serve_only_while_read=True)
    connection.pause_writing()  # what the transport says once its buffer is over the high-water mark
    connection.data_received(echo_frames(3))
    await asyncio.sleep(0)
    assert answered(transport) == []
    assert connection.waiting_request_codes() == [ECHO] * 3
    connection.resume_writing()
    await asyncio.sleep(0)
    assert answered(transport) == ["0", "1", "2"]


async def test_a_clients_end_keeps_serving_while_it_cannot_write():
    transport = RecordingTransport()
    connection = connection_with(transport)
    connection.pause_writing()
    connection.data_received(echo_frames(3))
    assert answered(transport) == ["0", "1", "2"]


def budget_connection(transport, budget: BacklogBudget) -> RemotingConnection:
    return connection_with(transport, budget=budget, serve_only_while_read=True)


async def settle(turns: int = 20) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


async def test_connections_that_together_exceed_the_servers_budget_stop_reading():
    budget = BacklogBudget(max_commands=40)
    first, second, light = PausableTransport(), PausableTransport(), PausableTransport()
    a, b, c = (budget_connection(t, budget) for t in (first, second, light))
    a.data_received(echo_frames(48))  # 16 served in the read, 32 wait: under 40
    assert budget.commands == 32 and first.reading == []
    b.data_received(echo_frames(30))  # 16 served, 14 wait: 46 together
    assert budget.commands == 46 and second.reading == [False]  # its own 14 are far below 1,024
    c.data_received(echo_frames(1))  # nothing waits of its own: served at once, reading on
    assert answered(light) == ["0"] and light.reading == []
    await settle()
    assert len(answered(first)) == 48 and len(answered(second)) == 30
    assert second.reading == [False, True]  # once its own backlog was served
    assert (budget.commands, budget.bytes) == (0, 0)


async def test_the_servers_byte_budget_counts_what_waiting_connections_read():
    budget = BacklogBudget(max_bytes=64 * 1024)
    first, second = PausableTransport(), PausableTransport()
    a, b = budget_connection(first, budget), budget_connection(second, budget)
    a.data_received(echo_frames(COMMANDS_PER_TURN * 2, size=1024))  # ~34 KiB, half still waiting
    assert first.reading == [] and budget.bytes > 32 * 1024
    b.data_received(echo_frames(COMMANDS_PER_TURN * 2, size=1024))  # ~68 KiB together
    assert second.reading == [False] and first.reading == []
    await settle()
    assert second.reading == [False, True]
    assert (budget.commands, budget.bytes) == (0, 0)


async def test_a_closed_connection_gives_back_what_it_left_waiting():
    budget = BacklogBudget()
    transport = RecordingTransport()
    connection = budget_connection(transport, budget)
    connection.pause_writing()  # its peer reads nothing: requests wait
    connection.data_received(echo_frames(5, size=100))
    assert budget.commands == 5 and budget.bytes > 500
    connection.connection_lost(None)
    assert (budget.commands, budget.bytes) == (0, 0)
