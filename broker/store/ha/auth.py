"""Signing in on the HA port: a slave proves it holds the broker set's secret before the master
streams it a byte or counts its acknowledgements (issue 31: a stranger confirming offset 2^62
made SYNC_MASTER sends answer SEND_OK that no slave had).

RocketMQ's HA port has no authentication; this is the project's own exchange, sent before the
classic report or the controller-mode handshake (``protocol``), and only by a slave that has a
secret (``HACredentials``):

1. slave → master ``HELLO``: magic, version, flags (0). 8 bytes, the size of a report, with the
   magic's top bit set: a master of an older build reads a negative offset and closes;
2. master → slave ``CHALLENGE``: magic, version, status (``OPEN``: no sign-in needed, go on;
   ``REQUIRED``), and 16 random bytes never used again;
3. (``REQUIRED`` only) slave → master ``SIGN_IN``: magic, version, the lengths of its access
   key and brokerName, its brokerId; the key, the name; then HMAC-SHA256 under its secret of a
   domain label, the challenge and everything before the MAC. A captured sign-in signs a
   challenge that never comes again, so it cannot be replayed; no clock is involved;
4. master → slave ``ANSWER``: magic, version, status (``OK`` or why not), then the stream.

The master looks the secret up by access key (``HAAuthPolicy.secret_of``: the ACL file's
account, or the single ``haAuthSecret``), and asks whether that brokerName/brokerId is a slave it
expects (``HAAuthPolicy.expects``). An unknown key and a wrong MAC get the same answer.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

HELLO_MAGIC = 0xE9A7A017
PROTOCOL_VERSION = 1
HELLO = struct.Struct(">IHH")  # magic, version, flags
CHALLENGE = struct.Struct(">IHH16s")  # magic, version, status, nonce
SIGN_IN = struct.Struct(">IHHHq")  # magic, version, key length, name length, brokerId
ANSWER = struct.Struct(">IHH")  # magic, version, status
MAC_SIZE = hashlib.sha256().digest_size
MAX_FIELD = 256  # an access key or a brokerName longer than this is no sign-in
_LABEL = b"pyrocket HA sign-in v1\x00"

# CHALLENGE status
OPEN = 0
REQUIRED = 1
# ANSWER status
OK = 0
REFUSED_SIGNATURE = 1  # unknown access key or wrong MAC (not told apart)
REFUSED_NOT_MEMBER = 2  # signed, but not a slave of this master's broker set
REFUSED_FULL = 3  # signed, but the master serves as many slaves as it takes (MAX_CONNECTIONS)

# The account a broker signs with when the secret is ``haAuthSecret`` (no ACL).
SHARED_SECRET_KEY = "haAuthSecret"


class HAAuthError(ValueError):
    """A sign-in that failed; the message says why, for the log and the runtime figures."""


@dataclass(frozen=True)
class HACredentials:
    """What a slave signs with: an access key and its secret, and who it says it is."""

    access_key: str
    secret_key: str = field(repr=False)
    broker_name: str
    broker_id: int


@dataclass(frozen=True)
class HAAuthPolicy:
    """A master's rules: ``secret_of(access_key)`` (None: no such account may replicate; itself
    None: the port is open, no sign-in asked) and ``expects(broker_name, broker_id)`` (None, or
    why that is not one of its slaves; brokerName None: not said — a controller-mode handshake's
    brokerId is asked about on an open port too)."""

    secret_of: Callable[[str], str | None] | None
    expects: Callable[[str | None, int], str | None]
    describe: str  # for the log: what signs ("the ACL account ...", "haAuthSecret", "nothing")

    @property
    def required(self) -> bool:
        return self.secret_of is not None


def new_challenge(required: bool) -> tuple[bytes, bytes]:
    """(the CHALLENGE frame, its nonce)."""
    nonce = secrets.token_bytes(16)
    return CHALLENGE.pack(HELLO_MAGIC, PROTOCOL_VERSION, REQUIRED if required else OPEN, nonce), nonce


def sign_in_frame(credentials: HACredentials, nonce: bytes) -> bytes:
    key, name = credentials.access_key.encode(), credentials.broker_name.encode()
    head = (
        SIGN_IN.pack(HELLO_MAGIC, PROTOCOL_VERSION, len(key), len(name), credentials.broker_id) + key + name
    )
    return head + _mac(credentials.secret_key, nonce, head)


def _mac(secret: str, nonce: bytes, signed: bytes) -> bytes:
    return hmac.new(secret.encode(), _LABEL + nonce + signed, hashlib.sha256).digest()


@dataclass(frozen=True)
class SignIn:
    access_key: str
    broker_name: str
    broker_id: int
    head: bytes  # the signed bytes
    mac: bytes


def parse_sign_in_head(data: bytes) -> tuple[int, int, int]:
    """(key length, name length, brokerId) of a SIGN_IN head; HAAuthError when it is none."""
    magic, version, key_len, name_len, broker_id = SIGN_IN.unpack(data)
    if magic != HELLO_MAGIC or version != PROTOCOL_VERSION:
        raise HAAuthError(f"no sign-in (magic {magic:#x}, version {version})")
    if not (0 < key_len <= MAX_FIELD and 0 < name_len <= MAX_FIELD and broker_id >= 0):
        raise HAAuthError(
            f"sign-in out of range: key {key_len} bytes, name {name_len} bytes, brokerId {broker_id}"
        )
    return key_len, name_len, broker_id


def parse_sign_in(head: bytes, rest: bytes, key_len: int) -> SignIn:
    """The whole SIGN_IN (``rest``: key, name, MAC); HAAuthError when its text is not text."""
    try:
        key, name = rest[:key_len].decode(), rest[key_len:-MAC_SIZE].decode()
    except UnicodeDecodeError:
        raise HAAuthError("sign-in with an access key or brokerName that is not UTF-8") from None
    _, _, _, _, broker_id = SIGN_IN.unpack(head)
    return SignIn(key, name, broker_id, head + rest[:-MAC_SIZE], rest[-MAC_SIZE:])


async def read_sign_in(read: Callable[[int, str], Awaitable[bytes]]) -> SignIn:
    """A SIGN_IN read with ``read(size, what)``; HAAuthError when it is none."""
    head = await read(SIGN_IN.size, "sign-in")
    key_len, name_len, _ = parse_sign_in_head(head)
    return parse_sign_in(head, await read(key_len + name_len + MAC_SIZE, "sign-in"), key_len)


def refused_why(policy: HAAuthPolicy, sign_in: SignIn, status: int) -> str:
    """The master's log line for a refused sign-in."""
    why = policy.expects(sign_in.broker_name, sign_in.broker_id) if status == REFUSED_NOT_MEMBER else None
    return (
        f"HA sign-in refused for account {sign_in.access_key!r}, brokerName {sign_in.broker_name!r}, "
        f"brokerId {sign_in.broker_id}: {why or 'unknown account or wrong signature'}"
    )


def verify(policy: HAAuthPolicy, sign_in: SignIn, nonce: bytes) -> int:
    """The ANSWER status for ``sign_in`` under ``policy``."""
    secret = policy.secret_of(sign_in.access_key) if policy.secret_of is not None else None
    # The MAC is computed even for an unknown key, so both refusals take the same time.
    expected = _mac(secret if secret is not None else secrets.token_hex(16), nonce, sign_in.head)
    if secret is None or not hmac.compare_digest(expected, sign_in.mac):
        return REFUSED_SIGNATURE
    if policy.expects(sign_in.broker_name, sign_in.broker_id) is not None:
        return REFUSED_NOT_MEMBER
    return OK


def answer_frame(status: int) -> bytes:
    return ANSWER.pack(HELLO_MAGIC, PROTOCOL_VERSION, status)


def refusal_text(status: int) -> str:
    """The slave's reading of a refusal."""
    if status == REFUSED_SIGNATURE:
        return (
            "the master refused this slave's HA sign-in: unknown account or wrong secret (both must "
            "have the same haAuthSecret, or with ACL on the master this broker's "
            "innerAccessKey/innerSecretKey must be an admin account of the master's plain_acl.yml)"
        )
    if status == REFUSED_NOT_MEMBER:
        return (
            "the master refused this slave's HA sign-in: it is not a slave of the master's broker set "
            "(brokerName and brokerId)"
        )
    if status == REFUSED_FULL:
        return (
            "the master refused this slave's HA sign-in: it already serves as many HA connections as "
            "it takes (MAX_CONNECTIONS); it takes this slave when one of them leaves"
        )
    return f"the master answered the HA sign-in with status {status}"
