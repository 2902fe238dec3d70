"""The attacks on the replay protection (issue 31, section 4, second round), against a real broker
and name server with ``aclReplayProtection=true``.

RocketMQ's classic ``Signature`` covers the ext fields' values joined without names or separators:
a signed string can be re-split into other fields whose names sort the same way and the signature
still matches. Before the fix that gave a fresh nonce carved from the signed one (a replay taken
as new), another request code (GET_BROKER_CONFIG resent as GET_BROKER_CLUSTER_ACL_CONFIG) and
another body, each answered SUCCESS. The project's clients now also send ``AclSignatureV2``, over
an unambiguous encoding (names, lengths, code, version, body), which these servers require.

Also here: a nonce cache flooded by one account with timestamps far ahead refused every account's
genuine requests afterwards (before: 104,000 requests of a non-admin account, stamped 115 s ahead);
and a ``_UNIQUE_KEY_QUERY`` added to a signed request at version 0 was accepted.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from broker.common.acl_signature import (
    REQUEST_CODE,
    REQUEST_NONCE,
    RequestSigner,
    SessionCredentials,
    stamp_fields,
)
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.request_headers.send import SendMessageRequestHeader
from broker.common.topic_config import AUTO_CREATE_TOPIC_KEY_TOPIC
from broker.remoting.command import RemotingCommand, create_request

from .acl_cluster import (
    ADMIN,
    PRODUCER_GROUP,
    TOPIC,
    USER,
    protected_cluster_fixture,
    signed_request,
    start_acl_cluster,
)

NONCE_ROOM = 1000
FUTURE_SKEW_S = 5
PROTECTION = {
    "aclReplayProtection": "true",
    "aclReplayWindowSeconds": 60,
    "aclReplayFutureSkewSeconds": FUTURE_SKEW_S,
    "aclReplayNoncesPerAccount": NONCE_ROOM,
}
NO_PERMISSION = ResponseCode.NO_PERMISSION


acl = protected_cluster_fixture("acl-attacks", PROTECTION)


captured = signed_request


def resent(request: RemotingCommand, code: int | None = None, body: bytes | None = None, /, **fields: str):
    """``request`` as an attacker rewrites it: ext fields changed or added, code and body changed
    (positional: every keyword is an ext field)."""
    return dataclasses.replace(
        request,
        code=request.code if code is None else code,
        ext_fields={**(request.ext_fields or {}), **fields},
        body=request.body if body is None else body,
    )


def carved_nonce(request: RemotingCommand) -> dict[str, str]:
    """A new nonce under the same classic signature: its last character moved to a field whose
    name sorts right after ``AclNonce``."""
    nonce = (request.ext_fields or {})[REQUEST_NONCE]
    return {REQUEST_NONCE: nonce[:-1], REQUEST_NONCE + "Z": nonce[-1:]}


def _refused(response: RemotingCommand, phrase: str) -> None:
    assert response.code == NO_PERMISSION, (response.code, response.remark)
    assert phrase in (response.remark or ""), response.remark


def test_a_nonce_carved_into_an_added_field_is_not_a_new_request(acl):
    """Before (#2): the resend with the carved nonce answered SUCCESS (the topic was deleted)."""
    acl.create_topic("CarveVictim-tmp")
    delete = captured(RC.DELETE_TOPIC_IN_BROKER, {"topic": "CarveVictim-tmp"})
    assert acl.anonymous.invoke(acl.broker_addr, delete).ok
    acl.create_topic("CarveVictim")
    # The same signed string re-split: topic "CarveVictim" + topicA "-tmp".
    again = resent(delete, **carved_nonce(delete), topic="CarveVictim", topicA="-tmp")
    _refused(acl.anonymous.invoke(acl.broker_addr, again), "AclSignatureV2")
    assert b"CarveVictim" in acl.request(acl.admin, RC.GET_ALL_TOPIC_CONFIG).body


def _code_carvable() -> tuple[RemotingCommand, int]:
    """A signed GET_BROKER_CONFIG (26) whose nonce holds "54" at ``j``: the content's
    ``nonce + "26"`` re-splits as AclNonce=nonce[:j], AclRequestCode="54", AclRequestCodeZ=rest."""
    while True:
        request = captured(RC.GET_BROKER_CONFIG)
        j = (request.ext_fields or {})[REQUEST_NONCE].find("54", 1)  # a nonce is never empty
        if j >= 0:
            return request, j


def test_a_request_code_carved_from_the_signed_fields_is_refused(acl):
    """Before (#3): GET_BROKER_CONFIG resent as GET_BROKER_CLUSTER_ACL_CONFIG returned every secret."""
    request, j = _code_carvable()
    region = (request.ext_fields or {})[REQUEST_NONCE] + (request.ext_fields or {})[REQUEST_CODE]
    fields = {REQUEST_NONCE: region[:j], REQUEST_NONCE + "Z": "", REQUEST_CODE: "54"}
    fields[REQUEST_CODE + "Z"] = region[j + 2 :]
    answer = acl.anonymous.invoke(
        acl.broker_addr, resent(request, RC.GET_BROKER_CLUSTER_ACL_CONFIG, **fields)
    )
    _refused(answer, "AclSignatureV2")
    assert not answer.body or USER.secret_key.encode() not in answer.body


def test_an_altered_body_under_the_same_signature_is_refused(acl):
    """Before (#5): the body "PAY 1000 EUR to bob" resent as "000 EUR to bob" with a field
    zzz="PAY 1" (sorted last, just before the body) answered SEND_OK."""
    header = SendMessageRequestHeader(
        producer_group=PRODUCER_GROUP,
        topic=TOPIC,
        default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC,
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=0,
        born_timestamp=int(time.time() * 1000),
        flag=0,
    )
    send = captured(RC.SEND_MESSAGE, header, b"PAY 1000 EUR to bob", USER)
    assert acl.anonymous.invoke(acl.broker_addr, send).ok
    again = resent(send, None, b"000 EUR to bob", **carved_nonce(send), zzz="PAY 1")
    _refused(acl.anonymous.invoke(acl.broker_addr, again), "AclSignatureV2")


def test_a_nonce_in_another_format_is_refused(acl):
    """Our clients send 24 lowercase hex digits; anything else is not a request of theirs, even
    signed by a holder of the keys (before: 1 to 64 characters of anything were taken)."""
    for odd in ("a" * 23, "A" * 24, "a" * 25, "é" * 24, "x"):
        request = stamped(ADMIN, 0, nonce=odd)
        _refused(acl.anonymous.invoke(acl.broker_addr, request), "lowercase hex")


def test_an_unsigned_unique_key_flag_is_refused(acl):
    """Before (#15): ``_UNIQUE_KEY_QUERY`` added at version 0 was left out of the check."""
    request = create_request(RC.GET_BROKER_CONFIG)
    request = dataclasses.replace(request, version=0)
    RequestSigner(ADMIN)(request)  # signed at version 0, as an old client; the flag added after
    flagged = resent(request, _UNIQUE_KEY_QUERY="true")
    _refused(acl.anonymous.invoke(acl.broker_addr, flagged), "AclSignatureV2")


def stamped(credentials: SessionCredentials, ahead_s: float, nonce: str | None = None) -> RemotingCommand:
    """A request signed by a holder of ``credentials`` whose clock is ``ahead_s`` ahead (a read
    any signed account may make)."""
    request = create_request(RC.GET_BROKER_RUNTIME_INFO)
    request.ext_fields = {}
    stamp_fields(request.ext_fields, request.code, int((time.time() + ahead_s) * 1000))
    if nonce is not None:
        request.ext_fields[REQUEST_NONCE] = nonce
    RequestSigner(credentials).sign_stamped(request)
    return request


def test_a_timestamp_beyond_the_future_skew_is_refused(acl):
    """Before (#8): a request stamped 115 s ahead was taken (and pushed every account's floor)."""
    request = stamped(USER, FUTURE_SKEW_S + 30)
    _refused(acl.anonymous.invoke(acl.broker_addr, request), "ahead of this server's clock")
    assert acl.anonymous.invoke(acl.broker_addr, stamped(USER, 0)).ok


def test_one_accounts_flood_leaves_the_other_accounts_alone(acl):
    """Before (#8): one account's flood filled the one nonce cache, and every account's genuine
    requests were refused afterwards. Now each account has its own room."""
    taken = 0
    for _ in range(NONCE_ROOM + 50):
        taken += acl.anonymous.invoke(acl.broker_addr, stamped(USER, FUTURE_SKEW_S - 1)).ok
    assert taken == NONCE_ROOM + 50  # stamped as far ahead as is taken
    genuine = acl.request(acl.admin, RC.GET_BROKER_CONFIG)
    assert genuine.ok, genuine.remark
    # The flooding account's own genuine requests wait out the skew it bought (at most that long).
    _refused(acl.request(acl.user, RC.GET_BROKER_CONFIG), "older than the oldest request")


@pytest.fixture(scope="module")
def unprotected(tmp_path_factory):
    """ACL on, ``aclReplayProtection`` off (the default): Apache clients welcome."""
    running = start_acl_cluster(tmp_path_factory.mktemp("acl-unprotected"))
    try:
        yield running
    finally:
        running.stop()


def _stripped_and_folded(request: RemotingCommand) -> dict[str, str]:
    """#4: our fields removed, their text moved into an added field whose name sorts where theirs
    did (after AccessKey, before AclNonce), so the classic content is unchanged: an Apache-style
    request under the same signature."""
    fields = dict(request.ext_fields or {})
    v2 = fields.pop("AclSignatureV2")
    fields["AccessKeyZ"] = (
        fields.pop(REQUEST_NONCE) + fields.pop(REQUEST_CODE) + v2 + fields.pop("AclTimestamp")
    )
    return fields


def test_with_protection_off_our_requests_are_checked_while_they_keep_our_fields(unprotected):
    """Before (#3/#5 with protection off): a code carved from the signed fields was taken."""
    request, j = _code_carvable()
    region = (request.ext_fields or {})[REQUEST_NONCE] + (request.ext_fields or {})[REQUEST_CODE]
    fields = {REQUEST_NONCE: region[:j], REQUEST_NONCE + "Z": "", REQUEST_CODE: "54"}
    fields[REQUEST_CODE + "Z"] = region[j + 2 :]
    recoded = resent(request, RC.GET_BROKER_CLUSTER_ACL_CONFIG, **fields)
    _refused(unprotected.anonymous.invoke(unprotected.broker_addr, recoded), "AclSignatureV2")


def test_stripping_our_fields_is_refused_only_with_protection_on(acl, unprotected):
    """What the README says of #4: stripped of our fields a request is an Apache-style one, whose
    signature does not cover the code. Protection on refuses it; off, it is taken (the limit)."""
    request = captured(RC.GET_BROKER_CONFIG)
    stripped = dataclasses.replace(request, ext_fields=_stripped_and_folded(request))
    _refused(acl.anonymous.invoke(acl.broker_addr, stripped), "lacks")
    assert unprotected.anonymous.invoke(unprotected.broker_addr, stripped).ok
