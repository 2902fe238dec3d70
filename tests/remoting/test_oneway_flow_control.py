"""Oneway sends to a peer that stops reading wait for it (real sockets on loopback)."""

import asyncio
import socket
import threading

from broker.remoting.client import RemotingClient
from broker.remoting.command import create_request
from broker.remoting.connection import COMMANDS_PER_TURN
from broker.remoting.frame import FrameDecoder, encode_frame

BODY = b"o" * 64 * 1024
# More than loopback's socket buffers hold (a few MiB each way): the sender must meet a full pipe.
SENDS = 1000


class SilentPeer:
    """Accepts one connection and reads nothing from it until told to, then decodes its frames."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.start_reading = threading.Event()
        self.received: list[str | None] = []  # the "n" of each frame, in order
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        decoder = FrameDecoder()
        with conn:
            self.start_reading.wait(60)
            while chunk := conn.recv(1 << 20):
                self.received += [cmd.field("n") for cmd in decoder.feed(chunk)]

    def close(self) -> None:
        self.start_reading.set()
        self.listener.close()


async def test_oneway_sends_wait_while_the_peer_reads_nothing_then_all_arrive():
    peer = SilentPeer()
    client = RemotingClient()
    largest_frame = len(encode_frame(create_request(700, {"n": SENDS}, BODY))) + 16  # (opaque's digits)
    sent = 0

    async def sender() -> None:
        nonlocal sent
        for i in range(SENDS):  # never yields by itself while the peer keeps up
            await client.invoke_oneway(peer.addr, create_request(700, {"n": i}, BODY))
            sent += 1

    task = asyncio.create_task(sender())
    connection = await client.connection(peer.addr)
    transport = connection.transport
    assert transport is not None  # connected
    high_water = transport.get_write_buffer_limits()[1]
    for _ in range(10_000):  # until the sender meets the full pipe
        if transport.get_write_buffer_size() > high_water or task.done():
            break
        await asyncio.sleep(0.001)
    assert not task.done(), "every send went into memory: nothing held the sender back"
    held_at = sent
    for _ in range(20):
        await asyncio.sleep(0)
    assert sent == held_at  # waiting, not sending
    # What the process holds for the peer: the transport's buffer stopped near its high-water mark.
    assert transport.get_write_buffer_size() <= (COMMANDS_PER_TURN + 2) * largest_frame

    peer.start_reading.set()
    await asyncio.wait_for(task, 60)
    await client.close()
    await asyncio.to_thread(peer.thread.join, 30)  # until the peer reads the end of the stream
    assert peer.received == [str(i) for i in range(SENDS)]  # every send, in order
    peer.close()
