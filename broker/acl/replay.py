"""Replayed and altered signed requests: what a server checks beyond RocketMQ's signature.

RocketMQ's signature covers a request's ext fields' values (joined without names or lengths, so
they can be re-split) and body, not its code nor any time: a captured request can be sent again,
as it is, under another code, or with values carved into other fields. The project's clients sign
three more fields (``broker.common.acl_signature``: the request code, a timestamp, a nonce) and a
second, unambiguous signature, ``AclSignatureV2``, which the validator checks first. Then, here:

- always: a request carrying ``AclRequestCode`` must have that code (an Apache client never sends
  the field, so this costs it nothing). With protection off an attacker can strip the project's
  fields, and the request is then an Apache-style one, whose signature does not cover the code;
- with ``aclReplayProtection=true``: the three fields are required, in exactly the form the
  project's clients write them (24 lowercase hex digits of nonce, 1 to 15 decimal digits of
  milliseconds), the timestamp must be at most ``aclReplayWindowSeconds`` behind the server's
  clock and at most ``aclReplayFutureSkewSeconds`` ahead of it, and the nonce must not have been
  seen within the window. Apache's clients cannot send the fields, so they are refused.

The nonces are remembered per account (an account's requests are the only ones that can replay
its signature), in a bounded cache each: ``aclReplayNoncesPerAccount``; the accounts are the
admin's plain_acl.yml's, so the total is bounded too. When an account's cache is full its oldest
nonce is forgotten and every request of that account timestamped at or before it is refused from
then on: a flood narrows that account's window (its genuine requests with a lagging clock are
refused), never another account's, and never lets a replay in. A flood stamped ahead of the clock
pushes the account's floor ahead by at most the future skew. A server refuses requests signed
before it started (a restart forgets every nonce). Each server process has its own caches: a
request captured on its way to one server can be sent, once, to another server that knows the same
account, within the window.

``aclRequireTls=true`` refuses signed requests over plaintext (a permissive port takes both): a
client that would expose its signed requests to a sniffer is told so, at its first request. The
request's nonce is recorded first (the validator checks it before refusing), so the same frame
cannot then be resent over TLS.
"""

from __future__ import annotations

import heapq
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.common.acl_signature import (
    NONCE_BYTES,
    REPLAY_FIELDS,
    REQUEST_CODE,
    REQUEST_NONCE,
    REQUEST_TIMESTAMP,
)
from broker.common.conf_file import get_bool, get_int, read_keys

from .plain_config import AclConfigError

REPLAY_PROTECTION_KEY = "aclReplayProtection"
REPLAY_WINDOW_KEY = "aclReplayWindowSeconds"
REQUIRE_TLS_KEY = "aclRequireTls"
FUTURE_SKEW_KEY = "aclReplayFutureSkewSeconds"
NONCES_PER_ACCOUNT_KEY = "aclReplayNoncesPerAccount"
DEFAULT_WINDOW_S = 120
MIN_WINDOW_S, MAX_WINDOW_S = 5, 3600
# How far ahead of the server's clock a request may be stamped: NTP keeps clocks within
# milliseconds; more skew lets a flood push its account's floor further ahead (see the module).
DEFAULT_FUTURE_SKEW_S = 15
MIN_FUTURE_SKEW_S = 1
# About 250 bytes a nonce: 100,000 hold ~25 MB per account that sends that many. An account sending
# more signed requests per window than this narrows its own window (see the module) rather than
# growing: at 5,000 requests a second, 20 s remain, far more than a request spends on the wire.
NONCE_CAPACITY = 100_000
MIN_NONCES, MAX_NONCES = 1_000, 10_000_000
NONCE_FORMAT = re.compile(f"[0-9a-f]{{{NONCE_BYTES * 2}}}")  # what RequestSigner writes, exactly
TIMESTAMP_FORMAT = re.compile("[0-9]{1,15}")


@dataclass(frozen=True, slots=True)
class SignedRequestPolicy:
    """A server's settings for signed requests (the keys above; all off by default)."""

    replay_protection: bool = False
    window_s: int = DEFAULT_WINDOW_S
    require_tls: bool = False
    future_skew_s: int = DEFAULT_FUTURE_SKEW_S
    nonces_per_account: int = NONCE_CAPACITY

    @classmethod
    def from_conf(cls, conf: Mapping[str, str]) -> SignedRequestPolicy:
        """From namesrv.conf or controller.conf (the broker's come through its config schema)."""
        policy = cls(
            *read_keys(
                conf,
                (REPLAY_PROTECTION_KEY, get_bool, False),
                (REPLAY_WINDOW_KEY, get_int, DEFAULT_WINDOW_S),
                (REQUIRE_TLS_KEY, get_bool, False),
                (FUTURE_SKEW_KEY, get_int, DEFAULT_FUTURE_SKEW_S),
                (NONCES_PER_ACCOUNT_KEY, get_int, NONCE_CAPACITY),
            )
        )
        return policy.checked(get_bool(conf, "aclEnable", False), conf.get("tls.server.mode", "disabled"))

    def checked(self, acl_enable: bool, tls_server_mode: str) -> SignedRequestPolicy:
        """Raise ``AclConfigError`` for settings that would protect nothing or refuse everything."""
        if not MIN_WINDOW_S <= self.window_s <= MAX_WINDOW_S:
            bounds = f"{MIN_WINDOW_S} to {MAX_WINDOW_S}"
            raise AclConfigError(f"{REPLAY_WINDOW_KEY}={self.window_s} must be {bounds}")
        if not MIN_FUTURE_SKEW_S <= self.future_skew_s <= self.window_s:
            bounds = f"{MIN_FUTURE_SKEW_S} to {REPLAY_WINDOW_KEY} ({self.window_s})"
            raise AclConfigError(f"{FUTURE_SKEW_KEY}={self.future_skew_s} must be {bounds}")
        if not MIN_NONCES <= self.nonces_per_account <= MAX_NONCES:
            bounds = f"{MIN_NONCES} to {MAX_NONCES}"
            raise AclConfigError(f"{NONCES_PER_ACCOUNT_KEY}={self.nonces_per_account} must be {bounds}")
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

    def __init__(self, capacity: int = NONCE_CAPACITY, floor_ms: int = -1) -> None:
        self.capacity = capacity
        self._seen: dict[str, int] = {}
        self._by_time: list[tuple[int, str]] = []  # a heap: the oldest timestamp first
        # Requests timestamped at or before this are refused: their nonce may have been forgotten.
        self.floor_ms = floor_ms

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
    signatures matched may still not run, or None."""

    def __init__(
        self,
        policy: SignedRequestPolicy,
        capacity: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.policy = policy
        self.capacity = policy.nonces_per_account if capacity is None else capacity
        self.nonces: dict[str, NonceCache] = {}  # by access key
        # A new process remembers no nonce: a request signed before it started could be one it
        # already took before a restart, so it is refused (a client retries with a new one).
        self.started_ms = int(clock() * 1000)
        self._clock = clock

    def problem(
        self,
        fields: Mapping[str, str],
        code: int,
        access_key: str = "",
        signature_v2: Callable[[], str | None] = lambda: None,
    ) -> str | None:
        """``signature_v2``: the validator's check of ``AclSignatureV2`` (None: it matched), run
        after the cheaper checks whose remarks say more (a re-coded request, missing fields)."""
        signed_code = fields.get(REQUEST_CODE)
        if signed_code is not None and signed_code != str(code):
            signed = signed_code[:16]
            return f"the request was signed for request code {signed!r}, not {code} ({REQUEST_CODE})"
        if not self.policy.replay_protection:
            return signature_v2()
        missing = [name for name in REPLAY_FIELDS if not fields.get(name)]
        if missing:
            return (
                f"signed request code {code} lacks {', '.join(missing)}: this server refuses requests "
                f"that could be replays ({REPLAY_PROTECTION_KEY}=true), and RocketMQ's own clients "
                "cannot send these fields"
            )
        return signature_v2() or self._fresh(fields[REQUEST_TIMESTAMP], fields[REQUEST_NONCE], access_key)

    def _fresh(self, stamp: str, nonce: str, access_key: str) -> str | None:
        if TIMESTAMP_FORMAT.fullmatch(stamp) is None:
            return f"{REQUEST_TIMESTAMP}={stamp[:20]!r} is not milliseconds since the epoch"
        if NONCE_FORMAT.fullmatch(nonce) is None:
            return f"{REQUEST_NONCE} is not {NONCE_BYTES * 2} lowercase hex digits, as our clients write it"
        now_ms = int(self._clock() * 1000)
        window_ms = self.policy.window_s * 1000
        behind_ms = now_ms - int(stamp)
        if behind_ms > window_ms:
            return (
                f"{REQUEST_TIMESTAMP} is {behind_ms // 1000} s behind this server's clock, "
                f"outside the replay window of {self.policy.window_s} s ({REPLAY_WINDOW_KEY}): "
                "a replay, or a client whose clock is wrong"
            )
        if -behind_ms > self.policy.future_skew_s * 1000:
            return (
                f"{REQUEST_TIMESTAMP} is {-behind_ms // 1000} s ahead of this server's clock, more than "
                f"{self.policy.future_skew_s} s ({FUTURE_SKEW_KEY}): a client whose clock is wrong"
            )
        cache = self.nonces.get(access_key)
        if cache is None:
            cache = self.nonces[access_key] = NonceCache(self.capacity, self.started_ms)
        return cache.admit(nonce, int(stamp), now_ms - window_ms)


NO_REPLAY_PROTECTION = ReplayGuard(SignedRequestPolicy(), capacity=0)
