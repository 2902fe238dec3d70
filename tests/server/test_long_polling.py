"""Held pulls: parked with a callback, woken by the dispatch of a message in the same turn as the
send that stored it, answered before the producer's own answer; expiry, filters and stop."""

from __future__ import annotations

import asyncio
import functools
import gc

import pytest

from broker.common.codes import RequestCode, ResponseCode
from broker.common.message_codec import decode_messages, properties_to_string
from broker.common.pull_sysflag import FLAG_SUBSCRIPTION, FLAG_SUSPEND
from broker.common.request_headers import PullMessageRequestHeader
from broker.local_cluster import SMALL_STORE_CONF
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.frame import FrameDecoder, encode_frame
from broker.server.config import BrokerConfig
from broker.server.controller import BrokerController
from broker.server.long_polling import PullRequestHoldService

TOPIC, GROUP = "HeldPulls", "HeldPullsGroup"
SMALL_STORE = dict(line.split("=", 1) for line in SMALL_STORE_CONF.split())


# -- the hold service alone ---------------------------------------------------------------------
async def test_a_message_below_the_new_end_wakes_the_pull_once():
    hold = PullRequestHoldService(asyncio.get_running_loop())
    calls: list[bool] = []
    hold.park("t", 0, 5, 60, calls.append)
    hold.notify("t", 0, 5)  # the queue now ends at 5: nothing at offset 5 yet
    hold.notify("t", 1, 9)  # another queue
    assert calls == [] and ("t", 0) in hold.waiting
    hold.notify("t", 0, 6)
    hold.notify("t", 0, 7)
    assert calls == [False]
    assert ("t", 0) not in hold.waiting and hold.held_count == 0


async def test_an_unanswered_pull_expires_once_with_a_final_wake():
    hold = PullRequestHoldService(asyncio.get_running_loop())
    calls: list[bool] = []
    hold.park("t", 0, 0, 0.01, calls.append)
    for _ in range(100):
        if calls:
            break
        await asyncio.sleep(0.01)
    hold.notify("t", 0, 1)  # too late: it was answered already
    hold.wake_all()
    assert calls == [True] and hold.held_count == 0


async def test_a_woken_pull_may_park_again_and_stop_answers_everyone():
    hold = PullRequestHoldService(asyncio.get_running_loop())
    calls: list[bool] = []

    def wake(final: bool) -> None:
        calls.append(final)
        if not final:
            hold.park("t", 0, 0, 60, wake)  # what arrived was not for it

    hold.park("t", 0, 0, 60, wake)
    hold.park("t", 0, 3, 60, calls.append)
    hold.notify("t", 0, 1)
    assert calls == [False] and hold.held_count == 2
    hold.wake_all()
    assert sorted(calls) == [False, True, True] and hold.held_count == 0
    await asyncio.sleep(0.02)
    assert len(calls) == 3  # the cancelled timers never fire


async def test_pulls_of_a_closed_connection_are_forgotten_unanswered():
    hold = PullRequestHoldService(asyncio.get_running_loop())
    gone, alive, calls = object(), object(), []
    hold.park("t", 0, 0, 0.01, lambda final: calls.append(("gone", final)), owner=gone)
    hold.park("t", 1, 0, 60, lambda final: calls.append(("gone", final)), owner=gone)
    hold.park("t", 0, 0, 60, lambda final: calls.append(("alive", final)), owner=alive)
    assert hold.forget(gone) == 2 and hold.held_count == 1
    await asyncio.sleep(0.03)  # the forgotten pull's timer was cancelled too
    hold.notify("t", 0, 1)
    assert calls == [("alive", False)]


# -- a broker in this process, its connections writing into lists --------------------------------
class LoggingTransport:
    """A socket stand-in that records every write in one log shared by all connections."""

    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    def write(self, data: bytes) -> None:
        for cmd in FrameDecoder().feed(data):
            self.log.append((self.name, cmd))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40000) if name == "peername" else default

    def close(self) -> None:
        pass


async def start_broker(root) -> BrokerController:
    config = BrokerConfig.from_properties({"listenPort": "0", "storePathRootDir": str(root), **SMALL_STORE})
    controller = BrokerController(config)
    await controller.start()
    controller.topics.ensure(TOPIC, 1, 6)
    controller.groups.find(GROUP, create=True)
    return controller


@pytest.fixture
async def broker(tmp_path):
    controller = await start_broker(tmp_path)
    yield controller
    await controller.stop()


def connect(broker, name: str, log: list):
    connection = broker.server._new_connection()
    connection.connection_made(LoggingTransport(name, log))
    return connection


def pull_frame(offset: int, suspend_ms: int = 60_000, subscription: str = "*") -> bytes:
    header = PullMessageRequestHeader(
        consumer_group=GROUP,
        topic=TOPIC,
        queue_id=0,
        queue_offset=offset,
        max_msg_nums=32,
        sys_flag=FLAG_SUSPEND | FLAG_SUBSCRIPTION,  # the subscription comes with the request
        commit_offset=0,
        suspend_timeout_millis=suspend_ms,
        sub_version=0,
        subscription=subscription,
        expression_type="TAG",
    )
    return encode_frame(create_request(RequestCode.PULL_MESSAGE, header))


def send_frame(body: bytes, tag: str = "") -> bytes:
    header = {
        "producerGroup": "pg",
        "topic": TOPIC,
        "queueId": 0,
        "sysFlag": 0,
        "bornTimestamp": 0,
        "flag": 0,
        "properties": properties_to_string({"TAGS": tag} if tag else {}),
    }
    return encode_frame(create_request(RequestCode.SEND_MESSAGE, header, body))


async def test_the_held_pull_is_answered_in_the_senders_turn_before_the_sender(broker):
    log: list = []
    consumer, producer = connect(broker, "consumer", log), connect(broker, "producer", log)
    consumer.data_received(pull_frame(0))
    await asyncio.sleep(0)
    assert log == [] and broker.hold.held_count == 1
    producer.data_received(send_frame(b"first"))
    # No turn of the loop in between: the message was dispatched and the pull answered inside
    # the send's handling, and the consumer's answer left first.
    assert [(name, cmd.code) for name, cmd in log] == [
        ("consumer", ResponseCode.SUCCESS),
        ("producer", ResponseCode.SUCCESS),
    ]
    assert [m.body for m in decode_messages(log[0][1].body)] == [b"first"]
    assert log[0][1].field("nextBeginOffset") == "1" and broker.hold.held_count == 0


async def test_a_message_the_filter_refuses_leaves_the_pull_held(broker):
    log: list = []
    consumer, producer = connect(broker, "consumer", log), connect(broker, "producer", log)
    consumer.data_received(pull_frame(0, subscription="wanted"))
    await asyncio.sleep(0)
    producer.data_received(send_frame(b"other", tag="other"))
    await asyncio.sleep(0)
    # As RocketMQ's hold service: a message whose tag the pull skips does not wake it.
    assert [name for name, _ in log] == ["producer"] and broker.hold.held_count == 1
    producer.data_received(send_frame(b"mine", tag="wanted"))
    answers = [cmd for name, cmd in log if name == "consumer"]
    assert len(answers) == 1 and answers[0].code == ResponseCode.SUCCESS
    assert [m.body for m in decode_messages(answers[0].body)] == [b"mine"]
    assert answers[0].field("nextBeginOffset") == "2"


async def test_the_periodic_check_answers_a_pull_whose_new_messages_all_fail_the_filter(broker):
    """RocketMQ's checkHoldRequest (every 5 s, issue 32 item 11): the held pull is woken whatever
    the filter said, finds nothing matching and is answered with the offset moved past it."""
    log: list = []
    consumer, producer = connect(broker, "consumer", log), connect(broker, "producer", log)
    consumer.data_received(pull_frame(0, subscription="wanted"))
    await asyncio.sleep(0)
    for i in range(3):
        producer.data_received(send_frame(b"other-%d" % i, tag="other"))
    await asyncio.sleep(0)
    assert broker.hold.held_count == 1
    broker.hold.recheck(broker.store.get_max_offset_in_queue)
    answers = [cmd for name, cmd in log if name == "consumer"]
    assert [(a.code, a.field("nextBeginOffset")) for a in answers] == [
        (ResponseCode.PULL_RETRY_IMMEDIATELY, "3")
    ]
    assert broker.hold.held_count == 0
    consumer.data_received(pull_frame(3, subscription="wanted"))
    await asyncio.sleep(0)
    broker.hold.recheck(broker.store.get_max_offset_in_queue)  # at the queue's end: stays held
    assert broker.hold.held_count == 1


async def test_the_hold_service_asks_the_filter_about_the_new_message():
    hold = PullRequestHoldService(asyncio.get_running_loop())
    calls: list[bool] = []
    hold.park("t", 0, 0, 60, calls.append, accepts=lambda tags_code: tags_code == 7)
    hold.notify("t", 0, 1, tags_code=3)
    assert calls == [] and hold.held_count == 1
    hold.notify("t", 0, 2, tags_code=7)
    assert calls == [False] and hold.held_count == 0


async def test_a_held_pull_times_out_with_pull_not_found_and_nothing_is_read(broker):
    log: list = []
    consumer = connect(broker, "consumer", log)
    consumer.data_received(pull_frame(0, suspend_ms=30))
    for _ in range(300):
        if log:
            break
        await asyncio.sleep(0.01)
    assert [(name, cmd.code) for name, cmd in log] == [("consumer", ResponseCode.PULL_NOT_FOUND)]
    assert broker.hold.held_count == 0


async def test_a_consumer_that_disconnects_leaves_no_held_pull(broker):
    log: list = []
    consumer, producer = connect(broker, "consumer", log), connect(broker, "producer", log)
    consumer.data_received(pull_frame(0))
    await asyncio.sleep(0)
    assert broker.hold.held_count == 1
    consumer.connection_lost(None)
    assert broker.hold.held_count == 0
    producer.data_received(send_frame(b"nobody waits"))
    assert [name for name, _ in log] == ["producer"]


async def test_stopping_the_broker_answers_held_pulls(tmp_path):
    controller = await start_broker(tmp_path)
    log: list = []
    connect(controller, "consumer", log).data_received(pull_frame(0))
    await asyncio.sleep(0)
    assert log == []
    await controller.stop()
    assert [(name, cmd.code) for name, cmd in log] == [("consumer", ResponseCode.PULL_NOT_FOUND)]


async def test_held_pulls_leave_no_garbage_for_the_collector(broker):
    """Each held pull is freed when answered: a reference cycle per pull made the broker run a
    collection every few dozen messages, in the path of the message at hand."""
    log: list = []
    consumer, producer = connect(broker, "consumer", log), connect(broker, "producer", log)
    gc.collect()
    gc.disable()
    try:
        for offset in range(100):
            consumer.data_received(pull_frame(offset))
            await asyncio.sleep(0)
            producer.data_received(send_frame(b"m%d" % offset))
            await asyncio.sleep(0)
        assert [name for name, _ in log].count("consumer") == 100
        gc.set_debug(gc.DEBUG_SAVEALL)  # keep what the collector finds, to look at it
        gc.collect()
        # Whatever else the process left (a failed registration's traceback…), nothing of the
        # pulls: their requests, readers and wake-ups (a cycle per pull left 19 objects each).
        pull_requests = [
            o for o in gc.garbage if isinstance(o, RemotingCommand) and o.code == RequestCode.PULL_MESSAGE
        ]
        # The pull's partials (its store read) and held-pull records; not asyncio's own wait_for
        # partials, which a registration timing out meanwhile on a loaded machine leaves.
        held = [
            o
            for o in gc.garbage
            if (isinstance(o, functools.partial) and getattr(o.func, "__self__", None) is not None)
            or type(o).__name__ == "_HeldPull"
        ]
        assert (pull_requests, held) == ([], [])
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
