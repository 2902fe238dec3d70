"""The broker: store, topic/group/offset managers, client tables, processors and name-server
registration, wired together and run on one asyncio loop."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path

from broker import __version__
from broker.acl import AclFile, install_acl, open_acl_file
from broker.acl.replay import ReplayGuard
from broker.common import topic_config as tc
from broker.common.codes import RequestCode as RC
from broker.common.filter import FilterCache
from broker.common.json_config_file import ConsumerOffsetTable
from broker.remoting.server import RemotingServer
from broker.store.message_store import MessageStore

from . import running_totals
from .acl_admin import AclAdminProcessor
from .broker_stats import BrokerStats
from .client_manager import ConsumerManager, ProducerManager
from .config import BrokerConfig
from .config_update import BrokerConfigUpdater
from .epoch_cache import epoch_cache_handler
from .long_polling import CHECK_INTERVAL_MS, PullRequestHoldService
from .loop_lag import LoopLagMonitor
from .processors.admin import AdminProcessor
from .processors.clients import ClientProcessor, OffsetProcessor, notify_request
from .processors.end_transaction import EndTransactionProcessor
from .processors.locks import LockProcessor
from .processors.pull import PullProcessor
from .processors.query import QueryProcessor
from .processors.reply import ReplyProcessor, ensure_reply_topic
from .processors.send import SendProcessor
from .processors.send_back import SendBackProcessor
from .queue_locks import RebalanceLockManager
from .registration import NamesrvRegistration
from .replicas_manager import ReplicasManager
from .replication import BrokerReplication
from .request_queues import queue_figures
from .schedule_message import ScheduleMessageService
from .subscription_manager import SubscriptionGroupManager
from .topic_manager import TopicConfigManager
from .transaction.check_service import TransactionalMessageCheckService
from .transaction.service import TransactionalMessageService

log = logging.getLogger(__name__)

# The requests that append to the commit log.
WRITE_CODES = (
    RC.SEND_MESSAGE,
    RC.SEND_MESSAGE_V2,
    RC.SEND_BATCH_MESSAGE,
    RC.SEND_REPLY_MESSAGE,
    RC.SEND_REPLY_MESSAGE_V2,
    RC.CONSUMER_SEND_MSG_BACK,
    RC.END_TRANSACTION,
)


class BrokerController:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        root = Path(config.store_path_root_dir)
        self.store = MessageStore(root, config.store_config())
        config_dir = root / "config"
        self.topics = TopicConfigManager(
            config_dir,
            config.broker_cluster_name,
            config.broker_name,
            config.auto_create_topic_enable,
            config.default_topic_queue_nums,
        )
        self.groups = SubscriptionGroupManager(config_dir, config.auto_create_subscription_group)
        self.topics.limit = lambda: self.config.max_topic_count
        self.groups.limit = lambda: self.config.max_subscription_group_count
        self.topics.disk_full = self.groups.disk_full = self.store.disk_full
        self.offsets = ConsumerOffsetTable(config_dir)
        self.consumers = ConsumerManager()
        self.producers = ProducerManager()
        self.filters = FilterCache()
        self.queue_locks = RebalanceLockManager(config.rebalance_lock_max_live_time)
        self.server = RemotingServer(
            config.broker_ip1,
            config.listen_port,
            config.connection_limits(),
            busy_poll_window_s=config.busy_poll_window_micros / 1_000_000,
            tls=config.server_tls(),  # its certificate is loaded here: a bad one stops the start
        )
        self.schedule = ScheduleMessageService(self.store, config_dir, config.flush_delay_offset_interval)
        self.transactions = TransactionalMessageService(self)
        self.transaction_checker = TransactionalMessageCheckService(self, self.transactions)
        self.stats = BrokerStats(self.store)
        self.totals_file = running_totals.totals_file(config_dir)
        saved = running_totals.load(self.totals_file)
        if saved is not None:
            self.stats.resume(saved, running_totals.utc_today())
        self._totals_unsaved = False
        # One writer of the totals file at a time (the second's thread and the stop's share a .tmp).
        self._totals_lock = threading.Lock()
        self.stats_sampler: asyncio.Task | None = None  # once a second (tests stop it, sample by hand)
        self.hold: PullRequestHoldService | None = None
        self.loop_lag: LoopLagMonitor | None = None
        self.registration: NamesrvRegistration | None = None
        self._tasks: list[asyncio.Task] = []
        self.boot_timestamp = int(time.time() * 1000)
        self.config_updater = BrokerConfigUpdater(self)
        # Plain ACL: loaded here, so a missing or bad plain_acl.yml stops the start with its reason.
        self.acl: AclFile | None = None
        self.acl_replay = ReplayGuard(config.signed_request_policy())  # checked before the file
        if config.acl_enable:
            self.acl = open_acl_file(config.acl_path(), config.acl_reload_interval_millis)
            log.info("plain ACL from %s", config.acl_path())
        # Master/slave replication (broker/store/ha): the HA port of a master, or a slave's
        # client to its master, and what a slave refuses.
        self.replication = BrokerReplication(self)
        # Controller mode (RocketMQ 5's automatic failover): the controllers name the role.
        self.replicas = ReplicasManager(self) if config.enable_controller_mode else None
        self._master_services = False  # the delay and transaction-check services run

    async def start(self) -> int:
        self.store.start(dispatch_loop=asyncio.get_running_loop())
        self.topics.load()
        ensure_reply_topic(self)
        if self.config.trace_topic_enable:
            self.topics.ensure(tc.TRACE_TOPIC, 1, tc.PERM_READ | tc.PERM_WRITE)
        self.groups.load()
        self.offsets.load()
        self.hold = PullRequestHoldService(asyncio.get_running_loop())
        self.loop_lag = LoopLagMonitor(asyncio.get_running_loop())
        self.loop_lag.start()
        self.store.add_dispatch_listener(self._on_dispatch)
        self._register_processors()
        self.server.close_listeners.append(self._on_connection_closed)
        port = await self.server.start()
        await self.replication.start()
        self.registration = NamesrvRegistration(self)
        await self.registration.register_all()
        self.registration.start()
        if self.replicas is not None:  # the role comes later, from the controllers
            self.replicas.start()
        elif not self.replication.is_slave:  # a slave's delay and half messages are its master's
            await self.start_master_services()
        self._tasks = [
            asyncio.create_task(
                self._every(self.config.flush_consumer_offset_interval, self.offsets.persist, on_thread=True)
            ),
            asyncio.create_task(self._every(10_000, self._scan_idle_clients)),
            asyncio.create_task(
                self.hold.keep_checking(self._hold_check_interval_ms, self.store.get_max_offset_in_queue)
            ),
        ]
        self.stats_sampler = asyncio.create_task(self._sample_stats_every_second())
        self._tasks.append(self.stats_sampler)
        return port

    def _hold_check_interval_ms(self) -> int:
        config = self.config
        return CHECK_INTERVAL_MS if config.long_polling_enable else config.short_polling_time_mills

    def _on_dispatch(self, request) -> None:
        hold = self.hold
        assert hold is not None  # listening from start(), after the hold service is made
        # No pull held anywhere (the usual dispatch of a busy producer): nothing to look up.
        # notify_from_thread reads the same table, so this changes no outcome.
        if hold.waiting and request.goes_to_consume_queue:
            hold.notify_from_thread(
                request.topic, request.queue_id, request.queue_offset + 1, request.tags_code
            )

    def _register_processors(self) -> None:
        send, pull, clients = SendProcessor(self), PullProcessor(self), ClientProcessor(self)
        offsets, query, admin = OffsetProcessor(self), QueryProcessor(self), AdminProcessor(self)
        table = {
            RC.SEND_MESSAGE: send.send,
            RC.SEND_MESSAGE_V2: send.send,
            RC.SEND_BATCH_MESSAGE: send.send,
            RC.PULL_MESSAGE: pull.pull,
            RC.HEART_BEAT: clients.heartbeat,
            RC.UNREGISTER_CLIENT: clients.unregister,
            RC.GET_CONSUMER_LIST_BY_GROUP: clients.consumer_list,
            RC.CHECK_CLIENT_CONFIG: clients.check_client_config,
            RC.QUERY_CONSUMER_OFFSET: offsets.query_consumer_offset,
            RC.UPDATE_CONSUMER_OFFSET: offsets.update_consumer_offset,
            RC.SEARCH_OFFSET_BY_TIMESTAMP: offsets.queue_position,
            RC.GET_MAX_OFFSET: offsets.queue_position,
            RC.GET_MIN_OFFSET: offsets.queue_position,
            RC.GET_EARLIEST_MSG_STORETIME: offsets.queue_position,
            RC.GET_ALL_CONSUMER_OFFSET: offsets.all_consumer_offsets,
            RC.QUERY_MESSAGE: query.query_message,
            RC.VIEW_MESSAGE_BY_ID: query.view_message_by_id,
            RC.UPDATE_AND_CREATE_TOPIC: admin.create_topic,
            RC.DELETE_TOPIC_IN_BROKER: admin.delete_topic,
            RC.GET_ALL_TOPIC_CONFIG: admin.all_topic_config,
            RC.GET_TOPIC_STATS_INFO: admin.topic_stats,
            RC.QUERY_TOPIC_CONSUME_BY_WHO: admin.topic_consume_by_who,
            RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.create_group,
            RC.DELETE_SUBSCRIPTIONGROUP: admin.delete_group,
            RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.all_groups,
            RC.GET_CONSUME_STATS: admin.consume_stats,
            RC.GET_CONSUMER_CONNECTION_LIST: admin.consumer_connections,
            RC.GET_PRODUCER_CONNECTION_LIST: admin.producer_connections,
            RC.INVOKE_BROKER_TO_RESET_OFFSET: admin.reset_offset,
            RC.GET_BROKER_RUNTIME_INFO: admin.runtime_info,
            RC.PURGE_DAMAGED_COMMIT_LOG: admin.purge_damaged_commit_log,
            RC.GET_BROKER_CONFIG: admin.get_config,
            RC.UPDATE_BROKER_CONFIG: admin.update_config,
            RC.GET_CONSUMER_RUNNING_INFO: admin.forward_to_client,
            RC.CONSUME_MESSAGE_DIRECTLY: admin.forward_to_client,
            RC.CONSUMER_SEND_MSG_BACK: SendBackProcessor(self).send_back,
            RC.END_TRANSACTION: EndTransactionProcessor(self).end_transaction,
            RC.GET_ALL_DELAY_OFFSET: self.schedule.all_delay_offsets,
        }
        locks, reply = LockProcessor(self), ReplyProcessor(self)
        table[RC.LOCK_BATCH_MQ], table[RC.UNLOCK_BATCH_MQ] = locks.lock_batch, locks.unlock_batch
        table[RC.SEND_REPLY_MESSAGE] = table[RC.SEND_REPLY_MESSAGE_V2] = reply.send_reply
        table.update(self.replication.slave_handlers(table))  # type: ignore[arg-type]
        # A master whose lease ended unnoticed, or silent with an in-sync slave unheard, writes nothing.
        if self.replicas is not None:
            for code in WRITE_CODES:
                table[code] = self.replicas.lease.guarded(table[code], self.replicas.fence_if_silent)
        for code, handler in table.items():
            self.server.register_processor(code, handler)
        self.server.register_processor(RC.GET_BROKER_EPOCH_CACHE, epoch_cache_handler(self))
        if self.replicas is not None:
            self.server.register_processor(RC.NOTIFY_BROKER_ROLE_CHANGED, self.replicas.on_role_changed)
        for acl_code, acl_handler in AclAdminProcessor(self).handlers().items():
            self.server.register_processor(acl_code, acl_handler)
        if self.acl is not None:  # after every handler is registered; nothing is wrapped when off
            install_acl(self.server.processors, self.acl, replay=self.acl_replay)
            self.acl.start_watching()

    async def _every(self, interval_ms: int, action, on_thread: bool = False) -> None:
        """Run ``action`` every interval; ``on_thread`` for one that waits on the disk (an fsync on
        the loop would hold every request and every held pull behind it)."""
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                if on_thread:
                    await asyncio.to_thread(action)
                else:
                    action()
            except Exception:
                log.exception("periodic task %s failed", getattr(action, "__name__", action))

    def commit_consumer_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """A consumer's commit (with a pull or on its own): kept, and its progress counted in the
        group's consume TPS. Offsets an operator sets, or a slave copies, are not consumption."""
        previous = self.offsets.commit(group, topic, queue_id, offset)
        self.stats.on_committed(topic, group, queue_id, previous, offset)

    async def _sample_stats_every_second(self) -> None:
        """The stats' one-second sample, on the loop; the totals it leaves are written on a
        thread (a rename can wait on the disk, and every request would wait behind it)."""
        while True:
            await asyncio.sleep(1)
            try:
                self.stats.sample(time.monotonic())
                await asyncio.to_thread(self._save_totals, self.stats.totals())
            except Exception:
                log.exception("stats sample failed")

    def _save_totals(self, totals: running_totals.RunningTotals) -> None:
        try:
            with self._totals_lock:
                running_totals.save(self.totals_file, totals)
        except OSError as exc:  # the broker goes on; a restart would count from the older file
            if not self._totals_unsaved:  # once, not every second of a full disk
                log.warning("put and get totals not saved (a restart resumes older ones): %s", exc)
            self._totals_unsaved = True
        else:
            self._totals_unsaved = False

    def _on_connection_closed(self, connection) -> None:
        if self.hold is not None:
            self.hold.forget(connection)  # its held pulls have nobody to answer
        self.producers.drop_connection(connection)
        for group in set(self.consumers.drop_connection(connection)):
            self.notify_consumer_ids_changed(group)

    def _scan_idle_clients(self) -> None:
        for group in set(self.consumers.expire_idle(self.config.client_channel_max_idle_millis)):
            self.notify_consumer_ids_changed(group)

    def notify_consumer_ids_changed(self, group: str) -> None:
        """Tell every member of ``group`` to rebalance now (oneway, best effort)."""
        info = self.consumers.groups.get(group)
        for channel in list(info.channels.values()) if info else []:
            try:
                channel.connection.invoke_oneway(notify_request(group))
            except Exception:
                log.debug("consumer %s unreachable for a notification", channel.client_id)

    def register_soon(self) -> None:
        if self.registration is not None:
            self.registration.soon()

    async def registered(self) -> None:
        """Register now and wait (bounded) until the name servers have the broker's topics: see
        NamesrvRegistration.registered."""
        if self.registration is not None:
            await self.registration.registered()

    async def start_master_services(self) -> None:
        """What only a master runs: delivering delay messages, checking half messages (a slave's
        are its master's, copied)."""
        if not self._master_services:
            self._master_services = True
            self.schedule.start()
            self.transaction_checker.start()

    async def stop_master_services(self) -> None:
        # Both finish the message in hand before stopping, so the persisted progress is exact.
        if self._master_services:
            self._master_services = False
            await self.schedule.stop()
            await self.transaction_checker.stop()

    def runtime_info(self) -> dict[str, str]:
        info = self.store.runtime_info()
        info.update(
            {
                "brokerVersionDesc": f"pyrocket {__version__}",
                "brokerVersion": "399",
                "bootTimestamp": str(self.boot_timestamp),
                "runtime": f"{(int(time.time() * 1000) - self.boot_timestamp) // 1000} s",
            }
        )
        info.update(self.schedule.runtime_info())
        lag_ms = self.loop_lag.lag_ms if self.loop_lag is not None else 0
        info.update(queue_figures(self.server.waiting_requests(), lag_ms))
        # Not a RocketMQ figure: the longest any request held the loop lately (loop_lag.py).
        info["eventLoopLagPeakMillis"] = str(self.loop_lag.peak_ms() if self.loop_lag is not None else 0)
        info.update(self.stats.runtime_info())
        info.update(self.replication.runtime_info())
        if self.replicas is not None:
            info.update(self.replicas.runtime_info())
        return info

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.loop_lag is not None:
            self.loop_lag.stop()
        if self.hold:
            self.hold.wake_all()
        if self.registration:
            await self.registration.stop()
        if self.acl is not None:
            self.acl.stop_watching()
        if self.replicas is not None:  # no role change from here on
            await self.replicas.stop()
        await self.server.stop()
        await self.replication.stop()
        await self.stop_master_services()
        self.offsets.persist()
        self.topics.persist()
        self.stats.sample(time.monotonic())  # the mornings, should the stop be the day's first sample
        self._save_totals(self.stats.totals())
        self.store.shutdown()
