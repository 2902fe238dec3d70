"""A name server and two brokers for console tests and the console benchmark, with small store files.

The brokers preallocate their files (1 GiB commit-log segments, 6 MB per consume queue by default);
a console test or benchmark creating hundreds of topics must not fill the machine's disk, so segments
here are a few MiB and each consume-queue file holds ``queue_entries`` entries.
"""

from __future__ import annotations

import time
from pathlib import Path

from broker.client.admin import NotFoundError
from tests.cli.live_cluster import CLUSTER, LiveCluster, start_namesrv
from tests.harness import EngineProcess, free_port, keep_draining

CONSUME_QUEUE_ENTRY_BYTES = 20


def start_broker(workdir: Path, name: str, namesrv_addr: str, queue_entries: int) -> EngineProcess:
    conf = workdir / f"{name}.conf"
    conf.write_text(
        f"brokerClusterName={CLUSTER}\nbrokerName={name}\nbrokerId=0\n"
        f"storePathRootDir={workdir / name}\nautoCreateTopicEnable=true\n"
        "autoCreateSubscriptionGroup=true\nmappedFileSizeCommitLog=4194304\n"
        f"mappedFileSizeConsumeQueue={queue_entries * CONSUME_QUEUE_ENTRY_BYTES}\n"
    )
    args = ["-m", "broker.server", "-c", str(conf), "--listen-port", str(free_port()), "-n", namesrv_addr]
    return keep_draining(EngineProcess(args))


def start_small_cluster(
    workdir: Path, broker_names: tuple[str, ...] = ("broker-a", "broker-b"), queue_entries: int = 3000
) -> LiveCluster:
    cluster = LiveCluster(start_namesrv(), {})
    try:
        for name in broker_names:
            cluster.brokers[name] = start_broker(workdir, name, cluster.namesrv_addr, queue_entries)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def route_settles(admin, topic: str, expected: set, timeout: float = 10.0) -> bool:
    """Brokers re-register a changed topic with the name server on their own: wait for the route."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = {
                (q.broker_name, q.write_queue_nums, q.perm) for q in admin.topic_route(topic).queue_datas
            }
        except NotFoundError:
            found = set()
        if found == expected:
            return True
        time.sleep(0.05)
    return False
