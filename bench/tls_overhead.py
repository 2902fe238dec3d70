"""What TLS costs on a remoting port: connecting, and requests one at a time and pipelined.

    python bench/tls_overhead.py [--requests N] [--body BYTES]

One process on uvloop, a ``RemotingServer`` and a ``RemotingClient`` over loopback, an echo
handler. Three ports: ``disabled`` (plaintext, the server's own factory as without TLS),
``permissive`` with a plaintext client (the first byte peeked, then a plain transport) and
``permissive`` with a TLS client. Figures are process CPU microseconds per connection and per
request (both ends are in this process), steadier on a shared machine than rates; wall-clock
rates are printed beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.common.tls_modes import TlsMode
from broker.local_tls import make_tls_files
from broker.remoting.client import RemotingClient
from broker.remoting.command import create_request, response_to
from broker.remoting.server import RemotingServer
from broker.remoting.tls import ClientTls, ServerTls

ECHO = 1000


async def _connect_cost(port: int, tls: ClientTls, count: int) -> tuple[float, float]:
    """A new connection and its first request, ``count`` times (one client: its SSL context,
    made once per client, is not counted)."""
    client = RemotingClient(tls=tls)
    addr = f"127.0.0.1:{port}"
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count):
        await client.invoke(addr, create_request(ECHO), 5000)
        client.close_connection(addr)
    result = (time.process_time() - cpu) / count * 1e6, count / (time.perf_counter() - wall)
    await client.close()
    return result


async def _request_cost(port: int, tls: ClientTls, count: int, body: bytes, in_flight: int):
    client = RemotingClient(tls=tls)
    addr = f"127.0.0.1:{port}"
    await client.invoke(addr, create_request(ECHO), 5000)  # connected (and handshaken) first
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count // in_flight):
        await asyncio.gather(
            *(client.invoke(addr, create_request(ECHO, body=body), 5000) for _ in range(in_flight))
        )
    done = count // in_flight * in_flight
    result = (time.process_time() - cpu) / done * 1e6, done / (time.perf_counter() - wall)
    await client.close()
    return result


async def main(requests: int, body_size: int) -> None:
    files = make_tls_files(Path(tempfile.mkdtemp(prefix="tls-bench-")))
    trusting = files.client_tls()
    body = b"x" * body_size
    servers = {}
    for mode in (TlsMode.DISABLED, TlsMode.PERMISSIVE):
        server = RemotingServer(tls=ServerTls(mode, files.server_cert, files.server_key))
        server.register_processor(ECHO, lambda conn, req: response_to(req, body=req.body))
        await server.start()
        servers[mode] = server
    cases = [
        ("disabled port, plaintext", servers[TlsMode.DISABLED].port, ClientTls()),
        ("permissive port, plaintext", servers[TlsMode.PERMISSIVE].port, ClientTls()),
        ("permissive port, TLS", servers[TlsMode.PERMISSIVE].port, trusting),
    ]
    print(f"{requests} requests of {body_size} bytes each; process CPU µs (both ends), rate /s")
    print(f"{'case':<28}{'connect':>16}{'one at a time':>22}{'64 in flight':>22}")
    for name, port, tls in cases:
        connect = await _connect_cost(port, tls, 200)
        single = await _request_cost(port, tls, requests // 4, body, 1)
        pipelined = await _request_cost(port, tls, requests, body, 64)
        print(
            f"{name:<28}{connect[0]:>8.0f} {connect[1]:>6.0f}/s"
            f"{single[0]:>12.1f} {single[1]:>8.0f}/s{pipelined[0]:>12.1f} {pipelined[1]:>8.0f}/s"
        )
    for server in servers.values():
        await server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40_000)
    parser.add_argument("--body", type=int, default=1024)
    args = parser.parse_args()
    uvloop.run(main(args.requests, args.body))
