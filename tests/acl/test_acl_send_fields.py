"""What the ACL's round-two attack (issue 31) found open, on a real name server and broker with
plain ACL on.

- The ACL read a send's topic from one set of field names (``topic`` for 10, 320 and 324, ``b``
  for 310 and 325) while the send handlers read the one-letter V2 names whenever ``b`` is there
  without ``topic``, whatever the code: USER stored messages in a topic it has no permission on.
- Only pulls of the broker's own topics needed an admin account: an account with SUB on every
  topic and group committed the transaction checker's offset (CID_RMQ_SYS_TRANS on the half
  topic), locked its queues and read its consume stats, so no half message was checked again.

Figures before the fixes: 3 of the 5 crossed sends answered 0 and stored in AclDenied (the
other 2 answered NO_PERMISSION once stored, or failed on the empty batch body); 4 of the
checker's requests answered 0. After: each refused with NO_PERMISSION, nothing stored.
"""

from __future__ import annotations

import time

import pytest

from broker.common.acl_signature import SessionCredentials
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.request_headers.send import SEND_V1_TO_V2
from broker.common.system_names import TRANSACTION_CHECK_GROUP
from broker.common.topic_config import TRANS_HALF_TOPIC
from broker.local_cluster import wait_until
from broker.remoting.client import SyncRemotingClient

from .acl_cluster import DENIED, PRODUCER_GROUP, TOPIC, broker_acl, start_acl_cluster, write_acl

NO_PERMISSION = ResponseCode.NO_PERMISSION
# SUB on every topic and group: what RocketMQ's examples give a read-only account.
WIDE = SessionCredentials("acl-wide-key", "acl-wide-secret")


@pytest.fixture(scope="module")
def acl(tmp_path_factory):
    running = start_acl_cluster(tmp_path_factory.mktemp("acl-send-fields"), {"aclReplayProtection": "true"})
    wide = SyncRemotingClient(WIDE)
    try:
        config = broker_acl()
        config["accounts"].append(
            {"accessKey": WIDE.access_key, "secretKey": WIDE.secret_key,
             "defaultTopicPerm": "SUB", "defaultGroupPerm": "SUB"}
        )  # fmt: skip
        write_acl(running.acl_path, config)
        running.create_topic(TOPIC)
        running.create_topic(DENIED)
        running.others["wide"] = wide
        wait_until(lambda: running.request(wide, RC.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0}).ok,
                   timeout=10, what="the wide account loaded")  # fmt: skip
        yield running
    finally:
        wide.close()
        running.stop()


def _stored_in_denied(acl) -> int:
    total = 0
    for queue in (0, 1):
        response = acl.request(acl.admin, RC.GET_MAX_OFFSET, {"topic": DENIED, "queueId": queue})
        assert response.ok, response.remark
        total += int(response.ext_fields["offset"])
    return total


def _v1_fields(topic: str) -> dict[str, str]:
    return {
        "producerGroup": PRODUCER_GROUP, "topic": topic, "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
        "bornTimestamp": str(int(time.time() * 1000)), "flag": "0", "properties": "",
        "reconsumeTimes": "0", "unitMode": "false",
    }  # fmt: skip


def _v2_fields(topic: str) -> dict[str, str]:
    return {SEND_V1_TO_V2[name]: value for name, value in _v1_fields(topic).items()}


CROSSED_SENDS = [
    (RC.SEND_MESSAGE, _v2_fields),
    (RC.SEND_BATCH_MESSAGE, _v2_fields),
    (RC.SEND_REPLY_MESSAGE, _v2_fields),
    (RC.SEND_MESSAGE_V2, _v1_fields),
    (RC.SEND_REPLY_MESSAGE_V2, _v1_fields),
]


_CROSSED_IDS = [f"{code}-{fields.__name__}" for code, fields in CROSSED_SENDS]


@pytest.mark.parametrize(("code", "fields"), CROSSED_SENDS, ids=_CROSSED_IDS)
def test_send_in_the_other_codes_field_names_is_checked_on_the_topic_it_stores_in(acl, code, fields):
    before = _stored_in_denied(acl)
    response = acl.request(acl.user, code, fields(DENIED), b"not-yours")
    assert response.code == NO_PERMISSION, (response.code, response.remark)
    assert DENIED in (response.remark or "")
    assert _stored_in_denied(acl) == before


def test_send_in_the_other_codes_field_names_to_an_allowed_topic_is_stored(acl):
    """The control: the same crossed names, on a topic USER may publish to, still send."""
    response = acl.request(acl.user, RC.SEND_MESSAGE, _v2_fields(TOPIC), b"yours")
    assert response.ok, response.remark


def test_send_with_an_unreadable_header_is_refused_with_a_reason(acl):
    fields = _v1_fields(DENIED)
    fields["queueId"] = "not-a-number"
    response = acl.request(acl.user, RC.SEND_MESSAGE, fields, b"x")
    assert response.code == NO_PERMISSION, (response.code, response.remark)
    assert "queueId" in (response.remark or "") or "not valid" in (response.remark or "")


_CHECKER = {"consumerGroup": TRANSACTION_CHECK_GROUP, "topic": TRANS_HALF_TOPIC, "queueId": "0"}
_CHECKER_LOCK = f'{{"consumerGroup":"{TRANSACTION_CHECK_GROUP}","clientId":"x","mqSet":[]}}'.encode()
CHECKER_REQUESTS = [
    (RC.UPDATE_CONSUMER_OFFSET, {**_CHECKER, "commitOffset": "1000000"}, b""),
    (RC.QUERY_CONSUMER_OFFSET, _CHECKER, b""),
    (RC.GET_CONSUME_STATS, {"consumerGroup": TRANSACTION_CHECK_GROUP}, b""),
    (RC.LOCK_BATCH_MQ, {}, _CHECKER_LOCK),
    (RC.GET_CONSUME_STATS, {"consumerGroup": "AnyGroup", "topic": TRANS_HALF_TOPIC}, b""),
]


@pytest.mark.parametrize(("code", "fields", "body"), CHECKER_REQUESTS, ids=lambda v: str(v)[:20])
def test_the_brokers_own_topics_and_groups_need_an_admin_account(acl, code, fields, body):
    response = acl.request(acl.others["wide"], code, fields, body)
    assert response.code == NO_PERMISSION, (response.code, response.remark)
    assert "only an admin account" in (response.remark or "")


def test_the_admin_account_still_reads_the_checkers_offset(acl):
    response = acl.request(acl.admin, RC.QUERY_CONSUMER_OFFSET, _CHECKER)
    assert response.code != NO_PERMISSION, response.remark


# Reads of every record at once, or of the broker's settings (innerAccessKey among them): before,
# any signed account had them (6 of 6 answered 0), GET_ALL_CONSUMER_OFFSET with denied groups.
WHOLE_READS = [
    RC.GET_ALL_TOPIC_CONFIG,
    RC.GET_ALL_CONSUMER_OFFSET,
    RC.GET_ALL_DELAY_OFFSET,
    RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    RC.GET_BROKER_CONFIG,
    RC.GET_BROKER_EPOCH_CACHE,
]


@pytest.mark.parametrize("code", WHOLE_READS)
def test_whole_broker_reads_need_an_admin_account(acl, code):
    response = acl.request(acl.user, code)
    assert response.code == NO_PERMISSION, (response.code, response.remark)
    assert "needs an admin account" in (response.remark or "")
    assert acl.request(acl.admin, code).code != NO_PERMISSION


def test_query_data_version_at_the_name_server_needs_an_admin_account(acl):
    """QUERY_DATA_VERSION keeps a broker's routes alive (routes.touch): before, anyone's answered
    0 unsigned, and a hung broker stayed in the routes; now it needs what REGISTER_BROKER does."""
    fields = {"brokerAddr": acl.broker_addr, "brokerName": "broker-acl", "clusterName": "AclCluster"}
    for client in (acl.anonymous, acl.user):
        response = acl.request(client, RC.QUERY_DATA_VERSION, fields, b"", addr=acl.namesrv_addr)
        assert response.code == NO_PERMISSION, (response.code, response.remark)
    assert acl.request(acl.admin, RC.QUERY_DATA_VERSION, fields, b"", addr=acl.namesrv_addr).ok
