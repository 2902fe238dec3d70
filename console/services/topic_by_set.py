"""A topic's queue offsets and consumers read set by set, so one broker set that does not answer
(hung, cut off, still listed by the name server) costs the topic page that set's figures, not the
whole page: the sets that answer are shown, the silent one is named with why.

The SDK's ``topic_status`` / ``topic_consumed_by`` ask the sets one after the other and stop at the
first failure, as mqadmin's topicStatus does; a console page of a two-set cluster should not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.client.admin import AsyncMQAdmin, MQAdmin, MQClientError, TopicStatus
from broker.common.route import TopicRouteData
from core.cluster_queries import TopicConsumer, fan_out, topic_consumers


@dataclass
class TopicBySet:
    status: TopicStatus  # the queues of the sets that answered
    unreachable: dict[str, str] = field(default_factory=dict)  # broker set → why it did not answer
    consumers: list[TopicConsumer] = field(default_factory=list)
    consumers_error: str = ""


async def _offsets_by_set(core: AsyncMQAdmin, topic: str, route: TopicRouteData) -> TopicBySet:
    masters = sorted((d.broker_name, d.master_addr) for d in route.broker_datas if d.master_addr)
    answers = await fan_out([core.topic_queue_offsets(addr, name, topic) for name, addr in masters])
    queues, unreachable = [], {}
    for (name, _), answer in zip(masters, answers, strict=True):
        if isinstance(answer, MQClientError):
            unreachable[name] = str(answer)
        elif isinstance(answer, BaseException):
            raise answer  # a bug, not a broker's state
        else:
            queues.extend(answer)
    queues.sort(key=lambda q: (q.broker_name, q.queue_id))
    return TopicBySet(TopicStatus(topic=topic, queues=queues), unreachable)


def topic_by_set(admin: MQAdmin, topic: str, route: TopicRouteData) -> TopicBySet:
    """The topic's queues on each set of ``route`` at once, and its consumer groups."""
    result = admin.run(_offsets_by_set(admin.core, topic, route))
    try:
        result.consumers = topic_consumers(admin, topic)
    except MQClientError as exc:  # which groups consume it is asked of every set in turn
        result.consumers_error = str(exc)
    return result
