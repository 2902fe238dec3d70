"""Two broker sets under one cluster (issue 24, item 4): ``broker-a`` and ``broker-b``, two masters
registered with one name server, a topic with queues on both, and what the tests count on them.

Not a test module: ``test_two_broker_sets`` uses it, and so may a benchmark.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from broker.common.codes import RequestCode
from broker.local_cluster import SMALL_STORE
from tests.cluster import Cluster, Preset, start

SETS = ("broker-a", "broker-b")
SCALEOUT_CLUSTER = "ScaleOutCluster"
TWO_SETS = Preset(
    SCALEOUT_CLUSTER,
    SETS,
    {
        **SMALL_STORE,
        "autoCreateTopicEnable": "true",
        "autoCreateSubscriptionGroup": "true",
        # Registers often, so a topic created on both is in the route within a second.
        "registerBrokerIntervalMillis": 500,
        "flushConsumerOffsetInterval": 500,
    },
)


def start_two_sets(workdir: Path, topics: dict[str, int]) -> Cluster:
    """The two masters running, each topic of ``topics`` (name: queues per set) on both."""
    cluster = start(TWO_SETS, workdir)
    try:
        for topic, queues in topics.items():
            cluster.create_topic(topic, queues)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def stored_per_set(cluster: Cluster, topic: str, queues: int) -> Counter:
    """Messages each running set holds for ``topic``, by the brokers' own max offsets."""
    stored: Counter = Counter()
    for name, process in cluster.brokers.items():
        if process.proc.poll() is not None:
            continue
        for queue_id in range(queues):
            fields = {"topic": topic, "queueId": queue_id}
            response = cluster.request(RequestCode.GET_MAX_OFFSET, fields, addr=process.addr)
            stored[name] += response.int_field("offset")
    return stored
