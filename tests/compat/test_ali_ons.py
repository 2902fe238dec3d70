"""Wire compatibility with an existing, independently written RocketMQ 4.x client: ali-ons.

ali-ons (npm, Alibaba's pure-JavaScript RocketMQ remoting client) runs unmodified in Node child
processes (``tests/compat/ali_ons/*.js``) against a real name server and broker started on free
loopback ports. It signs every request with access keys (AccessKey / Signature / OnsChannel ext
fields); a broker without ACL (the default, as here) ignores them as an ACL-less Apache broker does,
and ``tests/acl/test_acl_ali_ons.py`` runs the same client against a broker with ACL on.

``make setup`` installs ali-ons from the npm registry (``package.json`` devDependencies).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from broker.cli import main as mqadmin_main
from broker.client import (
    CONSUME_FROM_FIRST_OFFSET,
    ConsumeConcurrentlyStatus,
    LitePullConsumer,
    MessageSelector,
    Producer,
    PushConsumer,
)
from broker.common import message_const as const
from broker.common.message import Message, MessageExt
from broker.local_cluster import ROOT, wait_until
from tests.cluster import ONE_BROKER, cluster_fixture
from tests.polling import gathered

SCRIPTS = Path(__file__).parent / "ali_ons"
NODE = shutil.which("node") or ""  # "": no node, the module is skipped
ALI_ONS = ROOT / "node_modules" / "ali-ons" / "package.json"
# Every wait is bounded: a script gives up after CONSUME_TIMEOUT_MS, the test a little later.
CONSUME_TIMEOUT_MS = 25_000
PROCESS_TIMEOUT_S = 45
BIG_BODY = ("large body, compressed by its producer " * 200).encode()  # > 4 KiB: zlib + sys flag

pytestmark = pytest.mark.skipif(
    not NODE or not ALI_ONS.exists(),
    reason="needs `node` and node_modules/ali-ons (`make setup` installs them)",
)


# Retry levels of 1 s keep the send-back test short; SQL92 for the property filter test; with
# accessMessageInMemoryMaxRatio=0 every stored message counts as "in disk", so a new group with
# CONSUME_FROM_LAST_OFFSET starts at the tail even of a small backlog (as on a big broker).
cluster = cluster_fixture(
    ONE_BROKER,
    {
        "messageDelayLevel": "1s 1s 1s 1s 1s 1s",
        "enablePropertyFilter": "true",
        "accessMessageInMemoryMaxRatio": "0",
    },
)


# -- driving the Node scripts ------------------------------------------------------------------


def ali_ons_send(cluster, specs: list[dict], group: str = "compat_js_producer") -> list[dict]:
    """Send ``specs`` with ali-ons' Producer; its SendResults, in order."""
    proc = subprocess.run(
        [NODE, str(SCRIPTS / "producer.js"), "--namesrv", cluster.namesrv_addr, "--group", group],
        input="".join(json.dumps(spec) + "\n" for spec in specs),
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
        cwd=ROOT,
    )
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0, f"ali-ons producer failed:\n{proc.stdout}\n{proc.stderr}"
    assert [r["sendStatus"] for r in results] == ["SEND_OK"] * len(specs), results
    return results


class AliOnsConsumer:
    """ali-ons' push Consumer in a Node child process, printing a JSON line per delivery."""

    def __init__(self, cluster, group: str, topic: str, count: int, *args: str) -> None:
        argv = [NODE, str(SCRIPTS / "consumer.js"), "--namesrv", cluster.namesrv_addr]
        argv += ["--group", group, "--topic", topic, "--count", str(count)]
        argv += ["--timeout-ms", str(CONSUME_TIMEOUT_MS), *args]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
        )
        self.events: list[dict] = []
        self.stderr: list[str] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None  # piped
        self.stderr.extend(self.proc.stderr)

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None  # piped
        for line in self.proc.stdout:
            with self._changed:
                self.events.append(json.loads(line))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, event: str, timeout: float = PROCESS_TIMEOUT_S) -> None:
        """Block until the script prints ``{"event": event}``; fail on its timeout or exit."""
        with self._changed:
            reached = self._changed.wait_for(
                lambda: self._seen(event) or self._seen("timeout") or self.proc.poll() is not None, timeout
            )
            if not self._seen(event):
                raise AssertionError(f"no {event!r} from ali-ons (reached={reached}): {self.describe()}")

    def wait_until(self, predicate, timeout: float = PROCESS_TIMEOUT_S) -> bool:
        with self._changed:
            return (
                self._changed.wait_for(lambda: predicate() or self.proc.poll() is not None, timeout)
                and predicate()
            )

    def wait_for_queues(self, queues: list[int]) -> None:
        """Until this client's latest rebalance gave it exactly ``queues``."""

        def latest_share():
            shares = [e["queues"] for e in self.events if e["event"] == "queues"]
            return shares[-1] if shares else None

        assert self.wait_until(lambda: latest_share() == queues), self.describe()

    def _seen(self, event: str) -> bool:
        return any(e["event"] == event for e in self.events)

    @property
    def messages(self) -> list[dict]:
        return [e for e in self.events if e["event"] == "message"]

    def finish(self) -> list[dict]:
        """Wait for ``done``, let the script close (stdin EOF), return the deliveries."""
        try:
            self.wait_for("done")
        finally:
            self.stop()
        return self.messages

    def stop(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(PROCESS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def describe(self) -> str:
        return f"events={self.events}\nstderr={''.join(self.stderr)[-3000:]}"


def mqadmin_json(capsys, *argv: str):
    code = mqadmin_main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, f"mqadmin {' '.join(argv)}: {err}"
    return json.loads(out)


def spec(topic: str, tags: str, keys: list[str], body: str, **extra) -> dict:
    return {"topic": topic, "tags": tags, "keys": keys, "body": body, **extra}


# -- (a) ali-ons producer -> our broker -> ali-ons consumer --------------------------------------


def test_ali_ons_producer_to_ali_ons_consumers_with_tag_and_sql_filters(cluster):
    topic = "CompatJsTags"
    cluster.create_topic(topic, 4)
    specs = [
        spec(topic, "TagA", ["a-0", "shared"], "plain A", properties={"a": "1"}),
        spec(topic, "TagB", ["b-1"], "plain B", properties={"a": "7"}),
        spec(topic, "TagC", ["c-2", "shared"], "ünïcødé C 消息", properties={"a": "9"}),
        spec(topic, "TagA", ["a-3"], "delayed A", delayLevel=2, properties={"a": "3"}),
        spec(topic, "TagB", ["b-4"], BIG_BODY.decode(), properties={"a": "10"}),
        spec(topic, "TagC", ["c-5"], "plain C", properties={"a": "2"}),
    ]
    results = ali_ons_send(cluster, specs)
    assert len({r["msgId"] for r in results}) == len(specs)
    assert {r["queueId"] for r in results} <= {0, 1, 2, 3}

    tag_ac = AliOnsConsumer(cluster, "compat_js_tags_ac", topic, 4, "--expr", "TagA || TagC")
    every = AliOnsConsumer(cluster, "compat_js_tags_all", topic, len(specs))
    sql = AliOnsConsumer(cluster, "compat_js_sql", topic, 3, "--sql", "a > 5")
    # Pulls without a subscription (as Java's default): the broker filters by the heartbeat's.
    by_heartbeat = AliOnsConsumer(
        cluster, "compat_js_hb", topic, 4, "--expr", "TagA||TagC", "--no-post-subscription"
    )
    got_ac, got_all, got_sql = tag_ac.finish(), every.finish(), sql.finish()
    got_hb = by_heartbeat.finish()

    by_body = {s["body"]: s for s in specs}
    sent_id = {s["body"]: r["msgId"] for s, r in zip(specs, results, strict=True)}
    for got in (got_ac, got_all, got_sql, got_hb):
        for msg in got:
            sent = by_body[msg["body"]]
            assert msg["topic"] == topic and msg["tags"] == sent["tags"]
            assert msg["keys"] == " ".join(sent["keys"])
            assert msg["properties"]["a"] == sent["properties"]["a"]
            assert msg["reconsumeTimes"] == 0
            if "delayLevel" not in sent:  # a delayed message is re-written to its topic: new offset id
                assert msg["msgId"] == sent_id[msg["body"]]
    assert sorted(m["body"] for m in got_all) == sorted(by_body)  # each exactly once
    not_b = sorted(s["body"] for s in specs if s["tags"] != "TagB")
    assert sorted(m["body"] for m in got_ac) == sorted(m["body"] for m in got_hb) == not_b
    over_5 = [s["body"] for s in specs if int(s["properties"]["a"]) > 5]
    assert sorted(m["body"] for m in got_sql) == sorted(over_5)
    delayed = next(m for m in got_all if m["body"] == "delayed A")
    assert delayed["properties"]["REAL_TOPIC"] == topic and "DELAY" not in delayed["properties"]


def test_two_ali_ons_consumers_of_a_group_share_the_queues(cluster):
    topic, group = "CompatJsRebalance", "compat_js_rebalance"
    cluster.create_topic(topic, 4)
    first = AliOnsConsumer(cluster, group, topic, 1, "--until-eof", "--instance", "first")
    second = AliOnsConsumer(cluster, group, topic, 1, "--until-eof", "--instance", "second")
    try:
        # AllocateAveragely over the sorted client ids: "…@first" takes queues 0-1, "…@second" 2-3,
        # once both have rebalanced (every 2 s) with both heartbeats in GET_CONSUMER_LIST_BY_GROUP.
        first.wait_for_queues([0, 1])
        second.wait_for_queues([2, 3])
        results = ali_ons_send(cluster, [spec(topic, "T", [f"share-{i}"], f"share {i}") for i in range(12)])
        queue_of = {f"share {i}": r["queueId"] for i, r in enumerate(results)}

        def all_delivered():
            return len(first.messages) + len(second.messages) >= 12

        assert wait_until(all_delivered, timeout=30), first.describe() + second.describe()
    finally:
        first.stop()
        second.stop()
    assert sorted(m["body"] for m in first.messages + second.messages) == sorted(queue_of)
    assert {queue_of[m["body"]] for m in first.messages} <= {0, 1}
    assert {queue_of[m["body"]] for m in second.messages} <= {2, 3}


def test_new_ali_ons_group_consuming_from_last_offset_skips_the_backlog(cluster):
    topic = "CompatJsFromLast"
    cluster.create_topic(topic, 2)
    ali_ons_send(cluster, [spec(topic, "T", [f"old-{i}"], f"old {i}") for i in range(4)])
    # ali-ons' default: QUERY_CONSUMER_OFFSET answers QUERY_NOT_FOUND (the backlog is "in disk"),
    # so the client asks GET_MAX_OFFSET and starts there.
    consumer = AliOnsConsumer(cluster, "compat_js_from_last", topic, 3, "--from-last")
    try:
        consumer.wait_for_queues([0, 1])
        ali_ons_send(cluster, [spec(topic, "T", [f"new-{i}"], f"new {i}") for i in range(3)])
        got = consumer.finish()
    finally:
        consumer.stop()
    assert sorted(m["body"] for m in got) == ["new 0", "new 1", "new 2"]


# -- (b) our SDK <-> ali-ons ----------------------------------------------------------------------


def test_python_producer_to_ali_ons_consumer(cluster):
    topic = "CompatJsFromPython"
    cluster.create_topic(topic, 4)
    producer = Producer("compat_py_producer", cluster.namesrv_addr).start()
    try:
        sent = {}
        for i, body in enumerate([b"from python 0", "ünïcødé 1".encode(), BIG_BODY, b"from python 3"]):
            msg = Message(topic, body)
            msg.tags = f"Tag{i % 2}"
            msg.keys = [f"py-{i}", "py-shared"]
            msg.put_user_property("origin", "python")
            sent[body.decode()] = (msg, producer.send(msg))
    finally:
        producer.shutdown()

    got = AliOnsConsumer(cluster, "compat_js_from_python", topic, len(sent)).finish()
    assert sorted(m["body"] for m in got) == sorted(sent)
    for m in got:
        msg, result = sent[m["body"]]
        assert m["properties"][const.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == result.msg_id
        assert m["msgId"] == result.offset_msg_id  # ali-ons' msgId is the broker's offset id
        assert (m["tags"], m["keys"].split(" ")) == (msg.tags, msg.keys)
        assert m["properties"]["origin"] == "python"
        assert (m["queueId"], m["queueOffset"]) == (result.message_queue.queue_id, result.queue_offset)


def test_ali_ons_producer_to_python_push_and_lite_pull_consumers(cluster):
    topic = "CompatJsToPython"
    cluster.create_topic(topic, 4)
    specs = [
        spec(topic, "TagA", ["js-0", "js-shared"], "from ali-ons 0", properties={"origin": "js"}),
        spec(topic, "TagB", ["js-1"], "ünïcødé 消息 1", properties={"origin": "js"}),
        spec(topic, "TagA", ["js-2"], BIG_BODY.decode(), properties={"origin": "js"}),
    ]
    results = ali_ons_send(cluster, specs)
    expected = {s["body"].encode(): (s, r) for s, r in zip(specs, results, strict=True)}

    pushed, lock = [], threading.Lock()

    def listener(messages, context):
        with lock:
            pushed.extend(messages)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    push = PushConsumer("compat_py_push", cluster.namesrv_addr, consume_from_where=CONSUME_FROM_FIRST_OFFSET)
    push.subscribe(topic, "*")
    push.register_message_listener(listener)
    pull = LitePullConsumer(
        "compat_py_pull", cluster.namesrv_addr, consume_from_where=CONSUME_FROM_FIRST_OFFSET
    )
    pull.subscribe(topic, MessageSelector.by_tag("TagA"))
    push.start()
    pull.start()
    try:
        pulled: list[MessageExt] = []
        wait_until(lambda: len(gathered(pulled, pull.poll(0.5))) >= 2, timeout=30)
        assert wait_until(lambda: len(pushed) >= len(specs), timeout=30), pushed
    finally:
        push.shutdown()
        pull.shutdown()

    assert sorted(m.body for m in pushed) == sorted(expected)
    tag_a = [body for body, (sent, _) in expected.items() if sent["tags"] == "TagA"]
    assert sorted(m.body for m in pulled) == sorted(tag_a)
    for msg in pushed + pulled:
        sent, result = expected[msg.body]
        # ali-ons sets no UNIQ_KEY: the id an application sees is the broker's offset id.
        assert const.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in msg.properties
        assert msg.client_msg_id == msg.offset_msg_id == result["msgId"]
        assert (msg.topic, msg.tags, msg.keys) == (topic, sent["tags"], sent["keys"])
        assert msg.properties["origin"] == "js"
        assert (msg.queue_id, msg.queue_offset) == (result["queueId"], result["queueOffset"])


# -- (c) the operator's view of an ali-ons consumer group -----------------------------------------


def test_mqadmin_shows_the_ali_ons_groups_and_zero_lag(cluster, capsys):
    topic, group = "CompatJsOps", "compat_js_ops"
    cluster.create_topic(topic, 4)
    n = cluster.namesrv_addr
    linger = ["--linger-ms", str(CONSUME_TIMEOUT_MS)]  # the producer stays connected, heartbeating
    producer = subprocess.Popen(
        [NODE, str(SCRIPTS / "producer.js"), "--namesrv", n, "--group", "compat_js_ops_producer", *linger],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    consumer = None
    assert producer.stdin is not None and producer.stdout is not None  # piped
    try:
        producer.stdin.write(
            "".join(json.dumps(spec(topic, "TagA", [f"ops-{i}"], f"ops {i}")) + "\n" for i in range(5))
        )
        producer.stdin.close()
        sent = [json.loads(producer.stdout.readline() or "null") for _ in range(6)]  # bounded by linger
        assert [r.get("sendStatus") for r in sent[:5]] == ["SEND_OK"] * 5 and sent[5] == {"event": "sent"}, (
            sent
        )

        def producer_listed():  # ali-ons heartbeats its producer group every 2 s (common.js)
            argv = ["producerConnection", "-n", n, "-g", "compat_js_ops_producer", "-t", topic, "--json"]
            code = mqadmin_main(argv)
            out, _ = capsys.readouterr()
            return json.loads(out)["connections"] if code == 0 else None

        assert wait_until(producer_listed, timeout=15)
        [producer_connection] = producer_listed()
        assert producer_connection["language"] == "JAVA" and producer_connection["version"] == 121

        consumer = AliOnsConsumer(cluster, group, topic, 5, "--expr", "TagA", "--linger", "--instance", "ops")
        consumer.wait_for("persisted")
        view = mqadmin_json(capsys, "consumerConnection", "-n", n, "-g", group)
        [connection] = view["connections"]
        assert connection["client_id"].endswith("@ops") and connection["version"] == 121
        assert {"topic": topic, "sub_string": "TagA", "expression_type": "TAG"} in view["subscriptions"]
        assert view["message_model"] == "CLUSTERING"
        assert view["consume_from_where"] == "CONSUME_FROM_FIRST_OFFSET"

        def caught_up():
            progress = mqadmin_json(capsys, "consumerProgress", "-n", n, "-g", group, "-t", topic)
            return progress if progress["diff_total"] == 0 else None

        assert wait_until(caught_up, timeout=15), "the ali-ons group still lags"
        progress = caught_up()
        assert sum(q["consumer_offset"] for q in progress["queues"]) == 5
    finally:
        producer.kill()
        producer.wait(10)
        if consumer is not None:
            consumer.stop()
    assert len(consumer.messages) == 5
    # On close ali-ons sends UNREGISTER_CLIENT: the group has no connection left.
    assert mqadmin_main(["consumerConnection", "-n", n, "-g", group]) == 1
    assert "CONSUMER_NOT_ONLINE" in capsys.readouterr().err


# -- (d) a failing ali-ons handler: send-back through %RETRY%<group> ------------------------------


def test_ali_ons_consumer_failure_is_redelivered_through_the_retry_topic(cluster, capsys):
    topic, group = "CompatJsRetry", "compat_js_retry"
    cluster.create_topic(topic, 2)
    [failing, fine] = ali_ons_send(
        cluster, [spec(topic, "TagA", ["fail-once"], "fails once"), spec(topic, "TagA", ["fine"], "fine")]
    )
    consumer = AliOnsConsumer(cluster, group, topic, 2, "--fail-keys", "fail-once", "--linger")
    try:
        consumer.wait_for("persisted")
        deliveries = [m for m in consumer.messages if m["keys"] == "fail-once"]
        assert [m["reconsumeTimes"] for m in deliveries] == [0, 1]
        first, retry = deliveries
        assert first["msgId"] == failing["msgId"] and retry["body"] == "fails once"
        assert retry["topic"] == topic  # ali-ons restores the original topic from RETRY_TOPIC
        assert retry["properties"]["RETRY_TOPIC"] == topic
        assert retry["properties"]["ORIGIN_MESSAGE_ID"] == failing["msgId"]
        assert retry["properties"]["REAL_TOPIC"] == f"%RETRY%{group}"
        assert [m["reconsumeTimes"] for m in consumer.messages if m["keys"] == "fine"] == [0]

        def retry_consumed():
            progress = mqadmin_json(capsys, "consumerProgress", "-n", cluster.namesrv_addr, "-g", group)
            retry_queues = [q for q in progress["queues"] if q["topic"] == f"%RETRY%{group}"]
            return sum(q["broker_offset"] for q in retry_queues) == 1 and progress["diff_total"] == 0

        assert wait_until(retry_consumed, timeout=15)
    finally:
        consumer.stop()
    assert fine["msgId"]


def test_ali_ons_consumer_past_max_reconsume_times_sends_to_the_dead_letter_topic(cluster, capsys):
    topic, group = "CompatJsDead", "compat_js_dead"
    cluster.create_topic(topic, 2)
    [dead, _] = ali_ons_send(
        cluster, [spec(topic, "TagA", ["always-fails"], "dead letter"), spec(topic, "TagA", ["ok"], "ok")]
    )
    args = ["--fail-keys", "always-fails", "--fail-times", "99", "--max-reconsume", "1", "--linger"]
    consumer = AliOnsConsumer(cluster, group, topic, 1, *args)
    try:
        consumer.wait_for("persisted")

        def in_dead_letter_topic():
            # Fails (no route) until the broker has created %DLQ%<group> and registered it.
            argv = ["queryMsgByKey", "-n", cluster.namesrv_addr, "-t", f"%DLQ%{group}", "-k", "always-fails"]
            code = mqadmin_main([*argv, "--json"])
            out, _ = capsys.readouterr()
            return json.loads(out)["messages"] if code == 0 else []

        assert wait_until(in_dead_letter_topic, timeout=20), consumer.describe()
        [letter] = in_dead_letter_topic()
        assert letter["body"] == "dead letter"
        # Delivered at reconsume times 0 and 1, then the broker saw reconsumeTimes >= maxReconsumeTimes.
        tries = [m["reconsumeTimes"] for m in consumer.messages if m["keys"] == "always-fails"]
        assert tries == [0, 1]
    finally:
        consumer.stop()
    assert dead["msgId"]
