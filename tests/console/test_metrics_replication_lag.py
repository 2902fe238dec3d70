"""/metrics shows replication lag (issue 22): the bytes a master's furthest slave lacks
(``haSlaveBehindBytes``) and those a slave lacks of its master's log (``haBehindMasterBytes``)."""

from __future__ import annotations

import time

from console.metrics import ClusterCollector, Snapshot


def _broker(name: str, broker_id: str, runtime: dict[str, str]) -> dict:
    return {"cluster": "C", "broker": name, "broker_id": broker_id, "addr": f"{name}-{broker_id}:1",
            "up": True, "runtime": runtime}  # fmt: skip


def test_replication_lag_gauge_follows_the_runtime_info():
    collector = ClusterCollector(admin=None, cache_seconds=3600)  # type: ignore[arg-type]
    collector._snapshot = Snapshot(
        time.time(),
        brokers=[
            _broker(
                "a",
                "0",
                {"brokerRole": "ASYNC_MASTER", "haSlaveBehindBytes": "4096", "haSlaveBehindMillis": "1500"},
            ),
            _broker("a", "1", {"brokerRole": "SLAVE", "haBehindMasterBytes": "1024"}),
            _broker(
                "b",
                "0",
                {"brokerRole": "SYNC_MASTER", "haSlaveBehindBytes": "-1", "haSlaveBehindMillis": "-1"},
            ),
            _broker("c", "0", {"commitLogDiskRatio": "0.2"}),  # an older broker: no figure
        ],
    )
    families = {family.name: family for family in collector.collect()}
    samples = {
        (s.labels["broker"], s.labels["broker_id"]): s.value
        for s in families["rocketmq_broker_replication_lag_bytes"].samples
    }
    assert samples == {("a", "0"): 4096.0, ("a", "1"): 1024.0}
    seconds = {
        s.labels["broker"]: s.value for s in families["rocketmq_broker_replication_lag_seconds"].samples
    }
    assert seconds == {"a": 1.5}
