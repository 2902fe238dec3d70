"""``MQClientInstance``: what producers and consumers of one process share.

One asyncio loop runs all network work: by default a loop on a background thread (the blocking
API), or the application's own running loop (``MQClientInstance.on_running_loop``, the asyncio
API: no thread, no hand-off per request). Routes from the name servers are cached and refreshed
every 30 s, with those of every producer's and consumer's topics that have none now; heartbeats
go to every broker every 30 s; a broker's "consumer ids changed" notification triggers a
rebalance at once.

As RocketMQ's MQClientManager, clients share instances: producers and consumers made with the
same instance name (the process id by default) and name servers use one instance (per running
loop, for the asyncio API), so one client id. The id is how brokers tell the members of a
consumer group apart: two instances with one id would be one member to the broker and both take
that member's queues. A group is registered once per instance, and starting a second client of
it is refused.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import threading
from typing import TYPE_CHECKING, Any

from broker.common.acl_signature import SessionCredentials
from broker.common.codes import RequestCode
from broker.common.hosts import parse_host_list
from broker.common.message_queue import MessageQueue
from broker.common.names import group_problem
from broker.common.route import MASTER_ID, BrokerData, TopicRouteData
from broker.remoting.client import EventLoopThread, RemotingClient
from broker.remoting.errors import RemotingError
from broker.remoting.tls import ClientTls

from . import client_requests, request_reply
from .client_api import ClientAPI
from .errors import MQClientError

if TYPE_CHECKING:
    from .consumer_core import ConsumerCore
    from .producer import Producer

log = logging.getLogger(__name__)

# Instances in use by clients, by what makes them shareable (see the module's docstring).
_shared: dict[tuple, MQClientInstance] = {}
_shared_lock = threading.Lock()


def _client_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class MQClientInstance:
    def __init__(
        self,
        namesrv_addr: str,
        instance_name: str | None = None,
        heartbeat_interval_ms: int = 30_000,
        route_interval_ms: int = 30_000,
        rebalance_interval_ms: int = 20_000,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        credentials: SessionCredentials | None = None,
        tls: ClientTls | None = None,
    ) -> None:
        """``loop``: run on this (the application's) loop instead of a thread of our own; see
        ``on_running_loop``. ``credentials``: sign every request with this ACL account.
        ``tls``: how to connect (default: ``ROCKETMQ_TLS_*`` from the environment, as RocketMQ's
        clients read the ``tls.*`` system properties; plaintext when unset)."""
        self.credentials = credentials
        self.tls = tls if tls is not None else ClientTls.from_env()
        self.namesrv_addrs = parse_host_list(namesrv_addr, "name server address list", error=MQClientError)
        if not self.namesrv_addrs:
            raise MQClientError("no name server address given")
        self.client_id = f"{_client_ip()}@{instance_name or os.getpid()}"
        self.intervals = (
            heartbeat_interval_ms / 1000,
            route_interval_ms / 1000,
            rebalance_interval_ms / 1000,
        )
        if loop is None:
            self.loop_thread: EventLoopThread | None = EventLoopThread(f"mq-client-{self.client_id}")
            self.loop = self.loop_thread.loop
            self.remoting: RemotingClient = self.loop_thread.run(self._make_remoting())
        else:
            self.loop_thread, self.loop = None, loop
            self.remoting = self._build_remoting()
        self.api = ClientAPI(self.remoting)
        # The routes of the topics in use, and what producers and consumers read of them, kept
        # beside each route as it arrives (the send path looks a topic's queues up per message):
        # a topic's writable queues (RocketMQ's publish info), its readable queues (subscribe
        # info, also of a broker set whose master is down), and every broker set by name.
        self.routes: dict[str, TopicRouteData] = {}
        self.write_queues: dict[str, list[MessageQueue]] = {}
        self.read_queues: dict[str, list[MessageQueue]] = {}
        self.brokers: dict[str, BrokerData] = {}
        self.master_addrs: dict[str, str] = {}  # broker name → its master's address
        self.producers: dict[str, Producer] = {}
        self.consumers: dict[str, ConsumerCore] = {}
        self._tasks: list[asyncio.Future] = []
        self._background: set[asyncio.Future] = set()
        self.closing = False  # shutdown began: nothing new is spawned
        self.heartbeated: set[str] = set()  # broker addresses a heartbeat of ours reached
        self._shared_key: tuple | None = None  # its entry among the shared instances, if any

    @classmethod
    def shared(
        cls,
        namesrv_addr: str,
        instance_name: str | None = None,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        rebalance_interval_ms: int | None = None,
        credentials: SessionCredentials | None = None,
        tls: ClientTls | None = None,
    ) -> MQClientInstance:
        """The instance for this instance name and name servers, made on first use (``loop``:
        one on that running loop, as ``on_running_loop``). Clients register on it with
        ``add_client`` and leave with ``remove_client``; the last to leave shuts it down. A
        consumer asking for a shorter rebalance interval than the instance's gets it."""
        # Clients with other credentials (or none) get an instance of their own: its connections
        # sign with one account.
        # The same for TLS settings: one instance's connections are all plaintext or all TLS.
        tls = tls if tls is not None else ClientTls.from_env()
        key = (instance_name or str(os.getpid()), namesrv_addr, loop, credentials, tls)
        with _shared_lock:
            instance = _shared.get(key)
            if instance is None or instance.closing:
                instance = cls(namesrv_addr, instance_name, loop=loop, credentials=credentials, tls=tls)
                instance._shared_key = key
                _shared[key] = instance
            if rebalance_interval_ms is not None and rebalance_interval_ms / 1000 < instance.intervals[2]:
                instance.intervals = (*instance.intervals[:2], rebalance_interval_ms / 1000)
            return instance

    @classmethod
    def of_running_loop(cls, given: MQClientInstance | None, namesrv_addr: str, instance_name: str | None,
                        **options) -> MQClientInstance:  # fmt: skip
        """For the asyncio API: the instance given (it must run on the caller's loop), else the
        shared one of the caller's loop."""
        if given is None:
            return cls.shared(namesrv_addr, instance_name, loop=asyncio.get_running_loop(), **options)
        if not given.in_loop():
            raise MQClientError("the client instance given runs on another loop than the caller's")
        return given

    def _table(self, kind: str) -> dict[str, Any]:
        return self.producers if kind == "producer" else self.consumers

    def add_client(self, kind: str, group: str, client) -> None:
        """Register a producer or consumer (``kind``) of ``group``; refused, as RocketMQ does,
        when another client of that group already runs under this client id, or when the group
        name is illegal (RocketMQ's Validators.checkGroup at start)."""
        problem = group_problem(group)
        if problem:
            raise MQClientError(problem)
        with _shared_lock:
            same_id = [self] + [i for i in _shared.values() if i is not self and i.client_id == self.client_id
                                and i.namesrv_addrs == self.namesrv_addrs and not i.closing]  # fmt: skip
            for instance in same_id:
                holder = instance._table(kind).get(group)
                if holder is not None and holder is not client:
                    raise MQClientError(
                        f"The {kind} group[{group}] has been created before, specify another name please."
                    )
            self._table(kind)[group] = client

    def remove_client(self, kind: str, group: str, client) -> bool:
        """Forget a client; True when it was the last one: the caller shuts the instance down
        (and a client made afterwards gets a new instance). False once shutdown began."""
        with _shared_lock:
            table = self._table(kind)
            if table.get(group) is client:
                del table[group]
            if self.producers or self.consumers or self.closing:
                return False
            self.closing = True
            if self._shared_key is not None and _shared.get(self._shared_key) is self:
                del _shared[self._shared_key]
            return True

    # A client's life on an instance: ``join`` when it starts (blocking API; ``ajoin`` on the
    # instance's loop), ``abandon`` if the rest of its start fails, ``leave`` when it stops.
    def join(self, kind: str, group: str, client) -> None:
        try:
            self.add_client(kind, group, client)
        except MQClientError:
            self.abandon(kind, group, client)
            raise

    async def ajoin(self, kind: str, group: str, client) -> None:
        try:
            self.add_client(kind, group, client)
        except MQClientError:
            await self.aabandon(kind, group, client)
            raise

    def abandon(self, kind: str, group: str, client) -> None:
        """A client that did not start: forgotten, not announced (no broker has heard of it);
        an instance made for it alone stops, leaving no thread or connection behind."""
        if self.remove_client(kind, group, client):
            self.shutdown()

    async def aabandon(self, kind: str, group: str, client) -> None:
        if self.remove_client(kind, group, client):
            await self.ashutdown()

    def leave(self, kind: str, group: str, client) -> None:
        """A client stops: its group is unregistered from the brokers, as RocketMQ's
        unregisterProducer/unregisterConsumer do (the instance may go on serving others, and
        the broker must not count a member that left until its heartbeat expires); the last
        client shuts the instance down."""
        if self.closing:
            return
        if self._table(kind).get(group) is client:  # (not a client whose start was refused)
            self.run(self._unregister_group(kind, group))
        self.abandon(kind, group, client)

    async def aleave(self, kind: str, group: str, client) -> None:
        """``leave`` on the instance's loop (asyncio API)."""
        if self.closing:
            return
        if self._table(kind).get(group) is client:
            await self._unregister_group(kind, group)
        await self.aabandon(kind, group, client)

    async def _unregister_group(self, kind: str, group: str) -> None:
        producer_group, consumer_group = (group, None) if kind == "producer" else (None, group)
        try:
            async with asyncio.timeout(5):
                for addr in self.all_broker_addrs():
                    await _quietly(self.api.unregister(addr, self.client_id, producer_group, consumer_group))
        except TimeoutError:
            log.warning("unregistering %s %s from the brokers timed out", kind, group)

    @classmethod
    def on_running_loop(cls, namesrv_addr: str, instance_name: str | None = None, **options):
        """An instance that runs on the caller's running loop (the asyncio API): requests,
        heartbeats, route refreshes and pull loops are tasks of that loop. Start and stop it
        with ``await astart()`` / ``await ashutdown()``; blocking calls (``run``) work only from
        other threads."""
        return cls(namesrv_addr, instance_name, loop=asyncio.get_running_loop(), **options)

    @property
    def on_own_thread(self) -> bool:
        return self.loop_thread is not None

    def in_loop(self) -> bool:
        """Is the caller running on this instance's loop (its thread)?"""
        # The non-raising probe: this runs on every blocking send.
        return asyncio._get_running_loop() is self.loop

    async def _make_remoting(self) -> RemotingClient:
        return self._build_remoting()

    def _build_remoting(self) -> RemotingClient:
        remoting = RemotingClient(self.credentials, tls=self.tls)
        remoting.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_ids_changed)
        self.remoting = remoting
        client_requests.register(self)
        request_reply.register(self)
        self._rebalance_now = asyncio.Event()
        return remoting

    async def _on_ids_changed(self, conn, request):
        self._rebalance_now.set()
        return None

    def run(self, coro, timeout: float | None = None):
        """Run ``coro`` on the instance's loop and wait for it (blocking; not from that loop)."""
        self.check_not_in_loop(coro)
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def check_not_in_loop(self, coro=None) -> None:
        """Blocking on the loop that has to do the work would wait forever: refuse loudly."""
        if self.in_loop():
            if coro is not None:
                coro.close()
            raise MQClientError(
                "a blocking client call was made on the event loop the client runs on; "
                "use the asyncio API there (await AsyncProducer.send(...), AsyncPushConsumer, ...)"
            )

    def call_soon(self, callback, *args) -> None:
        """Run ``callback(*args)`` on the instance's loop, from any thread."""
        if self.in_loop():
            self.loop.call_soon(callback, *args)
        else:
            self.loop.call_soon_threadsafe(callback, *args)

    def submit(self, coro):
        """Schedule ``coro`` on the instance's loop: a task when called on that loop (loop mode),
        else a ``concurrent.futures.Future`` (safe to cancel from any thread)."""
        if self.loop_thread is None and self.in_loop():
            return self.loop.create_task(coro)
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def spawn(self, coro) -> asyncio.Task | None:
        """A task of the instance's loop (called on it) that shutdown cancels if still running.
        None once shutdown began (``coro`` is closed unrun): a send retried because shutdown
        closed its connection must not outlive the instance."""
        if self.closing:
            coro.close()
            return None
        task = self.loop.create_task(coro)
        self._background.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._background.discard)
        return task

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                self.submit(self._periodic(self.intervals[0], self.send_heartbeats)),
                self.submit(self._periodic(self.intervals[1], self.refresh_routes)),
                self.submit(self._rebalance_loop()),
            ]

    async def _periodic(self, interval: float, action) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await action()
            except Exception as exc:
                log.warning("%s failed: %s", action.__name__, exc)

    async def _rebalance_loop(self) -> None:
        while True:
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow the cancel
                # that shutdown sends when the event fires at the same moment.
                async with asyncio.timeout(self.intervals[2]):
                    await self._rebalance_now.wait()
            except TimeoutError:
                pass
            self._rebalance_now.clear()
            await self.rebalance_all()

    async def rebalance_all(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.rebalance()
            except Exception as exc:
                log.warning("rebalance of %s failed: %s", getattr(consumer, "group", "?"), exc)

    def trigger_rebalance(self) -> None:
        self.call_soon(self._rebalance_now.set)

    # -- routes -------------------------------------------------------------------------------
    async def route(self, topic: str, refresh: bool = False) -> TopicRouteData | None:
        if refresh or topic not in self.routes:
            await self._fetch_route(topic)
        return self.routes.get(topic)

    async def _fetch_route(self, topic: str) -> None:
        errors = []
        for addr in random.sample(self.namesrv_addrs, len(self.namesrv_addrs)):
            try:
                route = await self.api.topic_route(addr, topic)
            except RemotingError as exc:
                errors.append(str(exc))
                continue
            known = self.all_broker_addrs()
            if route is None:
                for table in (self.routes, self.write_queues, self.read_queues):
                    table.pop(topic, None)
            else:
                # Moved last: the broker sets of the route fetched last win in _index_brokers (a
                # master that moved is seen by its newest route, not masked by an older one).
                self.routes.pop(topic, None)
                self.routes[topic] = route
                self.write_queues[topic] = route.writable_queues()
                self.read_queues[topic] = route.readable_queues()
            self._index_brokers()
            if self.all_broker_addrs() - known:
                # A broker we never told about ourselves: heartbeat now (as RocketMQ does at start)
                # so it lists our producers and consumers without waiting 30 s.
                self.spawn(self.send_heartbeats())
            return
        raise MQClientError(f"no name server reachable for the route of {topic}: {'; '.join(errors)}")

    def _index_brokers(self) -> None:
        """Every broker set of the routes in use, by name (RocketMQ's broker address table)."""
        brokers = {data.broker_name: data for route in self.routes.values() for data in route.broker_datas}
        self.brokers = brokers
        self.master_addrs = {name: data.master_addr for name, data in brokers.items() if data.master_addr}

    def topics_in_use(self) -> list[str]:
        """The topics whose routes the periodic poll asks for: those cached, and every producer's
        publish topics and consumer's subscriptions even while the name servers have no route
        (RocketMQ's updateTopicRouteInfoFromNameServer): a topic whose only broker was gone comes
        back with it, and so do the heartbeats to that broker."""
        topics = dict.fromkeys(self.routes)
        for producer in list(self.producers.values()):
            topics.update(dict.fromkeys(list(producer.publish_topics)))
        for consumer in list(self.consumers.values()):
            topics.update(dict.fromkeys(list(consumer.subscriptions)))
        return list(topics)

    async def refresh_routes(self) -> None:
        for topic in self.topics_in_use():
            await self._fetch_route(topic)

    def broker_addr(self, broker_name: str) -> str | None:
        """The master of ``broker_name``: where sends, offsets, locks and send-backs go."""
        return self.master_addrs.get(broker_name)

    def pull_addr(self, broker_name: str) -> str | None:
        """Where to pull ``broker_name``'s queues from and keep a group's offsets: its master,
        else a slave (RocketMQ's findBrokerAddressInSubscribe), so a broker set whose master is
        down can still be read."""
        data = self.brokers.get(broker_name)
        return data.any_addr() if data is not None else None

    def subscribe_addr(self, broker_name: str, broker_id: int) -> tuple[str | None, bool]:
        """Broker ``broker_id`` of ``broker_name`` (a pull answer's suggestion), else any of the set
        as ``pull_addr``; and whether that is a slave (RocketMQ's findBrokerAddressInSubscribe)."""
        data = self.brokers.get(broker_name)
        if data is None:
            return None, False
        addr = data.broker_addrs.get(broker_id)
        if addr is not None:
            return addr, broker_id != MASTER_ID
        addr = data.any_addr()
        return addr, addr is not None and addr != data.broker_addrs.get(MASTER_ID)

    def all_broker_addrs(self, masters_only: bool = False) -> set[str]:
        """Every address of the brokers in use; ``masters_only``: their masters."""
        if masters_only:
            return set(self.master_addrs.values())
        return {addr for data in self.brokers.values() for addr in data.broker_addrs.values()}

    # -- heartbeats ---------------------------------------------------------------------------
    def heartbeat_data(self) -> dict:
        return {
            "clientID": self.client_id,
            # Copies: clients join and leave from other threads (list() of a dict is atomic).
            "producerDataSet": [{"groupName": group} for group in list(self.producers)],
            "consumerDataSet": [consumer.consumer_data() for consumer in list(self.consumers.values())],
        }

    def _heartbeat_addrs(self) -> set[str]:
        # Consumers may pull from a slave, which must know them; producers only talk to masters
        # (as RocketMQ's sendHeartbeatToAllBroker).
        return self.all_broker_addrs(masters_only=not self.consumers)

    async def send_heartbeats(self) -> None:
        data = self.heartbeat_data()
        for addr in self._heartbeat_addrs():
            try:
                await self.api.heartbeat(addr, data)
                self.heartbeated.add(addr)
            except Exception as exc:
                log.debug("heartbeat to %s failed: %s", addr, exc)

    async def heartbeat_known_brokers(self) -> None:
        """Heartbeat now every known broker that has not heard from us yet. A broker pushes a
        reply only to a client it knows by heartbeat: a requester must be known before its
        request can be answered (the heartbeat started when a route arrives may still be on
        its way)."""
        if self._heartbeat_addrs() - self.heartbeated:
            await self.send_heartbeats()

    async def astart(self) -> None:
        """``start`` for an instance on the caller's loop (same work; nothing to wait for)."""
        self.start()

    def shutdown(self) -> None:
        self.check_not_in_loop()
        for task in self._tasks:
            self.loop.call_soon_threadsafe(task.cancel)  # tasks of a loop are cancelled on it
        self._tasks = []
        try:
            self.run(self._close(), timeout=15)
        finally:
            if self.loop_thread is not None:
                self.loop_thread.stop()

    async def ashutdown(self) -> None:
        """Unregister from the brokers, close the connections, stop the periodic tasks (on the
        instance's loop; from another loop it is handed over to it)."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            self.call_soon(task.cancel)  # on the instance's loop, whichever loop awaits this
        if self.in_loop():
            await self._close()
            # Wait for the cancelled tasks to end: nothing of ours is left on the caller's loop.
            await asyncio.gather(*tasks, *self._background, return_exceptions=True)
            return
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._close(), self.loop))
        if self.loop_thread is not None:
            await asyncio.to_thread(self.loop_thread.stop)

    async def _close(self) -> None:
        self.closing = True
        for task in list(self._background):
            task.cancel()
        try:
            async with asyncio.timeout(10):
                await self._unregister_all()
        except TimeoutError:
            log.warning("unregistering %s from the brokers timed out", self.client_id)
        await self.remoting.close()

    async def _unregister_all(self) -> None:
        for addr in self.all_broker_addrs():
            for group in list(self.producers):
                await _quietly(self.api.unregister(addr, self.client_id, group, None))
            for group in list(self.consumers):
                await _quietly(self.api.unregister(addr, self.client_id, None, group))


async def _quietly(coro) -> None:
    try:
        await coro
    except Exception as exc:
        log.debug("ignored during shutdown: %s", exc)
