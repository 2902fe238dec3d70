"""``MQClientInstance``: what every producer and consumer of one client id shares.

One asyncio loop on a background thread runs all of the instance's network work: the route
cache (refreshed from the name servers every 30 s, with failover between them), the broker
address table, heartbeats to every broker (every 30 s, at start and when a subscription
changes), offset persistence (every 5 s), the rebalance service (every 20 s and at once when a
broker says the group changed) and the answers to requests brokers send to clients.

``MQClientManager.get_instance`` hands out one instance per client id (``ip@instanceName``);
the instance shuts down when its last producer or consumer leaves.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine

from broker.common import topic_config as tc
from broker.remoting.client import EventLoopThread, RemotingClient
from broker.remoting.errors import RemotingError

from . import client_remoting_processor
from .client_config import ClientConfig
from .errors import MQBrokerError, MQClientError
from .mq_client_api import MQClientAPI
from .topic_route import MASTER_ID, TopicRouteData

log = logging.getLogger(__name__)


class MQClientInstance:
    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.client_id = config.client_id
        self.namesrv_addrs = config.namesrv_addrs
        self._namesrv_index = 0
        self.loop_thread = EventLoopThread(f"mq-client-{self.client_id}")
        self.loop = self.loop_thread.loop
        self.remoting = RemotingClient()
        self.api = MQClientAPI(self.remoting)
        self.topic_route_table: dict[str, TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self.producer_table: dict[str, object] = {}
        self.consumer_table: dict[str, object] = {}
        self._tasks: list = []
        self._background: set[asyncio.Future] = set()
        self._rebalance_wakeup: asyncio.Event | None = None
        self._heartbeat_lock: asyncio.Lock | None = None
        self.started = False
        client_remoting_processor.register(self)

    # -- running coroutines on the instance's loop -----------------------------------------
    def run(self, coro: Coroutine, timeout: float | None = None):
        """Run ``coro`` on the instance's loop and wait for it (from any other thread)."""
        if threading.current_thread() is self.loop_thread._thread:
            coro.close()
            raise MQClientError("a blocking client call was made on the client's own event loop")
        return self.loop_thread.run(coro, timeout)

    def submit(self, coro: Coroutine):
        """Schedule ``coro`` on the instance's loop; a ``concurrent.futures.Future``."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def call(self, coro: Coroutine):
        """Await ``coro`` run on the instance's loop, from any event loop (the asyncio API)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            return await coro
        return await asyncio.wrap_future(self.submit(coro))

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self.started:
            return
        self.started = True
        self.run(self._start_services())

    async def _start_services(self) -> None:
        self._rebalance_wakeup = asyncio.Event()
        self._heartbeat_lock = asyncio.Lock()
        cfg = self.config
        self._tasks = [
            asyncio.ensure_future(self._every(cfg.poll_name_server_interval_ms, self.update_all_routes)),
            asyncio.ensure_future(self._every(cfg.heartbeat_broker_interval_ms, self.send_heartbeats)),
            asyncio.ensure_future(
                self._every(cfg.persist_consumer_offset_interval_ms, self.persist_all_consumer_offsets)
            ),
            asyncio.ensure_future(self._rebalance_service()),
        ]

    async def _every(self, interval_ms: int, action) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await action()
            except Exception as exc:
                log.warning("%s failed: %s", action.__name__, exc)

    async def _rebalance_service(self) -> None:
        # RocketMQ's RebalanceService: a periodic pass, cut short by a wake-up.
        while True:
            try:
                interval = self.config.rebalance_interval_ms / 1000
                await asyncio.wait_for(self._rebalance_wakeup.wait(), interval)
            except TimeoutError:
                pass
            self._rebalance_wakeup.clear()
            await self.do_rebalance()

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def rebalance_immediately(self) -> None:
        if self._rebalance_wakeup is not None:
            self.loop.call_soon_threadsafe(self._rebalance_wakeup.set)

    async def do_rebalance(self) -> None:
        for consumer in list(self.consumer_table.values()):
            try:
                await consumer.do_rebalance()
            except Exception as exc:
                log.warning("rebalance of %s failed: %s", consumer.group, exc)

    def shutdown_if_unused(self) -> None:
        """Stop the instance once no producer or consumer uses it (RocketMQ's rule)."""
        if self.producer_table or self.consumer_table or not self.started:
            return
        self.started = False
        MQClientManager.remove(self.client_id)
        try:
            self.run(self._stop_services(), timeout=10)
        finally:
            self.loop_thread.stop()

    async def _stop_services(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.remoting.close()

    # -- registration -------------------------------------------------------------------------
    def register_producer(self, group: str, producer) -> None:
        if group in self.producer_table:
            raise MQClientError(f"the producer group {group} is already registered in {self.client_id}")
        self.producer_table[group] = producer

    def register_consumer(self, group: str, consumer) -> None:
        if group in self.consumer_table:
            raise MQClientError(f"the consumer group {group} is already registered in {self.client_id}")
        self.consumer_table[group] = consumer

    async def unregister_producer(self, group: str) -> None:
        self.producer_table.pop(group, None)
        await self._unregister_client(group, None)

    async def unregister_consumer(self, group: str) -> None:
        self.consumer_table.pop(group, None)
        await self._unregister_client(None, group)

    async def _unregister_client(self, producer_group: str | None, consumer_group: str | None) -> None:
        for addr in self.master_addrs():
            try:
                await self.api.unregister_client(addr, self.client_id, producer_group, consumer_group)
            except (RemotingError, MQBrokerError) as exc:
                log.debug("unregister from %s failed: %s", addr, exc)

    # -- routes -------------------------------------------------------------------------------
    async def fetch_route(self, topic: str) -> TopicRouteData | None:
        """The route from the first name server that answers (sticking with it afterwards)."""
        errors = []
        for step in range(len(self.namesrv_addrs)):
            index = (self._namesrv_index + step) % len(self.namesrv_addrs)
            addr = self.namesrv_addrs[index]
            try:
                data = await self.api.get_topic_route(addr, topic, self.config.mq_client_api_timeout_ms)
            except (RemotingError, MQBrokerError) as exc:
                errors.append(str(exc))
                continue
            self._namesrv_index = index
            return None if data is None else TopicRouteData.from_json(data)
        raise MQClientError(f"no name server reachable for the route of {topic}: {'; '.join(errors)}")

    async def update_topic_route(self, topic: str) -> bool:
        """Refresh one topic; True when it changed. A topic the name servers do not know
        keeps no route (producers then go through TBW102)."""
        route = await self.fetch_route(topic)
        old = self.topic_route_table.get(topic)
        if route is None:
            if old is not None and not tc.is_retry_topic(topic):
                log.info("the route of %s disappeared from the name server", topic)
            return False
        changed = old is None or (old.queue_datas, old.broker_addrs) != (
            route.queue_datas,
            route.broker_addrs,
        )
        self.topic_route_table[topic] = route
        new_brokers = set(route.broker_addrs) - set(self.broker_addr_table)
        for name, addrs in route.broker_addrs.items():
            self.broker_addr_table[name] = dict(addrs)
        if changed:
            self._publish_route_change(topic, route)
        if new_brokers:
            # A broker we never told about ourselves: heartbeat now (as RocketMQ does at start)
            # so it lists our producers and consumers without a 30 s wait.
            self._spawn(self.send_heartbeats())
        return changed

    def _publish_route_change(self, topic: str, route: TopicRouteData) -> None:
        for producer in list(self.producer_table.values()):
            producer.on_route_changed(topic, route)
        rebalance = False
        for consumer in list(self.consumer_table.values()):
            rebalance |= consumer.update_subscribe_info(topic, route.subscribe_queues(topic))
        if rebalance:
            self.rebalance_immediately()

    async def route(self, topic: str, refresh: bool = False) -> TopicRouteData | None:
        if refresh or topic not in self.topic_route_table:
            await self.update_topic_route(topic)
        return self.topic_route_table.get(topic)

    def topics_in_use(self) -> set[str]:
        topics: set[str] = set()
        for producer in self.producer_table.values():
            topics |= producer.publish_topics()
        for consumer in self.consumer_table.values():
            topics |= consumer.subscribed_topics()
        return topics

    async def update_all_routes(self) -> None:
        for topic in self.topics_in_use():
            try:
                await self.update_topic_route(topic)
            except MQClientError as exc:
                log.warning("route refresh of %s failed: %s", topic, exc)

    # -- brokers ------------------------------------------------------------------------------
    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addr_table.get(broker_name, {}).get(MASTER_ID)

    def master_addrs(self) -> list[str]:
        return sorted({addrs[MASTER_ID] for addrs in self.broker_addr_table.values() if MASTER_ID in addrs})

    async def find_broker_addr_of_topic(self, topic: str) -> str | None:
        """A master serving ``topic`` (to ask it about the group's members)."""
        route = await self.route(topic)
        if route is None:
            return None
        for queue in route.queue_datas:
            addr = route.master_addr(queue.broker_name)
            if addr:
                return addr
        return None

    # -- heartbeats and offsets ---------------------------------------------------------------
    def heartbeat_data(self) -> dict:
        return {
            "clientID": self.client_id,
            "producerDataSet": [{"groupName": group} for group in self.producer_table],
            "consumerDataSet": [c.consumer_data() for c in self.consumer_table.values()],
        }

    async def send_heartbeats(self) -> None:
        if not self.producer_table and not self.consumer_table:
            return
        async with self._heartbeat_lock or asyncio.Lock():
            data = self.heartbeat_data()
            for addr in self.master_addrs():
                try:
                    await self.api.send_heartbeat(addr, data, self.config.mq_client_api_timeout_ms)
                except (RemotingError, MQBrokerError) as exc:
                    log.info("heartbeat to %s failed: %s", addr, exc)

    async def persist_all_consumer_offsets(self) -> None:
        for consumer in list(self.consumer_table.values()):
            await consumer.persist_consumer_offset()


class MQClientManager:
    """One ``MQClientInstance`` per client id in this process."""

    _instances: dict[str, MQClientInstance] = {}
    _lock = threading.Lock()

    @classmethod
    def get_instance(cls, config: ClientConfig) -> MQClientInstance:
        with cls._lock:
            instance = cls._instances.get(config.client_id)
            if instance is None:
                instance = cls._instances[config.client_id] = MQClientInstance(config)
            return instance

    @classmethod
    def remove(cls, client_id: str) -> None:
        with cls._lock:
            cls._instances.pop(client_id, None)
