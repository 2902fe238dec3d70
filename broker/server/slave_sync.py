"""A slave's copy of its master's metadata (RocketMQ's SlaveSynchronize): topics, subscription
groups, consumer offsets and delay progress, fetched from the master's remoting port.

As RocketMQ 4.9's slave: 3 s after start, then every 10 s; topics and groups are replaced
wholesale when the master's data version differs from the copy's (so a topic deleted on the
master goes from the slave too), consumer offsets are merged (the master's entries win, so
offsets the slave was told while the master was away are kept for queues the master does not
know), the delay progress is replaced. The master is the one the name server names
(``masterAddr`` of the registration answer).

Offsets consumers committed to this slave while their master was away (clients commit to a
slave only then) are handed to the master first, where the master's are lower or missing, so
they are not lost when it returns (issue 22; RocketMQ 4.9 would overwrite them with the master's).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.common.errors import MQBrokerError, MQError
from broker.common.json_config_file import JAVA_LONG_MAX, JAVA_LONG_MIN, DataVersion
from broker.common.names import group_problem, topic_problem
from broker.common.request_headers import UpdateConsumerOffsetRequestHeader
from broker.common.topic_config import TopicConfig

from .outer_api import BrokerOuterAPI
from .subscription_manager import SubscriptionGroupConfig

if TYPE_CHECKING:
    from .controller import BrokerController

log = logging.getLogger(__name__)

FIRST_SYNC_DELAY_S = 3.0
SYNC_INTERVAL_S = 10.0


class MetadataSyncError(ValueError):
    """The master's answer could not be used; nothing of it was applied."""


class SlaveSynchronize:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        # Signed as the broker's name-server requests are (an admin account where ACL is on).
        self.outer = BrokerOuterAPI(broker.config)
        self.last_sync_ms = 0
        self.last_error = ""
        # (group, topic, queue id) → offset a client committed here, not yet handed to the master.
        self.client_offsets: dict[tuple[str, str, int], int] = {}
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        await self.outer.close()

    async def _loop(self) -> None:
        await asyncio.sleep(FIRST_SYNC_DELAY_S)
        while True:
            try:
                await self.sync_all()
            except OSError as exc:  # a file that could not be written (a full disk): next round
                self.last_error = f"metadata not written: {exc}"
                log.error("%s", self.last_error)
            await asyncio.sleep(SYNC_INTERVAL_S)

    async def sync_all(self) -> bool:
        """One round; False (with the reason kept as a figure and logged) when it failed."""
        master = self.broker.replication.master_addr
        if not master:
            self.last_error = "no master known yet"
            return False
        outer = self.outer
        try:
            changed = [
                self._apply_topics(await outer.get_all_topic_config(master)),
                self._apply_groups(await outer.get_all_subscription_group_config(master)),
                self._apply_offsets(await self._hand_back_offsets(master)),
                self._apply_delay_offsets(await outer.get_all_delay_offset(master)),
            ]
            for persist in filter(None, changed):
                await asyncio.to_thread(persist)  # a write and fsync: never on the loop
        except (MQError, MetadataSyncError, LookupError, ValueError, TypeError, AttributeError) as exc:
            error = f"metadata from the master {master}: {exc}"
            if error != self.last_error:
                log.warning("%s", error)
            self.last_error = error
            return False
        self.last_sync_ms, self.last_error = int(time.time() * 1000), ""
        return True

    # Each _apply_ takes the master's answer into memory and returns what persists it (None when
    # nothing changed); nothing is taken from an answer that fails to parse.
    def note_client_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """A client committed ``offset`` to this slave (its master was away)."""
        self.client_offsets[(group, topic, queue_id)] = offset

    async def _hand_back_offsets(self, master: str) -> dict:
        """The master's offsets, after giving it those clients committed here that are further
        than its own (a committed offset only grows while its master is away)."""
        body = await self.outer.get_all_consumer_offset(master)
        table = body.setdefault("offsetTable", {})
        if not isinstance(table, dict):
            raise MetadataSyncError("the offset table is no JSON object")
        for (group, topic, queue_id), offset in list(self.client_offsets.items()):
            queues = table.setdefault(f"{topic}@{group}", {})
            if _java_long(queues.get(str(queue_id), queues.get(queue_id, -1))) < offset:
                header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
                try:
                    await self.outer.update_consumer_offset(master, header)
                except MQBrokerError as exc:
                    log.warning("the master refused the offset of %s@%s queue %d: %s",
                                topic, group, queue_id, exc.remark)  # fmt: skip
                else:
                    queues[str(queue_id)] = offset
                    log.info("offset %d of %s@%s queue %d, committed here, handed to the master",
                             offset, topic, group, queue_id)  # fmt: skip
            if self.client_offsets.get((group, topic, queue_id)) == offset:  # none newer meanwhile
                del self.client_offsets[(group, topic, queue_id)]
        return body

    def _apply_topics(self, wrapper: dict) -> Callable[[], object] | None:
        topics = self.broker.topics
        version = DataVersion.from_json(wrapper.get("dataVersion"))
        if version.to_json() == topics.data_version.to_json():
            return None
        table = {
            name: TopicConfig.from_json_dict(data)
            for name, data in (wrapper.get("topicConfigTable") or {}).items()
            if not topic_problem(name)
        }
        with topics.lock:
            topics.table = table
            topics.file.data_version = version
        return topics.persist

    def _apply_groups(self, wrapper: dict) -> Callable[[], object] | None:
        groups = self.broker.groups
        version = DataVersion.from_json(wrapper.get("dataVersion"))
        if version.to_json() == groups.file.data_version.to_json():
            return None
        table = {
            name: SubscriptionGroupConfig.from_json_dict(data)
            for name, data in (wrapper.get("subscriptionGroupTable") or {}).items()
            if not group_problem(name)
        }
        with groups.lock:
            groups.table = table
            groups.file.data_version = version
        return groups.persist

    def _apply_offsets(self, body: dict) -> Callable[[], None] | None:
        offsets = self.broker.offsets
        received = {}
        for key, queues in (body.get("offsetTable") or {}).items():
            topic, _, group = str(key).partition("@")
            if topic_problem(topic) or group_problem(group):
                continue
            received[key] = {int(q): _java_long(o) for q, o in queues.items()}
        changed = False
        for key, queues in received.items():
            topic, _, group = key.partition("@")
            for queue_id, offset in queues.items():
                if offsets.query(group, topic, queue_id) != offset:
                    offsets.commit(group, topic, queue_id, offset)
                    changed = True
        return offsets.persist if changed else None

    def _apply_delay_offsets(self, body: dict) -> Callable[[], None] | None:
        delay = self.broker.schedule.offsets
        table = {int(level): _java_long(offset) for level, offset in (body.get("offsetTable") or {}).items()}
        if table == delay.table:
            return None
        delay.table = table
        return delay.persist

    def runtime_info(self) -> dict[str, str]:
        return {"slaveSyncTimestamp": str(self.last_sync_ms), "slaveSyncError": self.last_error}


def _java_long(value) -> int:
    number = int(value)
    if not JAVA_LONG_MIN <= number <= JAVA_LONG_MAX:
        raise MetadataSyncError(f"{number} is no Java long")
    return number
