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
from broker.store.results import PutMessageStatus

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
        await reader.read()  # until the slave hangs up

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


def _sync_master(tmp_path, **config):
    settings = {"mapped_file_size_commit_log": 64 * 1024, "ha_send_heartbeat_interval": 200, **config}
    return MessageStore(tmp_path / "m", small_config(**settings, broker_role="SYNC_MASTER"))


async def _put(store, i: int):
    outcome = store.put_messages_or_wait([_message(i)])
    return outcome if not asyncio.isfuture(outcome) and not asyncio.iscoroutine(outcome) else await outcome


async def test_sync_master_answers_after_the_slave_confirms_or_with_the_slaves_status(tmp_path):
    """SYNC_MASTER double write (RocketMQ's handleHA): PUT_OK once a slave has the message;
    SLAVE_NOT_AVAILABLE without a slave or with one too far behind; FLUSH_SLAVE_TIMEOUT when the
    connected slave does not confirm within slaveTimeout. The message is stored every time."""
    master = _sync_master(tmp_path, slave_timeout=300)
    slave = MessageStore(
        tmp_path / "s", small_config(mapped_file_size_commit_log=64 * 1024, broker_role="SLAVE")
    )
    loop = asyncio.get_running_loop()
    master.start(dispatch_loop=loop)
    slave.start(dispatch_loop=loop)
    server = HAServer(master, "127.0.0.1", 0)
    master.replica_wait = server.wait_for_slave
    port = await server.start()
    client = HAClient(slave, f"127.0.0.1:{port}")
    silent = None
    try:
        alone = await _put(master, 0)
        assert alone.status is PutMessageStatus.SLAVE_NOT_AVAILABLE and alone.append is not None
        client.start()
        await _until(lambda: server.confirmed_offsets())
        for i in range(1, 50):
            result = await _put(master, i)
            assert result.status is PutMessageStatus.PUT_OK
            assert slave.max_physic_offset >= result.append.wrote_offset + result.append.wrote_bytes
        internal = await master.put_messages_async([_message(99)])  # the broker's own puts do not wait
        assert internal.status is PutMessageStatus.PUT_OK
        await client.stop()
        await _until(lambda: not server.connections)

        # A slave that reports once and then says nothing: connected, never confirming.
        _, silent = await asyncio.open_connection("127.0.0.1", port)
        silent.write(REPORT.pack(master.max_physic_offset))
        await _until(lambda: server.confirmed_offsets())
        late = await _put(master, 100)
        assert late.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT and late.append is not None
        # The silent slave lacks that message, stored at least slaveTimeout (300 ms) ago.
        info = server.runtime_info()
        assert info["haSlaveBehindBytes"] == str(late.append.wrote_bytes)
        assert int(info["haSlaveBehindMillis"]) >= 300
        master.config.ha_max_gap_not_in_sync = 1  # now it is too far behind to wait for
        assert (await _put(master, 101)).status is PutMessageStatus.SLAVE_NOT_AVAILABLE
        assert master.wait_for_dispatch()  # every one of the 53 was stored, whatever its answer
        assert master.get_max_offset_in_queue("wire", 0) + master.get_max_offset_in_queue("wire", 1) == 53
    finally:
        if silent is not None:
            silent.close()
        await client.stop()
        await server.stop()
        slave.shutdown()
        master.shutdown()


async def test_sync_master_waiting_sends_time_out_when_the_slave_leaves(tmp_path):
    master = _sync_master(tmp_path, slave_timeout=60_000)
    master.start(dispatch_loop=asyncio.get_running_loop())
    server = HAServer(master, "127.0.0.1", 0)
    master.replica_wait = server.wait_for_slave
    port = await server.start()
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(REPORT.pack(0))
        await _until(lambda: server.confirmed_offsets())
        pending = asyncio.ensure_future(_put(master, 1))
        await asyncio.sleep(0)
        writer.close()  # the only slave goes: nobody can confirm, the send is answered now
        result = await asyncio.wait_for(pending, 20)
        assert result.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    finally:
        writer.close()
        await server.stop()
        master.shutdown()


async def test_a_slave_needing_segments_the_master_deleted_says_so(tmp_path):
    """Retention removed the master's oldest segments while the slave was away: the master
    streams from its oldest offset, and the slave refuses the gap with a reason (its figure)."""
    master, slave = _stores(tmp_path)
    loop = asyncio.get_running_loop()
    master.start(dispatch_loop=loop)
    slave.start(dispatch_loop=loop)
    for i in range(100):
        assert master.put_message(_message(i)).ok
    slave.replica_log().append(0, master.commit_log_data(0, 4096))  # the slave got a little
    for i in range(100, 1500):
        assert master.put_message(_message(i)).ok
    master.commitlog.files.delete_first(2)  # as retention does
    server = HAServer(master, "127.0.0.1", 0)
    client = HAClient(slave, f"127.0.0.1:{await server.start()}")
    try:
        client.start()
        await _until(lambda: "on neither side" in client.last_error)
        assert f"sends from offset {master.min_physic_offset}" in client.last_error
        assert slave.max_physic_offset == 4096  # nothing appended beyond the gap
    finally:
        await client.stop()
        await server.stop()
        slave.shutdown()
        master.shutdown()


@pytest.mark.timeout(30)  # without the fix stop() never returns (nor does the loop give up)
async def test_stop_ends_the_client_even_when_a_cancellation_is_swallowed():
    """Python 3.11's wait_for can swallow a cancellation that arrives as the read it waits on
    fails (the master closing the connection as both brokers stop): stop() must still end the
    client instead of waiting for a retry loop that never ends."""
    client = HAClient(store=None, static_master="127.0.0.1:1")  # type: ignore[arg-type]
    swallowed = []

    async def follow(address: str) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            swallowed.append(address)  # and return as if the read had failed

    client._follow = follow  # type: ignore[method-assign]
    client.start()
    await asyncio.sleep(0.05)
    await asyncio.wait_for(client.stop(), 10)
    assert swallowed == ["127.0.0.1:1"]
