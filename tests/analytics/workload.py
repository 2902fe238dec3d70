"""A known workload written through the real ``MessageStore`` the way the broker writes it, with the
exact truth of every report figure computed while writing.

Records the broker itself writes (schedule, retry, DLQ, transaction half/op/commit, given up) are
put with the topics, queues, sys flags and properties RocketMQ 4.9 uses, so the Spark job reads
them as it would read a real broker's archive.
"""

from __future__ import annotations

import bisect
import os
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from analytics.spark import reports
from broker.common import message_const as const
from broker.common.message import MessageExt
from broker.common.sysflag import TRANSACTION_COMMIT_TYPE
from broker.common.topic_config import (
    SCHEDULE_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    dlq_topic,
    retry_topic,
)
from broker.store.archive import SegmentArchiver
from broker.store.message_store import MessageStore
from broker.store.store_config import MessageStoreConfig

T0 = 1_795_000_000_000 - 1_795_000_000_000 % reports.HOUR_MS  # an hour boundary in 2026
SEGMENT_SIZE = 64 * 1024
USER_TOPICS = ("orders", "payments", "audit-log")
GROUP_TOPICS = {"billing": "orders", "ledger": "payments"}


class FakeClock:
    """The store's clock, moved by the workload so every store timestamp is known."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> float:
        return self.now_ms / 1000


@dataclass
class Truth:
    stored: list[dict] = field(default_factory=list)  # every record that survives the torn tail
    torn_bytes: int = 0
    transactions: dict[str, dict] = field(default_factory=dict)  # unique key → {topic, outcome}


class WorkloadWriter:
    def __init__(self, store_dir: Path, seed: int = 7) -> None:
        self.clock = FakeClock(T0)
        config = MessageStoreConfig(
            mapped_file_size_commit_log=SEGMENT_SIZE,
            mapped_file_size_consume_queue=2000 * 20,
            max_hash_slot_num=4096,
            max_index_num=50_000,
            clean_resource_interval=3_600_000,
            store_host="10.1.2.3:10911",
        )
        self.store = MessageStore(store_dir, config, clock=self.clock)
        self.rng = random.Random(seed)
        self.truth = Truth()
        self._serial = 0

    # -- writing ------------------------------------------------------------------------------
    def put(
        self,
        topic: str,
        body: bytes,
        properties: dict,
        queue_id: int = 0,
        *,
        latency: int = 0,
        born: int | None = None,
        sys_flag: int = 0,
        prepared_offset: int = 0,
        reconsume_times: int = 0,
    ) -> dict:
        self.clock.now_ms += self.rng.randint(1, 16000)
        msg = MessageExt(
            topic=topic,
            body=body,
            properties=dict(properties),
            queue_id=queue_id,
            born_timestamp=born if born is not None else self.clock.now_ms - latency,
            born_host=("192.168.0.9", 50000),
            sys_flag=sys_flag,
            prepared_transaction_offset=prepared_offset,
            reconsume_times=reconsume_times,
        )
        result = self.store.put_message(msg)
        assert result.ok and result.append is not None, result.remark
        record = {
            "topic": topic,
            "body_size": len(body),
            "properties": dict(properties),
            "store_timestamp": result.append.store_timestamp,
            "born_timestamp": msg.born_timestamp,
            "commitlog_offset": result.append.wrote_offset,
            "queue_id": queue_id,
            "queue_offset": result.append.logics_offset,
            "size": result.append.wrote_bytes,
            "sys_flag": sys_flag,
        }
        self.truth.stored.append(record)
        return record

    def user_message(self, topic: str, queue_id: int, *, delay_level: int = 0) -> dict:
        self._serial += 1
        props = {const.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"UNIQ{self._serial:08d}"}
        if self.rng.random() < 0.8:
            props[const.PROPERTY_TAGS] = self.rng.choice(["TagA", "TagB", "TagC", "urgent"])
        if self.rng.random() < 0.7:
            keys = [f"k{self.rng.randint(0, 12)}" for _ in range(self.rng.randint(1, 2))]
            props[const.PROPERTY_KEYS] = const.KEY_SEPARATOR.join(keys)
        body = os.urandom(self.rng.choice([10, 50, 100, 300, 700, 1500, 3000]) + self.rng.randint(0, 40))
        latency = self.rng.choice([0, 1, 2, 3, 7, 15, 40, 120, 900])
        if not delay_level:
            return self.put(topic, body, props, queue_id, latency=latency)
        # The broker parks a delayed message in SCHEDULE_TOPIC_XXXX, queue level - 1 ...
        props[const.PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)
        parked = dict(
            props, **{const.PROPERTY_REAL_TOPIC: topic, const.PROPERTY_REAL_QUEUE_ID: str(queue_id)}
        )
        first = self.put(SCHEDULE_TOPIC, body, parked, delay_level - 1, latency=latency)
        # ... and, when due, writes it to its real topic without the delay level.
        delivered = {k: v for k, v in parked.items() if k != const.PROPERTY_DELAY_TIME_LEVEL}
        return self.put(topic, body, delivered, queue_id, born=first["born_timestamp"])

    def send_back(self, original: dict, group: str, attempts: int, max_reconsume: int) -> None:
        """A consumer of ``group`` fails ``original`` ``attempts`` times: each failure parks a retry
        in the schedule topic (level 3 + reconsume times) that is then delivered to %RETRY%group;
        the failure after ``max_reconsume`` retries goes to %DLQ%group instead."""
        props = dict(
            original["properties"],
            **{
                const.PROPERTY_RETRY_TOPIC: original["topic"],
                const.PROPERTY_ORIGIN_MESSAGE_ID: f"OFFSET{original['commitlog_offset']}",
            },
        )
        body = os.urandom(original["body_size"])
        for reconsume in range(attempts):
            if reconsume >= max_reconsume:
                self.put(
                    dlq_topic(group),
                    body,
                    props,
                    0,
                    born=original["born_timestamp"],
                    reconsume_times=reconsume + 1,
                )
                return
            level = 3 + reconsume
            parked = dict(
                props,
                **{
                    const.PROPERTY_REAL_TOPIC: retry_topic(group),
                    const.PROPERTY_REAL_QUEUE_ID: "0",
                    const.PROPERTY_DELAY_TIME_LEVEL: str(level),
                },
            )
            self.put(
                SCHEDULE_TOPIC,
                body,
                parked,
                level - 1,
                born=original["born_timestamp"],
                reconsume_times=reconsume + 1,
            )
            delivered = {k: v for k, v in parked.items() if k != const.PROPERTY_DELAY_TIME_LEVEL}
            self.put(
                retry_topic(group),
                body,
                delivered,
                0,
                born=original["born_timestamp"],
                reconsume_times=reconsume + 1,
            )

    def transaction(self, topic: str, outcome: str, *, re_put: bool = False) -> None:
        """A transactional send ending in ``outcome`` (committed / rolled_back / pending / given_up)."""
        self._serial += 1
        key = f"TXN{self._serial:08d}"
        queue_id = self.rng.randint(0, 3)
        props = {
            const.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: key,
            const.PROPERTY_TRANSACTION_PREPARED: "true",
            const.PROPERTY_PRODUCER_GROUP: "tx-producers",
            const.PROPERTY_TAGS: "TagT",
            const.PROPERTY_REAL_TOPIC: topic,
            const.PROPERTY_REAL_QUEUE_ID: str(queue_id),
        }
        body = os.urandom(self.rng.randint(20, 400))
        half = self.put(TRANS_HALF_TOPIC, body, props, 0, latency=3)
        if re_put:  # a transaction check put the half back: a new half record, same unique key
            renewed = dict(
                props, **{const.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET: str(half["queue_offset"])}
            )
            half = self.put(TRANS_HALF_TOPIC, body, renewed, 0, born=half["born_timestamp"])
        self.truth.transactions[key] = {"topic": topic, "outcome": outcome}
        if outcome in ("committed", "rolled_back"):
            op = self.put(
                TRANS_OP_HALF_TOPIC, str(half["queue_offset"]).encode(), {const.PROPERTY_TAGS: "d"}, 0
            )
            op["op_offset"] = half["queue_offset"]
        if outcome == "committed":
            real = {
                k: v
                for k, v in props.items()
                if k
                not in (
                    const.PROPERTY_REAL_TOPIC,
                    const.PROPERTY_REAL_QUEUE_ID,
                    const.PROPERTY_TRANSACTION_PREPARED,
                )
            }
            self.put(
                topic,
                body,
                real,
                queue_id,
                born=half["born_timestamp"],
                sys_flag=TRANSACTION_COMMIT_TYPE,
                prepared_offset=half["commitlog_offset"],
            )
        elif outcome == "given_up":
            checked = dict(props, **{const.PROPERTY_TRANSACTION_CHECK_TIMES: "15"})
            self.put(TRANS_CHECK_MAX_TIME_TOPIC, body, checked, 0, born=half["born_timestamp"])

    # -- the whole workload ---------------------------------------------------------------------
    def write(self, messages: int = 900) -> None:
        self.store.start()
        try:
            sent: dict[str, list] = {topic: [] for topic in USER_TOPICS}
            outcomes = ["committed"] * 6 + ["rolled_back"] * 4 + ["pending"] * 3 + ["given_up"] * 2
            for i in range(messages):
                topic = USER_TOPICS[i % 3] if i % 7 else "orders"
                delay = self.rng.choice([1, 2, 5, 16]) if i % 23 == 0 else 0
                sent[topic].append(self.user_message(topic, i % 4, delay_level=delay))
                if i % 60 == 0 and outcomes:
                    self.transaction("payments" if i % 120 else "orders", outcomes.pop(), re_put=i == 120)
            for group, topic in GROUP_TOPICS.items():
                for n, original in enumerate(sent[topic][:40:3]):
                    self.send_back(original, group, attempts=1 + n % 4, max_reconsume=2)
            # The last record: archived torn (the test cuts the archived copy mid-record).
            self.user_message("orders", 0)
            self.store.wait_for_dispatch()
        finally:
            self.store.shutdown()

    def archive(self, archive_root: Path) -> list[Path]:
        """Archive every segment with the store's archiver, then tear the last record's tail."""
        archiver = SegmentArchiver(str(archive_root))
        segments = sorted((self.store.root / "commitlog").iterdir())
        archived = [Path(archiver.archive(path)) for path in segments]
        last = self.truth.stored.pop()
        cut = last["commitlog_offset"] - int(archived[-1].name) + last["size"] // 2
        os.truncate(archived[-1], cut)
        self.truth.torn_bytes = last["size"] // 2
        return archived


# -- the exact figures the reports must show ----------------------------------------------------
def kind_of(topic: str) -> str:
    from analytics.spark.segment_rows import topic_kind

    return topic_kind(topic)


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (Spark's ``percentile``)."""
    position = (len(sorted_values) - 1) * p
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def distribution(values_by_topic: dict[str, list[int]]) -> dict[str, dict]:
    out = {}
    everything = [v for values in values_by_topic.values() for v in values]
    for topic, values in [*values_by_topic.items(), (reports.ALL_TOPICS, everything)]:
        ordered = sorted(values)
        row = {
            "messages": len(ordered),
            "min": ordered[0],
            "max": ordered[-1],
            "mean": sum(ordered) / len(ordered),
        }
        for p in reports.PERCENTILES:
            row[f"p{int(p * 100)}"] = percentile(ordered, p)
        out[topic] = row
    return out


def histogram(values: list[int], edges: tuple[int, ...]) -> dict:
    counts: Counter[int | None] = Counter()
    for v in values:
        i = bisect.bisect_left(edges, v)
        counts[edges[i] if i < len(edges) else None] += 1
    return dict(counts)


def expected(truth: Truth) -> dict:
    stored = truth.stored
    user = [r for r in stored if kind_of(r["topic"]) == "normal"]
    sizes, latencies = defaultdict(list), defaultdict(list)
    for r in user:
        sizes[r["topic"]].append(r["body_size"])
        latencies[r["topic"]].append(r["store_timestamp"] - r["born_timestamp"])
    throughput: Counter[tuple[int, str]] = Counter()
    throughput_bytes: Counter[tuple[int, str]] = Counter()
    for r in stored:
        hour = r["store_timestamp"] // reports.HOUR_MS * reports.HOUR_MS
        throughput[(hour, r["topic"])] += 1
        throughput_bytes[(hour, r["topic"])] += r["body_size"]
    return {
        "throughput": {k: (throughput[k], throughput_bytes[k]) for k in throughput},
        "size": distribution(sizes),
        "size_histogram": histogram([v for vs in sizes.values() for v in vs], reports.SIZE_BUCKETS),
        "latency": distribution(latencies),
        "latency_histogram": histogram([v for vs in latencies.values() for v in vs], reports.LATENCY_BUCKETS),
        "retry_dlq": _retry_dlq(stored, user),
        "delay_levels": _delay_levels(stored),
        "transactions": _transactions(truth.transactions),
        "top_keys": Counter(
            k for r in user for k in r["properties"].get(const.PROPERTY_KEYS, "").split() if k
        ),
        "top_tags": Counter(
            r["properties"][const.PROPERTY_TAGS] for r in user if const.PROPERTY_TAGS in r["properties"]
        ),
        "kinds": Counter(kind_of(r["topic"]) for r in stored),
    }


def _retry_dlq(stored: list[dict], user: list[dict]) -> dict:
    per_topic = Counter(r["topic"] for r in user)
    out = {}
    for group in GROUP_TOPICS:
        retries = [r for r in stored if r["topic"] == retry_topic(group)]
        dead = [r for r in stored if r["topic"] == dlq_topic(group)]
        sources = {r["properties"][const.PROPERTY_RETRY_TOPIC] for r in retries + dead}
        source_messages = sum(per_topic[t] for t in sources)
        retried = len({r["properties"][const.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for r in retries})
        out[group] = {
            "source_topics": ",".join(sorted(sources)),
            "source_messages": source_messages,
            # every send-back of the workload is parked and then delivered: both count alike
            "retry_messages": len(retries),
            "redelivered_messages": len(retries),
            "retried_messages": retried,
            "dlq_messages": len(dead),
            "retry_rate": retried / source_messages,
            "dlq_rate": len(dead) / source_messages,
        }
    return out


def _delay_levels(stored: list[dict]) -> dict:
    out: dict[int, dict] = {}
    for r in stored:
        if r["topic"] != SCHEDULE_TOPIC:
            continue
        level = int(r["properties"][const.PROPERTY_DELAY_TIME_LEVEL])
        row = out.setdefault(level, {"messages": 0, "delayed_messages": 0, "retry_messages": 0})
        row["messages"] += 1
        is_retry = r["properties"][const.PROPERTY_REAL_TOPIC].startswith("%RETRY%")
        row["retry_messages" if is_retry else "delayed_messages"] += 1
    return out


def _transactions(transactions: dict[str, dict]) -> dict:
    out: dict[str, Counter] = defaultdict(Counter)
    for txn in transactions.values():
        for topic in (txn["topic"], reports.ALL_TOPICS):
            out[topic]["transactions"] += 1
            out[topic][txn["outcome"]] += 1
    return out
