"""``invoke_with_callback`` and coalesced writes: the async-send hot path of the client."""

import asyncio

from broker.remoting.client import RemotingClient
from broker.remoting.command import create_request, response_to
from broker.remoting.errors import RemotingSendRequestError, RemotingTimeoutError
from broker.remoting.server import RemotingServer

ECHO, SILENT, CLOSE = 900, 901, 902


async def start_server() -> tuple[RemotingServer, str]:
    server = RemotingServer()

    async def echo(conn, request):
        return response_to(request, ext_fields={"n": request.field("n")})

    async def silent(conn, request):
        await asyncio.sleep(30)

    async def close(conn, request):
        conn.close()

    server.register_processor(ECHO, echo)
    server.register_processor(SILENT, silent)
    server.register_processor(CLOSE, close)
    port = await server.start()
    return server, f"127.0.0.1:{port}"


async def collect(connection, requests, timeout_ms=3000):
    """Send every request through callbacks; return (response, error) pairs by request order."""
    loop = asyncio.get_running_loop()
    outcomes = [loop.create_future() for _ in requests]
    for request, outcome in zip(requests, outcomes, strict=True):
        connection.invoke_with_callback(
            request, timeout_ms, lambda resp, err, o=outcome: o.set_result((resp, err))
        )
    return await asyncio.gather(*outcomes)


async def test_pipelined_callbacks_each_get_their_own_response():
    server, addr = await start_server()
    client = RemotingClient()
    try:
        connection = await client.connection(addr)
        requests = [create_request(ECHO, {"n": i}) for i in range(200)]
        outcomes = await collect(connection, requests)
        assert [resp.field("n") for resp, _ in outcomes] == [str(i) for i in range(200)]
        assert all(err is None for _, err in outcomes)
        assert connection.pending == {}
    finally:
        await client.close()
        await server.stop()


async def test_callback_times_out_and_a_late_answer_is_ignored():
    server, addr = await start_server()
    client = RemotingClient()
    try:
        connection = await client.connection(addr)
        [(resp, err)] = await collect(connection, [create_request(SILENT)], timeout_ms=100)
        assert resp is None and isinstance(err, RemotingTimeoutError)
        assert connection.pending == {}
        # The connection still serves others after a timeout.
        [(resp, err)] = await collect(connection, [create_request(ECHO, {"n": 1})])
        assert err is None and resp.field("n") == "1"
    finally:
        await client.close()
        await server.stop()


async def test_connection_closed_fails_every_waiting_callback_once():
    server, addr = await start_server()
    client = RemotingClient()
    try:
        connection = await client.connection(addr)
        calls = []
        for _ in range(3):
            connection.invoke_with_callback(create_request(SILENT), 5000, lambda r, e: calls.append((r, e)))
        [(resp, err)] = await collect(connection, [create_request(CLOSE)])
        assert resp is None and isinstance(err, RemotingSendRequestError)
        assert len(calls) == 3
        assert all(r is None and isinstance(e, RemotingSendRequestError) for r, e in calls)
        # Writing on the closed connection reports through the callback too, not by raising.
        late = []
        connection.invoke_with_callback(create_request(ECHO), 1000, lambda r, e: late.append(e))
        assert isinstance(late[0], RemotingSendRequestError)
    finally:
        await client.close()
        await server.stop()
