"""A producer's route refreshed after a send that failed because its master moved: which failures
ask for it, at most one request per topic per second, one shared by a burst of failing sends,
and the fault tolerance forgetting a broker set whose master moved. Also how send answers read
(RocketMQ's SendStatus and retryResponseCodes)."""

import asyncio
from typing import TYPE_CHECKING, cast

import pytest

from broker.client.errors import MQBrokerError, MQClientError
from broker.client.latency_fault import LatencyFaultTolerance
from broker.client.route_refresh import NoMasterError, RouteRefresher, route_may_be_stale, wait_for
from broker.client.send_result import RETRYABLE_CODES, SEND_STATUS, retryable
from broker.common.codes import ResponseCode
from broker.remoting.errors import (
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)

BROKER = "127.0.0.1:10911"

if TYPE_CHECKING:
    from broker.client.client_api import ClientAPI


class FakeInstance:
    """What a RouteRefresher uses of an MQClientInstance: spawn, route(refresh=True), master_addrs."""

    def __init__(self, moves_to: str | None = None, fails: bool = False) -> None:
        self.master_addrs = {"broker-a": "127.0.0.1:10911"}
        self.moves_to, self.fails = moves_to, fails
        self.asked: list[str] = []
        self.release = asyncio.Event()
        self.release.set()

    def spawn(self, coro):
        return asyncio.get_running_loop().create_task(coro)

    async def route(self, topic: str, refresh: bool = False):
        assert refresh
        self.asked.append(topic)
        await self.release.wait()
        if self.fails:
            raise MQClientError(f"no name server reachable for the route of {topic}")
        if self.moves_to:
            self.master_addrs = {"broker-a": self.moves_to}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    "error",
    [
        RemotingConnectError("127.0.0.1:1", "refused"),
        RemotingSendRequestError("127.0.0.1:1", "connection closed"),
        RemotingTimeoutError("127.0.0.1:1", 3000, 10),
        NoMasterError("the broker broker-a is not in any route"),
        MQBrokerError(ResponseCode.SERVICE_NOT_AVAILABLE, "message store is slave mode", BROKER),
        MQBrokerError(ResponseCode.TOPIC_NOT_EXIST, "topic[T] not exist, apply first please!", BROKER),
        MQBrokerError(
            ResponseCode.NO_PERMISSION, "the broker[127.0.0.1] sending message is forbidden", BROKER
        ),
    ],
)
def test_gone_or_refusing_writes_asks_for_the_route(error):
    assert route_may_be_stale(error)


@pytest.mark.parametrize(
    "error",
    [
        RemotingTooMuchRequestError("too many async sends in flight"),  # held back here, not there
        MQBrokerError(ResponseCode.MESSAGE_ILLEGAL, "bad", BROKER),
        MQBrokerError(ResponseCode.SYSTEM_BUSY, "busy", BROKER),
        MQClientError("the message body is empty"),
    ],
)
def test_other_failures_do_not(error):
    assert not route_may_be_stale(error)


def test_at_most_one_refresh_per_topic_per_second():
    async def run():
        instance, clock = FakeInstance(), Clock()
        refresher = RouteRefresher(instance, clock=clock)
        error = RemotingConnectError("127.0.0.1:10911", "refused")
        first = refresher.after_failure("T", error)
        await wait_for(first)
        assert refresher.after_failure("T", error) is first  # within the second: the same one
        clock.now += 0.5
        assert refresher.after_failure("T", error) is first
        other = refresher.after_failure("U", error)  # per topic
        await wait_for(other)
        clock.now += 0.6
        second = refresher.after_failure("T", error)
        assert second is not first
        await wait_for(second)
        assert refresher.after_failure("T", MQBrokerError(ResponseCode.MESSAGE_ILLEGAL, "x", BROKER)) is None
        return instance.asked

    assert asyncio.run(run()) == ["T", "U", "T"]


def test_a_burst_of_failing_sends_waits_for_one_refresh():
    async def run():
        instance, clock = FakeInstance(moves_to="127.0.0.1:20911"), Clock()
        instance.release.clear()  # the name server answers only when told
        refresher = RouteRefresher(instance, clock=clock)
        error = RemotingConnectError("127.0.0.1:10911", "refused")
        refreshes = [refresher.after_failure("T", error) for _ in range(20)]
        assert all(r is refreshes[0] for r in refreshes)
        clock.now += 5  # a slow name server: still one request while it is under way
        assert refresher.after_failure("T", error) is refreshes[0]
        waiters = [asyncio.ensure_future(wait_for(r)) for r in refreshes]
        await asyncio.sleep(0)
        assert not any(w.done() for w in waiters)
        instance.release.set()
        await asyncio.gather(*waiters)
        return instance.asked, instance.master_addrs

    asked, masters = asyncio.run(run())
    assert asked == ["T"] and masters == {"broker-a": "127.0.0.1:20911"}


def test_a_moved_master_is_forgotten_by_the_fault_tolerance():
    async def run(moves_to):
        faults = LatencyFaultTolerance()
        faults.update("broker-a", 0, isolation=True)  # its old master failed: avoided for a while
        refresher = RouteRefresher(FakeInstance(moves_to=moves_to), faults.forget)
        await wait_for(refresher.refresh("T"))
        return faults.is_available("broker-a")

    assert asyncio.run(run("127.0.0.1:20911"))
    assert not asyncio.run(run(None))  # the same master: still avoided


def test_a_name_server_failure_is_logged_and_asked_again_later():
    async def run():
        instance, clock = FakeInstance(fails=True), Clock()
        refresher = RouteRefresher(instance, clock=clock)
        error = RemotingConnectError("127.0.0.1:10911", "refused")
        await wait_for(refresher.after_failure("T", error))  # does not raise
        clock.now += 1.0
        await wait_for(refresher.after_failure("T", error))
        return instance.asked

    assert asyncio.run(run()) == ["T", "T"]


def test_send_answers_read_as_rocketmqs_client():
    # Stored, with a status: a result, never retried (retryAnotherBrokerWhenNotStoreOK is off).
    assert SEND_STATUS[ResponseCode.FLUSH_SLAVE_TIMEOUT] == "FLUSH_SLAVE_TIMEOUT"
    assert SEND_STATUS[ResponseCode.SLAVE_NOT_AVAILABLE] == "SLAVE_NOT_AVAILABLE"
    assert SEND_STATUS[ResponseCode.FLUSH_DISK_TIMEOUT] == "FLUSH_DISK_TIMEOUT"
    assert SEND_STATUS[ResponseCode.SUCCESS] == "SEND_OK"
    assert not set(SEND_STATUS) & RETRYABLE_CODES
    # DefaultMQProducer.retryResponseCodes (GO_AWAY aside: a proxy's code).
    assert {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    } == RETRYABLE_CODES
    assert retryable(RemotingConnectError("127.0.0.1:1", "refused"))
    assert not retryable(MQBrokerError(ResponseCode.MESSAGE_ILLEGAL, "bad", BROKER))


def test_the_route_fetched_last_names_a_broker_sets_master():
    """Two topics' routes name broker-a; T's is refreshed after its master moved: the instance
    sends to the new master, not to the one an older route of another topic still names."""
    from broker.client.instance import MQClientInstance
    from broker.common.route import BrokerData, QueueData, TopicRouteData

    def route(topic, master):
        return TopicRouteData(
            topic, [QueueData("broker-a", 4, 4, 6)], [BrokerData("c", "broker-a", {0: master})]
        )

    class NameServer:
        def __init__(self):
            self.master = "127.0.0.1:10911"

        async def topic_route(self, addr, topic):
            return route(topic, self.master)

    async def run():
        instance = MQClientInstance("127.0.0.1:9876", "route-order", loop=asyncio.get_running_loop())
        try:
            namesrv = NameServer()
            instance.api = cast("ClientAPI", namesrv)  # a stand-in: routing asks it topic_route only
            await instance.route("T")
            await instance.route("U")  # fetched later, with the same master
            namesrv.master = "127.0.0.1:20911"  # the master moves; only T's route is asked again
            await instance.route("T", refresh=True)
            return instance.broker_addr("broker-a")
        finally:
            instance.closing = True
            await instance.remoting.close()

    assert asyncio.run(run()) == "127.0.0.1:20911"
