"""RocketMQ's thread-pool queue figures in the broker's runtime info, from this broker's loop.

RocketMQ names a queue per kind of request; here the requests read but not yet served wait in
their connections' backlogs (``RemotingConnection``: a burst is served sixteen at a time, other
connections taking turns), and all of them wait as long as the loop is behind
(``loop_lag.LoopLagMonitor``). The capacities RocketMQ reports beside these are left out: no
queue here has one (a backlog holds what its client sent ahead of the answers).
"""

from __future__ import annotations

from collections import Counter

from broker.common.codes import RequestCode as RC

# Which requests RocketMQ serves from which pool (BrokerController.registerProcessor).
_POOL_OF_CODE = {
    RC.SEND_MESSAGE: "send",
    RC.SEND_MESSAGE_V2: "send",
    RC.SEND_BATCH_MESSAGE: "send",
    RC.CONSUMER_SEND_MSG_BACK: "send",
    RC.PULL_MESSAGE: "pull",
    RC.QUERY_MESSAGE: "query",
    RC.VIEW_MESSAGE_BY_ID: "query",
    RC.END_TRANSACTION: "endTransaction",
}


def queue_figures(waiting_codes: Counter, lag_ms: int) -> dict[str, str]:
    """Runtime-info entries for the requests waiting (``waiting_codes``: request code → how
    many) and the loop's lag."""
    sizes: Counter[str] = Counter()
    for code, count in waiting_codes.items():
        pool = _POOL_OF_CODE.get(code)
        if pool is not None:
            sizes[pool] += count
    lag = str(lag_ms)
    return {
        "sendThreadPoolQueueSize": str(sizes["send"]),
        "pullThreadPoolQueueSize": str(sizes["pull"]),
        "queryThreadPoolQueueSize": str(sizes["query"]),
        "EndTransactionQueueSize": str(sizes["endTransaction"]),
        "sendThreadPoolQueueHeadWaitTimeMills": lag,
        "pullThreadPoolQueueHeadWaitTimeMills": lag,
        "queryThreadPoolQueueHeadWaitTimeMills": lag,
    }
