"""Network limits of a remoting server (broker/common/connection_limits.py, enforced in
broker/remoting/), on an in-process server and raw loopback sockets: the frame length checked
from the prefix, unfinished frames bounded over all connections, idle connections closed, the
connection cap, and malformed header values answered.
"""

from __future__ import annotations

import asyncio
import json
import struct

import pytest

from broker.common.codes import ResponseCode
from broker.common.conf_file import ConfError
from broker.common.connection_limits import DEFAULT_FRAME_MAX_LENGTH, ConnectionLimits
from broker.remoting.client import RemotingClient
from broker.remoting.command import RemotingCommand, create_request, response_to
from broker.remoting.frame import FrameDecoder
from broker.remoting.server import RemotingServer
from tests.listener_failures import wait_until_async

ECHO = 1000
HOLD = 1001  # answered 1.5 s later, outside the handler (as a held pull)
UNENCODABLE = 1002  # the handler's answer carries a number no Java peer could read
KIB = 1024


async def start_server(limits: ConnectionLimits) -> RemotingServer:
    server = RemotingServer("127.0.0.1", 0, limits)

    def echo(conn, request):
        return response_to(request, body=request.body)

    def hold(conn, request):
        asyncio.get_running_loop().call_later(1.5, conn.send_response, request, response_to(request))

    def unencodable(conn, request):
        answer = response_to(request)
        answer.code = 2**70
        return answer

    server.register_processor(ECHO, echo)
    server.register_processor(HOLD, hold)
    server.register_processor(UNENCODABLE, unencodable)
    await server.start()
    return server


@pytest.fixture
async def stop_after():
    servers: list[RemotingServer] = []
    yield servers.append
    for server in servers:
        await server.stop()


def json_frame(header: dict, body: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack(">ii", 4 + len(raw) + len(body), len(raw)) + raw + body


def request_header(code=ECHO, opaque=7, **changes) -> dict:
    header = {"code": code, "language": "JAVA", "version": 399, "opaque": opaque, "flag": 0, "extFields": {}}
    header.update(changes)
    return header


async def connect(server: RemotingServer):
    return await asyncio.open_connection("127.0.0.1", server.port)


_decoders: dict[asyncio.StreamReader, tuple[FrameDecoder, list[RemotingCommand]]] = {}


async def answer_or_eof(reader: asyncio.StreamReader, timeout: float = 5.0) -> RemotingCommand | None:
    """The next frame read on ``reader``'s connection, or None when the server closed it."""
    decoder, ready = _decoders.setdefault(reader, (FrameDecoder(), []))
    while not ready:
        data = await asyncio.wait_for(reader.read(65536), timeout)
        if not data:
            return None
        ready.extend(decoder.feed(data))
    return ready.pop(0)


async def sees_eof(reader: asyncio.StreamReader, timeout: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(65536), timeout) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


# -- frame length -----------------------------------------------------------------------------------
def test_the_default_frame_limit_is_rocketmqs_and_counts_the_length_field():
    assert DEFAULT_FRAME_MAX_LENGTH == 16 * 1024 * 1024 == ConnectionLimits().frame_max_length
    decoder = FrameDecoder()
    # A frame of exactly 16 MiB with its length field is accepted (kept, waiting for the rest) ...
    assert decoder.feed(struct.pack(">ii", DEFAULT_FRAME_MAX_LENGTH - 4, 20)) == []
    # ... one byte more is refused from the prefix alone.
    with pytest.raises(Exception, match="over the frame limit 16777216"):
        FrameDecoder().feed(struct.pack(">ii", DEFAULT_FRAME_MAX_LENGTH - 3, 20))


async def test_a_frame_over_the_limit_closes_the_connection_before_it_is_kept(stop_after):
    server = await start_server(ConnectionLimits(frame_max_length=64 * KIB, max_partial_frame_bytes=64 * KIB))
    stop_after(server)
    reader, writer = await connect(server)
    writer.write(struct.pack(">ii", 64 * KIB - 3, 20) + b"x" * 1000)
    assert await sees_eof(reader, 5)
    assert server.partial_frames.bytes == 0  # nothing of it was kept
    # One at the limit is served.
    reader, writer = await connect(server)
    body = b"b" * (64 * KIB - 4 - 8 - 200)
    frame = json_frame(request_header(), body)
    assert len(frame) <= 64 * KIB
    writer.write(frame)
    answer = await answer_or_eof(reader)
    assert answer is not None and answer.body == body
    writer.close()


# -- malformed header values --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"flag": "x"}, "the header's flag 'x' is not a number"),
        ({"code": "abc"}, "the header's code 'abc' is not a number"),
        ({"version": "v4"}, "the header's version 'v4' is not a number"),
        ({"code": [1]}, "the header's code [1] is not a number"),
        ({"extFields": [1, 2]}, "the header's extFields is not an object"),
        ({"extFields": "topic=T"}, "the header's extFields is not an object"),
    ],
)
async def test_a_malformed_header_value_is_answered_with_the_reason(stop_after, change, reason):
    server = await start_server(ConnectionLimits())
    stop_after(server)
    reader, writer = await connect(server)
    malformed = json_frame(request_header(opaque=41, **change))
    writer.write(malformed + json_frame(request_header(opaque=42), b"ok"))
    refused = await answer_or_eof(reader)
    assert refused is not None, "the malformed request was not answered"
    assert refused.is_response and refused.opaque == 41
    assert refused.code == ResponseCode.SYSTEM_ERROR and refused.remark == reason
    served = await answer_or_eof(reader)  # the connection goes on: the next request is served
    assert served is not None and served.opaque == 42 and served.body == b"ok"
    writer.close()


@pytest.mark.parametrize("opaque", ["x", 2**40, None])
async def test_a_request_whose_opaque_is_unusable_closes_the_connection(stop_after, opaque):
    """Nothing says which request an answer would be for: the connection is closed, as RocketMQ
    closes one whose frame it cannot decode (never left waiting)."""
    server = await start_server(ConnectionLimits())
    stop_after(server)
    reader, writer = await connect(server)
    writer.write(json_frame(request_header(opaque=opaque)))
    assert await sees_eof(reader, 5)


async def test_an_answer_that_cannot_be_encoded_becomes_a_system_error(stop_after):
    server = await start_server(ConnectionLimits())
    stop_after(server)
    client = RemotingClient()
    try:
        answer = await client.invoke(f"127.0.0.1:{server.port}", create_request(UNENCODABLE), 3000)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert "Integer exceeds 64-bit range" in (answer.remark or "")
    finally:
        await client.close()


# -- unfinished frames over all connections -------------------------------------------------------------
async def test_unfinished_frames_are_bounded_and_a_client_sending_whole_frames_is_served(stop_after):
    frame_max = 256 * KIB
    limits = ConnectionLimits(frame_max_length=frame_max, max_partial_frame_bytes=1024 * KIB)
    server = await start_server(limits)
    stop_after(server)
    # Twelve peers each start a frame of the largest size and never finish it: 2.9 MiB in all.
    stalled = []
    for _ in range(12):
        reader, writer = await connect(server)
        writer.write(struct.pack(">ii", frame_max - 4, 20) + b"s" * (frame_max - 1000))
        await writer.drain()
        stalled.append((reader, writer))
        await asyncio.sleep(0.02)
        assert server.partial_frames.bytes <= limits.max_partial_frame_bytes
    closed = [await sees_eof(reader, 0.5) for reader, _ in stalled]
    # The oldest were dropped: at most four 255 KiB frames fit in 1 MiB.
    assert sum(closed) >= 8 and closed[:8] == [True] * 8
    assert server.partial_frames.bytes <= limits.max_partial_frame_bytes
    # A client sending 200 KiB requests in pieces, with unfinished frames arriving around it, is served.
    reader, writer = await connect(server)
    floods = []
    for n in range(5):
        body = bytes([n]) * (200 * KIB)
        frame = json_frame(request_header(opaque=n), body)
        for piece in range(0, len(frame), 32 * KIB):
            writer.write(frame[piece : piece + 32 * KIB])
            await writer.drain()
            _, flood = await connect(server)  # a new stalled frame arrives between the pieces
            floods.append(flood)
            flood.write(struct.pack(">ii", frame_max - 4, 20) + b"f" * (frame_max // 2))
            await asyncio.sleep(0.005)
        answer = await answer_or_eof(reader)
        assert answer is not None and answer.opaque == n and answer.body == body
        assert server.partial_frames.bytes <= limits.max_partial_frame_bytes
    writer.close()
    # A dropped connection's bytes leave the total; closed ones too.
    for writer in [w for _, w in stalled] + floods:
        writer.close()
    assert await wait_until_async(lambda: server.partial_frames.bytes == 0, 5)


# -- idle connections ------------------------------------------------------------------------------------
async def test_idle_connections_are_closed_but_active_and_waiting_ones_are_not(stop_after):
    server = await start_server(ConnectionLimits(channel_max_idle_s=1))
    stop_after(server)
    idle = [await connect(server) for _ in range(20)]
    active_reader, active_writer = await connect(server)
    held_reader, held_writer = await connect(server)
    held_writer.write(json_frame(request_header(HOLD, opaque=5)))  # answered after 1.5 s
    loop = asyncio.get_running_loop()
    started = loop.time()
    for n in range(8):  # the active client asks every 0.3 s for 2.4 s
        active_writer.write(json_frame(request_header(opaque=n), b"ping"))
        answer = await answer_or_eof(active_reader)
        assert answer is not None and answer.opaque == n
        await asyncio.sleep(0.3)
    held = await answer_or_eof(held_reader)  # not closed while its answer was owed
    assert held is not None and held.opaque == 5 and loop.time() - started >= 1.4
    assert all([await sees_eof(reader, 2) for reader, _ in idle])
    active_writer.write(json_frame(request_header(opaque=99), b"ping"))  # still open and served
    answer = await answer_or_eof(active_reader)
    assert answer is not None and answer.opaque == 99
    active_writer.close()
    assert await wait_until_async(lambda: not server.connections, 5)


async def test_idle_timeout_zero_keeps_idle_connections(stop_after):
    server = await start_server(ConnectionLimits(channel_max_idle_s=0))
    stop_after(server)
    reader, _ = await connect(server)
    assert server.idle_sweep is None
    assert not await sees_eof(reader, 0.5)


# -- connection cap --------------------------------------------------------------------------------------
async def test_connections_over_the_cap_are_closed_at_once(stop_after, caplog):
    server = await start_server(ConnectionLimits(max_connections=5))
    stop_after(server)
    admitted = [await connect(server) for _ in range(5)]
    assert await wait_until_async(lambda: len(server.connections) == 5, 5)
    over = [await connect(server) for _ in range(3)]
    assert all([await sees_eof(reader, 2) for reader, _ in over])
    assert server.cap.refused == 3 and "the cap is 5 (serverMaxConnections)" in caplog.text
    for n, (reader, writer) in enumerate(admitted):  # those admitted are served
        writer.write(json_frame(request_header(opaque=n)))
        assert (await answer_or_eof(reader)) is not None
    admitted[0][1].close()
    assert await wait_until_async(lambda: len(server.connections) == 4, 5)
    reader, writer = await connect(server)  # room again
    writer.write(json_frame(request_header(opaque=99)))
    answer = await answer_or_eof(reader)
    assert answer is not None and answer.opaque == 99


# -- settings --------------------------------------------------------------------------------------------
def test_limits_from_a_namesrv_conf_and_refused_values():
    limits = ConnectionLimits.from_conf(
        {
            "frameMaxLength": "8388608",
            "serverMaxPartialFrameBytes": "33554432",
            "serverChannelMaxIdleTimeSeconds": "30",
            "serverMaxConnections": "100",
            "serverMaxConnectionsPerAddress": "20",
        }
    )
    assert limits == ConnectionLimits(8388608, 33554432, 30, 100, 20)
    assert ConnectionLimits.from_conf({}) == ConnectionLimits(16777216, 128 * 1024 * 1024, 120, 4096, 1024)
    with pytest.raises(ConfError, match="serverMaxConnectionsPerAddress=0 must be between 1 and"):
        ConnectionLimits.from_conf({"serverMaxConnectionsPerAddress": "0"})
    with pytest.raises(ConfError, match="serverMaxPartialFrameBytes=1048576 must be at least frameMaxLength"):
        ConnectionLimits.from_conf({"serverMaxPartialFrameBytes": "1048576"})
    with pytest.raises(ConfError, match="serverMaxConnections=0"):
        ConnectionLimits.from_conf({"serverMaxConnections": "0"})
    with pytest.raises(ConfError, match="serverChannelMaxIdleTimeSeconds='soon' is not a whole number"):
        ConnectionLimits.from_conf({"serverChannelMaxIdleTimeSeconds": "soon"})
