"""What push and lite-pull consumers share: subscriptions, rebalancing, offsets, pulling.

Rebalance (every 20 s and whenever a broker says the group changed): each member lists the
topic's queues and the group's members, sorts both, and takes its share with the allocation
strategy; queues it lost stop and commit, queues it gained start at the committed offset (or
where ``consume_from_where`` says for a new group).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import time
from collections.abc import Callable

from broker.common import topic_config as tc
from broker.common.acl_signature import SessionCredentials
from broker.common.codes import ResponseCode as R
from broker.common.java_hash import java_string_hash
from broker.common.message_queue import MessageQueue
from broker.common.pull_sysflag import build_pull_sys_flag
from broker.common.request_headers import PullMessageRequestHeader
from broker.common.route import MASTER_ID
from broker.remoting.tls import ClientTls

from .allocate import AllocateAveragely
from .errors import MQClientError
from .instance import MQClientInstance
from .message_selector import TAG, MessageSelector
from .offset_store import LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore

log = logging.getLogger(__name__)
CLUSTERING, BROADCASTING = "CLUSTERING", "BROADCASTING"
CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


def subscription_data(topic: str, expression: str, expression_type: str = TAG) -> dict:
    tags = [] if expression.strip() in ("", "*") else [t.strip() for t in expression.split("||") if t.strip()]
    if expression_type != TAG:
        tags = []  # a SQL92 expression is evaluated by the broker as a whole
    return {
        "classFilterMode": False,
        "topic": topic,
        "subString": expression or "*",
        "tagsSet": tags,
        "codeSet": [java_string_hash(t) for t in tags],
        "subVersion": int(time.time() * 1000),
        "expressionType": expression_type,
    }


class ConsumerCore:
    consume_type = "CONSUME_PASSIVELY"

    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        message_model: str = CLUSTERING,
        consume_from_where: str = CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        allocate_strategy=None,
        pull_batch_size: int = 32,
        offset_store_dir: str | None = None,
        instance: MQClientInstance | None = None,
        instance_name: str | None = None,
        rebalance_interval_ms: int = 20_000,
        persist_interval_ms: int = 5000,
        credentials: SessionCredentials | None = None,
        tls: ClientTls | None = None,
    ) -> None:
        self.group, self.namesrv_addr = group, namesrv_addr
        self.credentials = credentials  # ACL: the instance signs every request with them
        self.tls = tls  # TLS to name servers and brokers; None: ROCKETMQ_TLS_* from the environment
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp_ms = consume_timestamp_ms or int(time.time() * 1000) - 30 * 60 * 1000
        self.allocate = allocate_strategy or AllocateAveragely()
        self.pull_batch_size = pull_batch_size
        self.offset_store_dir = offset_store_dir or str(
            __import__("pathlib").Path.home() / ".rocketmq_offsets"
        )
        self.instance, self.instance_name = instance, instance_name
        self.rebalance_interval_ms, self.persist_interval_ms = rebalance_interval_ms, persist_interval_ms
        self.subscriptions: dict[str, str] = {}
        self.expression_types: dict[str, str] = {}  # topic → SQL92 for property filters (else TAG)
        self.assigned: dict[MessageQueue, asyncio.Task] = {}
        self._rebalancing = asyncio.Lock()
        # In memory until the start puts the offsets where the message model keeps them.
        self.offsets: OffsetStore = OffsetStore()
        self.rebalance_history: list[tuple[float, frozenset]] = []
        self._pull_from: dict[MessageQueue, int] = {}  # the broker id each queue's last answer suggested
        self._persist_task: asyncio.Future | concurrent.futures.Future | None = None
        self.running = False
        self.started_at = 0

    def _client(self) -> MQClientInstance:
        """The instance the consumer runs on (given, or chosen by its start)."""
        if self.instance is None:
            raise MQClientError(f"the consumer of {self.group} is not started")
        return self.instance

    # -- configuration ------------------------------------------------------------------------
    subscribes_to_retry_topic = False  # push consumers do, in clustering mode

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        reason = tc.validate_topic(topic)
        if reason:
            raise MQClientError(reason)
        if isinstance(expression, MessageSelector):
            selector = expression
        else:
            selector = MessageSelector.by_tag(expression)
        if self.running and not selector.is_tag:
            self._client().run(self._check_subscription(topic, selector))  # before it is used anywhere
        self.subscriptions[topic] = selector.expression
        self.expression_types[topic] = selector.expression_type

    async def _check_subscriptions(self) -> None:
        """Let the brokers judge SQL92 subscriptions now (CHECK_CLIENT_CONFIG), as RocketMQ does at
        start: a bad expression fails here, loudly, rather than in every later pull."""
        for topic, expression_type in self.expression_types.items():
            if expression_type != TAG:
                await self._check_subscription(
                    topic, MessageSelector(expression_type, self.subscriptions[topic])
                )

    async def _check_subscription(self, topic: str, selector: MessageSelector) -> None:
        instance = self._client()
        route = await instance.route(topic)
        data = subscription_data(topic, selector.expression, selector.expression_type)
        for addr in route.master_addrs() if route else ():
            await instance.api.check_client_config(addr, instance.client_id, self.group, data)

    def consumer_data(self) -> dict:
        types = self.expression_types
        subs = [subscription_data(t, e, types.get(t, TAG)) for t, e in self.subscriptions.items()]
        return {
            "groupName": self.group,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "consumeFromWhere": self.consume_from_where,
            "subscriptionDataSet": subs,
            "unitMode": False,
        }

    # -- life cycle ---------------------------------------------------------------------------
    def _start_core(self) -> None:
        instance = self.instance or MQClientInstance.shared(
            self.namesrv_addr,
            self.instance_name,
            rebalance_interval_ms=self.rebalance_interval_ms,
            credentials=self.credentials,
            tls=self.tls,
        )
        instance.join("consumer", self.group, self)
        given, self.instance = self.instance, instance
        try:
            instance.run(self._check_subscriptions())
        except Exception:
            instance.abandon("consumer", self.group, self)
            self.instance = given
            raise
        instance.run(self._start_on_loop())

    async def _astart_core(self) -> None:
        """``_start_core`` for the asyncio API: the consumer runs on the caller's loop."""
        instance = MQClientInstance.of_running_loop(
            self.instance,
            self.namesrv_addr,
            self.instance_name,
            rebalance_interval_ms=self.rebalance_interval_ms,
            credentials=self.credentials,
            tls=self.tls,
        )
        await instance.ajoin("consumer", self.group, self)
        given, self.instance = self.instance, instance
        try:
            await self._check_subscriptions()
        except Exception:
            await instance.aabandon("consumer", self.group, self)
            self.instance = given
            raise
        await self._start_on_loop()

    def _offset_store(self) -> OffsetStore:
        """Where this consumer keeps its progress: a file of its own (broadcasting), else the brokers."""
        instance = self._client()
        if self.message_model == BROADCASTING:
            return LocalFileOffsetStore(self.offset_store_dir, instance.client_id, self.group)
        return RemoteBrokerOffsetStore(instance, self.group)

    async def _start_on_loop(self) -> None:
        self.offsets = self._offset_store()
        if self.message_model != BROADCASTING and self.subscribes_to_retry_topic:
            # Sent-back messages come back through the group's retry topic (RocketMQ's copySubscription).
            self.subscriptions.setdefault(tc.retry_topic(self.group), "*")
        self.running = True
        self.started_at = int(time.time() * 1000)
        await self._first_rebalance()
        instance = self._client()
        instance.start()
        self._persist_task = instance.submit(self._persist_loop())

    async def _first_rebalance(self) -> None:
        instance = self._client()
        for topic in self.subscriptions:
            if await instance.route(topic, refresh=True) is None and not tc.is_retry_topic(topic):
                # As RocketMQ: not fatal, the topic may be created later; rebalancing retries.
                log.warning("no route of topic %s yet; %s consumes it once it appears", topic, self.group)
        await instance.send_heartbeats()
        await self.rebalance()

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.persist_interval_ms / 1000)
            try:
                await self.offsets.persist(list(self.assigned))
            except Exception as exc:  # a full disk now must not end persisting for good
                log.warning("persisting the offsets of %s failed: %s", self.group, exc)

    def _shutdown_core(self) -> None:
        if not self.running:
            return
        self.running = False
        if self._persist_task is not None:
            self._persist_task.cancel()
        instance = self._client()
        instance.run(self._stop_all())
        instance.leave("consumer", self.group, self)

    async def _ashutdown_core(self) -> None:
        """``_shutdown_core`` on the instance's (the caller's) loop."""
        if not self.running:
            return
        self.running = False
        if self._persist_task is not None:
            self._persist_task.cancel()
        await self._stop_all()
        await self._drain()
        await self._client().aleave("consumer", self.group, self)

    async def _drain(self) -> None:
        """Asyncio API: what must end after pulling stopped and before the connections close."""

    async def _stop_all(self) -> None:
        async with self._rebalancing:  # a rebalance under way finishes first, then nothing is left
            for mq in list(self.assigned):
                await self._drop_queue(mq)  # each commits its offset as it is let go
        # A broadcasting member's file keeps every queue's offset (its store removes none).
        await self.offsets.persist(list(self.offsets.table))

    # -- rebalance ----------------------------------------------------------------------------
    async def rebalance(self) -> None:
        # One at a time: the periodic rebalance, a reset-offset reload and the first rebalance
        # of a consumer joining a shared instance may overlap, and two that both found a queue
        # unowned would start two pull loops for it (each message consumed twice, and the one
        # overwritten in ``assigned`` never stopped).
        async with self._rebalancing:
            await self._rebalance()

    async def _rebalance(self) -> None:
        if not self.running:
            return
        wanted: set[MessageQueue] = set()
        for topic in self.subscriptions:
            wanted |= set(await self._allocate(topic))
        for mq in [mq for mq in self.assigned if mq not in wanted]:
            await self._drop_queue(mq)
        for mq in sorted(wanted - set(self.assigned)):
            if not await self.acquire_queue(mq):
                continue  # e.g. an orderly queue still locked by its previous owner: next rebalance
            offset = await self._start_offset(mq)
            self.assigned[mq] = asyncio.create_task(self._pull_loop(mq, offset))
        self.rebalance_history.append((time.monotonic(), frozenset(self.assigned)))

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """A broker reset the group's offsets (RESET_CONSUMER_CLIENT_OFFSET): each owned queue it
        names restarts from its new offset, which this member commits itself first, as RocketMQ's
        client does. Until the reset reached this member, its persist loop and its pulls' commit
        flag went on committing its old progress, and one that reached the broker after the reset
        undid it: re-reading the broker's offset then found the old one, and nothing was consumed
        again. Without a table (an empty body) every owned queue of ``topic`` re-reads the broker's."""
        if not offsets:
            await self.reload_offsets(topic)
            return
        async with self._rebalancing:
            reset = [mq for mq in self.assigned if mq in offsets]
            for mq in reset:
                self.assigned.pop(mq).cancel()
                self.on_queue_dropped(mq)
                self.offsets.update(mq, offsets[mq])
            await self.offsets.persist(reset)
            await self._rebalance()  # they start again from the offset just committed

    async def reload_offsets(self, topic: str) -> None:
        """Restart every owned queue of ``topic`` from the offset now committed on the broker."""
        async with self._rebalancing:
            for mq in [mq for mq in self.assigned if mq.topic == topic]:
                self.assigned.pop(mq).cancel()
                self.on_queue_dropped(mq)
                self.offsets.remove(mq)  # not persisted: the broker's value is the new truth
            await self._rebalance()

    async def _allocate(self, topic: str) -> list[MessageQueue]:
        instance = self._client()
        route = await instance.route(topic, refresh=True)
        if route is None:
            return []
        mqs = sorted(instance.read_queues.get(topic, ()))
        if self.message_model == BROADCASTING:
            return mqs
        cids: list[str] = []
        # Any member of each broker set knows the group (it heartbeats slaves too).
        for addr in filter(None, (data.any_addr() for data in route.broker_datas)):
            cids = await instance.api.consumer_ids(addr, self.group)
            if cids:
                break
        return self.allocate.allocate(self.group, instance.client_id, mqs, sorted(cids))

    async def _drop_queue(self, mq: MessageQueue) -> None:
        task = self.assigned.pop(mq, None)
        if task is not None:
            task.cancel()
        self.on_queue_dropped(mq)
        await self.release_queue(mq)
        await self.offsets.persist([mq])
        self.offsets.remove(mq)

    async def _start_offset(self, mq: MessageQueue) -> int:
        committed = await self.offsets.read_store(mq)
        if committed >= 0:
            return committed
        instance = self._client()
        if self.consume_from_where == CONSUME_FROM_FIRST_OFFSET or tc.is_retry_topic(mq.topic):
            offset = 0
        else:
            addr = instance.pull_addr(mq.broker_name)
            if addr is None:
                raise MQClientError(f"no address for {mq.broker_name}")
            if self.consume_from_where == CONSUME_FROM_TIMESTAMP:
                offset = await instance.api.search_offset(
                    addr, mq.topic, mq.queue_id, self.consume_timestamp_ms
                )
            else:
                offset = await instance.api.max_offset(addr, mq.topic, mq.queue_id)
        self.offsets.update(mq, offset)
        return offset

    # -- pulling ------------------------------------------------------------------------------
    async def _pull_loop(self, mq: MessageQueue, offset: int) -> None:
        found = functools.partial(self._found, mq)  # what each answer's messages go to
        while self.running:
            if self.is_busy(mq):
                await asyncio.sleep(0.05)
                continue
            try:
                code, fields = await self._pull_once(mq, offset, found)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("pull from %s failed: %s", mq, exc)
                self._pull_from.pop(mq, None)  # a suggested slave that failed: the master again
                await asyncio.sleep(1)
                continue
            # The messages found went to on_messages as the answer was read (``_found``): the
            # consumers they woke run before this next pull is written, which wakes the broker
            # (a costly system call here).
            next_offset = fields.next_begin_offset
            self._pull_from[mq] = fields.suggest_which_broker_id  # RocketMQ's pullFromWhichNodeTable
            if code == R.PULL_OFFSET_MOVED:
                self.offsets.update(mq, next_offset)
            else:  # found, nothing new, or nothing matching: all below next_offset was seen
                self._correct_offset(mq, next_offset)
            offset = next_offset

    def _correct_offset(self, mq: MessageQueue, next_offset: int) -> None:
        """Commit past messages the subscription's filter skipped (RocketMQ's correctTagsOffset).

        Consuming commits only up to the last message delivered: a queue holding nothing but
        other tags (or with other tags after its last match) would keep its old offset and show
        lag for a group that is caught up. Once nothing pulled from ``mq`` is still in flight,
        every offset below the next pull's is consumed or filtered out, so it may be committed.
        """
        if not self.has_in_flight(mq):
            self.offsets.update(mq, next_offset, increase_only=True)

    async def _pull_once(self, mq: MessageQueue, offset: int, found: Callable[[list], None]):
        instance = self._client()
        # The broker the last answer suggested (a slave for a consumer far behind, when the master
        # allows slave reads), else the master, else a slave (RocketMQ's pullKernelImpl).
        addr, from_slave = instance.subscribe_addr(mq.broker_name, self._pull_from.get(mq, MASTER_ID))
        if addr is None:
            raise MQClientError(f"no address for {mq.broker_name}")
        committed = self.offsets.read_memory(mq)
        header = PullMessageRequestHeader(
            self.group,
            mq.topic,
            mq.queue_id,
            offset,
            self.pull_batch_size,
            build_pull_sys_flag(
                # A slave keeps no offset a pull carries: none is sent (RocketMQ clears the flag).
                commit_offset=committed > 0 and self.message_model == CLUSTERING and not from_slave,
                suspend=True,
                subscription=True,
            ),
            commit_offset=max(committed, 0),
            suspend_timeout_millis=15_000,
            sub_version=0,
            subscription=self.subscriptions.get(mq.topic, "*"),
            expression_type=self.expression_types.get(mq.topic, TAG),
        )
        return await instance.api.pull(addr, header, 30_000, found)

    def _found(self, mq: MessageQueue, messages: list) -> None:
        """A pull's messages, as its answer is read."""
        expression = self.subscriptions.get(mq.topic, "*")
        is_tag = self.expression_types.get(mq.topic, TAG) == TAG
        if messages and is_tag and expression.strip() not in ("", "*"):
            wanted = {t.strip() for t in expression.split("||")}
            messages = [m for m in messages if m.tags in wanted]  # the broker only compared hashes
        if messages:
            self.on_messages(mq, messages)

    # -- hooks for the concrete consumers ----------------------------------------------------
    def is_busy(self, mq: MessageQueue) -> bool:
        return False

    def has_in_flight(self, mq: MessageQueue) -> bool:
        """Is a message pulled from ``mq`` still unconsumed (its offset not committed in memory)?
        Asked on the consumer's loop, which is the only one adding messages."""
        raise NotImplementedError

    def on_messages(self, mq: MessageQueue, messages: list) -> None:
        raise NotImplementedError

    def on_queue_dropped(self, mq: MessageQueue) -> None:
        pass

    async def acquire_queue(self, mq: MessageQueue) -> bool:
        """May this member start consuming ``mq``? (Orderly consumers lock it at the broker first.)"""
        return True

    async def release_queue(self, mq: MessageQueue) -> None:
        """``mq`` went to another member: finish with it (orderly consumers unlock it)."""
