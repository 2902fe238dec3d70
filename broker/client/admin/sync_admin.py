"""``MQAdmin``: the blocking admin client, ``AsyncMQAdmin``'s methods run on a private loop thread."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import Any

from broker.common.acl_signature import SessionCredentials
from broker.common.message import MessageExt
from broker.common.system_names import TOOLS_CONSUMER_GROUP
from broker.remoting.client import EventLoopThread
from broker.remoting.tls import ClientTls

from .async_admin import AsyncMQAdmin


def _blocking(method: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    """The blocking twin of an ``AsyncMQAdmin`` coroutine method, run on the admin's loop thread."""

    @functools.wraps(method)
    def call(self: MQAdmin, *args: Any, **kwargs: Any) -> Any:
        return self._loop.run(method(self.core, *args, **kwargs))

    return call


class MQAdmin:
    """Blocking admin client: every ``AsyncMQAdmin`` method, same names, same results.

    The core runs on a private event-loop thread, so one MQAdmin may be shared by threads
    (a console serves several requests at once).
    """

    def __init__(
        self,
        namesrv_addr: str | Iterable[str],
        timeout: float = 3.0,
        credentials: SessionCredentials | None = None,
        tls: ClientTls | None = None,
    ) -> None:
        self._loop = EventLoopThread("mqadmin")
        try:
            self.core = AsyncMQAdmin(namesrv_addr, timeout, credentials, tls)
        except BaseException:  # TlsConfigError (a certificate file): no loop thread left behind
            self._loop.stop()
            raise
        self.namesrv_addrs = self.core.namesrv_addrs

    def close(self) -> None:
        try:
            self._loop.run(self.core.close(), timeout=10)
        finally:
            self._loop.stop()

    def __enter__(self) -> MQAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, coroutine: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        """Run a coroutine over ``self.core`` on the admin's loop thread and return its result: for
        callers that fan many requests out at once (``asyncio.gather``) instead of one by one."""
        return self._loop.run(coroutine, timeout=timeout)

    def iter_queue_messages(
        self, addr: str, topic: str, queue_id: int, start: int, end: int, group: str = TOOLS_CONSUMER_GROUP
    ) -> Iterator[MessageExt]:
        """Messages of one queue from ``start`` up to (not including) ``end``, pulled in batches."""
        offset = start
        while offset < end:
            result = self.pull_messages(addr, topic, queue_id, offset, min(32, end - offset), group)
            if result.status != "FOUND" or result.next_begin_offset <= offset:
                return
            yield from (m for m in result.messages if m.queue_offset < end)
            offset = result.next_begin_offset

    cluster_info = _blocking(AsyncMQAdmin.cluster_info)
    topic_list = _blocking(AsyncMQAdmin.topic_list)
    topic_route = _blocking(AsyncMQAdmin.topic_route)
    cluster_list = _blocking(AsyncMQAdmin.cluster_list)
    resolve_masters = _blocking(AsyncMQAdmin.resolve_masters)
    resolve_all_addrs = _blocking(AsyncMQAdmin.resolve_all_addrs)
    create_or_update_topic = _blocking(AsyncMQAdmin.create_or_update_topic)
    delete_topic = _blocking(AsyncMQAdmin.delete_topic)
    topic_status = _blocking(AsyncMQAdmin.topic_status)
    topic_consumed_by = _blocking(AsyncMQAdmin.topic_consumed_by)
    create_or_update_subscription_group = _blocking(AsyncMQAdmin.create_or_update_subscription_group)
    delete_subscription_group = _blocking(AsyncMQAdmin.delete_subscription_group)
    consumer_progress = _blocking(AsyncMQAdmin.consumer_progress)
    broker_consume_stats = _blocking(AsyncMQAdmin.broker_consume_stats)
    consumer_groups_progress = _blocking(AsyncMQAdmin.consumer_groups_progress)
    consumer_connection = _blocking(AsyncMQAdmin.consumer_connection)
    producer_connection = _blocking(AsyncMQAdmin.producer_connection)
    reset_offset_by_time = _blocking(AsyncMQAdmin.reset_offset_by_time)
    search_offset = _blocking(AsyncMQAdmin.search_offset)
    update_consumer_offset = _blocking(AsyncMQAdmin.update_consumer_offset)
    min_offset = _blocking(AsyncMQAdmin.min_offset)
    max_offset = _blocking(AsyncMQAdmin.max_offset)
    view_message = _blocking(AsyncMQAdmin.view_message)
    view_cluster_message = _blocking(AsyncMQAdmin.view_cluster_message)
    query_message_by_id = _blocking(AsyncMQAdmin.query_message_by_id)
    query_message_by_unique_key = _blocking(AsyncMQAdmin.query_message_by_unique_key)
    query_message_by_key = _blocking(AsyncMQAdmin.query_message_by_key)
    pull_messages = _blocking(AsyncMQAdmin.pull_messages)
    broker_runtime_info = _blocking(AsyncMQAdmin.broker_runtime_info)
    broker_config = _blocking(AsyncMQAdmin.broker_config)
    update_broker_config = _blocking(AsyncMQAdmin.update_broker_config)
    purge_damaged_commit_log = _blocking(AsyncMQAdmin.purge_damaged_commit_log)
    broker_config_state = _blocking(AsyncMQAdmin.broker_config_state)
    delay_offsets = _blocking(AsyncMQAdmin.delay_offsets)
    end_transaction = _blocking(AsyncMQAdmin.end_transaction)
    query_consumer_offset = _blocking(AsyncMQAdmin.query_consumer_offset)
    all_topic_configs = _blocking(AsyncMQAdmin.all_topic_configs)
    all_subscription_groups = _blocking(AsyncMQAdmin.all_subscription_groups)
    consume_message_directly = _blocking(AsyncMQAdmin.consume_message_directly)
    consumer_running_info = _blocking(AsyncMQAdmin.consumer_running_info)
    acl_targets = _blocking(AsyncMQAdmin.acl_targets)
    create_or_update_acl_account = _blocking(AsyncMQAdmin.create_or_update_acl_account)
    delete_acl_account = _blocking(AsyncMQAdmin.delete_acl_account)
    update_global_white_addrs = _blocking(AsyncMQAdmin.update_global_white_addrs)
    acl_config = _blocking(AsyncMQAdmin.acl_config)
    acl_version = _blocking(AsyncMQAdmin.acl_version)
    each_broker = _blocking(AsyncMQAdmin.each_broker)
