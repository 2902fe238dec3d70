"""The replay checks of signed requests in isolation (broker/acl/replay.py): the window on
both sides of the server's clock, nonces forgotten once outside it, and a full nonce cache that
narrows the window instead of growing or letting a replay in. The same checks against real
processes: test_acl_replay.py."""

from __future__ import annotations

import pytest

from broker.acl.replay import NO_REPLAY_PROTECTION, NonceCache, ReplayGuard, SignedRequestPolicy
from broker.common.acl_signature import REQUEST_CODE, REQUEST_NONCE, REQUEST_TIMESTAMP
from broker.common.conf_file import ConfError

NOW_S = 1_800_000_000.0
NOW_MS = int(NOW_S * 1000)


class Clock:
    def __init__(self) -> None:
        self.now = NOW_S

    def __call__(self) -> float:
        return self.now


def n(name: str) -> str:
    """A nonce in the one form taken (24 lowercase hex digits), distinct per ``name``."""
    return name.encode().hex()[:24].rjust(24, "0")


def fields(code: int = 10, stamp_ms: int = NOW_MS, nonce: str = "n1") -> dict[str, str]:
    return {REQUEST_CODE: str(code), REQUEST_TIMESTAMP: str(stamp_ms), REQUEST_NONCE: n(nonce)}


def guard(capacity: int = 100, window_s: int = 60, up_s: float = 3600) -> tuple[ReplayGuard, Clock]:
    """A guard of a server that started ``up_s`` before NOW, and its clock (at NOW)."""
    clock = Clock()
    clock.now -= up_s
    replay = ReplayGuard(SignedRequestPolicy(True, window_s), capacity, clock)
    clock.now = NOW_S
    return replay, clock


def test_a_fresh_request_passes_once():
    replay, _ = guard()
    assert replay.problem(fields(), 10) is None
    assert "seen before" in (replay.problem(fields(), 10) or "")
    assert replay.problem(fields(nonce="n2"), 10) is None


def test_the_signed_code_must_be_the_requests_even_without_protection():
    for replay in (guard()[0], NO_REPLAY_PROTECTION):
        assert "signed for request code '17', not 215" in (replay.problem(fields(17), 215) or "")
    assert NO_REPLAY_PROTECTION.problem({}, 215) is None  # Apache's clients: nothing to check


@pytest.mark.parametrize(
    ("offset_ms", "reason"),
    [(-60_001, "outside the replay window of 60 s"), (15_001, "ahead of this server's clock")],
)
def test_outside_the_window_or_the_future_skew_is_refused(offset_ms, reason):
    replay, _ = guard()
    assert reason in (replay.problem(fields(stamp_ms=NOW_MS + offset_ms), 10) or "")
    assert replay.problem(fields(stamp_ms=NOW_MS + offset_ms // 2), 10) is None


@pytest.mark.parametrize(
    ("changed", "reason"),
    [
        ({REQUEST_TIMESTAMP: "soon"}, "not milliseconds since the epoch"),
        ({REQUEST_TIMESTAMP: "1" * 16}, "not milliseconds since the epoch"),
        ({REQUEST_TIMESTAMP: "\u0661" * 13}, "not milliseconds since the epoch"),  # Arabic-Indic digits
        ({REQUEST_NONCE: "a" * 23}, "not 24 lowercase hex digits"),
        ({REQUEST_NONCE: "a" * 25}, "not 24 lowercase hex digits"),
        ({REQUEST_NONCE: "A" * 24}, "not 24 lowercase hex digits"),
        ({REQUEST_NONCE: "x" * 65}, "not 24 lowercase hex digits"),
        ({REQUEST_NONCE: ""}, "lacks AclNonce"),
    ],
)
def test_malformed_fields_are_refused(changed, reason):
    replay, _ = guard()
    assert reason in (replay.problem({**fields(), **changed}, 10) or "")


def test_nonces_outside_the_window_are_forgotten():
    replay, clock = guard()
    for i in range(50):
        assert replay.problem(fields(nonce=f"n{i}"), 10) is None
    clock.now += 61
    assert replay.problem(fields(stamp_ms=int(clock.now * 1000), nonce="late"), 10) is None
    assert len(replay.nonces[""]) == 1  # the 50 old ones went: their timestamps are refused anyway


def test_a_full_cache_narrows_the_window_and_never_lets_a_replay_in():
    cache = NonceCache(capacity=3)
    oldest = NOW_MS - 60_000
    for i, stamp in enumerate((NOW_MS - 30, NOW_MS - 20, NOW_MS - 10)):
        assert cache.admit(f"n{i}", stamp, oldest) is None
    # A fourth: the oldest nonce (n0, at NOW-30) is forgotten, so nothing at or before NOW-30 may pass.
    assert cache.admit("n3", NOW_MS, oldest) is None
    assert len(cache) == 3 and cache.floor_ms == NOW_MS - 30
    assert "its nonce cache is full" in (cache.admit("n0", NOW_MS - 30, oldest) or "")  # the replay of n0
    assert "its nonce cache is full" in (cache.admit("fresh-but-old", NOW_MS - 40, oldest) or "")
    # Older than every nonce remembered: refused without forgetting one (n1 is still known).
    assert "its nonce cache is full" in (cache.admit("older", NOW_MS - 25, oldest) or "")
    assert "seen before" in (cache.admit("n1", NOW_MS - 20, oldest) or "")
    assert cache.floor_ms == NOW_MS - 30
    # A flood of valid requests keeps the cache at its capacity.
    for i in range(1000):
        cache.admit(f"flood{i}", NOW_MS + i, oldest)
    assert len(cache) == 3


@pytest.mark.parametrize(
    ("conf", "reason"),
    [
        ({"aclEnable": "true", "aclReplayWindowSeconds": "4"}, "must be 5 to 3600"),
        ({"aclEnable": "true", "aclReplayWindowSeconds": "3601"}, "must be 5 to 3600"),
        ({"aclEnable": "true", "aclReplayWindowSeconds": "soon"}, "is not a whole number"),
        ({"aclReplayProtection": "true"}, "needs aclEnable=true"),
        ({"aclEnable": "true", "aclRequireTls": "true"}, "needs tls.server.mode permissive or enforcing"),
        ({"aclEnable": "true", "aclRequireTls": "yes"}, "must be true or false"),
        ({"aclEnable": "true", "aclReplayFutureSkewSeconds": "0"}, "must be 1 to aclReplayWindowSeconds"),
        ({"aclEnable": "true", "aclReplayFutureSkewSeconds": "121"}, "must be 1 to aclReplayWindowSeconds"),
        ({"aclEnable": "true", "aclReplayNoncesPerAccount": "999"}, "must be 1000 to 10000000"),
    ],
)
def test_bad_settings_are_refused_at_load(conf, reason):
    with pytest.raises(ConfError, match=reason):  # AclConfigError is one
        SignedRequestPolicy.from_conf(conf)


def test_good_settings_load():
    conf = {
        "aclEnable": "true",
        "aclReplayProtection": "true",
        "aclRequireTls": "true",
        "tls.server.mode": "permissive",
    }
    assert SignedRequestPolicy.from_conf(conf) == SignedRequestPolicy(True, 120, True)


def test_a_request_signed_before_the_server_started_is_refused():
    """A restart forgets every nonce: what was signed before it may have been taken already."""
    replay, _ = guard(up_s=0)
    assert "it restarted since" in (replay.problem(fields(stamp_ms=NOW_MS - 1), 10) or "")
    assert replay.problem(fields(stamp_ms=NOW_MS + 1), 10) is None


def test_each_account_has_its_own_nonce_room():
    """One account's flood narrows its own window, never another account's (before: one cache
    for all, and a flood stamped ahead refused every account's genuine requests)."""
    replay, _ = guard(capacity=10)
    for i in range(50):
        assert replay.problem(fields(stamp_ms=NOW_MS + 14_000 + i, nonce=f"f{i}"), 10, "flooder") is None
    assert "its nonce cache is full" in (replay.problem(fields(nonce="g"), 10, "flooder") or "")
    assert replay.problem(fields(nonce="g"), 10, "other") is None
    assert len(replay.nonces["flooder"]) == 10
