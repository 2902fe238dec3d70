"""The broker's refusal of a request that names an illegal topic or group.

RocketMQ's broker answers a bad topic name with SYSTEM_ERROR and a remark starting "The specified
topic" (TopicValidator.validateTopic); groups are answered the same way. Every processor checks
the names a request carries before it looks anything up, so a name that could not have been
created never reaches a table, a file or a log line unquoted.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.common.codes import ResponseCode
from broker.common.names import group_problem, topic_problem
from broker.remoting.command import RemotingCommand, response_to


def name_problem(topics: Iterable[object] = (), groups: Iterable[object] = ()) -> str | None:
    """The first reason one of the names is illegal; None-valued (optional, absent) names are skipped."""
    for topic in topics:
        if topic is not None:
            problem = topic_problem(topic)
            if problem:
                return problem
    for group in groups:
        if group is not None:
            problem = group_problem(group)
            if problem:
                return problem
    return None


def name_refusal(
    request: RemotingCommand,
    topics: Iterable[object] = (),
    groups: Iterable[object] = (),
    code: int = ResponseCode.SYSTEM_ERROR,
) -> RemotingCommand | None:
    """SYSTEM_ERROR (or ``code``) with the reason when a topic or group is illegal, else None."""
    problem = name_problem(topics, groups)
    return None if problem is None else response_to(request, code, problem)
