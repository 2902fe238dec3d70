"""Client building blocks: allocation strategies, batch splitting, fault tolerance, offsets."""

import asyncio
import inspect
import threading

import pytest

from broker.client.allocate import (
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateByConfig,
    AllocateByMachineRoom,
    AllocateConsistentHash,
)
from broker.client.asyncio_api import AsyncProducer
from broker.client.consumer_core import ConsumerCore
from broker.client.errors import MQClientError
from broker.client.instance import MQClientInstance
from broker.client.latency_fault import LatencyFaultTolerance
from broker.client.offset_store import LocalFileOffsetStore, OffsetStore
from broker.client.outgoing_message import split_batches
from broker.client.producer import Producer
from broker.client.queue_selectors import hash_selector
from broker.common.batch_codec import BatchDecodeError, decode_batch, encode_batch
from broker.common.message import Message
from broker.common.message_queue import MessageQueue

QUEUES = [MessageQueue("T", "broker-a", i) for i in range(4)] + [
    MessageQueue("T", "broker-b", i) for i in range(4)
]
CIDS = ["c1", "c2", "c3"]


def everyone(strategy, cids=CIDS, queues=QUEUES):
    return {cid: strategy.allocate("g", cid, queues, cids) for cid in cids}


def test_averagely_gives_contiguous_blocks():
    result = everyone(AllocateAveragely())
    assert result == {"c1": QUEUES[0:3], "c2": QUEUES[3:6], "c3": QUEUES[6:8]}
    more_consumers = everyone(AllocateAveragely(), [f"c{i}" for i in range(10)])
    assert sum(len(v) for v in more_consumers.values()) == 8 and all(
        len(v) <= 1 for v in more_consumers.values()
    )


def test_by_circle_deals_round_robin():
    assert everyone(AllocateAveragelyByCircle())["c2"] == [QUEUES[1], QUEUES[4], QUEUES[7]]


@pytest.mark.parametrize(
    "strategy", [AllocateAveragely(), AllocateAveragelyByCircle(), AllocateConsistentHash()]
)
def test_every_queue_has_exactly_one_owner(strategy):
    result = everyone(strategy)
    owned = [mq for queues in result.values() for mq in queues]
    assert sorted(owned) == sorted(QUEUES)


def test_consistent_hash_moves_only_the_leavers_queues():
    before = everyone(AllocateConsistentHash(virtual_nodes=20))
    after = everyone(AllocateConsistentHash(virtual_nodes=20), ["c1", "c2"])
    for cid in ("c1", "c2"):
        assert set(before[cid]) <= set(after[cid])


def test_config_and_machine_room():
    chosen = [QUEUES[0], QUEUES[5]]
    assert AllocateByConfig(chosen).allocate("g", "c1", QUEUES, CIDS) == chosen
    rooms = [MessageQueue("T", "hz@broker-a", i) for i in range(2)] + [MessageQueue("T", "sh@broker-b", 0)]
    assert AllocateByMachineRoom({"hz"}).allocate("g", "c1", rooms, ["c1"]) == rooms[:2]


def test_unknown_consumer_gets_nothing():
    assert AllocateAveragely().allocate("g", "stranger", QUEUES, CIDS) == []


def test_batch_codec_round_trip_and_bad_input():
    messages = [Message("T", b"body-%d" % i, properties={"TAGS": "a", "k": str(i)}) for i in range(3)]
    decoded = decode_batch(encode_batch(messages), "T")
    assert [(m.body, m.properties) for m in decoded] == [(m.body, m.properties) for m in messages]
    with pytest.raises(BatchDecodeError):
        decode_batch(encode_batch(messages)[:-3], "T")
    with pytest.raises(BatchDecodeError):
        decode_batch(b"\x00\x00\x00\x05garbage", "T")


def test_splitter_respects_the_limit_and_refuses_bad_batches():
    messages = [Message("T", bytes(1000)) for _ in range(50)]
    batches = split_batches(messages, limit=10_000)
    assert sum(len(b) for b in batches) == 50 and all(len(encode_batch(b)) <= 10_000 for b in batches)
    with pytest.raises(MQClientError, match="exceeds"):
        split_batches([Message("T", bytes(20_000))], limit=10_000)
    with pytest.raises(MQClientError, match="same topic"):
        split_batches([Message("T", b"1"), Message("U", b"2")])
    delayed = Message("T", b"1")
    delayed.delay_time_level = 3
    with pytest.raises(MQClientError, match="delayed"):
        split_batches([delayed])


def test_latency_fault_tolerance_avoids_then_forgives():
    clock = {"now": 100.0}
    faults = LatencyFaultTolerance(clock=lambda: clock["now"])
    faults.update("slow", 600, isolation=False)  # ≥ 550 ms → avoided for 30 s
    faults.update("fast", 20, isolation=False)
    assert not faults.is_available("slow") and faults.is_available("fast")
    clock["now"] += 31
    assert faults.is_available("slow")
    faults.update("down", 0, isolation=True)  # a failed send counts as 30 s latency → 10 min
    clock["now"] += 599
    assert not faults.is_available("down")


def test_a_fast_answer_forgives_a_broker_at_once_and_the_first_pause_starts_at_550_ms():
    clock = {"now": 100.0}
    faults = LatencyFaultTolerance(clock=lambda: clock["now"])
    faults.update("b", 0, isolation=True)
    faults.update("b", 549, isolation=False)  # the fast path: no pause
    assert faults.is_available("b")
    faults.update("b", 550, isolation=False)
    assert not faults.is_available("b")
    clock["now"] += 29.9
    assert not faults.is_available("b")


def test_hash_selector_is_stable_per_key():
    msg = Message("T", b"")  # the selector reads only its argument
    picks = {hash_selector(QUEUES, msg, f"order-{i % 5}") for i in range(100)}
    assert len(picks) <= 5
    assert hash_selector(QUEUES, msg, "order-1") == hash_selector(QUEUES, msg, "order-1")


async def test_local_offset_store_persists_with_backup(tmp_path):
    store = LocalFileOffsetStore(tmp_path, "127.0.0.1@1", "g")
    store.update(QUEUES[0], 10)
    await store.persist()
    store.update(QUEUES[0], 12)
    await store.persist()
    main = store.file.path
    main.write_text("{broken")
    reloaded = LocalFileOffsetStore(tmp_path, "127.0.0.1@1", "g")
    assert reloaded.read_memory(QUEUES[0]) == 10  # the .bak of the previous write


async def test_nothing_is_spawned_once_the_instance_shuts_down():
    """A send whose connection shutdown closed is retried in a task; begun after shutdown's
    sweep, that task would outlive the instance (and its connections)."""
    instance = MQClientInstance.on_running_loop("127.0.0.1:1", "spawn-after-shutdown")
    await instance.ashutdown()

    async def retry():
        raise AssertionError("never runs")

    coro = retry()
    assert instance.spawn(coro) is None
    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED  # closed, not left unawaited

    producer = Producer("spawn-after-shutdown", "127.0.0.1:1")
    producer.instance = instance
    outcomes = []
    producer._spawn(retry(), lambda result, error: outcomes.append((result, error)))
    [(result, error)] = outcomes
    assert result is None and isinstance(error, MQClientError) and "shutting down" in str(error)


async def test_concurrent_rebalances_start_one_pull_loop_per_queue():
    """The periodic rebalance, a reset-offset reload and a second consumer's first rebalance on a
    shared instance may overlap: each queue still gets exactly one pull loop (a second one would
    consume every message twice and outlive the consumer's shutdown)."""
    queues = [MessageQueue("Orders", "broker-a", i) for i in range(4)]
    pulls: list = []

    class Core(ConsumerCore):
        async def _allocate(self, topic):
            await asyncio.sleep(0)  # a route and member lookup on the network
            return queues

        async def _start_offset(self, mq):
            await asyncio.sleep(0)
            return 0

        async def _pull_loop(self, mq, offset):
            pulls.append(mq)
            await asyncio.Event().wait()

    core = Core("g", "127.0.0.1:1")
    core.subscriptions["Orders"] = "*"
    core.offsets, core.running = OffsetStore(), True
    await asyncio.gather(core.rebalance(), core.rebalance(), core.rebalance())
    await asyncio.sleep(0)
    assert sorted(pulls) == queues  # one loop each
    running = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert sorted(running, key=id) == sorted(core.assigned.values(), key=id)
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)


def test_clients_share_an_instance_per_client_id_and_refuse_a_second_client_of_a_group():
    """As RocketMQ's MQClientManager: one instance (so one client id, one loop thread) per instance
    name and name servers; a group runs once per client id; the last client to leave stops it."""
    namesrv = "127.0.0.1:1"  # nothing is sent: starting a producer needs no server
    orders = Producer("orders-producer", namesrv).start()
    audit = Producer("audit-producer", namesrv).start()
    elsewhere = Producer("orders-producer", namesrv, instance_name="other").start()
    try:
        assert orders.instance is audit.instance  # the default instance name: the process id
        assert elsewhere.instance is not orders.instance
        assert elsewhere.instance is not None and orders.instance is not None
        assert elsewhere.instance.client_id != orders.instance.client_id
        threads_before = threading.active_count()
        with pytest.raises(MQClientError, match=r"producer group\[orders-producer\] has been created before"):
            Producer("orders-producer", namesrv).start()
        assert threading.active_count() == threads_before  # the refused start left no thread
        shared = orders.instance
        orders.shutdown()
        assert audit.instance is not None and audit.instance.loop_thread is not None
        assert audit.instance.loop_thread.alive  # still serving the other producer
        audit.shutdown()
        assert shared.loop_thread is not None
        assert not shared.loop_thread.alive  # the last client stopped it
        again = Producer("orders-producer", namesrv).start()  # a new instance for a new client
        assert again.instance is not shared
        again.shutdown()
    finally:
        elsewhere.shutdown()


def test_asyncio_clients_share_the_instance_of_their_loop():
    async def on_one_loop():
        first = await AsyncProducer("async-orders", "127.0.0.1:1").start()
        other = await AsyncProducer("async-audit", "127.0.0.1:1").start()
        try:
            assert first.producer.instance is other.producer.instance
            assert first.producer.instance is not None
            assert first.producer.instance.loop is asyncio.get_running_loop()  # no thread of its own
            refused = r"producer group\[async-orders\] has been created before"
            with pytest.raises(MQClientError, match=refused):
                await AsyncProducer("async-orders", "127.0.0.1:1").start()
            return first.producer.instance
        finally:
            await first.shutdown()
            await other.shutdown()

    instance = asyncio.run(on_one_loop())
    assert instance.closing  # the last client stopped it
    assert asyncio.run(on_one_loop()) is not instance  # another loop, another instance
