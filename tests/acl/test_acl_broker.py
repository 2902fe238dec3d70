"""Plain ACL on a real broker and name server (loopback processes), with the project's SDK and raw
signed requests: allowed, denied topic, denied group, wrong signature, missing credentials, white
addresses (global and per account), admin-only codes from a normal account, the ACL admin
requests, hot reload, and a bad file at start."""

from __future__ import annotations

import subprocess
import sys
import threading

import orjson
import pytest
import yaml

from broker.client import CONSUME_FROM_FIRST_OFFSET, Producer, PushConsumer, SessionCredentials
from broker.client.push_consumer import ConsumeConcurrentlyStatus
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.message import Message
from broker.common.request_headers import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    PullMessageRequestHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from broker.common.topic_config import TRACE_TOPIC
from broker.local_cluster import ROOT, free_port, start_broker, wait_until, write_conf
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request

from .acl_cluster import (
    ADMIN,
    DENIED,
    ELSEWHERE_USER,
    GROUP,
    PRODUCER_GROUP,
    PUB_ONLY,
    TOPIC,
    USER,
    WHITE_USER,
    broker_acl,
    start_acl_cluster,
    write_acl,
)

NO_PERMISSION = ResponseCode.NO_PERMISSION
HOME_ADMIN = SessionCredentials("home-admin-key", "home-admin-secret")


def _keys(creds: SessionCredentials) -> dict:
    return {"accessKey": creds.access_key, "secretKey": creds.secret_key}


@pytest.fixture(scope="module")
def acl(tmp_path_factory):
    running = start_acl_cluster(tmp_path_factory.mktemp("acl"))
    try:
        for topic in (TOPIC, PUB_ONLY, DENIED):
            running.create_topic(topic)
        yield running
    finally:
        running.stop()


def _max_offset(acl, client, topic=TOPIC):
    return acl.request(client, RC.GET_MAX_OFFSET, {"topic": topic, "queueId": 0})


def _pull(acl, client, topic, group):
    header = PullMessageRequestHeader(group, topic, 0, 0, 1, 0, -1, 0, 0, "*", "TAG")
    return acl.request(client, RC.PULL_MESSAGE, header)


def _refused(response, *phrases):
    assert response.code == NO_PERMISSION, (response.code, response.remark)
    for phrase in phrases:
        assert phrase in response.remark, response.remark
    return response.remark


# -- the SDK --------------------------------------------------------------------------------------
def test_sdk_with_credentials_sends_and_consumes(acl):
    producer = Producer(PRODUCER_GROUP, acl.namesrv_addr, credentials=USER, instance_name="acl-p").start()
    received: list[bytes] = []
    got = threading.Event()

    def listener(msgs, context):
        received.extend(m.body for m in msgs)
        got.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        GROUP,
        acl.namesrv_addr,
        credentials=USER,
        consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        instance_name="acl-c",
        rebalance_interval_ms=500,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    try:
        result = producer.send(Message(TOPIC, b"signed hello"))
        assert result.send_status == "SEND_OK"
        consumer.start()
        assert got.wait(30), "the signed consumer received nothing"
        assert b"signed hello" in received
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_traced_producer_signs_its_trace_records_with_its_owners_account(acl):
    """The trace producer is a client of its own: unsigned, its records would be refused."""
    acl.create_topic(TRACE_TOPIC, queues=1)
    before = _max_offset(acl, acl.admin, TRACE_TOPIC)
    assert before.ok, before.remark
    producer = Producer(
        PRODUCER_GROUP, acl.namesrv_addr, credentials=USER, instance_name="acl-traced", enable_trace=True
    ).start()
    try:
        assert producer.send(Message(TOPIC, b"traced and signed")).send_status == "SEND_OK"

        def trace_stored() -> bool:
            answer = _max_offset(acl, acl.admin, TRACE_TOPIC)
            return int(answer.ext_fields["offset"]) > int(before.ext_fields["offset"])

        wait_until(trace_stored, timeout=20, what="the signed trace record in the trace topic")
    finally:
        producer.shutdown()


def test_sdk_send_to_a_denied_topic_is_refused_with_the_reason(acl):
    producer = Producer(PRODUCER_GROUP, acl.namesrv_addr, credentials=USER, instance_name="acl-p2").start()
    try:
        with pytest.raises(Exception) as caught:
            producer.send(Message(DENIED, b"nope"))
        assert "has no PUB permission on topic AclDenied" in str(caught.value)
        assert USER.secret_key not in str(caught.value)
    finally:
        producer.shutdown()


def test_sdk_without_credentials_is_refused(acl):
    producer = Producer(PRODUCER_GROUP, acl.namesrv_addr, instance_name="acl-p3").start()
    try:
        with pytest.raises(Exception, match="no AccessKey"):
            producer.send(Message(TOPIC, b"unsigned"))
    finally:
        producer.shutdown()


# -- raw signed requests ----------------------------------------------------------------------
def test_topic_without_sub_permission_is_refused(acl):
    _refused(_pull(acl, acl.user, PUB_ONLY, GROUP), "has no SUB permission on topic AclPubOnly")
    assert _pull(acl, acl.user, TOPIC, GROUP).code != NO_PERMISSION


def test_denied_group_is_refused(acl):
    _refused(_pull(acl, acl.user, TOPIC, "OtherGroup"), "no SUB permission on group OtherGroup")


def test_heartbeat_names_every_group_and_topic(acl):
    body = orjson.dumps(
        {
            "clientID": "acl-hb",
            "producerDataSet": [],
            "consumerDataSet": [
                {
                    "groupName": GROUP,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "unitMode": False,
                    "subscriptionDataSet": [
                        {"topic": DENIED, "subString": "*", "tagsSet": [], "codeSet": []}
                    ],
                }
            ],
        }
    )
    _refused(acl.request(acl.user, RC.HEART_BEAT, None, body), "no SUB permission on topic AclDenied")


def test_wrong_signature_is_refused_without_telling_the_secret(acl):
    wrong = SyncRemotingClient(SessionCredentials(USER.access_key, "not-the-secret"))
    try:
        remark = _refused(_max_offset(acl, wrong), "signature does not match", USER.access_key)
        assert USER.secret_key not in remark and "not-the-secret" not in remark
    finally:
        wrong.close()


def test_tampered_request_is_refused(acl):
    request = create_request(RC.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0})
    from broker.common.acl_signature import sign_fields

    sign_fields(request.ext_fields, request.body, USER)
    request.ext_fields["queueId"] = "1"  # changed after signing
    _refused(acl.anonymous.invoke(acl.broker_addr, request), "signature does not match")


def test_missing_and_unknown_credentials_are_refused(acl):
    _refused(_max_offset(acl, acl.anonymous), "no AccessKey")
    stranger = SyncRemotingClient(SessionCredentials("nobody-knows-me", "whatever-secret"))
    try:
        _refused(_max_offset(acl, stranger), "AccessKey 'nobody-knows-me', or no such account")
    finally:
        stranger.close()
    assert _max_offset(acl, acl.user).ok


def test_refusals_do_not_tell_whether_an_account_exists(acl):
    """An unknown key, a known one with a wrong secret and a known one unsigned get one remark
    (before: three, "no ACL account", "signature does not match", "no Signature")."""
    remarks = set()
    for key, secret in (("nobody-knows-me", "whatever-secret"), (USER.access_key, "not-the-secret")):
        client = SyncRemotingClient(SessionCredentials(key, secret))
        try:
            remarks.add(_refused(_max_offset(acl, client)).replace(key, "KEY"))
        finally:
            client.close()
    remarks.add(_refused(_unsigned_with_key(acl, ELSEWHERE_USER)).replace(ELSEWHERE_USER.access_key, "KEY"))
    assert remarks == {"signature does not match for AccessKey 'KEY', or no such account"}


def test_admin_only_codes_from_a_normal_account(acl):
    cases = [
        (RC.UPDATE_AND_CREATE_TOPIC, {"topic": "AclSneaky", "readQueueNums": 1, "writeQueueNums": 1}, b""),
        (RC.DELETE_TOPIC_IN_BROKER, {"topic": TOPIC}, b""),
        (RC.UPDATE_BROKER_CONFIG, None, b"brokerPermission=4\n"),
        (
            RC.INVOKE_BROKER_TO_RESET_OFFSET,
            {"topic": TOPIC, "group": GROUP, "timestamp": 0, "isForce": "true"},
            b"",
        ),
        (RC.DELETE_SUBSCRIPTIONGROUP, {"groupName": GROUP}, b""),
        (RC.GET_BROKER_CLUSTER_ACL_CONFIG, None, b""),
        (RC.PURGE_DAMAGED_COMMIT_LOG, None, b""),
    ]
    for code, fields, body in cases:
        _refused(acl.request(acl.user, code, fields, body), f"request code {code} needs an admin account")
    # Nothing changed: the broker still writes and the topic is there.
    config = acl.request(acl.admin, RC.GET_BROKER_CONFIG).body.decode()
    assert "brokerPermission=6" in config
    assert _max_offset(acl, acl.user).ok


def test_broker_config_answer_masks_the_inner_secret(acl):
    config = acl.request(acl.admin, RC.GET_BROKER_CONFIG).body.decode()
    assert "innerSecretKey=******" in config
    assert ADMIN.secret_key not in config


# -- white addresses --------------------------------------------------------------------------
def _unsigned_with_key(acl, creds, code=RC.GET_MAX_OFFSET, fields=None):
    fields = {"topic": TOPIC, "queueId": 0} if fields is None else fields
    request = create_request(code, {**fields, "AccessKey": creds.access_key})
    return acl.anonymous.invoke(acl.broker_addr, request)


def test_account_white_address_spares_the_signature_only(acl):
    assert _unsigned_with_key(acl, WHITE_USER).ok  # 127.0.0.1 is its white address
    _refused(_unsigned_with_key(acl, ELSEWHERE_USER), "signature does not match")  # 10.9.9.* is not us
    # Its permissions still hold: SUB only on the topic, so no send.
    send_fields = {"producerGroup": "g", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
                   "queueId": 0, "sysFlag": 0, "bornTimestamp": 0, "flag": 0}  # fmt: skip
    _refused(_unsigned_with_key(acl, WHITE_USER, RC.SEND_MESSAGE, send_fields), "no PUB permission")


def test_global_white_address_lets_unsigned_requests_in(acl):
    def set_white(addrs: str) -> None:
        header = UpdateGlobalWhiteAddrsConfigRequestHeader(addrs)
        response = acl.request(acl.admin, RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header)
        assert response.ok, response.remark

    try:
        set_white("10.0.0.*,127.0.0.{1,2}")
        assert _max_offset(acl, acl.anonymous).ok
        assert "127.0.0.{1,2}" in acl.acl_path.read_text()
    finally:
        set_white("")
    _refused(_max_offset(acl, acl.anonymous), "no AccessKey")
    bad = acl.request(
        acl.admin, RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, UpdateGlobalWhiteAddrsConfigRequestHeader("300.1.1.1")
    )
    assert bad.code == ResponseCode.SYSTEM_ERROR and "300.1.1.1" in bad.remark


# -- the ACL admin requests -------------------------------------------------------------------
def test_acl_admin_requests_create_read_and_delete_an_account(acl):
    new = SessionCredentials("acl-new-account", "acl-new-secret")
    header = CreateAccessConfigRequestHeader(
        new.access_key, new.secret_key, topic_perms=f"{TOPIC}=SUB", default_group_perm="SUB"
    )
    before = acl.request(acl.admin, RC.GET_BROKER_CLUSTER_ACL_INFO)
    assert before.ok, before.remark
    version_before = orjson.loads(GetBrokerAclConfigResponseHeader.from_ext_fields(before.ext_fields).version)
    created = acl.request(acl.admin, RC.UPDATE_AND_CREATE_ACL_CONFIG, header)
    assert created.ok, created.remark
    client = SyncRemotingClient(new)
    try:
        assert _max_offset(acl, client).ok
        on_disk = yaml.safe_load(acl.acl_path.read_text())
        assert any(a["accessKey"] == new.access_key for a in on_disk["accounts"])
        config = orjson.loads(acl.request(acl.admin, RC.GET_BROKER_CLUSTER_ACL_CONFIG).body)
        mine = next(a for a in config["plainAccessConfigs"] if a["accessKey"] == new.access_key)
        assert mine["topicPerms"] == [f"{TOPIC}=SUB"] and mine["admin"] is False
        info = GetBrokerAclConfigResponseHeader.from_ext_fields(
            acl.request(acl.admin, RC.GET_BROKER_CLUSTER_ACL_INFO).ext_fields
        )
        assert orjson.loads(info.version)["counter"] > version_before["counter"]
        assert info.broker_name == "broker-acl" and info.cluster_name == "AclCluster"
        # A bad permission is refused with the reason, and nothing changes.
        bad = CreateAccessConfigRequestHeader(new.access_key, topic_perms=f"{TOPIC}=READ")
        refused = acl.request(acl.admin, RC.UPDATE_AND_CREATE_ACL_CONFIG, bad)
        assert refused.code == ResponseCode.SYSTEM_ERROR and "'READ' is not a permission" in refused.remark
        assert _max_offset(acl, client).ok
        short = acl.request(
            acl.admin, RC.UPDATE_AND_CREATE_ACL_CONFIG, CreateAccessConfigRequestHeader("short", "s")
        )
        assert short.code == ResponseCode.SYSTEM_ERROR and "at least 7 characters" in short.remark
        deleted = acl.request(
            acl.admin, RC.DELETE_ACL_CONFIG, DeleteAccessConfigRequestHeader(new.access_key)
        )
        assert deleted.ok, deleted.remark
        _refused(_max_offset(acl, client), "or no such account")
    finally:
        client.close()
        acl.request(acl.admin, RC.DELETE_ACL_CONFIG, DeleteAccessConfigRequestHeader(new.access_key))


# -- hot reload -------------------------------------------------------------------------------
def test_hot_reload_takes_a_good_file_and_keeps_the_last_on_a_bad_one(acl):
    reloaded = SessionCredentials("acl-reload-key", "acl-reload-secret")
    client = SyncRemotingClient(reloaded)
    config = broker_acl()
    config["accounts"].append({"accessKey": reloaded.access_key, "secretKey": reloaded.secret_key,
                               "topicPerms": [f"{TOPIC}=SUB"]})  # fmt: skip
    try:
        _refused(_max_offset(acl, client), "or no such account")
        write_acl(acl.acl_path, config)
        wait_until(lambda: _max_offset(acl, client).ok, timeout=10, what="the reloaded account")
        refusals = "".join(acl.broker.output).count("not reloaded, the previous ACL stays in use")
        acl.acl_path.write_text("accounts: [this is: not yaml")
        wait_until(
            lambda: (
                "".join(acl.broker.output).count("not reloaded, the previous ACL stays in use") > refusals
            ),
            timeout=10,
            what="the broker's refusal of the bad file",
        )
        assert _max_offset(acl, client).ok  # the previous configuration stays in use
    finally:
        write_acl(acl.acl_path, broker_acl())
        wait_until(
            lambda: _max_offset(acl, client).code == NO_PERMISSION, timeout=10, what="the restored file"
        )
        client.close()


# -- start-up ---------------------------------------------------------------------------------
def test_broker_with_a_bad_acl_file_does_not_start(tmp_path):
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text("accounts:\n  - accessKey: short\n    secretKey: 12345678\n")
    conf = write_conf(
        tmp_path / "broker.conf",
        {
            "storePathRootDir": tmp_path / "store",
            "aclEnable": "true",
            "aclFilePath": acl_file,
            "listenPort": 0,
        },
    )
    proc = subprocess.run(
        [sys.executable, "-m", "broker.server", "-c", str(conf)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "plain_acl.yml" in proc.stderr and "accessKey: must have at least 7 characters" in proc.stderr
    missing = write_conf(tmp_path / "b2.conf", {"storePathRootDir": tmp_path / "s2", "aclEnable": "true"})
    proc = subprocess.run(
        [sys.executable, "-m", "broker.server", "-c", str(missing)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2 and "cannot read the ACL file" in proc.stderr, proc.stderr


def test_without_acl_file_path_the_broker_reads_apaches_place_under_rocketmq_home(tmp_path, monkeypatch):
    """Issue 32 item 12: an Apache broker.conf with aclEnable=true and no aclFilePath reads
    $ROCKETMQ_HOME/conf/plain_acl.yml, as Apache's PlainPermissionManager does."""
    home = tmp_path / "rocketmq-home"
    (home / "conf").mkdir(parents=True)
    write_acl(home / "conf" / "plain_acl.yml", {"accounts": [{**_keys(HOME_ADMIN), "admin": True}]})
    conf = write_conf(
        tmp_path / "broker.conf",
        {"brokerName": "broker-home", "storePathRootDir": tmp_path / "store", "aclEnable": "true"},
    )
    monkeypatch.setenv("ROCKETMQ_HOME", str(home))
    broker = start_broker(conf, port=free_port())
    clients = {name: SyncRemotingClient(creds) for name, creds in (("home", HOME_ADMIN), ("other", ADMIN))}
    anonymous = SyncRemotingClient()
    try:

        def max_offset(client):
            fields = {"topic": TOPIC, "queueId": 0}
            return client.invoke(broker.addr, create_request(RC.GET_MAX_OFFSET, fields))

        assert max_offset(clients["home"]).ok  # the account of that file
        _refused(max_offset(clients["other"]), ADMIN.access_key)  # an account it does not hold
        _refused(max_offset(anonymous))
    finally:
        for client in (*clients.values(), anonymous):
            client.close()
        assert broker.stop() == 0, "".join(broker.output)


def test_acl_file_path_wins_over_rocketmq_home(tmp_path, monkeypatch):
    from broker.server.config import BrokerConfig

    store = tmp_path / "store"
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path / "home"))
    chosen = BrokerConfig.from_properties(
        {"aclEnable": "true", "aclFilePath": str(tmp_path / "mine.yml"), "storePathRootDir": str(store)}
    )
    assert chosen.acl_path() == tmp_path / "mine.yml"
    default = BrokerConfig.from_properties({"aclEnable": "true", "storePathRootDir": str(store)})
    assert default.acl_path() == tmp_path / "home" / "conf" / "plain_acl.yml"
    # A broker that has its own file keeps it, even where an Apache install sets ROCKETMQ_HOME (its
    # sample plain_acl.yml holds well-known keys).
    (store / "config").mkdir(parents=True)
    (store / "config" / "plain_acl.yml").write_text("accounts: []\n")
    assert default.acl_path() == store / "config" / "plain_acl.yml"
    monkeypatch.delenv("ROCKETMQ_HOME")  # neither: the store's own config directory, as before
    assert default.acl_path() == store / "config" / "plain_acl.yml"
