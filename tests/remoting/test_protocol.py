"""The remoting protocol on real sockets: framing, both header formats, errors, robustness."""

import asyncio
import json
import socket
import struct

import pytest

from broker.common.codes import RequestCode, ResponseCode
from broker.remoting.client import RemotingClient, SyncRemotingClient
from broker.remoting.command import SERIALIZE_ROCKETMQ, RemotingCommand, create_request, response_to
from broker.remoting.errors import (
    FrameError,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from broker.remoting.frame import FrameDecoder, decode_header, encode_frame
from broker.remoting.server import RemotingServer
from tests.listener_failures import wait_until_async


def java_style_frame(code=105, opaque=7, ext=None, body=b"", language="JAVA"):
    """A frame built from the documented layout, as a Java client writes it."""
    header = json.dumps(
        {
            "code": code,
            "extFields": ext or {"topic": "T"},
            "flag": 0,
            "language": language,
            "opaque": opaque,
            "serializeTypeCurrentRPC": "JSON",
            "version": 399,
        }
    ).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def test_json_frame_from_a_java_client_decodes():
    cmd = FrameDecoder().feed(java_style_frame(ext={"topic": "T", "queueId": 3}, body=b"abc"))[0]
    assert (cmd.code, cmd.opaque, cmd.language, cmd.body) == (105, 7, 0, b"abc")
    assert cmd.ext_fields == {"topic": "T", "queueId": "3"}  # numbers coerced to strings


@pytest.mark.parametrize("language", ["JAVA", 0, "0", "go"])
def test_language_as_name_or_ordinal(language):
    expected = 9 if language == "go" else 0
    assert FrameDecoder().feed(java_style_frame(language=language))[0].language == expected


def test_binary_header_round_trip_and_layout():
    cmd = RemotingCommand(code=10, opaque=5, flag=0, remark="hé", ext_fields={"a": "1", "topic": "T"},
                          body=b"xyz", serialize_type=SERIALIZE_ROCKETMQ)  # fmt: skip
    frame = encode_frame(cmd)
    total, marked = struct.unpack_from(">ii", frame)
    assert marked >> 24 == 1 and total == len(frame) - 4
    header = frame[8 : 8 + (marked & 0xFFFFFF)]
    assert struct.unpack_from(">hbhii", header) == (10, 3, 399, 5, 0)
    back = decode_header(header, 1)
    assert (back.remark, back.ext_fields) == ("hé", {"a": "1", "topic": "T"})


def test_incremental_decoding_at_every_split():
    frames = encode_frame(create_request(11, {"x": "1"}, b"body")) + encode_frame(create_request(12))
    for split in range(len(frames) + 1):
        decoder = FrameDecoder()
        got = decoder.feed(frames[:split]) + decoder.feed(frames[split:])
        assert [c.code for c in got] == [11, 12]
        assert [c.body for c in got] == [b"body", b""]
        assert all(type(c.body) is bytes for c in got)
        assert decoder.feed(frames) == got  # nothing left over from the split reads


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">ii", 2, 0),  # shorter than its own header length field
        struct.pack(">ii", -5, 0),
        struct.pack(">ii", 2**31 - 1, 10),  # 2 GiB declared
        struct.pack(">ii", 10, 50) + b"x" * 6,  # header longer than the frame
        struct.pack(">ii", 12, 8) + b"not json",
        struct.pack(">ii", 12, (7 << 24) | 8) + b"whatever",  # unknown serialisation
        struct.pack(">ii", 8, (1 << 24) | 4) + b"\0\0\0\0",  # truncated binary header
    ],
)
def test_malformed_frames_raise_frame_error(frame):
    with pytest.raises(FrameError):
        FrameDecoder().feed(frame)


class _EchoServer(RemotingServer):
    slow_requests: list[RemotingCommand]  # requests a slow echo has started on (its "sleep" field)


@pytest.fixture
async def server():
    srv = _EchoServer("127.0.0.1", 0)
    srv.slow_requests = []

    async def echo(conn, request):
        if request.field("sleep"):
            srv.slow_requests.append(request)
            await asyncio.sleep(float(request.field("sleep")))
        return response_to(request, body=request.body, ext_fields={"echo": request.field("n")})

    async def boom(conn, request):
        raise RuntimeError("kaput")

    async def ask_back(conn, request):
        answer = await conn.invoke(create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED), 2000)
        return response_to(request, remark=answer.remark)

    srv.register_processor(1000, echo)
    srv.register_processor(1001, boom)
    srv.register_processor(1002, ask_back)
    await srv.start()
    yield srv
    await srv.stop()


async def test_many_in_flight_requests_matched_by_opaque(server):
    client = RemotingClient()
    addr = f"127.0.0.1:{server.port}"
    requests = [
        create_request(1000, {"n": i, "sleep": 0.05 if i % 2 else 0}, str(i).encode()) for i in range(50)
    ]
    responses = await asyncio.gather(*(client.invoke(addr, r) for r in requests))
    assert [r.field("echo") for r in responses] == [str(i) for i in range(50)]
    assert [r.body for r in responses] == [str(i).encode() for i in range(50)]
    await client.close()


async def test_unknown_code_and_handler_failure(server):
    client = RemotingClient()
    addr = f"127.0.0.1:{server.port}"
    unknown = await client.invoke(addr, create_request(9999))
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "9999 not supported" in (
        unknown.remark or ""
    )
    failed = await client.invoke(addr, create_request(1001))
    assert failed.code == ResponseCode.SYSTEM_ERROR and "kaput" in (failed.remark or "")
    await client.close()


async def test_oneway_gets_no_reply_and_server_can_call_the_client(server):
    client = RemotingClient()
    addr = f"127.0.0.1:{server.port}"

    async def on_notify(conn, request):
        return response_to(request, remark="client says hi")

    client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
    await client.invoke_oneway(addr, create_request(1000, {"n": 1}))
    answer = await client.invoke(addr, create_request(1002))
    assert answer.remark == "client says hi"
    connection = await client.connection(addr)
    assert connection.pending == {}  # the oneway request left nothing waiting
    await client.close()


async def test_timeout_refused_and_closed_connection_errors(server):
    client = RemotingClient()
    addr = f"127.0.0.1:{server.port}"
    with pytest.raises(RemotingTimeoutError):
        await client.invoke(addr, create_request(1000, {"sleep": 1}), timeout_ms=100)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    with pytest.raises(RemotingConnectError):
        await client.invoke(f"127.0.0.1:{free_port}", create_request(1000))
    server.slow_requests.clear()
    pending = asyncio.ensure_future(client.invoke(addr, create_request(1000, {"sleep": 5}), timeout_ms=5000))
    assert await wait_until_async(lambda: server.slow_requests, 5)  # the server is working on it
    for conn in list(server.connections):
        conn.close()
    with pytest.raises(RemotingSendRequestError):
        await pending
    await client.close()


async def test_garbage_closes_only_that_connection(server):
    for garbage in (
        b"\xff" * 64,
        struct.pack(">ii", 2**31 - 1, 10),
        struct.pack(">ii", 12, 8) + b"{bad json",
    ):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(garbage)
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the server
        writer.close()
    client = RemotingClient()
    response = await client.invoke(f"127.0.0.1:{server.port}", create_request(1000, {"n": "ok"}))
    assert response.field("echo") == "ok"
    await client.close()


def test_sync_client_facade():
    async def start():
        srv = RemotingServer("127.0.0.1", 0)

        async def echo(conn, request):
            return response_to(request, body=b"pong")

        srv.register_processor(1, echo)
        await srv.start()
        return srv

    sync = SyncRemotingClient()
    srv = sync._loop_thread.run(start())
    try:
        assert sync.invoke(f"127.0.0.1:{srv.port}", create_request(1)).body == b"pong"
    finally:
        sync._loop_thread.run(srv.stop())
        sync.close()
