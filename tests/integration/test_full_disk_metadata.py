"""Issue 31, §5: on a full disk, topic and group creation and offset commits are refused as sends
are, not answered SUCCESS and lost. A real broker process whose store is a small tmpfs.

Before: with the disk full, UPDATE_AND_CREATE_TOPIC, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP and
UPDATE_CONSUMER_OFFSET each answered SUCCESS (code 0); the topic was served until the broker was
killed, and after the restart the topic, the group and the offset were gone. After: each is refused
with SERVICE_NOT_AVAILABLE and the disk-full remark, the broker's tables are unchanged, and each is
taken again once space returns (and survives a SIGKILL).
"""

from __future__ import annotations

import contextlib
import io
import json
import signal

import pytest

from broker.cli import main as mqadmin_main
from broker.common import fastjson
from broker.common.codes import RequestCode, ResponseCode
from broker.common.pull_sysflag import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION
from broker.common.request_headers import PullMessageRequestHeader
from broker.common.request_headers.pull import (
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from broker.local_cluster import LocalCluster, wait_until
from tests.integration.test_full_disk_broker import REFUSED
from tests.small_disk import broker_on_small_disk, fill

TOPIC, NEW_TOPIC, NEW_GROUP, GROUP = "MetaDiskTopic", "MetaDiskNewTopic", "MetaDiskNewGroup", "MetaDiskGroup"


@pytest.fixture
def cluster(tmp_path):
    settings = {"flushConsumerOffsetInterval": 100}
    with broker_on_small_disk(
        tmp_path, 4 * 1024 * 1024, "MetaDiskCluster", "broker-meta", settings, (TOPIC,)
    ) as local:
        yield local


def create_topic(cluster: LocalCluster, topic: str):
    fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
    return cluster.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)


def create_group(cluster: LocalCluster, group: str):
    body = fastjson.dumps({"groupName": group, "consumeEnable": True, "retryQueueNums": 1})
    return cluster.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)


def commit(cluster: LocalCluster, offset: int):
    header = UpdateConsumerOffsetRequestHeader(GROUP, TOPIC, 0, offset)
    return cluster.request(RequestCode.UPDATE_CONSUMER_OFFSET, header)


def pull_committing(cluster: LocalCluster, offset: int):
    """A pull that carries a commit of ``offset`` (as a push consumer's pulls do)."""
    header = PullMessageRequestHeader(
        consumer_group=GROUP, topic=TOPIC, queue_id=0, queue_offset=0, max_msg_nums=1,
        sys_flag=FLAG_COMMIT_OFFSET | FLAG_SUBSCRIPTION, commit_offset=offset, suspend_timeout_millis=0,
        sub_version=0, subscription="*", expression_type="TAG",
    )  # fmt: skip
    return cluster.request(RequestCode.PULL_MESSAGE, header)


def committed(cluster: LocalCluster) -> int:
    answer = cluster.request(
        RequestCode.QUERY_CONSUMER_OFFSET, QueryConsumerOffsetRequestHeader(GROUP, TOPIC, 0)
    )
    return int(answer.ext_fields["offset"]) if answer.ok else -1


def tables(cluster: LocalCluster) -> tuple[set[str], set[str]]:
    topics = json.loads(cluster.request(RequestCode.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]
    groups = json.loads(cluster.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)
    return set(topics), set(groups["subscriptionGroupTable"])


def disk_full(cluster: LocalCluster) -> bool:
    info = json.loads(cluster.request(RequestCode.GET_BROKER_RUNTIME_INFO).body)["table"]
    return info["diskFull"] == "true"


def offset_on_disk(cluster: LocalCluster) -> int:
    """The offset consumerOffset.json holds (-1 for none): what a restart would find."""
    try:
        table = json.loads((cluster.disk / "store/config/consumerOffset.json").read_text())["offsetTable"]
    except (OSError, ValueError):
        return -1
    return int(table.get(f"{TOPIC}@{GROUP}", {}).get("0", -1))


def mqadmin(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = mqadmin_main(list(argv))
    return code, out.getvalue() + err.getvalue()


def test_metadata_writes_on_a_full_disk_are_refused_and_kept_once_space_returns(cluster):
    assert commit(cluster, 5).ok and committed(cluster) == 5
    wait_until(lambda: offset_on_disk(cluster) == 5, timeout=10, what="the offset written")
    filler = fill(cluster.disk)
    wait_until(lambda: disk_full(cluster), timeout=10, what="the broker seeing its disk full")

    answers = create_topic(cluster, NEW_TOPIC), create_group(cluster, NEW_GROUP), commit(cluster, 9)
    assert [a.code for a in answers] == [ResponseCode.SERVICE_NOT_AVAILABLE] * 3, [a.remark for a in answers]
    assert all(a.remark.startswith(REFUSED) for a in answers)
    pull_committing(cluster, 7)  # served (nothing to read), its commit not kept
    # Nothing of them is in memory either: no topic that would vanish at the next restart.
    topics, groups = tables(cluster)
    assert NEW_TOPIC not in topics and NEW_GROUP not in groups and committed(cluster) == 5
    assert offset_on_disk(cluster) == 5
    # mqadmin says why.
    code, shown = mqadmin("updateTopic", "-b", cluster.broker_addr, "-t", NEW_TOPIC)
    assert code != 0 and "disk is full" in shown

    filler.unlink()
    wait_until(lambda: create_topic(cluster, NEW_TOPIC).ok, timeout=10, what="the topic taken again")
    assert create_group(cluster, NEW_GROUP).ok and commit(cluster, 9).ok
    wait_until(lambda: offset_on_disk(cluster) == 9, timeout=10, what="the offset written")
    cluster.broker.proc.send_signal(signal.SIGKILL)
    cluster.broker.proc.wait(10)
    cluster.start_broker()
    topics, groups = tables(cluster)
    assert NEW_TOPIC in topics and NEW_GROUP in groups and committed(cluster) == 9


HEARTBEAT_GROUP, SENT_TOPIC = "MetaDiskHeartbeatGroup", "MetaDiskSentTopic"


def heartbeat(cluster: LocalCluster, *groups: str):
    subscription = {"topic": TOPIC, "subString": "*", "expressionType": "TAG", "subVersion": 1}
    consumers = [{"groupName": group, "subscriptionDataSet": [subscription]} for group in groups]
    body = fastjson.dumps({"clientID": "127.0.0.1@disk", "consumerDataSet": consumers})
    return cluster.request(RequestCode.HEART_BEAT, body=body)


def send_creating(cluster: LocalCluster, topic: str):
    """A send to a topic the broker does not have, created from TBW102 (autoCreateTopicEnable)."""
    fields = {
        "producerGroup": "p", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": 0, "sysFlag": 0, "bornTimestamp": 0, "flag": 0, "properties": "",
    }  # fmt: skip
    return cluster.request(RequestCode.SEND_MESSAGE, fields, b"body")


def consumer_ids(cluster: LocalCluster, group: str) -> list[str]:
    answer = cluster.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    return json.loads(answer.body)["consumerIdList"] if answer.ok else []


def test_clients_create_no_topic_or_group_on_a_full_disk(cluster):
    """A heartbeat naming a new group, and a send to a new topic (auto-created from TBW102).
    Before: on the full disk the heartbeat answered SUCCESS and the group and its %RETRY% topic
    appeared in the broker's tables; the send was refused (14) but its topic stayed in the table
    and the name server served its route; a restart lost all three. After: the heartbeat still
    answers SUCCESS (it keeps the client registered in every group, the existing one too) but
    makes neither the group nor its retry topic; the send is refused with 14 and makes nothing;
    once space returns the next heartbeat and send make them, written."""
    assert create_group(cluster, GROUP).ok
    filler = fill(cluster.disk)
    wait_until(lambda: disk_full(cluster), timeout=10, what="the broker seeing its disk full")

    assert heartbeat(cluster, GROUP, HEARTBEAT_GROUP).ok
    assert consumer_ids(cluster, GROUP) == ["127.0.0.1@disk"]  # the existing group's heartbeat kept
    sent = send_creating(cluster, SENT_TOPIC)
    assert sent.code == ResponseCode.SERVICE_NOT_AVAILABLE and sent.remark.startswith(REFUSED), sent.remark
    topics, groups = tables(cluster)
    assert HEARTBEAT_GROUP not in groups
    assert {f"%RETRY%{HEARTBEAT_GROUP}", SENT_TOPIC} & topics == set()
    namesrv = cluster.namesrv_addr
    route = cluster.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": SENT_TOPIC}, addr=namesrv)
    assert route.code == ResponseCode.TOPIC_NOT_EXIST

    filler.unlink()
    wait_until(lambda: not disk_full(cluster), timeout=10, what="the disk seen with space again")
    assert heartbeat(cluster, GROUP, HEARTBEAT_GROUP).ok and send_creating(cluster, SENT_TOPIC).ok
    cluster.broker.proc.send_signal(signal.SIGKILL)
    cluster.broker.proc.wait(10)
    cluster.start_broker()
    topics, groups = tables(cluster)
    assert HEARTBEAT_GROUP in groups and {f"%RETRY%{HEARTBEAT_GROUP}", SENT_TOPIC} <= topics
