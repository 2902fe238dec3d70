"""Controller mode's HA handshake (broker/store/ha with an EpochFile): real HAServer/HAClient on
loopback with real stores. A rejoining broker cuts its log where its epochs and the master's
part, whether its divergent tail is shorter or longer than the master's log since; sharing
nothing, it copies the master whole; a replaced (stale) master and hostile peers are refused."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.common.epoch_entries import EpochEntry
from broker.common.message import MessageExt
from broker.common.message_codec import decode_message
from broker.store.ha.epochs import FILE_NAME, EpochFile
from broker.store.ha.master import UNKNOWN_BROKER_ID, HAServer
from broker.store.ha.protocol import (
    EPOCH_ITEM,
    EPOCH_TRANSFER_HEADER,
    HANDSHAKE,
    HANDSHAKE_ANSWER,
    HANDSHAKE_MAGIC,
    HANDSHAKE_VERSION,
    REPORT,
    STATUS_OK,
)
from broker.store.ha.slave import HAClient
from broker.store.message_store import MessageStore
from broker.store.results import GetMessageStatus, PutMessageStatus

from .conftest import small_config

SEGMENT = 64 * 1024
QUEUES = 3


def _message(key: str, i: int) -> MessageExt:
    msg = MessageExt(topic="orders", body=f"{key}-".encode() * (5 + i % 40), queue_id=i % QUEUES,
                     born_host=("10.0.0.1", 1))  # fmt: skip
    msg.keys = [key]
    return msg


async def _until(predicate, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


class Broker:
    """A store, its epoch file, and the HA side it runs now (server as master, client as slave)."""

    def __init__(self, root, role: str, broker_id: int, **config) -> None:
        settings = {"mapped_file_size_commit_log": SEGMENT, "ha_send_heartbeat_interval": 200, **config}
        self.store = MessageStore(root, small_config(**settings, broker_role=role))
        self.store.start(dispatch_loop=asyncio.get_running_loop())
        self.epochs = EpochFile(root / FILE_NAME)
        self.broker_id = broker_id
        self.server: HAServer | None = None
        self.client: HAClient | None = None

    def set_role(self, role: str) -> None:
        # What the broker's role switch does to the store (broker/server): puts follow the role.
        self.store.config.broker_role = role
        self.store.writability.update()

    async def become_master(self, epoch: int) -> str:
        if self.client is not None:
            await self.client.stop()
        self.set_role("ASYNC_MASTER")
        self.epochs.append(epoch, self.store.max_physic_offset)
        if self.server is None:
            self.server = HAServer(self.store, "127.0.0.1", 0, epochs=self.epochs)
        return f"127.0.0.1:{await self.server.start()}"

    async def become_slave(self, master: str) -> HAClient:
        if self.server is not None:
            await self.server.stop()
        self.set_role("SLAVE")
        if self.client is None:
            self.client = HAClient(self.store, epochs=self.epochs, broker_id=self.broker_id)
        self.client.update_master_address(master)
        self.client.start()
        return self.client

    def put(self, key: str, count: int, start: int = 0) -> None:
        for i in range(start, start + count):
            assert self.store.put_message(_message(f"{key}{i}", i)).ok
        assert self.store.wait_for_dispatch(timeout=30)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.stop()
        if self.server is not None:
            await self.server.stop()
        self.store.shutdown()


@pytest.fixture
async def brokers(tmp_path):
    made: list[Broker] = []

    def factory(name: str, role: str, broker_id: int, **config) -> Broker:
        broker = Broker(tmp_path / name, role, broker_id, **config)
        made.append(broker)
        return broker

    yield factory
    for broker in made:
        await broker.close()


def _segments(store) -> dict[str, bytes]:
    directory = store.commitlog.files.directory
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _queue_keys(store, queue_id: int) -> list[str]:
    keys, offset = [], 0
    while (result := store.get_message("g", "orders", queue_id, offset, 32)).status is GetMessageStatus.FOUND:
        keys += [decode_message(m).keys[0] for m in result.messages]
        offset = result.next_begin_offset
    return keys


def _assert_same_log(follower, leader) -> None:
    assert follower.max_physic_offset == leader.max_physic_offset
    assert _segments(follower) == _segments(leader)
    assert follower.wait_for_dispatch(timeout=30)
    for queue_id in range(QUEUES):
        keys = _queue_keys(follower, queue_id)
        assert keys == _queue_keys(leader, queue_id)
        assert len(keys) == len(set(keys))  # no message twice
        assert follower.get_max_offset_in_queue("orders", queue_id) == leader.get_max_offset_in_queue(
            "orders", queue_id
        )
    assert follower.commitlog.queue_offsets == leader.commitlog.queue_offsets


def _caught_up(follower: Broker, leader: Broker) -> bool:
    return follower.store.max_physic_offset == leader.store.max_physic_offset


async def test_a_slave_behind_on_the_same_epoch_catches_up_without_a_cut(brokers):
    master, slave = brokers("a", "ASYNC_MASTER", 0), brokers("b", "SLAVE", 1)
    address = await master.become_master(1)
    master.put("m", 300)
    client = await slave.become_slave(address)
    await _until(lambda: _caught_up(slave, master))
    assert client.handshakes == 1 and client.last_cut == -1
    assert slave.epochs.entries() == (EpochEntry(1, 0),)  # learnt from the transfers' tags

    await client.stop()  # away for a while; the master restarts its HA port meanwhile
    master.put("m", 300, start=300)
    await master.server.stop()
    assert await master.server.start() == int(address.rpartition(":")[2])
    client.start()
    await _until(lambda: _caught_up(slave, master) and client.handshakes == 2)
    assert client.last_cut == -1
    _assert_same_log(slave.store, master.store)
    assert slave.epochs.entries() == master.epochs.entries()
    [progress] = master.server.slaves()
    assert progress.broker_id == 1 and progress.ack_offset == master.store.max_physic_offset
    assert time.monotonic() - progress.last_report_monotonic < 30

    # The master is confirmed at a new epoch while the slave follows: the tags carry it over.
    master.epochs.append(2, master.store.max_physic_offset)
    master.put("m", 100, start=600)
    await _until(lambda: _caught_up(slave, master))
    assert slave.epochs.entries() == master.epochs.entries() and slave.epochs.last_epoch() == 2
    assert client.handshakes == 2


@pytest.mark.parametrize("tail", [40, 1200], ids=["tail-shorter", "tail-longer"])
async def test_old_master_rejoining_cuts_its_divergent_tail(brokers, tail):
    """A was master at epoch 1 and wrote [X, Y) that never reached B; B, elected at epoch 2,
    wrote [X, Z). A rejoins B as a slave: it cuts at X (Y < Z and Y > Z alike), and then holds
    B's log byte for byte, its queues and index answering without a message lost or twice."""
    a, b = brokers("a", "ASYNC_MASTER", 0), brokers("b", "SLAVE", 1)
    address_a = await a.become_master(1)
    a.put("common", 400)
    client_b = await b.become_slave(address_a)
    await _until(lambda: _caught_up(b, a))
    common_end = a.store.max_physic_offset
    await client_b.stop()

    a.put("old", tail)  # written at epoch 1, never replicated
    divergent_end = a.store.max_physic_offset
    address_b = await b.become_master(2)  # B starts epoch 2 at X
    b.put("new", 300)
    assert (divergent_end < b.store.max_physic_offset) == (tail == 40)

    client_a = await a.become_slave(address_b)
    await _until(lambda: client_a.handshakes == 1 and _caught_up(a, b))
    assert client_a.last_cut == common_end
    _assert_same_log(a.store, b.store)
    assert (
        a.epochs.entries() == b.epochs.entries() == (EpochEntry(1, 0, common_end), EpochEntry(2, common_end))
    )
    assert a.store.query_message("orders", "old3", 4, 0, 2**62) == []
    assert [m.keys for m in a.store.query_message("orders", "new7", 4, 0, 2**62)] == [["new7"]]
    all_keys = [k for q in range(QUEUES) for k in _queue_keys(a.store, q)]
    assert sorted(all_keys) == sorted([f"common{i}" for i in range(400)] + [f"new{i}" for i in range(300)])

    b.put("later", 200)  # and it follows the new master from there
    await _until(lambda: _caught_up(a, b))
    _assert_same_log(a.store, b.store)
    [progress] = b.server.slaves()
    assert progress.broker_id == 0


@pytest.mark.parametrize("own_epochs", [[(1, 0)], []], ids=["other-epochs", "no-epochs"])
async def test_sharing_no_epoch_drops_the_log_and_copies_the_master(brokers, own_epochs):
    master, slave = brokers("m", "ASYNC_MASTER", 0), brokers("s", "ASYNC_MASTER", 1)
    master.epochs.append(2, 0)
    master.epochs.append(3, 0)
    address = await master.become_master(4)
    master.put("m", 500)
    slave.put("own", 700)  # its own history, at an epoch the master never had (or at none)
    for epoch, start in own_epochs:
        slave.epochs.append(epoch, start)
    client = await slave.become_slave(address)
    await _until(lambda: client.handshakes == 1 and _caught_up(slave, master))
    assert client.last_cut == 0
    _assert_same_log(slave.store, master.store)
    assert slave.epochs.entries() == master.epochs.entries()
    assert slave.store.query_message("orders", "own5", 4, 0, 2**62) == []


async def test_sharing_nothing_with_a_master_that_deleted_old_segments(brokers):
    """The copy starts at the master's oldest segment; queues continue at the master's offsets."""
    master, slave = brokers("m", "ASYNC_MASTER", 0), brokers("s", "ASYNC_MASTER", 1)
    address = await master.become_master(2)
    master.put("m", 1500)
    master.store.commitlog.files.delete_first(2)  # as retention does
    oldest = master.store.min_physic_offset
    assert oldest > 0
    slave.put("own", 300)
    slave.epochs.append(1, 0)
    client = await slave.become_slave(address)
    await _until(lambda: client.handshakes == 1 and _caught_up(slave, master))
    assert slave.store.min_physic_offset == oldest
    assert _segments(slave.store) == _segments(master.store)
    assert slave.store.wait_for_dispatch(timeout=30)
    for queue_id in range(QUEUES):
        assert slave.store.get_max_offset_in_queue(
            "orders", queue_id
        ) == master.store.get_max_offset_in_queue("orders", queue_id)
    assert [m.keys for m in slave.store.query_message("orders", "m1400", 4, 0, 2**62)] == [["m1400"]]
    assert slave.store.query_message("orders", "own5", 4, 0, 2**62) == []


async def test_a_replaced_master_is_refused(brokers, caplog):
    """The slave has seen epoch 5; a master still at epoch 3 has been replaced: it refuses to
    lead it (logged on both sides), and the slave's log stays as it is."""
    stale, slave = brokers("m", "ASYNC_MASTER", 0), brokers("s", "SLAVE", 1)
    address = await stale.become_master(3)
    stale.put("stale", 100)
    slave.epochs.append(5, 0)
    client = await slave.become_slave(address)
    await _until(lambda: "has been replaced" in client.last_error)
    assert "refused: its last epoch 5 is above this master's 3" in caplog.text
    assert slave.store.max_physic_offset == 0 and slave.epochs.last_epoch() == 5
    await _until(lambda: not stale.server.connections)


async def test_update_master_address_handshakes_with_the_new_master(brokers):
    """A third broker follows the master of epoch 1; after a failover it is told the new
    master's address and handshakes with it (no cut: the new master has all it has)."""
    m1, m2, s = brokers("m1", "ASYNC_MASTER", 0), brokers("m2", "SLAVE", 1), brokers("s", "SLAVE", 2)
    address1 = await m1.become_master(1)
    m1.put("one", 300)
    client2, client3 = await m2.become_slave(address1), await s.become_slave(address1)
    await _until(lambda: _caught_up(m2, m1) and _caught_up(s, m1))
    await m1.server.stop()  # the master dies
    address2 = await m2.become_master(2)
    m2.put("two", 300)
    client3.update_master_address(address2)
    await _until(lambda: client3.handshakes == 2 and _caught_up(s, m2))
    assert client3.last_cut == -1
    _assert_same_log(s.store, m2.store)
    assert s.epochs.entries() == m2.epochs.entries()
    assert client2.handshakes == 1


async def test_in_sync_waits_need_every_listed_slave(brokers):
    master = brokers("m", "SYNC_MASTER", 0, slave_timeout=300)
    s1, s2 = brokers("s1", "SLAVE", 1), brokers("s2", "SLAVE", 2)
    address = await master.become_master(1)
    master.set_role("SYNC_MASTER")
    server = master.server
    await s1.become_slave(address)
    await s2.become_slave(address)
    await _until(lambda: sorted(p.broker_id for p in server.slaves()) == [1, 2])
    master.put("m", 50)
    end = master.store.max_physic_offset
    assert await server.wait_for_slaves(end, {1, 2}, timeout=30)
    assert server.acked_offsets() == {1: end, 2: end}
    assert await server.wait_for_slaves(end, set(), timeout=0.01)  # only the master in sync
    assert not await server.wait_for_slaves(end + 1, {1, 2}, timeout=0.3)  # nothing that far
    assert not await server.wait_for_slaves(end, {1, 3}, timeout=0.3)  # 3 is not connected

    # As the SYNC_MASTER's replica wait: the send answers once both have it, or times out.
    master.store.replica_wait = lambda end_offset: server.wait_for_in_sync(end_offset, {1, 2})
    outcome = master.store.put_messages_or_wait([_message("sync", 1)])
    result = await outcome if asyncio.isfuture(outcome) or asyncio.iscoroutine(outcome) else outcome
    assert result.status is PutMessageStatus.PUT_OK
    assert s1.store.max_physic_offset >= result.append.wrote_offset + result.append.wrote_bytes
    assert s2.store.max_physic_offset >= result.append.wrote_offset + result.append.wrote_bytes
    master.store.replica_wait = lambda end_offset: server.wait_for_in_sync(end_offset, {1, 3})
    outcome = master.store.put_messages_or_wait([_message("sync", 2)])
    result = await outcome if asyncio.isfuture(outcome) or asyncio.iscoroutine(outcome) else outcome
    assert result.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT


# -- hostile peers ---------------------------------------------------------------------------


async def _closed_by_peer(reader: asyncio.StreamReader, timeout: float = 20) -> bytes:
    return await asyncio.wait_for(reader.read(), timeout)  # b"" (or what was sent) then EOF


@pytest.mark.parametrize(
    "hello",
    [
        REPORT.pack(0),  # a classic slave: its report, then silence
        b"\x00" * HANDSHAKE.size,  # no magic
        HANDSHAKE.pack(HANDSHAKE_MAGIC, 99, 0, 1, 0, 0),  # unknown version
        HANDSHAKE.pack(HANDSHAKE_MAGIC, HANDSHAKE_VERSION, 0, -7, 0, 0),  # negative brokerId
        HANDSHAKE.pack(HANDSHAKE_MAGIC, HANDSHAKE_VERSION, 0, 1, -1, 0),  # negative offset
        HANDSHAKE.pack(HANDSHAKE_MAGIC, HANDSHAKE_VERSION, 0, 1, 0, -3),  # negative epoch
    ],
    ids=["classic-report", "no-magic", "version", "broker-id", "offset", "epoch"],
)
async def test_a_master_closes_a_hostile_handshake(brokers, hello):
    master = brokers("m", "ASYNC_MASTER", 0, ha_housekeeping_interval=1000)
    address = await master.become_master(1)
    master.put("m", 20)
    reader, writer = await asyncio.open_connection(*address.split(":"))
    try:
        writer.write(hello)
        assert await _closed_by_peer(reader) == b""  # no epochs, no bytes
        await _until(lambda: not master.server.connections)
        assert master.server.slaves() == []
    finally:
        writer.close()
    # and it still serves a real slave
    slave = brokers("s", "SLAVE", 1)
    await slave.become_slave(address)
    await _until(lambda: _caught_up(slave, master))


def _answer(
    count: int, items: list[tuple[int, int]], master_max: int = 1000, status: int = STATUS_OK
) -> bytes:
    head = HANDSHAKE_ANSWER.pack(HANDSHAKE_MAGIC, HANDSHAKE_VERSION, status, master_max, 0, count)
    return head + b"".join(EPOCH_ITEM.pack(*item) for item in items)


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (_answer(2**31 - 1, []), "handshake answer out of range: 2147483647 epochs"),
        (_answer(-1, []), "handshake answer out of range"),
        (_answer(2, [(3, 0), (2, 100)]), "no epoch list"),
        (_answer(1, [(1, 5000)]), "beyond its end"),
        (_answer(0, [], status=7), "status 7"),
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "does not answer a controller-mode handshake"),
        # A valid answer, then a transfer written at an epoch older than the slave's.
        (_answer(1, [(4, 0)], master_max=0) + EPOCH_TRANSFER_HEADER.pack(0, 0, 2, 0), "older than"),
    ],
    ids=[
        "huge-count",
        "negative-count",
        "epochs-falling",
        "epoch-beyond-end",
        "bad-status",
        "not-ha",
        "old-epoch-transfer",
    ],
)
async def test_a_slave_refuses_a_hostile_master_and_keeps_its_log(brokers, answer, error):
    slave = brokers("s", "ASYNC_MASTER", 1)
    slave.put("own", 50)
    slave.epochs.append(3, 0)
    before, entries, end = _segments(slave.store), slave.epochs.entries(), slave.store.max_physic_offset
    hellos: list[tuple] = []

    async def hostile(reader, writer):
        hellos.append(HANDSHAKE.unpack(await reader.readexactly(HANDSHAKE.size)))
        writer.write(answer)
        await writer.drain()
        await reader.read()

    server = await asyncio.start_server(hostile, "127.0.0.1", 0)
    try:
        client = await slave.become_slave(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
        await _until(lambda: error in client.last_error)
        assert hellos[0] == (HANDSHAKE_MAGIC, HANDSHAKE_VERSION, 0, 1, end, 3)
        if "older than" not in error:
            assert _segments(slave.store) == before and slave.epochs.entries() == entries
        assert not client.connected and client.handshakes == (1 if "older than" in error else 0)
    finally:
        await slave.client.stop()
        server.close()


async def test_classic_and_controller_mode_peers_do_not_mix(brokers):
    """A controller-mode slave on a classic master (and the reverse) is refused, never
    streamed at a wrong offset."""
    classic = brokers("c", "ASYNC_MASTER", 0)
    classic.put("c", 30)
    classic_server = HAServer(classic.store, "127.0.0.1", 0)
    port = await classic_server.start()
    slave = brokers("s", "SLAVE", 1)
    try:
        client = await slave.become_slave(f"127.0.0.1:{port}")
        await _until(lambda: "closed the connection" in client.last_error)
        assert slave.store.max_physic_offset == 0 and UNKNOWN_BROKER_ID == -1
        await client.stop()
        await _until(lambda: not classic_server.connections)
    finally:
        await classic_server.stop()

    master = brokers("m", "ASYNC_MASTER", 0)
    address = await master.become_master(1)
    master.put("m", 30)
    old = HAClient(brokers("o", "SLAVE", 2).store, address)  # classic client
    old.start()
    try:
        await _until(lambda: "closed the connection" in old.last_error)
    finally:
        await old.stop()
