"""Trace hooks: what a traced producer and push consumer record (RocketMQ's
SendMessageTraceHookImpl and ConsumeMessageTraceHookImpl)."""

from __future__ import annotations

import threading
import time

from broker.common import message_const as const
from broker.common.message_codec import string_to_properties
from broker.common.message_id import create_unique_id
from broker.common.request_headers import SendMessageRequestHeader, SendMessageResponseHeader
from broker.common.trace_data import (
    CONTEXT_FAILED,
    CONTEXT_RETURN_NULL,
    CONTEXT_SUCCESS,
    MSG_TYPE_DELAY,
    MSG_TYPE_NORMAL,
    PUB,
    SUB_AFTER,
    SUB_BEFORE,
    TraceRecord,
)

from .dispatcher import AsyncTraceDispatcher

DEFAULT_REGION = "DefaultRegion"
_SUCCESS_STATUSES = {"CONSUME_SUCCESS", "SUCCESS"}


def _now_ms() -> int:
    return int(time.time() * 1000)


class SendTraceHook:
    """Called by the producer after each send attempt that got an answer from a broker."""

    def __init__(self, producer, dispatcher: AsyncTraceDispatcher) -> None:
        self.producer, self.group, self.dispatcher = producer, producer.group, dispatcher

    def __call__(
        self, mq, broker_addr: str, header: SendMessageRequestHeader, body: bytes, response, cost_ms: int
    ) -> None:
        if header.topic == self.dispatcher.trace_topic or response is None or header.batch:
            return
        answer = SendMessageResponseHeader.from_ext_fields(response.ext_fields)
        if answer.trace_on == "false":
            return  # the broker switched tracing off
        properties = string_to_properties(header.properties or "")
        delayed = int(properties.get(const.PROPERTY_DELAY_TIME_LEVEL, "0") or 0) > 0
        self.dispatcher.append(
            TraceRecord(
                PUB,
                properties.get(const.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
                # When the send began, as RocketMQ's trace context: a consumer may hold the
                # message before its producer hears back from the broker.
                timestamp=_now_ms() - cost_ms,
                region=answer.msg_region or DEFAULT_REGION,
                group=self.group,
                topic=mq.topic,
                tags=properties.get(const.PROPERTY_TAGS, ""),
                keys=properties.get(const.PROPERTY_KEYS, ""),
                store_host=broker_addr,
                body_length=len(body),
                cost_time=cost_ms,
                msg_type=MSG_TYPE_DELAY if delayed else MSG_TYPE_NORMAL,
                offset_msg_id=answer.msg_id,
                success=response.code == 0,
                client_host=self.producer.instance.client_id,
            )
        )


class ConsumeTraceHooks:
    """``before(messages)`` / ``after(messages, status)`` around each listener call."""

    def __init__(self, consumer, dispatcher: AsyncTraceDispatcher) -> None:
        self.consumer, self.group, self.dispatcher = consumer, consumer.group, dispatcher
        self._open: dict[int, tuple[str, float]] = {}  # id(messages) → request id, start
        self._lock = threading.Lock()

    def before(self, messages: list) -> None:
        request_id = create_unique_id()
        with self._lock:
            self._open[id(messages)] = (request_id, time.monotonic())
        now, client = _now_ms(), self.consumer.instance.client_id
        for msg in self._traced(messages):
            self.dispatcher.append(
                TraceRecord(
                    SUB_BEFORE,
                    msg.client_msg_id,
                    timestamp=now,
                    region=msg.properties.get(const.PROPERTY_MSG_REGION) or DEFAULT_REGION,
                    group=self.group,
                    keys=msg.properties.get(const.PROPERTY_KEYS, ""),
                    request_id=request_id,
                    retry_times=msg.reconsume_times,
                    client_host=client,
                )
            )

    def after(self, messages: list, status) -> None:
        with self._lock:
            opened = self._open.pop(id(messages), None)
        if opened is None:
            return
        request_id, started = opened
        cost = int((time.monotonic() - started) * 1000)
        value = getattr(status, "value", None)
        success = value in _SUCCESS_STATUSES
        code = CONTEXT_SUCCESS if success else (CONTEXT_RETURN_NULL if status is None else CONTEXT_FAILED)
        now, client = _now_ms(), self.consumer.instance.client_id
        for msg in self._traced(messages):
            self.dispatcher.append(
                TraceRecord(
                    SUB_AFTER,
                    msg.client_msg_id,
                    timestamp=now,
                    keys=msg.properties.get(const.PROPERTY_KEYS, ""),
                    cost_time=cost,
                    success=success,
                    request_id=request_id,
                    context_code=code,
                    client_host=client,
                )
            )

    @staticmethod
    def _traced(messages: list):
        return [m for m in messages if m.properties.get(const.PROPERTY_TRACE_SWITCH) != "false"]


def install_producer_trace(
    producer, trace_topic: str | None = None, **dispatcher_options
) -> AsyncTraceDispatcher:
    dispatcher_options.setdefault("tls", producer.tls)  # trace records travel as the owner's do
    dispatcher_options.setdefault("credentials", producer.credentials)
    dispatcher = AsyncTraceDispatcher(
        producer.group, producer.namesrv_addr, trace_topic=trace_topic, **dispatcher_options
    ).start()
    producer.send_hooks.append(SendTraceHook(producer, dispatcher))
    return dispatcher


def install_consumer_trace(
    consumer, trace_topic: str | None = None, **dispatcher_options
) -> AsyncTraceDispatcher:
    dispatcher_options.setdefault("tls", consumer.tls)  # trace records travel as the owner's do
    dispatcher_options.setdefault("credentials", consumer.credentials)
    dispatcher = AsyncTraceDispatcher(
        consumer.group, consumer.namesrv_addr, trace_topic=trace_topic, **dispatcher_options
    ).start()
    hooks = ConsumeTraceHooks(consumer, dispatcher)
    consumer.before_hooks.append(hooks.before)
    consumer.after_hooks.append(hooks.after)
    return dispatcher
