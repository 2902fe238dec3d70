"""The HA port's frames as a peer sees them (broker/store/ha): a real HAServer and HAClient on
loopback with real stores, and a hostile master whose frames must close the connection."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.common.message import MessageExt
from broker.store.ha.master import HAServer
from broker.store.ha.protocol import MAX_TRANSFER_BODY, REPORT, TRANSFER_HEADER
from broker.store.ha.slave import HAClient
from broker.store.message_store import MessageStore

from .conftest import small_config


def _message(i: int) -> MessageExt:
    msg = MessageExt(topic="wire", body=b"x" * (50 + i % 300), queue_id=i % 2, born_host=("10.0.0.1", 1))
    msg.keys = [f"k{i}"]
    return msg


async def _until(predicate, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def _stores(tmp_path):
    config = {"mapped_file_size_commit_log": 64 * 1024, "ha_send_heartbeat_interval": 200}
    master = MessageStore(tmp_path / "m", small_config(**config))
    slave = MessageStore(tmp_path / "s", small_config(**config, broker_role="SLAVE"))
    return master, slave


async def test_master_streams_and_the_slave_confirms(tmp_path):
    master, slave = _stores(tmp_path)
    loop = asyncio.get_running_loop()
    master.start(dispatch_loop=loop)
    slave.start(dispatch_loop=loop)
    server = HAServer(master, "127.0.0.1", 0)
    port = await server.start()
    client = HAClient(slave, f"127.0.0.1:{port}")
    try:
        for i in range(500):
            assert master.put_message(_message(i)).ok
        client.start()
        await _until(lambda: slave.max_physic_offset == master.max_physic_offset)
        for i in range(500, 900):  # while connected: woken by dispatch, not by the heartbeat
            assert master.put_message(_message(i)).ok
        await _until(
            lambda: (
                server.confirmed_offsets()
                and min(server.confirmed_offsets().values()) == master.max_physic_offset
            )
        )
        assert server.push_to_slave_max_offset == master.max_physic_offset
        assert client.runtime_info()["haMasterConnected"] == "true"
        assert server.runtime_info()["haSlaveBehindBytes"] == "0"
        await _until(lambda: slave.get_max_offset_in_queue("wire", 1) == 450)
        assert [m.body for m in slave.query_message("wire", "k777", 2, 0, 2**62)] == [_message(777).body]
    finally:
        await client.stop()
        await server.stop()
        slave.shutdown()
        master.shutdown()


@pytest.mark.parametrize(
    ("frame", "error"),
    [
        (TRANSFER_HEADER.pack(0, MAX_TRANSFER_BODY + 1), "a transfer of 4194305 bytes"),
        (TRANSFER_HEADER.pack(-5, 0), "at offset -5"),
        (TRANSFER_HEADER.pack(0, 12) + b"\x00\x00\x00\x0cnot-a-rec", "not a record"),
    ],
)
async def test_a_hostile_master_is_dropped_and_nothing_is_kept(tmp_path, frame, error):
    _, slave = _stores(tmp_path)
    slave.start(dispatch_loop=asyncio.get_running_loop())
    reports: list[int] = []

    async def hostile(reader, writer):
        reports.append(REPORT.unpack(await reader.readexactly(REPORT.size))[0])
        writer.write(frame)
        await writer.drain()
        await asyncio.sleep(5)

    server = await asyncio.start_server(hostile, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = HAClient(slave, f"127.0.0.1:{port}")
    try:
        client.start()
        await _until(lambda: error in client.last_error)
        assert reports == [0]  # an empty slave asks from 0
        assert slave.max_physic_offset == 0 and not client.connected
    finally:
        await client.stop()
        server.close()
        slave.shutdown()
