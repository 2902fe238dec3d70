"""``AsyncTraceDispatcher``: trace records leave the application's path at once and are sent in
batches by a worker thread, through a producer (and client instance) of their own.

Recording never blocks and never raises: when the buffer is full a record is dropped (and
counted), and a failed trace send is logged and forgotten. So tracing can neither slow nor fail
the user's sends and consumption.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import Protocol

from broker.common.acl_signature import SessionCredentials
from broker.common.message import Message
from broker.common.names import GROUP_MAX_LENGTH
from broker.common.topic_config import TRACE_TOPIC
from broker.common.trace_data import TraceRecord
from broker.remoting.tls import ClientTls

log = logging.getLogger(__name__)

TRACE_PRODUCER_GROUP_PREFIX = "_INNER_TRACE_PRODUCER-"
MAX_TRACE_BODY = 128 * 1024  # RocketMQ's maxMsgSize for trace messages
_STOP = object()


class TraceSender(Protocol):
    """What sends trace messages: a started producer (made by the dispatcher's factory)."""

    def send(self, msg: Message) -> object: ...

    def shutdown(self) -> None: ...


class AsyncTraceDispatcher:
    def __init__(
        self,
        owner_group: str,
        namesrv_addr: str,
        *,
        trace_topic: str | None = None,
        batch_size: int = 100,
        flush_interval_ms: int = 200,
        buffer_size: int = 2048,
        producer_factory: Callable[[str, str], TraceSender] | None = None,
        tls: ClientTls | None = None,
        credentials: SessionCredentials | None = None,
    ) -> None:
        """``tls`` and ``credentials``: how the default trace producer connects and signs (its
        owner's settings: a broker with ACL on refuses unsigned trace records)."""
        self.trace_topic = trace_topic or TRACE_TOPIC
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_ms / 1000
        self.buffer: queue.Queue = queue.Queue(buffer_size)
        self.dropped = 0
        self.sent_records = 0
        self._producer_factory = producer_factory or functools.partial(
            _default_producer, tls=tls, credentials=credentials
        )
        self._producer: TraceSender | None = None  # from start on
        self._owner_group, self._namesrv_addr = owner_group, namesrv_addr
        self._worker: threading.Thread | None = None

    def start(self) -> AsyncTraceDispatcher:
        self._producer = self._producer_factory(self._owner_group, self._namesrv_addr)
        self._worker = threading.Thread(target=self._run, name=f"trace-{self._owner_group}", daemon=True)
        self._worker.start()
        return self

    def append(self, record: TraceRecord) -> None:
        """Hand over a record; never blocks, never raises."""
        try:
            self.buffer.put_nowait(record)
        except queue.Full:
            self.dropped += 1

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Send what is buffered (within ``timeout_s``), then stop."""
        if self._worker is None:
            return
        try:
            self.buffer.put(_STOP, timeout=timeout_s)
        except queue.Full:
            pass
        self._worker.join(timeout_s)
        self._worker = None
        if self._producer is None:
            return
        try:
            self._producer.shutdown()
        except Exception as exc:
            log.debug("the trace producer did not shut down cleanly: %s", exc)

    # -- worker -------------------------------------------------------------------------------
    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch: list[TraceRecord] = []
            deadline: float | None = None
            while len(batch) < self.batch_size:
                timeout = None if deadline is None else max(deadline - time.monotonic(), 0)
                try:
                    item = self.buffer.get(timeout=timeout)
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                    break
                batch.append(item)
                deadline = deadline or time.monotonic() + self.flush_interval_s
            if batch:
                self._send(batch)

    def _send(self, records: list[TraceRecord]) -> None:
        assert self._producer is not None  # the worker runs from start on
        for body, keys in _pack(records):
            msg = Message(self.trace_topic, body.encode("utf-8"))
            msg.keys = keys
            try:
                self._producer.send(msg)
                self.sent_records += body.count("\x02")
            except Exception as exc:
                log.warning("sending %d trace record(s) failed: %s", body.count("\x02"), exc)


def _pack(records: list[TraceRecord]) -> list[tuple[str, list[str]]]:
    """Records joined into trace message bodies of at most MAX_TRACE_BODY, each with its keys."""
    messages: list[tuple[str, list[str]]] = []
    body: list[str] = []
    keys: dict[str, None] = {}  # in order, once each
    size = 0
    for record in records:
        text = record.encode()
        if body and size + len(text) > MAX_TRACE_BODY:
            messages.append(("".join(body), list(keys)))
            body, keys, size = [], {}, 0
        body.append(text)
        size += len(text)
        keys.update(dict.fromkeys(record.trans_keys()))
    if body:
        messages.append(("".join(body), list(keys)))
    return messages


def _default_producer(
    owner_group: str,
    namesrv_addr: str,
    tls: ClientTls | None = None,
    credentials: SessionCredentials | None = None,
) -> TraceSender:
    from broker.client.producer import Producer

    # Its own client instance: trace traffic shares no connection or loop with the application.
    # Cut to the group name limit: a group of more than 105 characters would make it illegal.
    producer = Producer(
        (TRACE_PRODUCER_GROUP_PREFIX + owner_group)[:GROUP_MAX_LENGTH],
        namesrv_addr,
        instance_name=f"trace-{uuid.uuid4().hex[:12]}",
        retry_times=0,
        tls=tls,
        credentials=credentials,
    )
    return producer.start()
