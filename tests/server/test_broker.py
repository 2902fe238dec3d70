"""The broker as a real process next to a real name server, driven with RocketMQ frames."""

import asyncio
import socket
import threading
import time

import orjson
import pytest

from broker.common import fastjson
from broker.common.batch_codec import encode_batch
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.message import Message
from broker.common.message_codec import decode_messages
from broker.common.pull_sysflag import FLAG_SUBSCRIPTION, FLAG_SUSPEND
from broker.common.request_headers import PullMessageRequestHeader
from broker.local_cluster import SMALL_STORE_CONF, free_port, start_namesrv, wait_until
from broker.local_cluster import start_broker as launch_broker
from broker.remoting.client import RemotingClient, SyncRemotingClient
from broker.remoting.command import create_request, response_to
from broker.remoting.connection import MAX_BACKLOG_COMMANDS
from broker.remoting.frame import FrameDecoder, encode_frame
from tests.listener_failures import ListenerFailures


def start_broker(namesrv_addr, store_dir, name, port=None, extra=""):
    conf = store_dir.parent / f"{name}.conf"
    conf.write_text(
        f"brokerClusterName=TestCluster\nbrokerName={name}\nlistenPort={port or free_port()}\n"
        f"namesrvAddr={namesrv_addr}\nstorePathRootDir={store_dir}\nregisterBrokerIntervalMillis=1000\n{SMALL_STORE_CONF}{extra}"
    )
    return launch_broker(conf)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("cluster")
    namesrv = start_namesrv()
    brokers = {}
    try:
        for name in ("broker-a", "broker-b"):
            brokers[name] = start_broker(namesrv.addr, base / name, name)
    except RuntimeError:  # a broker that cannot start must not leave the others running
        for process in [*brokers.values(), namesrv]:
            process.stop()
        raise
    yield namesrv, brokers
    for process in brokers.values():
        process.stop()
    namesrv.stop()


@pytest.fixture
def client():
    sync = SyncRemotingClient()
    yield sync
    sync.close()


def send_header(topic, queue_id=0, props=""):
    """SEND_MESSAGE's header fields, as RocketMQ's producer fills them."""
    return {
        "producerGroup": "pg",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": 4,
        "queueId": queue_id,
        "sysFlag": 0,
        "bornTimestamp": int(time.time() * 1000),
        "flag": 0,
        "properties": props,
        "reconsumeTimes": 0,
    }


def send(client, addr, topic, body, queue_id=0, tags=None, keys=None, v2=False, code=RC.SEND_MESSAGE):
    props = "".join(f"{k}\x01{v}\x02" for k, v in (("TAGS", tags), ("KEYS", keys)) if v)
    header = send_header(topic, queue_id, props)
    if v2:
        letters = dict(zip("abcdefghij", header, strict=False))
        header = {letter: header[name] for letter, name in letters.items()}
        code = RC.SEND_MESSAGE_V2
    return client.invoke(addr, create_request(code, header, body))


def pull_header(topic, queue_id, offset, group="cg", suspend_ms=0, expression="*"):
    flag = FLAG_SUBSCRIPTION | (FLAG_SUSPEND if suspend_ms else 0)
    return PullMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=32,
        sys_flag=flag,
        commit_offset=0,
        suspend_timeout_millis=suspend_ms,
        sub_version=0,
        subscription=expression,
        expression_type="TAG",
    )


def wait_dispatched(client, addr, topic, queue_id, count):
    """Messages become readable once dispatched, in the background as in RocketMQ: wait for it."""
    fields = {"topic": topic, "queueId": queue_id}
    deadline = time.monotonic() + 10
    while client.invoke(addr, create_request(RC.GET_MAX_OFFSET, fields)).field("offset") != str(count):
        assert time.monotonic() < deadline, f"{count} messages of {topic} were never dispatched"
        time.sleep(0.02)


def pull(client, addr, *args, timeout_ms=5000, **kwargs):
    return client.invoke(addr, create_request(RC.PULL_MESSAGE, pull_header(*args, **kwargs)), timeout_ms)


def test_send_single_v2_and_batch_then_pull_back(cluster, client):
    _, brokers = cluster
    addr = brokers["broker-a"].addr
    first = send(client, addr, "SendPull", b"one", tags="t1", keys="k-one")
    assert first.ok and first.field("queueOffset") == "0" and len(first.field("msgId")) == 32
    assert send(client, addr, "SendPull", b"two", tags="t2", v2=True).field("queueOffset") == "1"
    batch = encode_batch([Message("SendPull", b"b%d" % i, properties={"TAGS": "t1"}) for i in range(5)])
    sent = client.invoke(
        addr,
        create_request(
            RC.SEND_BATCH_MESSAGE,
            {
                "producerGroup": "pg",
                "topic": "SendPull",
                "queueId": 0,
                "sysFlag": 0,
                "bornTimestamp": 0,
                "flag": 0,
                "batch": True,
            },
            batch,
        ),
    )
    assert sent.ok and len(sent.field("msgId").split(",")) == 5 and sent.field("queueOffset") == "2"

    wait_dispatched(client, addr, "SendPull", 0, 7)
    response = pull(client, addr, "SendPull", 0, 0)
    assert response.ok and response.field("nextBeginOffset") == "7" and response.field("maxOffset") == "7"
    messages = decode_messages(response.body)
    assert [m.body for m in messages] == [b"one", b"two", b"b0", b"b1", b"b2", b"b3", b"b4"]
    assert [m.queue_offset for m in messages] == list(range(7))
    assert messages[0].tags == "t1" and messages[0].keys == ["k-one"]
    only_t2 = pull(client, addr, "SendPull", 0, 0, expression="t2")
    assert [m.body for m in decode_messages(only_t2.body)] == [b"two"]
    assert pull(client, addr, "SendPull", 0, 7).code == ResponseCode.PULL_NOT_FOUND
    assert pull(client, addr, "SendPull", 0, 99).code == ResponseCode.PULL_OFFSET_MOVED


def test_auto_create_and_refusals(cluster, client, tmp_path):
    namesrv, brokers = cluster
    assert send(client, brokers["broker-a"].addr, "AutoCreated", b"x").ok
    # The broker re-registers right after creating the topic; the name server has it moments later.
    lookup = create_request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "AutoCreated"})
    deadline = time.monotonic() + 10
    while not (found := client.invoke(namesrv.addr, lookup)).ok:
        assert time.monotonic() < deadline, "the auto-created topic never reached the name server"
        time.sleep(0.05)
    assert fastjson.loads(found.body)["queueDatas"][0]["writeQueueNums"] == 4
    bad = send(client, brokers["broker-a"].addr, "bad topic!", b"x")
    assert bad.code == ResponseCode.SYSTEM_ERROR and "'bad topic!'" in bad.remark  # RocketMQ's msgCheck
    strict = start_broker(
        namesrv.addr, tmp_path / "strict", "broker-strict", extra="autoCreateTopicEnable=false\n"
    )
    try:
        refused = send(client, strict.addr, "NoSuchTopic", b"x")
        assert refused.code == ResponseCode.TOPIC_NOT_EXIST and "apply first" in refused.remark
        assert pull(client, strict.addr, "NoSuchTopic", 0, 0).code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        assert strict.stop() == 0


def test_long_polling_is_answered_by_a_later_message(cluster):
    _, brokers = cluster
    addr = brokers["broker-b"].addr

    async def scenario():
        client = RemotingClient()
        create = {"topic": "LongPoll", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
        assert (await client.invoke(addr, create_request(RC.UPDATE_AND_CREATE_TOPIC, create))).ok
        # Held for up to 10 minutes: only the wake-up on arrival can answer it within the test.
        held = asyncio.ensure_future(
            client.invoke(
                addr,
                create_request(RC.PULL_MESSAGE, pull_header("LongPoll", 0, 0, suspend_ms=600_000)),
                600_000,
            )
        )
        await asyncio.sleep(0.3)
        assert not held.done()
        header = {
            "producerGroup": "pg",
            "topic": "LongPoll",
            "queueId": 0,
            "sysFlag": 0,
            "bornTimestamp": 0,
            "flag": 0,
        }
        sent = await client.invoke(addr, create_request(RC.SEND_MESSAGE, header, b"wake up"))
        assert sent.ok
        response = await asyncio.wait_for(held, 30)
        await client.close()
        return response

    response = asyncio.run(scenario())
    assert response.ok and [m.body for m in decode_messages(response.body)] == [b"wake up"]


def test_offsets_commit_query_search_and_reset(cluster, client):
    _, brokers = cluster
    addr = brokers["broker-a"].addr
    for i in range(5):
        assert send(client, addr, "Offsets", b"%d" % i, queue_id=0).ok
    query = {"consumerGroup": "og", "topic": "Offsets", "queueId": 0}
    assert client.invoke(addr, create_request(RC.QUERY_CONSUMER_OFFSET, query)).field("offset") == "0"
    assert client.invoke(addr, create_request(RC.UPDATE_CONSUMER_OFFSET, {**query, "commitOffset": 3})).ok
    assert client.invoke(addr, create_request(RC.QUERY_CONSUMER_OFFSET, query)).field("offset") == "3"
    wait_dispatched(client, addr, "Offsets", 0, 5)
    assert (
        client.invoke(addr, create_request(RC.GET_MIN_OFFSET, {"topic": "Offsets", "queueId": 0})).field(
            "offset"
        )
        == "0"
    )
    future = {"topic": "Offsets", "queueId": 0, "timestamp": int(time.time() * 1000) + 60_000}
    assert client.invoke(addr, create_request(RC.SEARCH_OFFSET_BY_TIMESTAMP, future)).field("offset") == "5"
    stats = client.invoke(
        addr, create_request(RC.GET_CONSUME_STATS, {"consumerGroup": "og", "topic": "Offsets"})
    )
    assert b'"brokerOffset":5,"consumerOffset":3' in stats.body
    reset = {"topic": "Offsets", "group": "og", "timestamp": 0, "isForce": True}
    assert client.invoke(addr, create_request(RC.INVOKE_BROKER_TO_RESET_OFFSET, reset)).ok
    assert client.invoke(addr, create_request(RC.QUERY_CONSUMER_OFFSET, query)).field("offset") == "0"


def test_a_reset_is_pushed_to_each_online_consumer_with_its_header(cluster, client):
    _, brokers = cluster
    addr = brokers["broker-a"].addr
    assert send(client, addr, "ResetPushed", b"x", queue_id=0).ok
    member = {"groupName": "reset-group", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
              "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
              "subscriptionDataSet": [{"topic": "ResetPushed", "subString": "*", "tagsSet": [], "codeSet": [],
                                       "subVersion": 1, "expressionType": "TAG"}]}  # fmt: skip
    heartbeat = orjson.dumps({"clientID": "reset-client", "producerDataSet": [], "consumerDataSet": [member]})

    async def scenario():
        consumer = RemotingClient()
        pushed: asyncio.Future = asyncio.get_running_loop().create_future()

        async def on_reset(conn, request):
            if not pushed.done():
                pushed.set_result(request)
            return response_to(request)

        consumer.register_processor(RC.RESET_CONSUMER_CLIENT_OFFSET, on_reset)
        assert (await consumer.invoke(addr, create_request(RC.HEART_BEAT, body=heartbeat))).ok
        reset = {"topic": "ResetPushed", "group": "reset-group", "timestamp": 0, "isForce": False}
        answer = await consumer.invoke(addr, create_request(RC.INVOKE_BROKER_TO_RESET_OFFSET, reset))
        request = await asyncio.wait_for(pushed, 10)
        await consumer.close()
        return answer, request

    answer, request = asyncio.run(scenario())
    assert answer.ok
    # As RocketMQ's broker sends it: the admin's header, isForce included, and the new offsets.
    assert request.ext_fields == {
        "topic": "ResetPushed",
        "group": "reset-group",
        "timestamp": "0",
        "isForce": "false",
    }
    assert request.body == answer.body


def test_heartbeats_consumer_list_and_membership_notification(cluster):
    _, brokers = cluster
    addr = brokers["broker-a"].addr

    def heartbeat(client_id):
        return orjson.dumps(
            {
                "clientID": client_id,
                "producerDataSet": [],
                "consumerDataSet": [
                    {
                        "groupName": "hb-group",
                        "consumeType": "CONSUME_PASSIVELY",
                        "messageModel": "CLUSTERING",
                        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                        "unitMode": False,
                        "subscriptionDataSet": [
                            {
                                "topic": "Beats",
                                "subString": "*",
                                "tagsSet": [],
                                "codeSet": [],
                                "subVersion": 1,
                                "expressionType": "TAG",
                            }
                        ],
                    }
                ],
            }
        )

    async def scenario():
        first, second = RemotingClient(), RemotingClient()
        notified = asyncio.Event()
        failures = ListenerFailures()

        @failures.watch
        async def on_notify(conn, request):
            assert request.field("consumerGroup") == "hb-group"
            notified.set()
            return response_to(request)

        first.register_processor(RC.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
        assert (await first.invoke(addr, create_request(RC.HEART_BEAT, body=heartbeat("client-1")))).ok
        assert (await second.invoke(addr, create_request(RC.HEART_BEAT, body=heartbeat("client-2")))).ok
        await failures.wait_async(notified.wait(), 10)
        listed = await first.invoke(
            addr, create_request(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "hb-group"})
        )
        connections = await first.invoke(
            addr, create_request(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "hb-group"})
        )
        notified.clear()
        await second.close()  # a member leaves: the other is told
        await failures.wait_async(notified.wait(), 10)
        after = await first.invoke(
            addr, create_request(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "hb-group"})
        )
        await first.close()
        return listed, connections, after

    listed, connections, after = asyncio.run(scenario())
    assert orjson.loads(listed.body)["consumerIdList"] == ["client-1", "client-2"]
    assert orjson.loads(connections.body)["subscriptionTable"]["Beats"]["subString"] == "*"
    assert orjson.loads(after.body)["consumerIdList"] == ["client-1"]


def test_query_by_key_and_by_offset(cluster, client):
    _, brokers = cluster
    addr = brokers["broker-b"].addr
    sent = send(client, addr, "Queried", b"find me", keys="order-42")
    assert sent.ok
    query = {
        "topic": "Queried",
        "key": "order-42",
        "maxNum": 10,
        "beginTimestamp": 0,
        "endTimestamp": int(time.time() * 1000) + 60_000,
    }
    deadline = time.monotonic() + 5
    while (
        found := client.invoke(addr, create_request(RC.QUERY_MESSAGE, query))
    ).code != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [m.body for m in decode_messages(found.body)] == [b"find me"]
    offset = decode_messages(found.body)[0].commitlog_offset
    viewed = client.invoke(addr, create_request(RC.VIEW_MESSAGE_BY_ID, {"offset": offset}))
    assert decode_messages(viewed.body)[0].msg_id == sent.field("msgId")
    missing = client.invoke(addr, create_request(RC.QUERY_MESSAGE, {**query, "key": "nope"}))
    assert missing.code == ResponseCode.QUERY_NOT_FOUND


def test_admin_topics_groups_config_and_runtime(cluster, client):
    namesrv, brokers = cluster
    addr = brokers["broker-a"].addr
    create = {"topic": "AdminTopic", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6}
    assert client.invoke(addr, create_request(RC.UPDATE_AND_CREATE_TOPIC, create)).ok
    topics = orjson.loads(client.invoke(addr, create_request(RC.GET_ALL_TOPIC_CONFIG)).body)
    assert topics["topicConfigTable"]["AdminTopic"]["writeQueueNums"] == 8
    group = orjson.dumps({"groupName": "admin-group", "retryMaxTimes": 3})
    assert client.invoke(addr, create_request(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group)).ok
    groups = orjson.loads(client.invoke(addr, create_request(RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
    assert groups["subscriptionGroupTable"]["admin-group"]["retryMaxTimes"] == 3
    bad_group = client.invoke(addr, create_request(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b"{}"))
    assert bad_group.code == ResponseCode.SYSTEM_ERROR and "groupName" in bad_group.remark

    runtime = orjson.loads(client.invoke(addr, create_request(RC.GET_BROKER_RUNTIME_INFO)).body)["table"]
    assert {"commitLogMaxOffset", "brokerVersionDesc", "bootTimestamp"} <= set(runtime)
    # RocketMQ's queue figures: this broker's backlog and loop lag (nothing waits here now).
    assert runtime["pageCacheLockTimeMills"] == "0"
    for key in ("sendThreadPoolQueueSize", "pullThreadPoolQueueSize", "queryThreadPoolQueueSize"):
        assert runtime[key] == "0"
    assert int(runtime["sendThreadPoolQueueHeadWaitTimeMills"]) >= 0
    assert client.invoke(
        addr, create_request(RC.UPDATE_BROKER_CONFIG, body=b"shortPollingTimeMills=500\n")
    ).ok
    config_text = client.invoke(addr, create_request(RC.GET_BROKER_CONFIG)).body.decode()
    assert "shortPollingTimeMills=500" in config_text
    refused = client.invoke(addr, create_request(RC.UPDATE_BROKER_CONFIG, body=b"listenPort=1\n"))
    assert refused.code == ResponseCode.NO_PERMISSION and "listenPort" in refused.remark

    assert client.invoke(addr, create_request(RC.DELETE_TOPIC_IN_BROKER, {"topic": "AdminTopic"})).ok
    info = fastjson.loads(client.invoke(namesrv.addr, create_request(RC.GET_BROKER_CLUSTER_INFO)).body)
    assert info["clusterAddrTable"]["TestCluster"] == ["broker-a", "broker-b"]
    missing_header = client.invoke(addr, create_request(RC.GET_MAX_OFFSET, {"topic": "x"}))
    assert missing_header.code == ResponseCode.SYSTEM_ERROR and "queueId" in missing_header.remark


def test_restart_keeps_topics_offsets_and_messages(cluster, client, tmp_path):
    namesrv, _ = cluster
    port = free_port()
    broker = start_broker(namesrv.addr, tmp_path / "restart", "broker-r", port=port)
    assert send(client, broker.addr, "Durable", b"kept").ok
    query = {"consumerGroup": "rg", "topic": "Durable", "queueId": 0}
    assert client.invoke(
        broker.addr, create_request(RC.UPDATE_CONSUMER_OFFSET, {**query, "commitOffset": 1})
    ).ok
    assert broker.stop() == 0
    assert not (tmp_path / "restart" / "abort").exists()  # clean shutdown
    client.client.close_connection(broker.addr)
    again = start_broker(namesrv.addr, tmp_path / "restart", "broker-r", port=port)
    try:
        assert (
            client.invoke(again.addr, create_request(RC.QUERY_CONSUMER_OFFSET, query)).field("offset") == "1"
        )
        assert [m.body for m in decode_messages(pull(client, again.addr, "Durable", 0, 0).body)] == [b"kept"]
    finally:
        again.stop()


def test_garbage_on_the_wire_does_not_hurt_others(cluster, client):
    import struct

    _, brokers = cluster
    host, port = brokers["broker-a"].addr.rsplit(":", 1)
    before = orjson.loads(
        client.invoke(brokers["broker-a"].addr, create_request(RC.GET_BROKER_RUNTIME_INFO)).body
    )
    for garbage in (struct.pack(">ii", 2**31 - 1, 8), struct.pack(">ii", 12, 8) + b"{notjson", b"\x00" * 3):
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            raw.sendall(garbage)
            raw.shutdown(socket.SHUT_WR)
            assert raw.recv(1024) == b""
    after = orjson.loads(
        client.invoke(brokers["broker-a"].addr, create_request(RC.GET_BROKER_RUNTIME_INFO)).body
    )
    assert after["table"]["commitLogMaxOffset"] == before["table"]["commitLogMaxOffset"]
    unknown = client.invoke(brokers["broker-a"].addr, create_request(777))
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


def test_a_flood_of_oneway_sends_is_held_back_not_read_into_memory(cluster, client):
    """Raw connections write oneway sends far faster than the broker stores them. The broker
    stops reading a connection once MAX_BACKLOG_COMMANDS of its requests wait (TCP holds the
    sender back), so its send queue stays bounded; it answers other connections meanwhile and
    stores every message (a oneway send has nobody to hear of a refusal)."""
    _, brokers = cluster
    addr = brokers["broker-a"].addr
    topic, senders, per_sender = "FloodTopic", 2, 10_000
    create = {"topic": topic, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
    assert client.invoke(addr, create_request(RC.UPDATE_AND_CREATE_TOPIC, create)).ok
    flood = b"".join(
        encode_frame(create_request(RC.SEND_MESSAGE, send_header(topic, i % 4), b"f" * 1024, oneway=True))
        for i in range(per_sender)
    )
    host, port = addr.rsplit(":", 1)
    connections = [socket.create_connection((host, int(port)), timeout=60) for _ in range(senders)]
    writers = [threading.Thread(target=conn.sendall, args=(flood,)) for conn in connections]
    for writer in writers:
        writer.start()
    waiting = []
    while True:  # sampled while the senders write, and once after
        runtime = client.invoke(addr, create_request(RC.GET_BROKER_RUNTIME_INFO))
        waiting.append(int(orjson.loads(runtime.body)["table"]["sendThreadPoolQueueSize"]))
        if not any(writer.is_alive() for writer in writers):
            break
        time.sleep(0.02)
    for writer in writers:
        writer.join()

    def stored() -> int:
        fields = [{"topic": topic, "queueId": queue_id} for queue_id in range(4)]
        answers = [client.invoke(addr, create_request(RC.GET_MAX_OFFSET, f)) for f in fields]
        return sum(int(answer.field("offset")) for answer in answers)

    assert wait_until(lambda: stored() == senders * per_sender, timeout=120)
    for conn in connections:
        conn.close()
    # Read into memory at most: the backlog's limit and one more read (256 KiB) per connection.
    assert max(waiting) <= senders * 2 * MAX_BACKLOG_COMMANDS, max(waiting)


def test_pipelined_pulls_wait_while_their_answers_are_not_read(cluster, client):
    """A client writes hundreds of pulls and reads none of the (large) answers. The broker
    stops serving that connection once its answers fill the socket, instead of building every
    answer in memory; once the client reads, every pull is answered, in order."""
    _, brokers = cluster
    addr = brokers["broker-a"].addr
    topic, pulls = "StalledReaderTopic", 400
    create = {"topic": topic, "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
    assert client.invoke(addr, create_request(RC.UPDATE_AND_CREATE_TOPIC, create)).ok
    for _ in range(32):
        assert send(client, addr, topic, b"s" * 16 * 1024).ok
    wait_dispatched(client, addr, topic, 0, 32)
    one_pull = client.invoke(addr, create_request(RC.PULL_MESSAGE, pull_header(topic, 0, 0)))
    per_pull = len(decode_messages(one_pull.body))

    def runtime() -> dict:
        return orjson.loads(client.invoke(addr, create_request(RC.GET_BROKER_RUNTIME_INFO)).body)["table"]

    got_before = int(runtime()["msgGetTotalTodayNow"])
    host, port = addr.rsplit(":", 1)
    reader = socket.create_connection((host, int(port)), timeout=60)
    requests = [create_request(RC.PULL_MESSAGE, pull_header(topic, 0, 0)) for _ in range(pulls)]
    reader.sendall(b"".join(encode_frame(request) for request in requests))
    samples = []  # (pulls served, pulls waiting) until neither changes
    for _ in range(600):
        table = runtime()
        served = (int(table["msgGetTotalTodayNow"]) - got_before) // per_pull
        samples.append((served, int(table["pullThreadPoolQueueSize"])))
        settled = samples[-1][1] == 0 or samples[-5:] == [samples[-1]] * 5
        if settled and served + samples[-1][1] == pulls:  # (the first samples may precede the read)
            break
        time.sleep(0.05)
    served, waiting = samples[-1]
    assert waiting > 0 and served + waiting == pulls, samples[-5:]
    assert served < pulls // 2  # what the socket's buffers hold, not every answer

    opaques = []
    decoder = FrameDecoder()
    while len(opaques) < pulls:
        opaques += [answer.opaque for answer in decoder.feed(reader.recv(1 << 20))]
    reader.close()
    assert opaques == [request.opaque for request in requests]
    assert wait_until(lambda: runtime()["pullThreadPoolQueueSize"] == "0")
