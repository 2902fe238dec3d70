"""Replayed and altered signed requests: what a server checks beyond RocketMQ's signature.

RocketMQ's signature covers a request's ext fields and body, not its code nor any time: a captured
request can be sent again, as it is or under another code (a create-topic resent as DELETE_TOPIC).
The project's clients sign three more fields (``broker.common.acl_signature``: the request code, a
timestamp, a nonce), which a server checks once the signature matched:

- always: a request carrying ``AclRequestCode`` must have that code (an Apache client never sends
  the field, so this costs it nothing; one of ours cannot be re-coded even with protection off);
- with ``aclReplayProtection=true``: the three fields are required, the timestamp must lie within
  ``aclReplayWindowSeconds`` of the server's clock (either way: clocks differ) and the nonce must not
  have been seen within the window. Apache's clients cannot send the fields, so they are refused.

The nonces are remembered in a bounded cache. When it is full the oldest nonce is forgotten and
every request timestamped at or before it is refused from then on: a flood of valid requests
narrows the window (genuine requests with a lagging clock are refused) but never lets a replay in.
For the same reason a server refuses requests signed before it started (a restart forgets every
nonce). Each server process has its own cache: a request captured on its way to one server can be
sent, once, to another server that knows the same account, within the window.

``aclRequireTls=true`` refuses signed requests over plaintext (a permissive port takes both): a
client that would expose its signed requests to a sniffer is told so, at its first request.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.common.acl_signature import REPLAY_FIELDS, REQUEST_CODE, REQUEST_NONCE, REQUEST_TIMESTAMP
from broker.common.conf_file import get_bool, get_int

from .plain_config import AclConfigError

REPLAY_PROTECTION_KEY = "aclReplayProtection"
REPLAY_WINDOW_KEY = "aclReplayWindowSeconds"
REQUIRE_TLS_KEY = "aclRequireTls"
DEFAULT_WINDOW_S = 120
MIN_WINDOW_S, MAX_WINDOW_S = 5, 3600
# About 250 bytes a nonce: 100,000 hold ~25 MB. A server taking more signed requests per window
# than this narrows its window (see the module) rather than growing.
NONCE_CAPACITY = 100_000
MAX_NONCE_LENGTH = 64  # ours are 24 characters; longer is not a client of ours
MAX_TIMESTAMP_DIGITS = 15


@dataclass(frozen=True, slots=True)
class SignedRequestPolicy:
    """A server's settings for signed requests (the keys above; all off by default)."""

    replay_protection: bool = False
    window_s: int = DEFAULT_WINDOW_S
    require_tls: bool = False

    @classmethod
    def from_conf(cls, conf: Mapping[str, str]) -> SignedRequestPolicy:
        """From namesrv.conf or controller.conf (the broker's come through its config schema)."""
        values = dict(conf)
        return cls(
            get_bool(values, REPLAY_PROTECTION_KEY, False),
            get_int(values, REPLAY_WINDOW_KEY, DEFAULT_WINDOW_S),
            get_bool(values, REQUIRE_TLS_KEY, False),
        ).checked(get_bool(values, "aclEnable", False), values.get("tls.server.mode", "disabled"))

    def checked(self, acl_enable: bool, tls_server_mode: str) -> SignedRequestPolicy:
        """Raise ``AclConfigError`` for settings that would protect nothing or refuse everything."""
        if not MIN_WINDOW_S <= self.window_s <= MAX_WINDOW_S:
            bounds = f"{MIN_WINDOW_S} to {MAX_WINDOW_S}"
            raise AclConfigError(f"{REPLAY_WINDOW_KEY}={self.window_s} must be {bounds}")
        for key, on in ((REPLAY_PROTECTION_KEY, self.replay_protection), (REQUIRE_TLS_KEY, self.require_tls)):
            if on and not acl_enable:
                raise AclConfigError(f"{key}=true needs aclEnable=true (it checks signed requests)")
        if self.require_tls and tls_server_mode not in ("permissive", "enforcing"):
            raise AclConfigError(
                f"{REQUIRE_TLS_KEY}=true needs tls.server.mode permissive or enforcing "
                f"(it is {tls_server_mode or 'disabled'}: every signed request would be refused)"
            )
        return self


class NonceCache:
    """The nonces of the accepted requests of the last window, at most ``capacity`` of them."""

    def __init__(self, capacity: int = NONCE_CAPACITY) -> None:
        self.capacity = capacity
        self._seen: dict[str, int] = {}
        self._by_time: list[tuple[int, str]] = []  # a heap: the oldest timestamp first
        # Requests timestamped at or before this are refused: their nonce may have been forgotten.
        self.floor_ms = -1

    def __len__(self) -> int:
        return len(self._seen)

    def admit(self, nonce: str, timestamp_ms: int, oldest_ms: int) -> str | None:
        """Remember ``nonce``; the reason for a refusal instead when it was seen or may have been.
        ``oldest_ms``: the window's start, before which nothing needs remembering."""
        heap = self._by_time
        while heap and heap[0][0] < oldest_ms:
            del self._seen[heapq.heappop(heap)[1]]
        if nonce in self._seen:
            return f"{REQUEST_NONCE} seen before within the replay window: a signed request is accepted once"
        full = len(self._seen) >= self.capacity
        # Full, a request older than every remembered one would be the one to forget: refused
        # without forgetting anything (a refused request must not narrow the window).
        if timestamp_ms <= self.floor_ms or (full and heap and timestamp_ms <= heap[0][0]):
            return (
                f"{REQUEST_TIMESTAMP} is older than the oldest request this server remembers "
                "(it restarted since, or its nonce cache is full): send the request again"
            )
        if full and heap:
            forgotten_ms, forgotten = heapq.heappop(heap)
            del self._seen[forgotten]
            self.floor_ms = max(self.floor_ms, forgotten_ms)
        self._seen[nonce] = timestamp_ms
        heapq.heappush(heap, (timestamp_ms, nonce))
        return None


class ReplayGuard:
    """The checks of the module for one server: ``problem`` says why a signed request whose
    signature matched may still not run, or None."""

    def __init__(
        self,
        policy: SignedRequestPolicy,
        capacity: int = NONCE_CAPACITY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.policy = policy
        self.nonces = NonceCache(capacity)
        # A new process remembers no nonce: a request signed before it started could be one it
        # already took before a restart, so it is refused (a client retries with a new one).
        self.nonces.floor_ms = int(clock() * 1000)
        self._clock = clock

    def problem(self, fields: Mapping[str, str], code: int) -> str | None:
        signed_code = fields.get(REQUEST_CODE)
        if signed_code is not None and signed_code != str(code):
            signed = signed_code[:16]
            return f"the request was signed for request code {signed!r}, not {code} ({REQUEST_CODE})"
        if not self.policy.replay_protection:
            return None
        missing = [name for name in REPLAY_FIELDS if not fields.get(name)]
        if missing:
            return (
                f"signed request code {code} lacks {', '.join(missing)}: this server refuses requests "
                f"that could be replays ({REPLAY_PROTECTION_KEY}=true), and RocketMQ's own clients "
                "cannot send these fields"
            )
        return self._fresh(fields[REQUEST_TIMESTAMP], fields[REQUEST_NONCE])

    def _fresh(self, stamp: str, nonce: str) -> str | None:
        if not stamp.isascii() or not stamp.isdigit() or len(stamp) > MAX_TIMESTAMP_DIGITS:
            return f"{REQUEST_TIMESTAMP}={stamp[:20]!r} is not milliseconds since the epoch"
        if len(nonce) > MAX_NONCE_LENGTH:
            return f"{REQUEST_NONCE} is longer than {MAX_NONCE_LENGTH} characters"
        now_ms = int(self._clock() * 1000)
        window_ms = self.policy.window_s * 1000
        timestamp_ms = int(stamp)
        if abs(now_ms - timestamp_ms) > window_ms:
            return (
                f"{REQUEST_TIMESTAMP} is {abs(now_ms - timestamp_ms) // 1000} s from this server's clock, "
                f"outside the replay window of {self.policy.window_s} s ({REPLAY_WINDOW_KEY}): "
                "a replay, or a client whose clock is wrong"
            )
        return self.nonces.admit(nonce, timestamp_ms, now_ms - window_ms)


NO_REPLAY_PROTECTION = ReplayGuard(SignedRequestPolicy(), capacity=0)
