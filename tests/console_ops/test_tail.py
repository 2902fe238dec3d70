"""Live tail over a real websocket consumer (Channels communicator) and a real broker."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from console.tail.routing import websocket_urlpatterns
from tests.cluster import send

pytestmark = pytest.mark.django_db(transaction=True)

TOPIC = "OpsTail"


@pytest.fixture
def fast_tail():
    from console.tail.pump import registry

    registry.settings.route_refresh_s = 0.5
    yield registry
    registry.settings.route_refresh_s = 5.0


@pytest.fixture
def topic_exists(namesrv):
    """TOPIC has a route before tailing starts, whichever tests ran before (a tail reaches "live"
    only then); the message sent to make it is older than the tail, so never shown."""
    send(namesrv, TOPIC, 1, keys="seed")


async def _connect(user, topic=TOPIC):
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/tail/{topic}/")
    communicator.scope["user"] = user
    connected, code = await communicator.connect()
    return communicator, connected, code


async def _until(communicator, predicate, timeout=15.0):
    """Next message that satisfies ``predicate`` (others, e.g. status ticks, are skipped)."""

    async def scan():
        while True:
            message = await communicator.receive_json_from(timeout=timeout)
            if predicate(message):
                return message

    return await asyncio.wait_for(scan(), timeout)


async def _live(communicator):
    await _until(communicator, lambda m: m["type"] == "status" and m["status"] == "live")


async def test_anonymous_socket_is_closed():
    _, connected, code = await _connect(AnonymousUser())
    assert not connected and code == 4403


async def test_messages_sent_after_start_arrive_filtered(namesrv, viewer, fast_tail):
    send(namesrv, TOPIC, 1, keys="before")  # creates the topic; must not be shown (tail starts at max)
    communicator, connected, _ = await _connect(viewer)
    assert connected
    try:
        await _live(communicator)
        await communicator.send_json_to({"action": "filter", "tags": "keep", "key": "", "sql": ""})
        assert (await _until(communicator, lambda m: m["type"] == "filter"))["ok"] is True
        await database_sync_to_async(send)(namesrv, TOPIC, 2, keys="drop", tags="other")
        await database_sync_to_async(send)(namesrv, TOPIC, 1, keys="after", tags="keep")
        seen: list[dict] = []
        while not any(e["keys"] == ["after-0"] for e in seen):
            batch = await _until(communicator, lambda m: m["type"] == "messages")
            seen.extend(batch["events"])
        assert [e["keys"] for e in seen] == [["after-0"]]
        assert seen[0]["body"].startswith('{"n": 0') and seen[0]["topic"] == TOPIC
    finally:
        await communicator.disconnect()


async def _pause_and_hold(communicator, namesrv, keys: str, count: int) -> dict:
    """Pause, send ``count`` messages, and return the last "held" report once all are counted."""
    await communicator.send_json_to({"action": "pause"})
    await _until(communicator, lambda m: m["type"] == "paused")
    await database_sync_to_async(send)(namesrv, TOPIC, count, keys=keys)
    return await _until(communicator, lambda m: m["type"] == "held" and m["held"] + m["dropped"] == count)


async def test_messages_matching_while_paused_are_held_and_shown_on_resume(
    namesrv, topic_exists, viewer, fast_tail
):
    communicator, _, _ = await _connect(viewer)
    try:
        await _live(communicator)
        held = await _pause_and_hold(communicator, namesrv, "paused", 2)
        assert (held["held"], held["dropped"]) == (2, 0)
        await communicator.send_json_to({"action": "resume"})
        resumed = await _until(communicator, lambda m: m["type"] == "resumed")
        assert (resumed["missed"], resumed["held"], resumed["dropped"]) == (2, 2, 0)
        batch = await _until(communicator, lambda m: m["type"] == "messages" and m["events"])
        assert sorted(e["keys"][0] for e in batch["events"]) == ["paused-0", "paused-1"]
        await database_sync_to_async(send)(namesrv, TOPIC, 1, keys="resumed")
        batch = await _until(communicator, lambda m: m["type"] == "messages" and m["events"])
        assert [e["keys"] for e in batch["events"]] == [["resumed-0"]]
    finally:
        await communicator.disconnect()


async def test_a_paused_socket_holds_at_most_what_the_page_keeps(
    namesrv, topic_exists, viewer, fast_tail, monkeypatch
):
    from console.tail import consumer

    monkeypatch.setattr(consumer, "BUFFER_SIZE", 3)
    communicator, _, _ = await _connect(viewer)
    try:
        await _live(communicator)
        held = await _pause_and_hold(communicator, namesrv, "many", 5)
        assert (held["held"], held["dropped"]) == (3, 2)
        await communicator.send_json_to({"action": "resume"})
        resumed = await _until(communicator, lambda m: m["type"] == "resumed")
        assert (resumed["missed"], resumed["held"], resumed["dropped"]) == (5, 3, 2)
        batch = await _until(communicator, lambda m: m["type"] == "messages" and m["events"])
        assert len(batch["events"]) == 3
    finally:
        await communicator.disconnect()


async def test_bad_filters_are_refused_with_the_reason(namesrv, viewer, fast_tail):
    communicator, _, _ = await _connect(viewer)
    try:
        await communicator.send_json_to({"action": "filter", "sql": "price >", "tags": "", "key": ""})
        reply = await _until(communicator, lambda m: m["type"] == "filter")
        assert reply["ok"] is False and "price" in reply["error"]
        await communicator.send_json_to({"action": "explode"})
        assert "unknown action" in (await _until(communicator, lambda m: m["type"] == "error"))["error"]
    finally:
        await communicator.disconnect()


async def test_sql_filter_selects_by_property(namesrv, topic_exists, viewer, fast_tail):
    communicator, _, _ = await _connect(viewer)
    try:
        await _live(communicator)
        await communicator.send_json_to({"action": "filter", "sql": "amount > 100", "tags": "", "key": ""})
        assert (await _until(communicator, lambda m: m["type"] == "filter"))["ok"] is True
        await database_sync_to_async(send)(namesrv, TOPIC, 1, keys="small", amount=5)
        await database_sync_to_async(send)(namesrv, TOPIC, 1, keys="big", amount=500)
        batch = await _until(communicator, lambda m: m["type"] == "messages" and m["events"])
        assert [e["keys"] for e in batch["events"]] == [["big-0"]]
    finally:
        await communicator.disconnect()


def _burst(namesrv_addr: str, count: int) -> set[str]:
    """``count`` messages sent as fast as the producer goes (async sends), their msgIds."""
    from broker.client import Producer
    from broker.common.message import Message

    producer = Producer("OPS_TAIL_BURST", namesrv_addr).start()
    try:
        futures = [producer.send_async(Message(TOPIC, b"burst")) for _ in range(count)]
        return {future.result(10).msg_id for future in futures}
    finally:
        producer.shutdown()


async def test_a_burst_arrives_complete(namesrv, topic_exists, viewer, fast_tail):
    communicator, _, _ = await _connect(viewer)
    try:
        await _live(communicator)
        sent = await database_sync_to_async(_burst)(namesrv, 400)
        seen: set[str] = set()
        while not sent <= seen:
            batch = await _until(communicator, lambda m: m["type"] == "messages" and m["events"])
            seen.update(e["msgId"] for e in batch["events"])
        assert sent <= seen
    finally:
        await communicator.disconnect()


async def test_tailing_a_topic_before_it_exists_shows_its_first_messages(namesrv, viewer, fast_tail):
    communicator, _, _ = await _connect(viewer, topic="OpsTailBornLater")
    try:
        waiting = await _until(communicator, lambda m: m["type"] == "status")
        assert waiting["status"] == "waiting"
        await database_sync_to_async(send)(namesrv, "OpsTailBornLater", 2, keys="first")
        seen: list[str] = []
        while len(seen) < 2:
            batch = await _until(communicator, lambda m: m["type"] == "messages" and m["events"])
            seen.extend(e["keys"][0] for e in batch["events"])
        assert sorted(seen) == ["first-0", "first-1"]
    finally:
        await communicator.disconnect()


async def test_tailing_leaves_no_consumer_of_the_topic_behind(
    namesrv, topic_exists, admin, viewer, fast_tail
):
    """The tail is a reader (RocketMQ's tools group, no subscription, nothing committed): while it
    runs and after a message went through it, no group consumes the topic and no retry topic was
    made for it."""
    communicator, _, _ = await _connect(viewer)
    try:
        await _live(communicator)
        await database_sync_to_async(send)(namesrv, TOPIC, 1, keys="read-only")
        await _until(communicator, lambda m: m["type"] == "messages" and m["events"])
        assert await asyncio.to_thread(admin.topic_consumed_by, TOPIC) == []
        assert not [t for t in await asyncio.to_thread(admin.topic_list) if "TOOLS_CONSUMER" in t]
    finally:
        await communicator.disconnect()
    assert await asyncio.to_thread(admin.topic_consumed_by, TOPIC) == []
