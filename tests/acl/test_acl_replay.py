"""Replayed and altered signed requests (issue 31, section 4), against a real broker and name server
with ``aclReplayProtection=true``.

A request is "captured" by signing it exactly as the project's clients do (the remoting client's
``RequestSigner``) and written by an unsigned client, which sends it as it is: what an eavesdropper
on a plaintext connection holds. The replays: a create-topic resent with the code of DELETE_TOPIC
(215) and of GET_BROKER_CLUSTER_ACL_CONFIG (54, every account's secret key), a broker registration
resent as UNREGISTER_BROKER, and requests resent verbatim. Before the fix the first three answered
SUCCESS (topic deleted, secrets returned, the broker's routes gone) and a verbatim resend ran twice.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time

import pytest

from broker.client.admin.sync_admin import MQAdmin
from broker.common.acl_signature import (
    REQUEST_CODE,
    REQUEST_NONCE,
    REQUEST_TIMESTAMP,
    RequestSigner,
    SessionCredentials,
    sign_fields,
    stamp_fields,
)
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.request_headers import (
    CreateTopicRequestHeader,
    GetRouteInfoRequestHeader,
    RegisterBrokerRequestHeader,
)
from broker.common.topic_config import AUTO_CREATE_TOPIC_KEY_TOPIC
from broker.local_cluster import ROOT, free_port, wait_until, write_conf
from broker.remoting.command import RemotingCommand, create_request

from .acl_cluster import (
    ADMIN,
    TOPIC,
    USER,
    protected_cluster_fixture,
    sdk_round_trip,
    signed_request,
    start_acl_slave,
)

PROTECTION = {"aclReplayProtection": "true", "aclReplayWindowSeconds": 60}
NO_PERMISSION = ResponseCode.NO_PERMISSION


acl = protected_cluster_fixture("acl-replay", PROTECTION)


captured = signed_request


def replayed(request: RemotingCommand, code: int | None = None, **changed: str) -> RemotingCommand:
    """A copy of ``request`` with its code and ext fields changed as given."""
    fields = {**(request.ext_fields or {}), **changed}
    return dataclasses.replace(request, code=request.code if code is None else code, ext_fields=fields)


def _create_topic_header(topic: str) -> CreateTopicRequestHeader:
    return CreateTopicRequestHeader(topic, AUTO_CREATE_TOPIC_KEY_TOPIC, 2, 2, 6, "SINGLE_TAG")


def _refused(response: RemotingCommand, *phrases: str) -> str:
    assert response.code == NO_PERMISSION, (response.code, response.remark)
    for phrase in phrases:
        assert phrase in (response.remark or ""), response.remark
    return response.remark or ""


def _topic_exists(acl, topic: str) -> bool:
    answer = acl.request(acl.admin, RC.GET_ALL_TOPIC_CONFIG)
    return answer.ok and topic.encode() in answer.body


def test_create_topic_replayed_as_delete_topic_is_refused(acl):
    """Before: the replay as code 215 answered SUCCESS and the topic was gone."""
    create = captured(RC.UPDATE_AND_CREATE_TOPIC, _create_topic_header("ReplayVictim"))
    assert acl.anonymous.invoke(acl.broker_addr, create).ok
    assert _topic_exists(acl, "ReplayVictim")
    _refused(acl.anonymous.invoke(acl.broker_addr, replayed(create, RC.DELETE_TOPIC_IN_BROKER)), "code")
    assert _topic_exists(acl, "ReplayVictim")


def test_create_topic_replayed_as_acl_config_read_returns_no_secret(acl):
    """Before: the replay as code 54 answered SUCCESS with every account's secret key."""
    create = captured(RC.UPDATE_AND_CREATE_TOPIC, _create_topic_header("ReplayVictim2"))
    answer = acl.anonymous.invoke(acl.broker_addr, replayed(create, RC.GET_BROKER_CLUSTER_ACL_CONFIG))
    _refused(answer, "code")
    assert not answer.body or USER.secret_key.encode() not in answer.body


def test_registration_replayed_as_unregister_is_refused(acl):
    """Before: the replay answered SUCCESS and every route of the broker was gone."""
    host, port = acl.broker_addr.rsplit(":", 1)
    header = RegisterBrokerRequestHeader(
        broker_name="broker-acl",
        broker_addr=acl.broker_addr,
        cluster_name="AclCluster",
        ha_server_addr=f"{host}:{int(port) + 1}",
        broker_id=0,
        compressed=False,
        body_crc32=0,
    )
    registration = captured(RC.REGISTER_BROKER, header)
    answer = acl.anonymous.invoke(acl.namesrv_addr, replayed(registration, RC.UNREGISTER_BROKER))
    _refused(answer, "code")
    route = create_request(RC.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(TOPIC))
    assert acl.anonymous.invoke(acl.namesrv_addr, route).ok


@pytest.mark.parametrize("server", ["broker", "namesrv"])
def test_a_genuine_request_resent_verbatim_is_refused_the_second_time(acl, server):
    """Before: both answered SUCCESS."""
    addr = acl.broker_addr if server == "broker" else acl.namesrv_addr
    code = RC.GET_BROKER_CONFIG if server == "broker" else RC.PUT_KV_CONFIG
    fields = None if server == "broker" else {"namespace": "replay", "key": "k", "value": "v"}
    request = captured(code, fields)
    assert acl.anonymous.invoke(addr, request).ok
    _refused(acl.anonymous.invoke(addr, replayed(request)), "AclNonce", "seen before")


@pytest.mark.parametrize("field", [REQUEST_CODE, REQUEST_TIMESTAMP, REQUEST_NONCE])
def test_an_altered_code_timestamp_or_nonce_breaks_the_signature(acl, field):
    request = captured(RC.GET_BROKER_CONFIG, None)
    fields = request.ext_fields or {}
    altered = {
        REQUEST_CODE: str(RC.DELETE_TOPIC_IN_BROKER),
        REQUEST_TIMESTAMP: str(int(fields[REQUEST_TIMESTAMP]) + 1),
        REQUEST_NONCE: fields[REQUEST_NONCE][:-1] + ("A" if fields[REQUEST_NONCE][-1] != "A" else "B"),
    }[field]
    code = RC.DELETE_TOPIC_IN_BROKER if field == REQUEST_CODE else None
    _refused(acl.anonymous.invoke(acl.broker_addr, replayed(request, code, **{field: altered})), "signature")


def _apache_signed(code: int, fields=None, **extra: str) -> RemotingCommand:
    """Signed as Apache's AclClientRPCHook signs: every ext field present, nothing added."""
    request = create_request(code, fields)
    request.ext_fields = {**(request.ext_fields or {}), **extra}
    sign_fields(request.ext_fields, request.body, ADMIN)
    return request


def test_a_request_without_the_replay_fields_is_refused(acl):
    remark = _refused(acl.anonymous.invoke(acl.broker_addr, _apache_signed(RC.GET_BROKER_CONFIG)))
    assert "aclReplayProtection" in remark and REQUEST_TIMESTAMP in remark


@pytest.mark.parametrize(("offset_s", "phrases"), [(-120, ("window", "60 s")), (120, ("ahead", "15 s"))])
def test_a_timestamp_outside_the_window_is_refused(acl, offset_s, phrases):
    request = create_request(RC.GET_BROKER_CONFIG)
    request.ext_fields = {}
    stamp_fields(request.ext_fields, request.code, int((time.time() + offset_s) * 1000))
    RequestSigner(ADMIN).sign_stamped(request)  # a signer whose clock is off by offset_s
    _refused(acl.anonymous.invoke(acl.broker_addr, request), *phrases)


def test_refusals_name_the_check_but_no_account(acl):
    """A replay check runs only once the signature matched: an unknown account is refused as
    before, never with a replay remark that would confirm its existence."""
    stranger = SessionCredentials("nobody-knows-me", "whatever")
    request = captured(RC.GET_BROKER_CONFIG, None, credentials=stranger)
    remark = _refused(acl.anonymous.invoke(acl.broker_addr, request))
    assert "nonce" not in remark and "window" not in remark


def test_the_sdk_and_the_admin_client_work_with_replay_protection(acl):
    sdk_round_trip(acl.namesrv_addr, USER)
    admin = MQAdmin(acl.namesrv_addr, credentials=ADMIN)
    try:
        admin.create_or_update_topic(acl.broker_addr, "ReplayAdminTopic", 1, 1)
        assert "ReplayAdminTopic" in admin.all_topic_configs(acl.broker_addr)
        assert admin.delete_topic("ReplayAdminTopic", "AclCluster") == [acl.broker_addr]
        assert admin.cluster_list()
    finally:
        admin.close()


def test_a_slave_syncs_from_its_master_and_registers_with_replay_protection(acl):
    """The broker's own calls: the slave's registration at the name server and its metadata sync
    from its master (RocketMQ's SlaveSynchronize, 3 s after start) are signed requests too."""
    slave = start_acl_slave(acl)
    try:

        def copied() -> bool:
            answer = acl.request(acl.admin, RC.GET_ALL_TOPIC_CONFIG, addr=slave.addr)
            return answer.ok and TOPIC.encode() in answer.body

        wait_until(copied, timeout=20, what="the slave's copy of its master's topics")
        info = acl.request(acl.anonymous, RC.GET_BROKER_CLUSTER_INFO, addr=acl.namesrv_addr)
        assert slave.addr.encode() in info.body
    finally:
        assert slave.stop() == 0, "".join(slave.output)


ACL_ON = {"aclEnable": "true", "aclFilePath": "{acl}"}


@pytest.mark.parametrize(
    ("server", "settings", "reason"),
    [
        ("namesrv", {**ACL_ON, "aclRequireTls": "true"}, "aclRequireTls=true needs tls.server.mode"),
        ("namesrv", {**ACL_ON, "aclReplayWindowSeconds": "1"}, "aclReplayWindowSeconds=1 must be 5 to 3600"),
        ("namesrv", {"aclReplayProtection": "true"}, "aclReplayProtection=true needs aclEnable=true"),
        ("controller", {**ACL_ON, "aclReplayWindowSeconds": "86400"}, "must be 5 to 3600"),
        ("server", {**ACL_ON, "aclRequireTls": "true"}, "aclRequireTls=true needs tls.server.mode"),
        ("server", {**ACL_ON, "aclReplayWindowSeconds": "4"}, "aclReplayWindowSeconds"),
    ],
)
def test_settings_that_protect_nothing_or_refuse_everything_stop_the_start(
    tmp_path, server, settings, reason
):
    acl_file = tmp_path / "acl.yml"
    acl_file.write_text("accounts: []\n")
    values = {k: v.format(acl=acl_file) for k, v in settings.items()}
    base: dict[str, object] = {"listenPort": free_port()}
    if server == "server":
        base = {"storePathRootDir": tmp_path / "store", "brokerName": "b", "listenPort": free_port()}
    conf = write_conf(tmp_path / "server.conf", {**base, **values})
    done = subprocess.run(
        [sys.executable, "-m", f"broker.{server}", "-c", str(conf)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode != 0 and reason in done.stderr, done.stderr
