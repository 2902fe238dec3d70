"""The broker's registration with its name servers (broker/server/registration.py), against a real
name server process, beside one that is dead: a socket that accepts and never answers, as a name
server behind a proxy that drops what it is sent."""

from __future__ import annotations

import socket
import threading
import time

import orjson
import pytest

from broker.common.codes import RequestCode, ResponseCode
from broker.local_cluster import SMALL_STORE_CONF, free_port
from broker.remoting.client import RemotingClient, SyncRemotingClient
from broker.remoting.command import create_request
from broker.server.config import BrokerConfig
from broker.server.controller import BrokerController
from tests.cluster import namesrv_fixture

SMALL_STORE = dict(line.split("=", 1) for line in SMALL_STORE_CONF.split())
namesrv = namesrv_fixture(scope="module")


@pytest.fixture(scope="module")
def dead_namesrv():
    """Accepts connections (the kernel completes them from the backlog) and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


async def start_broker(root, namesrv_addr: str) -> BrokerController:
    settings = {"listenPort": str(free_port()), "storePathRootDir": str(root), "namesrvAddr": namesrv_addr,
                "autoCreateSubscriptionGroup": "true", **SMALL_STORE}  # fmt: skip
    controller = BrokerController(BrokerConfig.from_properties(settings))
    await controller.start()
    return controller


def consumer_heartbeat(group: str) -> bytes:
    subscription = {"topic": "RegisteredTopic", "subString": "*", "expressionType": "TAG", "tagsSet": [],
                    "codeSet": [], "subVersion": 1, "classFilterMode": False}  # fmt: skip
    consumer = {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
                "subscriptionDataSet": [subscription]}  # fmt: skip
    heartbeat = {"clientID": f"127.0.0.1@{group}", "producerDataSet": [], "consumerDataSet": [consumer]}
    return orjson.dumps(heartbeat)


def route_now(namesrv_addr: str, topic: str):
    """GET_ROUTEINFO_BY_TOPIC asked once (no waiting for a registration to come)."""
    client = SyncRemotingClient()
    try:
        request = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return client.invoke(namesrv_addr, request)
    finally:
        client.close()


async def test_a_dead_name_server_does_not_delay_the_live_ones_route(tmp_path, namesrv, dead_namesrv):
    """As RocketMQ registers with every name server at once: the live one has a new group's retry
    route when the heartbeat that created it is answered (before: only after the dead one's
    3 s timeout, the heartbeat answered after waiting 2 s)."""
    broker = await start_broker(tmp_path, f"{dead_namesrv};{namesrv.addr}")
    client = RemotingClient()
    try:
        for group in ("beside-a-dead-one", "and-another"):  # the second: once the dead one is known
            began = time.monotonic()
            heartbeat = create_request(RequestCode.HEART_BEAT, body=consumer_heartbeat(group))
            answer = await client.invoke(broker.config.broker_addr, heartbeat, 10_000)
            answered = time.monotonic() - began  # in the message only: no test asserts speed
            assert answer.ok, answer.remark
            route = route_now(namesrv.addr, "%RETRY%" + group)
            assert route.code == ResponseCode.SUCCESS, (
                f"{group}: {route.remark} (answered in {answered:.2f} s)"
            )
    finally:
        await client.close()
        await broker.stop()


async def test_the_body_is_built_off_the_loop_once_per_table_version(tmp_path, namesrv):
    """At 20,000 groups the body is 40,000 topics: built on the loop, it stalled every client for
    most of a second at each registration (attack finding 3). Here the broker's own table is
    watched: each copy of it made for a registration, and on which thread."""
    broker = await start_broker(tmp_path, namesrv.addr)
    copies: list[int] = []
    table_copy = broker.topics.serialize_wrapper

    def watched() -> dict:
        copies.append(threading.get_ident())
        return table_copy()

    broker.topics.serialize_wrapper = watched  # type: ignore[method-assign]
    registration = broker.registration
    assert registration is not None
    try:
        broker.topics.ensure("%RETRY%built-off-the-loop", 1, 6)
        for _ in range(3):  # one change, three registrations: one copy
            assert await registration.register_all()
        assert route_now(namesrv.addr, "%RETRY%built-off-the-loop").code == ResponseCode.SUCCESS
        assert len(copies) == 1 and threading.get_ident() not in copies, (copies, threading.get_ident())
    finally:
        await broker.stop()
