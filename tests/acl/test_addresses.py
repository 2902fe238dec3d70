"""The white-address grammar of RocketMQ's plain ACL."""

import pytest

from broker.common.acl_addresses import MAX_ITEMS, AddressPattern, AddressPatternError


@pytest.mark.parametrize("pattern", ["*", "*.*.*.*", "*:*:*:*:*:*:*:*"])
def test_match_all(pattern):
    p = AddressPattern(pattern)
    assert p.matches("10.1.2.3") and p.matches("::1") and p.matches("192.168.0.1")


def test_empty_matches_nothing():
    p = AddressPattern("")
    assert p.is_empty and not p.matches("127.0.0.1")
    assert not AddressPattern(None).matches("127.0.0.1")


def test_one_address_ipv4_and_ipv6_any_spelling():
    assert AddressPattern("192.168.0.1").matches("192.168.0.1")
    assert not AddressPattern("192.168.0.1").matches("192.168.0.2")
    v6 = AddressPattern("2001:db8:0:0:0:0:0:1")
    assert v6.matches("2001:db8::1") and v6.matches("[2001:DB8::1]")
    assert not v6.matches("2001:db8::2")


def test_ipv4_mapped_peer_matches_ipv4_patterns():
    assert AddressPattern("127.0.0.*").matches("::ffff:127.0.0.1")


@pytest.mark.parametrize(
    ("pattern", "inside", "outside"),
    [
        ("192.168.0.*", "192.168.0.77", "192.168.1.77"),
        ("192.168.*.*", "192.168.200.1", "192.169.0.1"),
        ("192.168.1-10.*", "192.168.10.3", "192.168.11.3"),
        ("10.0.0.100-200", "10.0.0.150", "10.0.0.99"),
        ("192.168.1.{1,2,3}", "192.168.1.3", "192.168.1.4"),
        ("2001:db8::{1,2}", "2001:db8::2", "2001:db8::3"),
        ("2001:db8:0:0:0:0:0:1-ff", "2001:db8::fe", "2001:db8::100"),
        ("2001:db8:*:*:*:*:*:*", "2001:db8:1::5", "2001:db9::5"),
        ("192.168.1.1,10.0.0.*", "10.0.0.9", "192.168.1.2"),
    ],
)
def test_patterns(pattern, inside, outside):
    p = AddressPattern(pattern)
    assert p.matches(inside), (pattern, inside)
    assert not p.matches(outside), (pattern, outside)


def test_ipv4_pattern_does_not_match_ipv6_peer():
    assert not AddressPattern("192.168.*.*").matches("2001:db8::1")
    assert not AddressPattern("*.*.*.1-2").matches("not-an-address")


@pytest.mark.parametrize(
    "bad",
    [
        "192.168.0",  # three parts
        "192.168.0.256",
        "192.168.0.1.5",
        "192.168.10-1.*",  # backwards
        "192.168.a.*",
        "hostname",
        "192.168.{1,2}.1",  # a choice only as the last part
        "192.168.1.{}",
        "192.168.1.1,,10.0.0.1",
        "1::2::3",
        "2001:db8::10000",
        "-1.0.0.*",
    ],
)
def test_bad_patterns_are_refused_with_the_pattern_named(bad):
    with pytest.raises(AddressPatternError) as caught:
        AddressPattern(bad)
    assert str(caught.value)


def test_bounds():
    with pytest.raises(AddressPatternError, match="more than"):
        AddressPattern(",".join(["10.0.0.1"] * (MAX_ITEMS + 1)))
    with pytest.raises(AddressPatternError, match="longer than"):
        AddressPattern("1" * 5000)
    with pytest.raises(AddressPatternError):
        AddressPattern("10.0.0.{" + ",".join(["1"] * 300) + "}")
