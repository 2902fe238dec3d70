"""What a registration with the name servers costs the broker's other clients, at many groups.

    python bench/registration_stall.py [--groups N] [--seconds S] [--json]

Starts a name server and one broker, fills the broker with ``--groups`` consumer groups (each
one a ``%RETRY%`` topic, so 20,000 groups are 40,000 topics in every registration), then for
``--seconds`` a victim producer sends one small message at a time while, once a second, a
heartbeat names one more new group: the broker registers its whole topic table before answering
it (attack finding 3 of issue 32: a new table version each time). Prints the victim's send
latencies, the new-group heartbeats' answer times and the broker's loop-lag peak
(``eventLoopLagPeakMillis``, the longest the loop ran late in the last minute, the groups'
creation included).

    python bench/registration_stall.py --in-process [--groups N]

Runs the broker in this process instead, with its 2 x N retry topics put in its table directly,
and measures the registrations alone: five times a topic is added, then (the change written)
``registered()`` is awaited while a 1 ms ticker on the broker's loop records how late it runs:
the longest gap is how long the registration held the loop. With ``compressedRegister`` on
(the default) and off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.peers.base import percentile
from broker.client import Producer
from broker.common.codes import RequestCode
from broker.common.fastjson import loads as fastjson_loads
from broker.common.message import Message
from broker.common.topic_config import TopicConfig
from broker.local_cluster import SMALL_STORE, LocalCluster, free_port, start_cluster, start_namesrv
from broker.server.config import BrokerConfig
from broker.server.controller import BrokerController

GROUPS_PER_HEARTBEAT = 256  # the most one heartbeat may name
VICTIM_TOPIC = "VictimTopic"


def heartbeat(groups: list[str]) -> bytes:
    subscription = {"topic": VICTIM_TOPIC, "subString": "*"}
    names = {"consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING", "unitMode": False}
    where = {"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": [subscription]}
    consumers = [{"groupName": g, **names, **where} for g in groups]
    return orjson.dumps({"clientID": "127.0.0.1@bench", "producerDataSet": [], "consumerDataSet": consumers})


def ask_heartbeat(cluster: LocalCluster, groups: list[str]) -> float:
    began = time.perf_counter()
    answer = cluster.request(RequestCode.HEART_BEAT, body=heartbeat(groups))
    if not answer.ok:
        raise RuntimeError(f"heartbeat refused: {answer.remark}")
    return time.perf_counter() - began


def fill(cluster: LocalCluster, groups: int) -> None:
    names = [f"bench-group-{i:06d}" for i in range(groups)]
    for start in range(0, groups, GROUPS_PER_HEARTBEAT):
        ask_heartbeat(cluster, names[start : start + GROUPS_PER_HEARTBEAT])


def victim(namesrv_addr: str, stop: threading.Event, latencies: list[float]) -> None:
    producer = Producer("bench-victim", namesrv_addr, instance_name="bench-victim").start()
    try:
        producer.send(Message(VICTIM_TOPIC, b"warm"))
        while not stop.is_set():
            began = time.perf_counter()
            producer.send(Message(VICTIM_TOPIC, b"x" * 100))
            latencies.append(time.perf_counter() - began)
    finally:
        producer.shutdown()


def run(groups: int, seconds: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="registration-stall-") as workdir:
        limits = {"maxSubscriptionGroupCount": groups + 1000, "maxTopicCount": 3 * groups + 1000}
        auto = {"autoCreateTopicEnable": "true", "autoCreateSubscriptionGroup": "true"}
        settings = {**SMALL_STORE, **auto, **limits}
        cluster = start_cluster(Path(workdir), settings=settings)
        try:
            cluster.create_topic(VICTIM_TOPIC, 4)
            fill(cluster, groups)
            stop, latencies = threading.Event(), list[float]()
            sender = threading.Thread(target=victim, args=(cluster.namesrv_addr, stop, latencies))
            sender.start()
            time.sleep(1.0)  # the victim's route and connection made
            latencies.clear()
            answers = []
            for second in range(int(seconds)):
                answers.append(ask_heartbeat(cluster, [f"bench-new-group-{second}"]))
                time.sleep(1.0)
            stop.set()
            sender.join()
            info = fastjson_loads(cluster.request(RequestCode.GET_BROKER_RUNTIME_INFO).body)["table"]
        finally:
            cluster.stop()
    ms = [value * 1000 for value in sorted(latencies)]
    return {
        "groups": groups,
        "victim_sends": len(ms),
        "victim_p50_ms": round(percentile(ms, 0.5), 2),
        "victim_p99_ms": round(percentile(ms, 0.99), 2),
        "victim_max_ms": round(ms[-1], 2),
        "new_group_heartbeat_max_ms": round(max(answers) * 1000, 1),
        "loop_lag_peak_ms": int(info.get("eventLoopLagPeakMillis", 0)),
    }


async def registrations(namesrv_addr: str, groups: int, compressed: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="registration-stall-") as store:
        small = {key: str(value) for key, value in SMALL_STORE.items()}
        settings = {"listenPort": str(free_port()), "storePathRootDir": store, "namesrvAddr": namesrv_addr,
                    "compressedRegister": str(compressed).lower(), **small}  # fmt: skip
        broker = BrokerController(BrokerConfig.from_properties(settings))
        await broker.start()
        registration = broker.registration
        assert registration is not None
        for i in range(groups):
            for prefix in ("%RETRY%", "%DLQ%"):
                broker.topics.table[f"{prefix}g{i}"] = TopicConfig(f"{prefix}g{i}", 1, 1, 6)
        gaps: list[float] = []
        ticking = asyncio.create_task(_tick(gaps))
        waits, held = [], []
        try:
            for i in range(5):
                broker.topics.update(TopicConfig(f"bench-new-{i}", 1, 1, 6))  # written on the loop
                await asyncio.sleep(0.05)
                gaps.clear()
                began = time.perf_counter()
                await registration.registered()
                waits.append(time.perf_counter() - began)
                await asyncio.sleep(0.05)
                held.append(max(gaps))
        finally:
            ticking.cancel()
            await broker.stop()
    return {
        "compressed": compressed,
        "registered_wait_ms": [round(w * 1000) for w in waits],
        "loop_held_max_ms": [round(h * 1000, 1) for h in held],
    }


async def _tick(gaps: list[float]) -> None:
    last = time.perf_counter()
    while True:
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


def run_in_process(groups: int) -> list[dict]:
    namesrv = start_namesrv()
    try:
        return [asyncio.run(registrations(namesrv.addr, groups, compressed)) for compressed in (True, False)]
    finally:
        namesrv.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = run_in_process(args.groups) if args.in_process else [run(args.groups, args.seconds)]
    for result in results:
        print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
