"""``DefaultMQProducerImpl``: the asyncio core behind ``Producer`` and ``AsyncProducer``.

Every method runs on the client instance's loop. A sync send tries up to 1 + 2 times, each
retry on a queue of another broker than the one that just failed, within one overall timeout;
brokers that failed or answered slowly are avoided for a while when ``send_latency_fault_enable``
is on (RocketMQ's MQFaultStrategy). Bodies over ``compress_msg_body_over_howmuch`` are sent
zlib-compressed with the COMPRESSED sys flag; every message gets a client unique id (UNIQ_KEY).
"""

from __future__ import annotations

import itertools
import logging
import random
import time
import zlib
from dataclasses import dataclass

from broker.common import request_headers as rh
from broker.common import topic_config as tc
from broker.common.batch_codec import encode_batch
from broker.common.message import Message
from broker.common.message_codec import properties_to_string
from broker.common.message_id import create_unique_id
from broker.common.sysflag import COMPRESSED_FLAG
from broker.remoting.codes import ResponseCode
from broker.remoting.errors import RemotingError

from .errors import MQBrokerError, MQClientError
from .message_queue import MessageQueue
from .producer_parts import LatencyFaultTolerance, split_batches
from .results import SendResult
from .topic_route import TopicPublishInfo, TopicRouteData

log = logging.getLogger(__name__)

MAX_MESSAGE_SIZE = 4 * 1024 * 1024
# Broker answers after which a sync send tries another broker (RocketMQ's list).
RETRY_RESPONSE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)


@dataclass(slots=True)
class ProducerConfig:
    group: str = "DEFAULT_PRODUCER"
    send_msg_timeout_ms: int = 3000
    retry_times_when_send_failed: int = 2
    compress_msg_body_over_howmuch: int = 4096
    max_message_size: int = MAX_MESSAGE_SIZE
    default_topic_queue_nums: int = 4
    create_topic_key: str = tc.AUTO_CREATE_TOPIC_KEY_TOPIC
    send_latency_fault_enable: bool = False
    retry_another_broker_when_not_store_ok: bool = False


def check_message(msg: Message, max_size: int) -> None:
    """RocketMQ's Validators.checkMessage: refuse before anything goes on the wire."""
    if msg is None:
        raise MQClientError("the message is null", ResponseCode.MESSAGE_ILLEGAL)
    reason = tc.validate_topic(msg.topic)
    if reason is None and msg.topic in tc.SYSTEM_TOPICS:
        reason = f"sending a message to the system topic {msg.topic} is not allowed"
    if reason:
        raise MQClientError(reason, ResponseCode.MESSAGE_ILLEGAL)
    if not msg.body:
        raise MQClientError("the message body is empty", ResponseCode.MESSAGE_ILLEGAL)
    if len(msg.body) > max_size:
        raise MQClientError(
            f"the message body size over max value, MAX: {max_size}", ResponseCode.MESSAGE_ILLEGAL
        )


class DefaultMQProducerImpl:
    def __init__(self, config: ProducerConfig, instance) -> None:
        self.config = config
        self.group = config.group
        self.instance = instance
        self.publish_info_table: dict[str, TopicPublishInfo] = {}
        self.faults = LatencyFaultTolerance()
        self._send_which_queue = itertools.count(random.randrange(1 << 16))

    # -- life cycle (on the instance's loop) ------------------------------------------------
    async def start(self) -> None:
        self.instance.register_producer(self.group, self)
        await self.instance.send_heartbeats()

    async def shutdown(self) -> None:
        await self.instance.unregister_producer(self.group)

    # -- called by the client instance -------------------------------------------------------
    def publish_topics(self) -> set[str]:
        return set(self.publish_info_table)

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        if topic in self.publish_info_table:
            self.publish_info_table[topic] = TopicPublishInfo.of(topic, route)

    # -- routes -------------------------------------------------------------------------------
    async def find_publish_info(self, topic: str) -> TopicPublishInfo:
        info = self.publish_info_table.get(topic)
        if info is None or not info.ok:
            self.publish_info_table.setdefault(topic, TopicPublishInfo([]))
            route = await self.instance.route(topic, refresh=True)
            if route is not None:
                info = self.publish_info_table[topic] = TopicPublishInfo.of(topic, route)
        if info is not None and info.ok:
            return info
        # No route yet: send through the brokers that may auto-create it (TBW102's route).
        default = await self.instance.route(self.config.create_topic_key, refresh=True)
        if default is not None:
            info = TopicPublishInfo.auto_create(topic, default, self.config.default_topic_queue_nums)
            if info.ok:
                self.publish_info_table[topic] = info
                return info
        raise MQClientError(
            f"No route info of this topic: {topic}, and auto-creation through "
            f"{self.config.create_topic_key} is not possible",
            ResponseCode.TOPIC_NOT_EXIST,
        )

    def select_queue(self, info: TopicPublishInfo, last_broker: str | None) -> MessageQueue:
        queues = info.message_queues
        if self.config.send_latency_fault_enable:
            start = next(self._send_which_queue)
            for i in range(len(queues)):
                mq = queues[(start + i) % len(queues)]
                if self.faults.is_available(mq.broker_name) and mq.broker_name != last_broker:
                    return mq
        start = next(self._send_which_queue)
        for i in range(len(queues)):
            mq = queues[(start + i) % len(queues)]
            if mq.broker_name != last_broker:
                return mq
        return queues[start % len(queues)]

    def _update_fault(self, broker_name: str, started: float, isolation: bool) -> None:
        if self.config.send_latency_fault_enable:
            self.faults.update(broker_name, (time.monotonic() - started) * 1000, isolation)

    # -- sending ------------------------------------------------------------------------------
    async def send(self, msg: Message, timeout_ms: int | None = None) -> SendResult:
        """Sync send with retries on other brokers, all within ``timeout_ms``."""
        check_message(msg, self.config.max_message_size)
        return await self._send_with_retries(msg, self._encode(msg), timeout_ms)

    async def _send_with_retries(self, msg: Message, encoded, timeout_ms: int | None) -> SendResult:
        timeout_ms = timeout_ms or self.config.send_msg_timeout_ms
        begin = time.monotonic()
        info = await self.find_publish_info(msg.topic)
        last_broker, last_error, brokers_sent = None, None, []
        for _ in range(1 + self.config.retry_times_when_send_failed):
            mq = self.select_queue(info, last_broker)
            remaining = timeout_ms - int((time.monotonic() - begin) * 1000)
            if remaining <= 0:
                raise MQClientError(
                    f"send of {msg.topic} timed out after {timeout_ms} ms (tried {brokers_sent})"
                ) from last_error
            brokers_sent.append(mq.broker_name)
            started = time.monotonic()
            try:
                result = await self.send_kernel(mq, encoded, remaining)
            except (RemotingError, MQBrokerError, MQClientError) as exc:
                self._update_fault(mq.broker_name, started, isolation=True)
                log.info("send to %s failed (%s); trying another broker", mq, exc)
                last_broker, last_error = mq.broker_name, exc
                if isinstance(exc, MQBrokerError) and exc.response_code not in RETRY_RESPONSE_CODES:
                    raise
                info = await self.find_publish_info(msg.topic)
                continue
            self._update_fault(mq.broker_name, started, isolation=False)
            if result.send_status != "SEND_OK" and self.config.retry_another_broker_when_not_store_ok:
                last_broker = mq.broker_name
                continue
            return result
        elapsed = int((time.monotonic() - begin) * 1000)
        raise MQClientError(
            f"Send [{len(brokers_sent)}] times, still failed, cost [{elapsed}]ms, Topic: {msg.topic}, "
            f"BrokersSent: {brokers_sent}: {last_error}",
            getattr(last_error, "response_code", -1),
        ) from last_error

    async def send_to_queue(
        self, msg: Message, mq: MessageQueue, timeout_ms: int | None = None
    ) -> SendResult:
        check_message(msg, self.config.max_message_size)
        if msg.topic != mq.topic:
            raise MQClientError(f"message's topic {msg.topic} is not the queue's topic {mq.topic}")
        return await self.send_kernel(mq, self._encode(msg), timeout_ms or self.config.send_msg_timeout_ms)

    async def send_select(self, msg: Message, selector, arg, timeout_ms: int | None = None) -> SendResult:
        """The queue comes from ``selector(queues, msg, arg)`` (or ``selector.select``); no retries,
        as RocketMQ: an ordered producer must not silently move a key to another queue."""
        check_message(msg, self.config.max_message_size)
        info = await self.find_publish_info(msg.topic)
        choose = getattr(selector, "select", selector)
        mq = choose(list(info.message_queues), msg, arg)
        if mq is None:
            raise MQClientError("the message queue selector returned no queue")
        return await self.send_kernel(mq, self._encode(msg), timeout_ms or self.config.send_msg_timeout_ms)

    async def send_oneway(self, msg: Message, mq: MessageQueue | None = None) -> None:
        check_message(msg, self.config.max_message_size)
        if mq is None:
            mq = self.select_queue(await self.find_publish_info(msg.topic), None)
        header, body, _ = self._encode(msg)
        header.queue_id = mq.queue_id
        await self.instance.api.send_message_oneway(await self._broker_addr(mq), header, body)

    async def send_batch(
        self, messages: list[Message], mq: MessageQueue | None = None, timeout_ms: int | None = None
    ) -> list[SendResult]:
        """Split into batches of at most ``max_message_size`` and send each (SEND_BATCH_MESSAGE)."""
        results = []
        for chunk in split_batches(list(messages), self.config.max_message_size):
            for msg in chunk:
                check_message(msg, self.config.max_message_size)
                if tc.is_retry_topic(msg.topic):
                    reason = "Retry Group is not supported for batching"
                    raise MQClientError(reason, ResponseCode.MESSAGE_ILLEGAL)
                msg.unique_key = msg.unique_key or create_unique_id()
            encoded = self._encode_batch(chunk)
            if mq is not None:
                timeout_ms = timeout_ms or self.config.send_msg_timeout_ms
                results.append(await self.send_kernel(mq, encoded, timeout_ms))
            else:
                results.append(await self._send_with_retries(chunk[0], encoded, timeout_ms))
        return results

    # -- encoding and the kernel ------------------------------------------------------------
    def _encode(self, msg: Message) -> tuple[rh.SendMessageRequestHeader, bytes, str]:
        msg.unique_key = msg.unique_key or create_unique_id()
        body, sys_flag = bytes(msg.body), 0
        if len(body) > self.config.compress_msg_body_over_howmuch:
            # The application's message keeps its plain body; only the wire copy is compressed.
            body, sys_flag = zlib.compress(body, 5), COMPRESSED_FLAG
        header = self._header(msg.topic, sys_flag, msg.flag, properties_to_string(msg.properties))
        return header, body, msg.unique_key

    def _encode_batch(self, chunk: list[Message]):
        header = self._header(chunk[0].topic, 0, 0, None, batch=True)
        return header, encode_batch(chunk), ",".join(m.unique_key for m in chunk)

    def _header(self, topic, sys_flag, flag, properties, batch=False) -> rh.SendMessageRequestHeader:
        return rh.SendMessageRequestHeader(
            producer_group=self.group,
            topic=topic,
            default_topic=self.config.create_topic_key,
            default_topic_queue_nums=self.config.default_topic_queue_nums,
            queue_id=-1,
            sys_flag=sys_flag,
            born_timestamp=int(time.time() * 1000),
            flag=flag,
            properties=properties,
            reconsume_times=0,
            unit_mode=False,
            batch=batch,
        )

    async def _broker_addr(self, mq: MessageQueue) -> str:
        addr = self.instance.master_addr(mq.broker_name)
        if addr is None:
            await self.instance.update_topic_route(mq.topic)
            addr = self.instance.master_addr(mq.broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        return addr

    async def send_kernel(self, mq: MessageQueue, encoded, timeout_ms: int) -> SendResult:
        header, body, msg_id = encoded
        header.queue_id = mq.queue_id
        addr = await self._broker_addr(mq)
        return await self.instance.api.send_message(addr, mq, header, body, timeout_ms, msg_id)
