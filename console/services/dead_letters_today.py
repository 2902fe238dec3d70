"""How many dead letters each group received since a moment, read from the brokers' stores.

The count is exact because it comes from where the messages are: a dead letter is stored in its
group's ``%DLQ%`` topic when it dies, so the messages of that topic stored at or after ``since``
are the ones that arrived since then. Per queue of the topic on each master, that is the max offset
less the first offset stored at or after ``since`` (SEARCH_OFFSET_BY_TIMESTAMP, a binary search of
the consume queue by store time). Counting from the metric history instead depended on when the
sampler happened to run: a DLQ topic first seen in the same sample as its group had no earlier
point to count from, and a restart or a lost cycle blurred the day's growth.

Dead letters of today that retention already deleted are not counted (they are no longer there).
"""

from __future__ import annotations

from datetime import datetime

from broker.client.admin import AsyncMQAdmin, MQAdmin, MQClientError
from broker.common.topic_config import DLQ_GROUP_TOPIC_PREFIX
from core.cluster_queries import fan_out

# The overview reads "New today" for the groups with most dead letters; beyond this many it shows
# none (each group costs a route lookup and two requests per queue, on every load of the page).
MAX_GROUPS = 20


async def _arrived_in_topic(core: AsyncMQAdmin, topic: str, since_ms: int) -> int:
    route = await core.topic_route(topic)
    arrived = 0
    for data in route.broker_datas:
        if not data.master_addr:
            continue
        for queue in await core.topic_queue_offsets(data.master_addr, data.broker_name, topic):
            if queue.max_offset <= queue.min_offset:
                continue
            first = await core.search_offset(data.master_addr, topic, queue.queue_id, since_ms)
            arrived += queue.max_offset - min(max(first, queue.min_offset), queue.max_offset)
    return arrived


async def _arrived_since(core: AsyncMQAdmin, groups: list[str], since_ms: int) -> dict[str, int | None]:
    found = await fan_out([_arrived_in_topic(core, DLQ_GROUP_TOPIC_PREFIX + g, since_ms) for g in groups])
    counts: dict[str, int | None] = {}
    for group, answer in zip(groups, found, strict=True):
        if isinstance(answer, MQClientError | OSError | TimeoutError):
            counts[group] = None  # shown as unknown, never as a made-up 0
        elif isinstance(answer, BaseException):
            raise answer
        else:
            counts[group] = answer
    return counts


def dead_letters_since(admin: MQAdmin, groups: list[str], since: datetime) -> dict[str, int | None]:
    """Dead letters stored in each group's ``%DLQ%`` topic at or after ``since`` (``None`` for a
    group whose topic could not be read). At most ``MAX_GROUPS`` groups, in the order given."""
    since_ms = int(since.timestamp() * 1000)
    return admin.run(_arrived_since(admin.core, groups[:MAX_GROUPS], since_ms))
