"""What replication costs and how fast it goes, with real broker processes on loopback.

    python bench/ha_replication.py [--messages N] [--body BYTES]

Three set-ups, each a fresh name server and brokers: a master alone (ASYNC_MASTER), an
ASYNC_MASTER with a slave, a SYNC_MASTER with a slave. For each: sync sends one at a time from
one producer (rate, p50 and p99 latency) and, with a slave, how long after the last answer the
slave held the master's whole log. Then a slave started late against a master holding the
messages: how fast it catches up (MB/s of commit log). A benchmark, not a test: figures vary
with the machine's load; compare columns of one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.client import Producer
from broker.common.codes import RequestCode
from broker.common.message import Message
from broker.local_cluster import LocalCluster, add_slave, start_master_slave, wait_until

TOPIC = "bench-ha"


def _runtime(cluster, addr: str) -> dict[str, str]:
    response = cluster.request(RequestCode.GET_BROKER_RUNTIME_INFO, addr=addr)
    return json.loads(response.body)["table"]


def _end(cluster, addr: str) -> int:
    return int(_runtime(cluster, addr)["commitLogMaxOffset"])


def _create_topic(cluster) -> None:
    fields = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4,
              "perm": 6, "topicFilterType": "SINGLE_TAG"}  # fmt: skip
    assert cluster.request(
        RequestCode.UPDATE_AND_CREATE_TOPIC, fields, addr=cluster.brokers["broker-ha"].addr
    ).ok
    cluster.wait_for_route(TOPIC)


def _sync_sends(cluster, count: int, body: bytes) -> tuple[float, list[float], dict[str, int]]:
    producer = Producer("BENCH_HA", cluster.namesrv_addr).start()
    try:
        producer.send(Message(TOPIC, body))  # routes and connection ready
        latencies: list[float] = []
        statuses: dict[str, int] = {}
        started = time.perf_counter()
        for _ in range(count):
            sent = time.perf_counter()
            status = producer.send(Message(TOPIC, body)).send_status
            latencies.append((time.perf_counter() - sent) * 1000)
            statuses[status] = statuses.get(status, 0) + 1
        return count / (time.perf_counter() - started), latencies, statuses
    finally:
        producer.shutdown()


def _setup(workdir: Path, name: str, role: str | None, with_slave: bool, count: int, body: bytes) -> None:
    settings = {"brokerRole": role} if role else {}
    cluster: LocalCluster = start_master_slave(
        workdir / name, with_slave=with_slave, master_settings=settings
    )
    try:
        _create_topic(cluster)
        master = cluster.brokers["broker-ha"].addr
        if with_slave:
            wait_until(lambda: _runtime(cluster, master)["haSlaveCount"] == "1", timeout=30, what="the slave")
        rate, latencies, statuses = _sync_sends(cluster, count, body)
        lag = ""
        if with_slave:
            slave, end, answered = (
                cluster.brokers["broker-ha-s"].addr,
                _end(cluster, master),
                time.perf_counter(),
            )
            wait_until(lambda: _end(cluster, slave) >= end, timeout=60, what="the slave to catch up")
            lag = f"  slave complete {1000 * (time.perf_counter() - answered):6.1f} ms after the last answer"
        p50, p99 = statistics.median(latencies), statistics.quantiles(latencies, n=100)[98]
        print(f"{name:24} {rate:8.0f} msg/s  p50 {p50:6.3f} ms  p99 {p99:6.3f} ms  {statuses}{lag}")
    finally:
        cluster.stop()


def _catch_up(workdir: Path, count: int, body: bytes) -> None:
    cluster: LocalCluster = start_master_slave(workdir / "late", with_slave=False)
    try:
        _create_topic(cluster)
        producer = Producer("BENCH_HA_BATCH", cluster.namesrv_addr).start()
        try:
            for _ in range(count // 100):
                producer.send_batch([Message(TOPIC, body) for _ in range(100)])
        finally:
            producer.shutdown()
        master = cluster.brokers["broker-ha"].addr
        end = _end(cluster, master)
        started = time.perf_counter()
        slave = add_slave(cluster, "broker-ha", "broker-ha-s").addr
        wait_until(lambda: _end(cluster, slave) >= end, timeout=300, interval=0.01, what="the late slave")
        seconds = time.perf_counter() - started
        rate = end / seconds / 1e6
        size = f"{end / 1e6:.1f} MB in {seconds:.2f} s, slave start included"
        print(f"{'late slave catch-up':24} {rate:8.1f} MB/s  ({size})")
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--body", type=int, default=1024)
    args = parser.parse_args()
    body = b"x" * args.body
    with tempfile.TemporaryDirectory(prefix="bench-ha-") as tmp:
        workdir = Path(tmp)
        print(f"sync sends, one producer, {args.messages} x {args.body} B")
        _setup(workdir, "master alone", None, False, args.messages, body)
        _setup(workdir, "ASYNC_MASTER + slave", None, True, args.messages, body)
        _setup(workdir, "SYNC_MASTER + slave", "SYNC_MASTER", True, args.messages, body)
        _catch_up(workdir, args.messages * 10, body)


if __name__ == "__main__":
    main()
