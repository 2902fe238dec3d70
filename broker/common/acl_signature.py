"""Request signatures of RocketMQ's plain ACL: the one home of what is signed and how.

A signing client (RocketMQ's ``AclClientRPCHook``, ali-ons, this SDK) puts its access key (and
security token, if it has one) into the request's ``extFields``, then signs the *content*: the
values of every ext field, in the order of their names, joined without separators, followed by
the body's bytes. The signature is HMAC-SHA1 of the content keyed with the secret key, in
standard Base64, sent as the ``Signature`` ext field.

The server recomputes the content from what arrived: every ext field except ``Signature`` (and,
for clients older than RocketMQ 4.3.1, ``_UNIQUE_KEY_QUERY``, which those clients added after
signing), so any field a client adds before signing (ali-ons' ``OnsChannel``) is covered.

The project's own clients (``RequestSigner``) add three ext fields before signing, so the signature
covers them too: ``AclRequestCode`` (the request code, which RocketMQ leaves out of the content, so a
captured request could be replayed under another code), ``AclTimestamp`` (milliseconds since the
epoch) and ``AclNonce`` (random, never reused). RocketMQ's servers ignore ext fields their headers do
not name, and sign over every field present, so Apache servers still verify these requests; the
project's servers check the fields (``broker.acl.replay``). Apache's clients cannot send
them: their requests stay open to replay, which is what ``aclReplayProtection`` refuses.

The classic content is ambiguous: values joined without names or lengths can be re-split into
other fields (a nonce's tail moved into an added field ``AclNonceZ`` is a new nonce under the same
signature; so is a code or a body carved from a neighbouring value). So the project's clients sign
a second time, ``AclSignatureV2``: HMAC-SHA256 over an encoding that cannot be re-split (``v2_content``:
every ext field's name and value, length-prefixed and sorted by name, the request code and version,
the body's length and bytes). It is added before the classic signature is computed, so an Apache
server, which signs over every field present, still verifies the request; the project's servers
require it of every request carrying the replay fields, and of all with ``aclReplayProtection``.

Names are sorted as Java's ``TreeMap`` sorts strings, by UTF-16 code unit; for the ASCII names
every header uses that is Python's own order, so the code-unit key is used only when a name is not
ASCII.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE_V2 = "AclSignatureV2"
# The replay fields (see the module): capitalised like AccessKey and Signature, and prefixed, so that
# no RocketMQ request header's field (camelCase) can have their names.
REQUEST_CODE = "AclRequestCode"
REQUEST_TIMESTAMP = "AclTimestamp"
REQUEST_NONCE = "AclNonce"
REPLAY_FIELDS = (REQUEST_CODE, REQUEST_TIMESTAMP, REQUEST_NONCE)
# Any of these marks a request of the project's clients, whose AclSignatureV2 is then required.
OUR_FIELDS = (*REPLAY_FIELDS, SIGNATURE_V2)
NONCE_BYTES = 12  # 96 random bits: no two requests of any client share one in practice
# Added by RocketMQ clients before 4.3.1 to a QUERY_MESSAGE after the signature was computed.
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
# MQVersion.Version.V4_3_1.ordinal(): requests of this version or older leave the flag unsigned.
VERSION_4_3_1 = 275


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """An ACL account's keys as a client holds them (RocketMQ's ``SessionCredentials``)."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("credentials need both an access key and a secret key")

    def __repr__(self) -> str:  # never print the secret
        return f"SessionCredentials(access_key={self.access_key!r}, secret_key='***')"


def _sorted_names(names) -> list[str]:
    names = list(names)
    if "".join(names).isascii():
        return sorted(names)
    return sorted(names, key=lambda name: name.encode("utf-16-be"))


def signed_content(fields: Mapping[str, str], body: bytes | None) -> bytes:
    """The bytes a signature covers: ``fields``' values in name order (``Signature`` left out),
    then ``body``."""
    text = "".join(fields[name] for name in _sorted_names(fields) if name != SIGNATURE)
    content = text.encode("utf-8")
    return content + body if body else content


def server_content(fields: Mapping[str, str], body: bytes | None, version: int) -> bytes:
    """The content as the server recomputes it from a request that arrived (PlainAccessValidator's
    parse): every ext field but ``Signature``, and ``_UNIQUE_KEY_QUERY`` for pre-4.3.1 clients."""
    if version <= VERSION_4_3_1 and UNIQUE_MSG_QUERY_FLAG in fields:
        fields = {k: v for k, v in fields.items() if k != UNIQUE_MSG_QUERY_FLAG}
    return signed_content(fields, body)


_V2_TAG = b"pyrocket-acl-v2\0"  # so that no other content of this key can equal a V2 content


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a field from a socket may hold a lone surrogate


def v2_content(fields: Mapping[str, str], code: int, version: int, body: bytes | None) -> bytes:
    """The bytes ``AclSignatureV2`` covers: every ext field but the two signatures, each name and
    value prefixed by its length (sorted by name), the request code and version, the body's
    length and bytes. No two different requests share an encoding."""
    names = sorted(name for name in fields if name not in (SIGNATURE, SIGNATURE_V2))
    # Decimal text ended by NUL: a code or version from a socket may be any integer.
    parts = [_V2_TAG, b"%d\0%d\0" % (code, version), struct.pack(">I", len(names))]
    for name in names:
        for text in (_utf8(name), _utf8(fields[name])):
            parts.append(struct.pack(">I", len(text)))
            parts.append(text)
    body = body or b""
    parts.append(struct.pack(">Q", len(body)))
    parts.append(body)
    return b"".join(parts)


class SigningKey:
    """A secret key made ready to sign: the keyed HMAC states are computed once and copied per
    signature (setting a key up costs 4-5 times what signing a short request does)."""

    __slots__ = ("_keyed", "_keyed_v2")

    def __init__(self, secret_key: str) -> None:
        self._keyed = hmac.new(secret_key.encode("utf-8"), digestmod=hashlib.sha1)
        self._keyed_v2 = hmac.new(secret_key.encode("utf-8"), digestmod=hashlib.sha256)

    def sign(self, content: bytes) -> str:
        """HMAC-SHA1 of ``content``, standard Base64 (AclUtils.calSignature)."""
        mac = self._keyed.copy()
        mac.update(content)
        return base64.b64encode(mac.digest()).decode("ascii")

    def sign_v2(self, content: bytes) -> str:
        """HMAC-SHA256 of a ``v2_content``, standard Base64."""
        mac = self._keyed_v2.copy()
        mac.update(content)
        return base64.b64encode(mac.digest()).decode("ascii")


def signature(content: bytes, secret_key: str) -> str:
    """HMAC-SHA1 of ``content`` with ``secret_key``, standard Base64 (AclUtils.calSignature)."""
    return SigningKey(secret_key).sign(content)


def sign_fields(
    fields: dict[str, str],
    body: bytes | None,
    credentials: SessionCredentials,
    key: SigningKey | None = None,
) -> None:
    """Sign a request's ext fields in place, as AclClientRPCHook.doBeforeRequest does: add the
    access key (and token), then the signature over all of them and the body. ``key``: the
    credentials' secret made ready (``SigningKey``), for a signer that signs many requests."""
    fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        fields[SECURITY_TOKEN] = credentials.security_token
    fields.pop(SIGNATURE, None)
    content = signed_content(fields, body)
    fields[SIGNATURE] = (key or SigningKey(credentials.secret_key)).sign(content)


def signature_matches(expected: str, given: str) -> bool:
    """Constant-time comparison, so the time of a refusal tells nothing of the right signature."""
    return hmac.compare_digest(_utf8(expected), _utf8(given))


class RequestSigner:
    """Signs each request a client writes (the remoting connection calls it just before
    encoding), as RocketMQ's ``AclClientRPCHook`` does. A client without credentials has none, so
    an unsigned client pays nothing for it."""

    __slots__ = ("credentials", "key")

    def __init__(self, credentials: SessionCredentials) -> None:
        self.credentials = credentials
        self.key = SigningKey(credentials.secret_key)

    def __call__(self, request) -> None:
        # ``request`` is a RemotingCommand (duck-typed: broker.common does not import remoting).
        if request.ext_fields is None:
            request.ext_fields = {}
        stamp_fields(request.ext_fields, request.code)
        self.sign_stamped(request)

    def sign_stamped(self, request) -> None:
        """Sign a request whose replay fields are in place: ``AclSignatureV2`` first, so that the
        classic signature (which an Apache server checks over every field) covers it too."""
        fields = request.ext_fields
        fields[ACCESS_KEY] = self.credentials.access_key
        if self.credentials.security_token is not None:
            fields[SECURITY_TOKEN] = self.credentials.security_token
        fields.pop(SIGNATURE, None)
        fields.pop(SIGNATURE_V2, None)
        fields[SIGNATURE_V2] = self.key.sign_v2(
            v2_content(fields, request.code, request.version, request.body)
        )
        sign_fields(fields, request.body, self.credentials, self.key)


def stamp_fields(fields: dict[str, str], code: int, now_ms: int | None = None) -> None:
    """Add the replay fields to a request about to be signed: a fresh timestamp and nonce each
    time, so a request written again (a retry) is a new request, never a replay of the first."""
    fields[REQUEST_CODE] = str(code)
    fields[REQUEST_TIMESTAMP] = str(time.time_ns() // 1_000_000 if now_ms is None else now_ms)
    fields[REQUEST_NONCE] = os.urandom(NONCE_BYTES).hex()  # the system's CSPRNG, as secrets uses
