"""Dead letters of a consumer group (``%DLQ%<group>``): listing, filtering and replaying them.

A replay sends a copy of the dead letter to the original topic (RETRY_TOPIC property, which the
broker sets when a message first fails) or to the group's retry topic (only that group sees it
again). The copy keeps body, flag, tags, keys and application properties; the broker's own
bookkeeping properties are dropped so it is a fresh message, and ORIGIN_MESSAGE_ID names the
message it replays, as RocketMQ does for a sent-back message. A copy sent to the retry topic keeps
the original topic in RETRY_TOPIC, as RocketMQ's own retries do: consumers restore it as the
message's topic, and if the copy dies again its dead letter names the original topic as origin.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from broker.client import Producer
from broker.client.admin import MQAdmin, NotFoundError
from broker.common import message_const as mc
from broker.common.message import Message, MessageExt
from broker.common.message_codec import MessageDecodeError, decode_offset_msg_id
from broker.common.topic_config import (
    PERM_READ,
    PERM_WRITE,
    dlq_topic,
    is_readable,
    is_retry_topic,
    retry_topic,
)

from .reading import LocatedMessage, read_topic

TARGET_ORIGINAL, TARGET_RETRY = "original", "retry"
ROUTE_SETTLE_S = 5.0
TARGETS = (TARGET_ORIGINAL, TARGET_RETRY)

# Properties the broker or the sending client owns: a replayed copy gets fresh ones.
_NOT_COPIED = frozenset(
    {
        mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        mc.PROPERTY_DELAY_TIME_LEVEL,
        mc.PROPERTY_REAL_TOPIC,
        mc.PROPERTY_REAL_QUEUE_ID,
        mc.PROPERTY_RETRY_TOPIC,
        mc.PROPERTY_TRANSACTION_PREPARED,
        mc.PROPERTY_PRODUCER_GROUP,
        mc.PROPERTY_MIN_OFFSET,
        mc.PROPERTY_MAX_OFFSET,
        mc.PROPERTY_RECONSUME_TIME,
        mc.PROPERTY_MAX_RECONSUME_TIMES,
        mc.PROPERTY_CONSUME_START_TIMESTAMP,
        mc.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
        mc.PROPERTY_TRANSACTION_CHECK_TIMES,
        mc.PROPERTY_WAIT_STORE_MSG_OK,
        mc.PROPERTY_MSG_REGION,
        mc.PROPERTY_TRACE_SWITCH,
        mc.PROPERTY_CLUSTER,
    }
)


@dataclass(frozen=True)
class DeadLetterFilter:
    key: str = ""
    tag: str = ""
    begin_ms: int | None = None
    end_ms: int | None = None

    def matches(self, message: MessageExt) -> bool:
        if self.key and not any(self.key in k for k in message.keys) and self.key != message.client_msg_id:
            return False
        if self.tag and message.tags != self.tag:
            return False
        if self.begin_ms is not None and message.store_timestamp < self.begin_ms:
            return False
        return self.end_ms is None or message.store_timestamp <= self.end_ms


@dataclass(frozen=True)
class ReplayStep:
    """One line of a replay plan: which dead letter goes where (or why it cannot)."""

    offset_msg_id: str
    client_msg_id: str
    original_topic: str | None
    destination: str | None
    error: str = ""


@dataclass(frozen=True)
class ReplayOutcome:
    step: ReplayStep
    new_msg_id: str = ""
    error: str = ""


def original_topic(message: MessageExt) -> str | None:
    return message.get_property(mc.PROPERTY_RETRY_TOPIC) or message.get_property(mc.PROPERTY_REAL_TOPIC)


def write_only_brokers(admin: MQAdmin, group: str) -> list[str]:
    """Brokers where the group's DLQ topic cannot be read. A broker creates it write-only (as
    RocketMQ 4.x does, so nothing consumes dead letters by accident); browsing needs read."""
    try:
        route = admin.topic_route(dlq_topic(group))
    except NotFoundError:
        return []
    return sorted(q.broker_name for q in route.queue_datas if not is_readable(q.perm))


def make_readable(admin: MQAdmin, group: str) -> list[str]:
    """Give the DLQ topic read permission (perm 6) on every broker of its route, keeping its queue
    counts, as an operator does in RocketMQ's dashboard before browsing dead letters."""
    topic = dlq_topic(group)
    route = admin.topic_route(topic)
    changed = []
    for queue_data in route.queue_datas:
        if is_readable(queue_data.perm):
            continue
        broker = route.broker(queue_data.broker_name)
        if broker is None or not broker.master_addr:
            raise NotFoundError(f"broker {queue_data.broker_name!r} of topic {topic!r} has no master")
        addr = broker.master_addr
        admin.create_or_update_topic(
            addr, topic, queue_data.read_queue_nums, queue_data.write_queue_nums, PERM_READ | PERM_WRITE
        )
        changed.append(queue_data.broker_name)
    # Brokers re-register the topic with the name servers right away, but asynchronously; wait for
    # the route to say so, or the page the operator lands on next would still call it write-only.
    deadline = time.monotonic() + ROUTE_SETTLE_S
    while changed and write_only_brokers(admin, group) and time.monotonic() < deadline:
        time.sleep(0.05)
    return changed


def list_dead_letters(
    admin: MQAdmin, group: str, flt: DeadLetterFilter | None = None, newest_per_queue: int = 1000
) -> list[LocatedMessage]:
    flt = flt or DeadLetterFilter()
    return read_topic(admin, dlq_topic(group), newest_per_queue, flt.matches)


def find_dead_letters(admin: MQAdmin, group: str, offset_msg_ids: Iterable[str]) -> list[MessageExt]:
    """The dead letters named by their offsetMsgIds; an id that is not a dead letter of this group
    is refused rather than replayed (a forged form must not resend arbitrary messages)."""
    messages = []
    topic = dlq_topic(group)
    for msg_id in offset_msg_ids:
        try:
            decode_offset_msg_id(msg_id)
        except MessageDecodeError:
            raise ValueError(
                f"{msg_id!r} is not an offsetMsgId (32 hex digits: broker address + offset)"
            ) from None
        message = admin.view_cluster_message(msg_id)
        if message.topic != topic:
            raise ValueError(f"message {msg_id} is in topic {message.topic!r}, not in {topic!r}")
        messages.append(message)
    return messages


def plan_replay(group: str, messages: Iterable[MessageExt], target: str) -> list[ReplayStep]:
    if target not in TARGETS:
        raise ValueError(f"unknown replay target {target!r}: use one of {', '.join(TARGETS)}")
    steps = []
    for message in messages:
        origin = original_topic(message)
        if target == TARGET_RETRY:
            destination, error = retry_topic(group), ""
        elif origin:
            destination, error = origin, ""
        else:
            destination, error = None, "no original topic recorded (RETRY_TOPIC); replay to the retry topic"
        steps.append(ReplayStep(message.msg_id, message.client_msg_id, origin, destination, error))
    return steps


def replay_copy(message: MessageExt, destination: str) -> Message:
    properties = {k: v for k, v in message.properties.items() if k not in _NOT_COPIED}
    properties[mc.PROPERTY_ORIGIN_MESSAGE_ID] = message.client_msg_id
    origin = original_topic(message)
    if origin and is_retry_topic(destination):
        properties[mc.PROPERTY_RETRY_TOPIC] = origin
    return Message(destination, message.body, message.flag, properties)


class RateLimiter:
    """At most ``per_second`` calls to ``wait`` return per second (0 = unlimited)."""

    def __init__(self, per_second: float, clock=time.monotonic, sleep=time.sleep) -> None:
        self.interval = 1.0 / per_second if per_second > 0 else 0.0
        self.clock, self.sleep = clock, sleep
        self.next_at = clock()

    def wait(self) -> None:
        if not self.interval:
            return
        now = self.clock()
        if now < self.next_at:
            self.sleep(self.next_at - now)
        self.next_at = max(now, self.next_at) + self.interval


def replay(
    producer: Producer, group: str, messages: Iterable[MessageExt], target: str, per_second: float = 0
) -> Iterator[ReplayOutcome]:
    """Send each dead letter's copy; one outcome per message, errors reported, never raised."""
    limiter = RateLimiter(per_second)
    by_id = {}
    listed = []
    for message in messages:
        by_id[message.msg_id] = message
        listed.append(message)
    for step in plan_replay(group, listed, target):
        if step.error or step.destination is None:  # (no destination: error says why)
            yield ReplayOutcome(step, error=step.error)
            continue
        limiter.wait()
        try:
            result = producer.send(replay_copy(by_id[step.offset_msg_id], step.destination))
        except Exception as exc:  # one failed send must not stop the rest of a bulk replay
            yield ReplayOutcome(step, error=f"{type(exc).__name__}: {exc}")
            continue
        yield ReplayOutcome(step, new_msg_id=result.msg_id)
