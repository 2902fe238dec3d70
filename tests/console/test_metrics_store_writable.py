"""/metrics shows whether each broker's store takes writes (issue 21: a full disk refuses them),
from the runtime info the broker reports (``storeWritable``)."""

from __future__ import annotations

import time

from console.metrics import ClusterCollector, Snapshot


def _broker(name: str, runtime: dict[str, str], up: bool = True) -> dict:
    return {
        "cluster": "C",
        "broker": name,
        "broker_id": "0",
        "addr": f"{name}:1",
        "up": up,
        "runtime": runtime,
    }


def test_store_writable_gauge_follows_the_runtime_info():
    collector = ClusterCollector(admin=None, cache_seconds=3600)  # type: ignore[arg-type]
    collector._snapshot = Snapshot(
        time.time(),
        brokers=[
            _broker("full", {"storeWritable": "false", "diskFull": "true", "commitLogDiskRatio": "0.97"}),
            _broker("fine", {"storeWritable": "true", "commitLogDiskRatio": "0.2"}),
            _broker("older", {"commitLogDiskRatio": "0.2"}),  # reports no such figure: no sample
            _broker("down", {}, up=False),
        ],
    )
    families = {family.name: family for family in collector.collect()}
    samples = {s.labels["broker"]: s.value for s in families["rocketmq_broker_store_writable"].samples}
    assert samples == {"full": 0.0, "fine": 1.0}
