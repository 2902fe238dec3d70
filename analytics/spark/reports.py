"""The A3 reports, each a small DataFrame computed from the records DataFrame (``segments``).

Every function takes the filtered records and returns one section's rows; definitions (what is
counted, over which kinds) are in each docstring, because the tests compute the same truth.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from broker.common import message_const as const
from broker.common.delay_levels import DEFAULT_DELAY_LEVELS

from .catalog import HOUR_MS
from .segment_rows import (
    KIND_DLQ,
    KIND_NORMAL,
    KIND_RETRY,
    KIND_SCHEDULE,
    KIND_TORN,
    KIND_TRANS_GIVEN_UP,
    KIND_TRANS_HALF,
    KIND_TRANS_OP,
)

PERCENTILES = (0.5, 0.9, 0.95, 0.99)
# Upper bounds (inclusive) of histogram buckets; the last bucket is "above the last edge".
SIZE_BUCKETS = (0, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 65536, 262144, 1048576, 4194304)
LATENCY_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 60000, 600000)
ALL_TOPICS = "*"


def filter_records(df: DataFrame, start_ms: int | None, end_ms: int | None, topics) -> DataFrame:
    """Records stored in ``[start_ms, end_ms)`` whose topic - or, for retry, DLQ, schedule and
    transaction records, the user topic they stand for - is one of ``topics`` (all when empty).
    Op records name no topic: with a topic filter they are kept when they remove a kept half."""
    df = df.filter(F.col("kind") != KIND_TORN)
    if start_ms is not None:
        df = df.filter(F.col("store_timestamp") >= start_ms)
    if end_ms is not None:
        df = df.filter(F.col("store_timestamp") < end_ms)
    if not topics:
        return df
    kept = df.filter(F.coalesce(F.col("original_topic"), F.col("topic")).isin(list(topics)))
    halves = kept.filter(F.col("kind") == KIND_TRANS_HALF).select(
        "queue_id", F.col("queue_offset").alias("o")
    )
    ops = (
        df.filter(F.col("kind") == KIND_TRANS_OP)
        .withColumn("o", F.explode("op_offsets"))
        .join(halves, ["queue_id", "o"], "left_semi")
        .drop("o")
        .dropDuplicates(["commitlog_offset"])
    )
    return kept.unionByName(ops)


def inputs(df: DataFrame) -> DataFrame:
    """What was read, per kind (torn tails included): records, stored bytes, segments."""
    return (
        df.groupBy("kind")
        .agg(
            F.count("*").alias("records"),
            F.sum("store_size").alias("store_bytes"),
            F.countDistinct("segment").alias("segments"),
        )
        .orderBy("kind")
    )


def throughput(df: DataFrame) -> DataFrame:
    """Records and body bytes per topic per hour of store time, for every kind of topic."""
    hour = (F.floor(F.col("store_timestamp") / HOUR_MS) * HOUR_MS).cast("long")
    return (
        df.withColumn("hour_start_ms", hour)
        .groupBy("hour_start_ms", "topic", "kind")
        .agg(F.count("*").alias("messages"), F.sum("body_size").cast("long").alias("bytes"))
        .orderBy("hour_start_ms", "topic")
    )


def _distribution(values: DataFrame, column: str) -> DataFrame:
    aggregates = [
        F.count("*").alias("messages"),
        F.min(column).cast("double").alias("min"),
        F.percentile(column, list(PERCENTILES)).alias("pcts"),
        F.max(column).cast("double").alias("max"),
        F.avg(column).alias("mean"),
    ]
    per_topic = values.groupBy("topic").agg(*aggregates)
    overall = values.agg(*aggregates).withColumn("topic", F.lit(ALL_TOPICS))
    both = per_topic.unionByName(overall).filter(F.col("messages") > 0)
    columns = [F.col("pcts")[i].alias(f"p{int(p * 100)}") for i, p in enumerate(PERCENTILES)]
    return both.select("topic", "messages", "min", *columns, "max", "mean").orderBy("topic")


def _histogram(values: DataFrame, column: str, edges: tuple[int, ...]) -> DataFrame:
    bucket = F.lit(None).cast("long")
    for edge in reversed(edges):
        bucket = F.when(F.col(column) <= edge, F.lit(edge)).otherwise(bucket)
    return (
        values.withColumn("le", bucket)
        .groupBy("le")
        .agg(F.count("*").alias("messages"))
        .orderBy(F.col("le").asc_nulls_last())
    )


def user_messages(df: DataFrame) -> DataFrame:
    """Records of user topics (kind normal): what producers sent, incl. delivered delayed and
    committed transactional messages."""
    return df.filter(F.col("kind") == KIND_NORMAL)


def size_distribution(df: DataFrame) -> DataFrame:
    """Body size percentiles of user messages per topic and over all (``*``)."""
    return _distribution(user_messages(df), "body_size")


def size_histogram(df: DataFrame) -> DataFrame:
    return _histogram(user_messages(df), "body_size", SIZE_BUCKETS)


def _latencies(df: DataFrame) -> DataFrame:
    return user_messages(df).withColumn("latency_ms", F.col("store_timestamp") - F.col("born_timestamp"))


def latency_distribution(df: DataFrame) -> DataFrame:
    """Store latency (store - born timestamp, ms) percentiles of user messages."""
    return _distribution(_latencies(df), "latency_ms")


def latency_histogram(df: DataFrame) -> DataFrame:
    return _histogram(_latencies(df), "latency_ms", LATENCY_BUCKETS)


def send_backs_for_retry(df: DataFrame) -> DataFrame:
    """One record per send-back that asked for redelivery (a consumer's retry): the broker parks it
    in ``SCHEDULE_TOPIC_XXXX`` for ``%RETRY%group``, or - with no delay levels - writes it straight
    to ``%RETRY%group``. A ``%RETRY%`` record the schedule delivered keeps ``REAL_TOPIC`` (as in
    RocketMQ), so it is the parked record's redelivery, not a second retry."""
    parked = (F.col("kind") == KIND_SCHEDULE) & F.col("group").isNotNull()
    straight = (F.col("kind") == KIND_RETRY) & F.col("real_topic").isNull()
    return df.filter(parked | straight)


def retry_dlq(df: DataFrame) -> DataFrame:
    """Per consumer group: send-backs asking for redelivery (retry_messages, see
    ``send_backs_for_retry``; the delay-level section's retry_messages plus any written straight
    to ``%RETRY%group``), distinct messages among them (retried_messages), records delivered into
    ``%RETRY%group`` (redelivered_messages: fewer while retries wait), records in ``%DLQ%group``
    (dlq_messages), and the user messages of the topics those came from (source_messages, topic
    named in RETRY_TOPIC); rates are per source message."""
    message_id = F.coalesce(
        F.col("unique_key"),
        F.col("properties")[const.PROPERTY_ORIGIN_MESSAGE_ID],
        F.col("commitlog_offset").cast("string"),
    )
    retries = (
        send_backs_for_retry(df)
        .groupBy("group")
        .agg(F.count("*").alias("retry_messages"), F.countDistinct(message_id).alias("retried_messages"))
    )
    redelivered = (
        df.filter(F.col("kind") == KIND_RETRY)
        .groupBy("group")
        .agg(F.count("*").alias("redelivered_messages"))
    )
    dead = df.filter(F.col("kind") == KIND_DLQ).groupBy("group").agg(F.count("*").alias("dlq_messages"))
    origins = (
        df.filter(F.col("kind").isin(KIND_RETRY, KIND_DLQ, KIND_SCHEDULE) & F.col("group").isNotNull())
        .filter(F.col("original_topic").isNotNull())
        .select("group", F.col("original_topic").alias("source_topic"))
        .distinct()
    )
    per_topic = user_messages(df).groupBy(F.col("topic").alias("source_topic")).agg(F.count("*").alias("n"))
    sources = (
        origins.join(per_topic, "source_topic", "left")
        .groupBy("group")
        .agg(
            F.sum(F.coalesce(F.col("n"), F.lit(0))).cast("long").alias("source_messages"),
            F.concat_ws(",", F.sort_array(F.collect_set("source_topic"))).alias("source_topics"),
        )
    )
    joined = (
        retries.join(redelivered, "group", "full_outer")
        .join(dead, "group", "full_outer")
        .join(sources, "group", "left")
        .fillna(0)
    )
    joined = joined.fillna("", subset=["source_topics"])

    def rate(column: str):
        return F.when(F.col("source_messages") > 0, F.col(column) / F.col("source_messages"))

    return joined.select(
        "group",
        "source_topics",
        "source_messages",
        "retry_messages",
        "redelivered_messages",
        "retried_messages",
        "dlq_messages",
        rate("retried_messages").alias("retry_rate"),
        rate("dlq_messages").alias("dlq_rate"),
    ).orderBy("group")


def delay_levels(df: DataFrame, levels: str = DEFAULT_DELAY_LEVELS) -> DataFrame:
    """Records written to ``SCHEDULE_TOPIC_XXXX`` per delay level (queue id = level - 1), split
    into a user's delayed messages and consumer retries parked for ``%RETRY%group`` (the same
    records the retry section counts as retry_messages, see ``send_backs_for_retry``)."""
    labels = levels.split()
    label_map = F.create_map(*[x for i, name in enumerate(labels) for x in (F.lit(i + 1), F.lit(name))])
    level = F.coalesce(F.col("delay_level"), F.col("queue_id") + 1)
    is_retry = F.col("group").isNotNull().cast("long")
    return (
        df.filter(F.col("kind") == KIND_SCHEDULE)
        .withColumn("level", level)
        .groupBy("level")
        .agg(F.count("*").alias("messages"), F.sum(is_retry).alias("retry_messages"))
        .select(
            "level",
            label_map[F.col("level")].alias("delay"),
            "messages",
            (F.col("messages") - F.col("retry_messages")).alias("delayed_messages"),
            "retry_messages",
        )
        .orderBy("level")
    )


def transactions(df: DataFrame) -> DataFrame:
    """Outcome of every transaction (one half message's unique key, re-put halves included):
    committed — a real-topic record of commit type whose prepared offset is a half's commit-log
    offset; given up — a record in TRANS_CHECK_MAX_TIME_TOPIC; rolled back — an op record removed
    the half and no commit exists; pending — none of those."""
    txn_id = F.coalesce(F.col("unique_key"), F.col("commitlog_offset").cast("string"))
    halves = df.filter(F.col("kind") == KIND_TRANS_HALF).select(
        F.col("queue_id").alias("hq"),
        F.col("queue_offset").alias("hoff"),
        F.col("commitlog_offset").alias("hpos"),
        txn_id.alias("txn"),
        F.coalesce(F.col("real_topic"), F.lit("")).alias("txn_topic"),
    )
    ops = df.filter(F.col("kind") == KIND_TRANS_OP).select(
        F.col("queue_id").alias("hq"), F.explode("op_offsets").alias("hoff")
    )
    removed = halves.join(ops.distinct(), ["hq", "hoff"]).select("txn").distinct()
    commits = (
        df.filter((F.col("transaction_state") == "commit") & (F.col("prepared_transaction_offset") > 0))
        .select(F.col("prepared_transaction_offset").alias("hpos"))
        .join(halves.select("hpos", "txn"), "hpos")
        .select("txn")
        .distinct()
    )
    given_up = df.filter(F.col("kind") == KIND_TRANS_GIVEN_UP).select(txn_id.alias("txn")).distinct()
    outcome = (
        F.when(F.col("c").isNotNull(), "committed")
        .when(F.col("g").isNotNull(), "given_up")
        .when(F.col("r").isNotNull(), "rolled_back")
        .otherwise("pending")
    )
    txns = (
        halves.groupBy("txn")
        .agg(F.min("txn_topic").alias("topic"))
        .join(commits.withColumn("c", F.lit(1)), "txn", "left")
        .join(given_up.withColumn("g", F.lit(1)), "txn", "left")
        .join(removed.withColumn("r", F.lit(1)), "txn", "left")
        .withColumn("outcome", outcome)
    )
    counts = [F.count("*").alias("transactions")] + [
        F.sum((F.col("outcome") == name).cast("long")).alias(name)
        for name in ("committed", "rolled_back", "pending", "given_up")
    ]
    per_topic = txns.groupBy("topic").agg(*counts)
    overall = txns.agg(*counts).withColumn("topic", F.lit(ALL_TOPICS)).filter(F.col("transactions") > 0)
    return per_topic.unionByName(overall).orderBy("topic")


def top_keys(df: DataFrame, limit: int = 20) -> DataFrame:
    """Most frequent message keys of user messages (a message with several keys counts for each)."""
    keys = user_messages(df).select(F.explode(F.split(F.col("keys"), const.KEY_SEPARATOR)).alias("key"))
    return _top(keys.filter(F.col("key") != ""), "key", limit)


def top_tags(df: DataFrame, limit: int = 20) -> DataFrame:
    """Most frequent tags of user messages."""
    tags = user_messages(df).filter(F.col("tags").isNotNull() & (F.col("tags") != ""))
    return _top(tags.select(F.col("tags").alias("tag")), "tag", limit)


def _top(values: DataFrame, column: str, limit: int) -> DataFrame:
    counted = values.groupBy(column).agg(F.count("*").alias("messages"))
    return counted.orderBy(F.col("messages").desc(), F.col(column).asc()).limit(limit)
