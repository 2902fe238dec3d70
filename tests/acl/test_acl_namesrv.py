"""Plain ACL at the name server (a real process with aclEnable=true in namesrv.conf): brokers
register with an admin account (the broker signs with innerAccessKey), writes need an admin
account, route reads stay open to unsigned clients, a wrong signature is refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker.common.acl_signature import SessionCredentials
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.request_headers import (
    DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader,
    PutKVConfigRequestHeader,
    UnRegisterBrokerRequestHeader,
)
from broker.local_cluster import ROOT, write_conf
from broker.remoting.client import SyncRemotingClient

from .acl_cluster import TOPIC, start_acl_cluster


@pytest.fixture(scope="module")
def acl(tmp_path_factory):
    running = start_acl_cluster(tmp_path_factory.mktemp("acl-ns"))
    try:
        running.create_topic(TOPIC)  # waits for the route: the broker's signed registration worked
        yield running
    finally:
        running.stop()


def _ns(acl, client, code, header=None, body=b""):
    return acl.request(client, code, header, body, addr=acl.namesrv_addr)


def test_broker_registers_with_its_inner_account_and_routes_are_open(acl):
    route = _ns(acl, acl.anonymous, RC.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(TOPIC))
    assert route.ok and acl.broker_addr.split(":")[1] in route.body.decode()
    assert _ns(acl, acl.anonymous, RC.GET_BROKER_CLUSTER_INFO).ok
    assert _ns(acl, acl.user, RC.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(TOPIC)).ok


def test_writes_need_an_admin_account(acl):
    fake = UnRegisterBrokerRequestHeader("broker-acl", acl.broker_addr, "AclCluster", 0)
    for client, reason in ((acl.anonymous, "no AccessKey"), (acl.user, "needs an admin account")):
        for code, header in (
            (RC.UNREGISTER_BROKER, fake),
            (RC.DELETE_TOPIC_IN_NAMESRV, DeleteTopicFromNamesrvRequestHeader(TOPIC)),
            (RC.PUT_KV_CONFIG, PutKVConfigRequestHeader("ns", "k", "v")),
        ):
            response = _ns(acl, client, code, header)
            assert response.code == ResponseCode.NO_PERMISSION and reason in response.remark, response.remark
        forged = _ns(acl, client, RC.REGISTER_BROKER, None, b"{}")
        assert forged.code == ResponseCode.NO_PERMISSION, forged.remark
    # The broker is still registered, and an admin may write.
    assert _ns(acl, acl.anonymous, RC.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(TOPIC)).ok
    assert _ns(acl, acl.admin, RC.PUT_KV_CONFIG, PutKVConfigRequestHeader("acl-ns", "k", "v")).ok


def test_a_wrong_signature_is_refused_for_a_write_and_ignored_for_an_open_read(acl):
    wrong = SyncRemotingClient(SessionCredentials("acl-admin-key", "not-the-secret"))
    try:
        response = _ns(acl, wrong, RC.PUT_KV_CONFIG, PutKVConfigRequestHeader("acl-ns", "k", "forged"))
        assert response.code == ResponseCode.NO_PERMISSION
        assert "signature does not match" in response.remark and "not-the-secret" not in response.remark
        # A route read is answered to anyone: its signature is not looked at.
        assert _ns(acl, wrong, RC.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(TOPIC)).ok
    finally:
        wrong.close()


def test_name_server_without_an_acl_file_does_not_start(tmp_path):
    conf = write_conf(tmp_path / "namesrv.conf", {"listenPort": 0, "aclEnable": "true"})
    proc = subprocess.run(
        [sys.executable, "-m", "broker.namesrv", "-c", str(conf)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2 and "aclFilePath" in proc.stderr, proc.stderr
    bad = tmp_path / "acl.yml"
    bad.write_text(
        "accounts:\n  - accessKey: long-enough-key\n    secretKey: long-enough-secret\n    admin: maybe\n"
    )
    conf = write_conf(tmp_path / "n2.conf", {"listenPort": 0, "aclEnable": "true", "aclFilePath": bad})
    proc = subprocess.run(
        [sys.executable, "-m", "broker.namesrv", "-c", str(conf)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2 and "admin: expected true or false" in proc.stderr, proc.stderr
