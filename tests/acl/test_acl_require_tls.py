"""Signed requests with every protection on (issue 31, section 4): a broker and a name server with
ACL, ``aclReplayProtection=true`` and ``aclRequireTls=true`` on permissive TLS ports (real
processes). The broker registers over TLS with its inner account; the SDK and mqadmin work over
TLS (the console's admin client: tests/console/test_console_signed_requests.py); a signed request
over plaintext is refused, while an unsigned route read over plaintext is still answered (it is
open to anyone)."""

from __future__ import annotations

import pytest

from broker.cli import main as mqadmin
from broker.common.acl_signature import RequestSigner
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.request_headers import GetRouteInfoRequestHeader
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request

from .acl_cluster import ADMIN, TOPIC, USER, sdk_round_trip


@pytest.fixture
def acl(signed_tls_cluster):
    return signed_tls_cluster


def test_a_signed_request_over_plaintext_is_refused(acl):
    plaintext = SyncRemotingClient(ADMIN)
    try:
        for addr, code in (
            (acl.broker_addr, RC.GET_BROKER_CONFIG),
            (acl.namesrv_addr, RC.PUT_KV_CONFIG),
        ):
            refused = plaintext.invoke(
                addr, create_request(code, {"namespace": "t", "key": "k", "value": "v"})
            )
            assert refused.code == ResponseCode.NO_PERMISSION, (refused.code, refused.remark)
            assert "aclRequireTls=true" in (refused.remark or ""), refused.remark
        # A route read is open to anyone, over plaintext too: nothing signed crosses the wire.
        unsigned = SyncRemotingClient()
        try:
            lookup = create_request(RC.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(TOPIC))
            assert unsigned.invoke(acl.namesrv_addr, lookup).ok
        finally:
            unsigned.close()
    finally:
        plaintext.close()


def test_the_same_request_over_tls_is_taken_once(acl):
    request = create_request(RC.GET_BROKER_CONFIG)
    RequestSigner(ADMIN)(request)
    assert acl.anonymous.invoke(acl.broker_addr, request).ok  # the anonymous client is a TLS one
    again = acl.anonymous.invoke(acl.broker_addr, request)
    assert again.code == ResponseCode.NO_PERMISSION and "seen before" in (again.remark or "")


def test_the_sdk_works_over_tls(acl, certs):
    sdk_round_trip(acl.namesrv_addr, USER, tls=certs.client_tls())


def test_mqadmin_works_over_tls(acl, certs, capsys):
    keys = ["--access-key", ADMIN.access_key, "--secret-key", ADMIN.secret_key]
    tls = ["--tls-trust-cert", certs.ca]
    common = ["-n", acl.namesrv_addr, *keys, *tls]
    assert mqadmin(["updateTopic", *common, "-b", acl.broker_addr, "-t", "TlsAdminTopic"]) == 0
    assert mqadmin(["topicList", *common]) == 0
    assert mqadmin(["brokerStatus", *common, "-b", acl.broker_addr]) == 0
    out = capsys.readouterr().out
    assert TOPIC in out and "brokerVersionDesc" in out
    # Without TLS its signed requests are refused, with the reason.
    assert mqadmin(["brokerStatus", "-n", acl.namesrv_addr, *keys, "-b", acl.broker_addr]) != 0
    assert "aclRequireTls=true" in capsys.readouterr().err


def test_a_plaintext_request_refused_cannot_be_resent_over_tls(acl):
    """Before (#7): the victim's plaintext request was refused, but its nonce was not recorded, so
    the sniffer resent the same frame over TLS and it answered SUCCESS."""
    request = create_request(RC.GET_BROKER_CONFIG)
    RequestSigner(ADMIN)(request)
    plaintext = SyncRemotingClient()  # writes the frame as it is, over plaintext
    try:
        refused = plaintext.invoke(acl.broker_addr, request)
    finally:
        plaintext.close()
    assert refused.code == ResponseCode.NO_PERMISSION and "aclRequireTls=true" in (refused.remark or "")
    again = acl.anonymous.invoke(acl.broker_addr, request)  # over TLS
    assert again.code == ResponseCode.NO_PERMISSION and "seen before" in (again.remark or ""), again.remark
