"""The request signature of RocketMQ's plain ACL, against vectors computed elsewhere.

The fixed vectors were computed with Node's crypto (HMAC-SHA1, Base64) over a hand-built content
string, as ali-ons computes them; the others with Python's hmac over a content string built here
by hand, not by the module under test.
"""

import base64
import hashlib
import hmac

import pytest

from broker.common.acl_signature import (
    ACCESS_KEY,
    REQUEST_CODE,
    REQUEST_NONCE,
    REQUEST_TIMESTAMP,
    SECURITY_TOKEN,
    SIGNATURE,
    SIGNATURE_V2,
    UNIQUE_MSG_QUERY_FLAG,
    RequestSigner,
    SessionCredentials,
    server_content,
    sign_fields,
    signature,
    signature_matches,
    signed_content,
    v2_content,
)
from broker.remoting.command import RemotingCommand

AK, SK = "compat-access-key", "compat-secret-key"


def _hmac(content: bytes, key: str) -> str:
    return base64.b64encode(hmac.new(key.encode(), content, hashlib.sha1).digest()).decode()


def test_fixed_vector_with_body():
    fields = {"topic": "TopicA", "producerGroup": "PID_G", "queueId": "0"}
    sign_fields(fields, b"hello", SessionCredentials(AK, SK))
    # Names in order: AccessKey, producerGroup, queueId, topic; then the body.
    assert fields[SIGNATURE] == "UPq2U+efyhlwTEBWDqrnPVFhZkc="
    assert fields[ACCESS_KEY] == AK


def test_fixed_vector_without_body():
    fields = {"topic": "TopicA", "producerGroup": "PID_G", "queueId": "0"}
    sign_fields(fields, b"", SessionCredentials(AK, SK))
    assert fields[SIGNATURE] == "ujJ57zD7OHbHhD1gnfIS+Cy8j3o="


def test_security_token_is_signed_and_sent():
    fields = {"b": "2", "a": "1"}
    sign_fields(fields, None, SessionCredentials("ak", "sk", security_token="tok"))
    # AccessKey < SecurityToken < a < b (upper case sorts first, as in Java's TreeMap)
    assert fields[SECURITY_TOKEN] == "tok"
    assert fields[SIGNATURE] == _hmac(b"aktok12", "sk")


def test_resigning_replaces_the_old_signature():
    fields = {"topic": "T"}
    creds = SessionCredentials("ak", "sk")
    sign_fields(fields, b"x", creds)
    first = fields[SIGNATURE]
    sign_fields(fields, b"x", creds)
    assert fields[SIGNATURE] == first == _hmac(b"akTx", "sk")


def test_server_content_covers_every_field_but_the_signature():
    fields = {"OnsChannel": "ALIYUN", "AccessKey": "ak", "Signature": "zzz", "topic": "T"}
    assert server_content(fields, b"B", 399) == b"akALIYUNTB"


def test_unique_key_flag_unsigned_only_for_old_clients():
    fields = {"AccessKey": "ak", UNIQUE_MSG_QUERY_FLAG: "true", "topic": "T"}
    assert server_content(fields, None, 275) == b"akT"  # 4.3.1 and older added it after signing
    assert server_content(fields, None, 399) == b"aktrueT"


def test_non_ascii_names_sort_by_utf16_code_unit():
    # U+FF21 (fullwidth A) is one UTF-16 unit above the surrogates of U+1F600: Java puts the
    # emoji first, code-point order would put it last.
    fields = {"\uff21": "1", "\U0001f600": "2"}
    assert signed_content(fields, None) == b"21"


def test_signature_is_hmac_sha1_base64():
    assert signature(b"content", "key") == _hmac(b"content", "key")
    assert signature_matches(_hmac(b"content", "key"), signature(b"content", "key"))
    assert not signature_matches("x", signature(b"content", "key"))


def test_request_signer_signs_a_command_in_place():
    cmd = RemotingCommand(code=10, ext_fields={"topic": "T"}, body=b"b")
    RequestSigner(SessionCredentials("ak", "sk"))(cmd)
    fields = cmd.ext_fields
    # The replay fields and AclSignatureV2 are signed too, in name order: AccessKey, AclNonce,
    # AclRequestCode, AclSignatureV2, AclTimestamp, then the header's own (lower-case) names.
    assert fields[REQUEST_CODE] == "10" and fields[REQUEST_TIMESTAMP].isdigit() and fields[REQUEST_NONCE]
    v2 = fields[SIGNATURE_V2]
    content = f"ak{fields[REQUEST_NONCE]}10{v2}{fields[REQUEST_TIMESTAMP]}Tb".encode()
    assert fields[SIGNATURE] == _hmac(content, "sk")
    # V2: HMAC-SHA256 over the length-prefixed encoding, which names every field but the two signatures.
    expected = hmac.new(b"sk", v2_content(fields, 10, cmd.version, b"b"), hashlib.sha256).digest()
    assert v2 == base64.b64encode(expected).decode()


def test_the_v2_content_cannot_be_re_split():
    """The classic content of {AclNonce: "ab", topic: "T"} equals that of {AclNonce: "a",
    AclNonceZ: "b", topic: "T"}; the V2 contents differ, as do those of another code or body split."""
    one = v2_content({"AclNonce": "ab", "topic": "T"}, 10, 1, b"xy")
    assert signed_content({"AclNonce": "ab", "topic": "T"}, b"xy") == signed_content(
        {"AclNonce": "a", "AclNonceZ": "b", "topic": "T"}, b"xy"
    )
    for other in (
        v2_content({"AclNonce": "a", "AclNonceZ": "b", "topic": "T"}, 10, 1, b"xy"),
        v2_content({"AclNonce": "ab", "topic": "Tx"}, 10, 1, b"y"),
        v2_content({"AclNonce": "ab", "topic": "T"}, 11, 1, b"xy"),
        v2_content({"AclNonce": "ab", "topic": "T"}, 10, 0, b"xy"),
    ):
        assert other != one


def test_request_signer_stamps_each_write_afresh():
    """A request written twice (a retry) carries a new nonce: the server must not take the retry
    for a replay of the first."""
    cmd = RemotingCommand(code=10, ext_fields={"topic": "T"}, body=b"b")
    signer = RequestSigner(SessionCredentials("ak", "sk"))
    signer(cmd)
    first = dict(cmd.ext_fields)
    signer(cmd)
    assert cmd.ext_fields[REQUEST_NONCE] != first[REQUEST_NONCE]
    assert cmd.ext_fields[SIGNATURE] != first[SIGNATURE]


def test_credentials_need_both_keys_and_hide_the_secret():
    with pytest.raises(ValueError):
        SessionCredentials("", "sk")
    with pytest.raises(ValueError):
        SessionCredentials("ak", "")
    assert "sk-secret" not in repr(SessionCredentials("ak", "sk-secret"))
