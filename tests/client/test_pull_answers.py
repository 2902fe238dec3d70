"""``ClientAPI.pull`` against a server on a loopback socket: the messages found reach the
consumer while the answer is read, before the pulling coroutine resumes; an answer nobody waits
for any more is dropped; a refusal is an error and delivers nothing."""

from __future__ import annotations

import asyncio

import pytest

from broker.client.client_api import ClientAPI
from broker.client.errors import MQBrokerError
from broker.common.codes import RequestCode, ResponseCode
from broker.common.message import MessageExt
from broker.common.message_codec import encode_host, encode_record, properties_to_string
from broker.common.request_headers import PullMessageRequestHeader, PullMessageResponseHeader
from broker.remoting.client import RemotingClient
from broker.remoting.command import response_to
from broker.remoting.server import RemotingServer
from tests.listener_failures import wait_until_async

HOST = encode_host(("127.0.0.1", 10911))
HEADER = PullMessageRequestHeader("g", "Orders", 0, 0, 32, 0, 0, 0, 0)


def record(i: int) -> bytearray:
    properties = properties_to_string({"KEYS": f"k{i}"}).encode()
    return encode_record(0, 0, 0, 0, HOST, HOST, f"body-{i}".encode(), b"Orders", properties, queue_offset=i)


def records(count: int) -> bytes:
    return b"".join(record(i) for i in range(count))


class HoldingBroker:
    """Answers each PULL_MESSAGE when the test releases it, with what the test chose."""

    def __init__(self) -> None:
        self.server = RemotingServer(port=0)
        self.server.register_processor(RequestCode.PULL_MESSAGE, self.pull)
        self.held: asyncio.Queue = asyncio.Queue()

    def pull(self, conn, request):
        answer = asyncio.get_running_loop().create_future()
        self.held.put_nowait(answer)

        async def answered():
            code, body = await answer
            fields = PullMessageResponseHeader(next_begin_offset=2, min_offset=0, max_offset=2,
                                               suggest_which_broker_id=0)  # fmt: skip
            remark = None if code == ResponseCode.SUCCESS else "refused"
            return response_to(request, code, remark, fields, body)

        return answered()

    async def release(self, code: int, body: bytes | None = None) -> None:
        (await asyncio.wait_for(self.held.get(), 5)).set_result((code, body))


async def with_broker(scenario) -> None:
    broker = HoldingBroker()
    port = await broker.server.start()
    remoting = RemotingClient()
    try:
        await scenario(broker, ClientAPI(remoting), f"127.0.0.1:{port}")
    finally:
        await remoting.close()
        await broker.server.stop()


def test_found_messages_arrive_before_the_puller_resumes():
    events: list[tuple] = []

    async def scenario(broker, api, addr):
        async def puller():
            def on_found(messages):  # while the answer is read: in no task, the puller's included
                events.append((messages, asyncio.current_task()))

            code, fields = await api.pull(addr, HEADER, 3000, on_found)
            events.append(("resumed", code, fields.next_begin_offset))

        task = asyncio.create_task(puller())
        await broker.release(ResponseCode.SUCCESS, records(2))
        await asyncio.wait_for(task, 5)

    asyncio.run(with_broker(scenario))
    (found, task_at_delivery), resumed = events
    assert task_at_delivery is None
    delivered = [(m.body, m.keys[0], m.queue_offset) for m in found]
    assert delivered == [(b"body-0", "k0", 0), (b"body-1", "k1", 1)]
    assert resumed == ("resumed", ResponseCode.SUCCESS, 2)


def test_an_answer_after_the_puller_was_cancelled_is_dropped():
    found: list[list[MessageExt]] = []

    async def scenario(broker, api, addr):
        task = asyncio.create_task(api.pull(addr, HEADER, 3000, found.append))
        assert await wait_until_async(lambda: not broker.held.empty(), 5)  # the request is out and held
        task.cancel()
        await broker.release(ResponseCode.SUCCESS, records(1))
        with pytest.raises(asyncio.CancelledError):
            await task
        # The connection still serves: the next pull gets its messages.
        second = asyncio.create_task(api.pull(addr, HEADER, 3000, found.append))
        await broker.release(ResponseCode.SUCCESS, records(3))
        assert (await asyncio.wait_for(second, 5))[0] == ResponseCode.SUCCESS

    asyncio.run(with_broker(scenario))
    assert [len(batch) for batch in found] == [3]


def test_a_refused_pull_raises_and_delivers_nothing():
    found: list[list[MessageExt]] = []

    async def scenario(broker, api, addr):
        task = asyncio.create_task(api.pull(addr, HEADER, 3000, found.append))
        await broker.release(ResponseCode.SUBSCRIPTION_NOT_EXIST)
        with pytest.raises(MQBrokerError) as refused:
            await asyncio.wait_for(task, 5)
        assert refused.value.response_code == ResponseCode.SUBSCRIPTION_NOT_EXIST
        # "Nothing found" is an answer, not an error, and carries no messages either.
        task = asyncio.create_task(api.pull(addr, HEADER, 3000, found.append))
        await broker.release(ResponseCode.PULL_NOT_FOUND)
        assert (await asyncio.wait_for(task, 5))[0] == ResponseCode.PULL_NOT_FOUND

    asyncio.run(with_broker(scenario))
    assert found == []


def test_a_damaged_message_is_checked_on_receipt_and_never_delivered(caplog):
    """A broker (or the path to it) sending a record whose body no longer matches its CRC: the
    SDK reports it and delivers only the intact ones (before: delivered with the wrong bytes)."""
    found: list[list[MessageExt]] = []
    damaged = bytearray(record(1))
    damaged[damaged.index(b"body-1")] ^= 0x20  # "Body-1", same length: only the CRC tells

    async def scenario(broker, api, addr):
        task = asyncio.create_task(api.pull(addr, HEADER, 3000, found.append))
        await broker.release(ResponseCode.SUCCESS, record(0) + bytes(damaged) + record(2))
        assert (await asyncio.wait_for(task, 5))[0] == ResponseCode.SUCCESS

    asyncio.run(with_broker(scenario))
    assert [m.body for m in found[0]] == [b"body-0", b"body-2"]
    errors = [r.message for r in caplog.records if r.levelname == "ERROR"]
    assert any("damaged and was not delivered" in message for message in errors)
