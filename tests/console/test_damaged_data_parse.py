"""The broker page's reading of quarantined commit-log ranges from a broker's runtime info, which
comes off a socket: counts and detail are checked, never trusted."""

import json

from console.services.damaged_data import MAX_SHOWN_RANGES, damaged_data


def _runtime(ranges: int, size: int, detail) -> dict[str, str]:
    text = detail if isinstance(detail, str) else json.dumps(detail)
    return {
        "commitLogDamagedRanges": str(ranges),
        "commitLogDamagedBytes": str(size),
        "commitLogDamagedDetail": text,
    }


def test_a_broker_without_the_figures_has_no_damage():
    data = damaged_data({"putTps": "1.0"})
    assert not data.any and data.ranges == () and data.detail_error == ""


def test_ranges_are_read_with_their_sizes_and_times():
    entry = {"from": 2048, "to": 3148, "segment": "00000000000001048576", "reason": "body CRC"}
    data = damaged_data(_runtime(1, 1100, [entry | {"foundAt": 1_700_000_000_000}]))
    assert data.any and data.range_count == 1 and data.byte_count == 1100
    (only,) = data.ranges
    assert (only.start, only.end, only.size, only.reason) == (2048, 3148, 1100, "body CRC")
    assert only.found_at is not None and only.found_at.year == 2023


def test_unusable_detail_keeps_the_banner_with_its_reason():
    data = damaged_data(_runtime(3, 300, "{not json"))
    assert data.any and data.ranges == () and "not JSON" in data.detail_error
    data = damaged_data(_runtime(2, 10, {"from": 1}))
    assert data.any and "not a list" in data.detail_error


def test_hostile_entries_are_dropped_and_said_so():
    entries = [
        {"from": 10, "to": 5},  # backwards
        {"from": -1, "to": 5},
        {"from": "1", "to": 5},
        {"from": True, "to": 7},  # JSON's true is an int to Python, yet no offset
        "a string",
        {"from": 0, "to": 100, "reason": "x" * 10_000, "segment": "s" * 500, "foundAt": 10**30},
    ]
    data = damaged_data(_runtime(6, 1, entries))
    kept = [(r.start, r.end) for r in data.ranges]
    assert kept == [(0, 100)]
    long_one = next(r for r in data.ranges if r.end == 100)
    assert len(long_one.reason) == 300 and len(long_one.segment) == 64 and long_one.found_at is None
    assert data.detail_error == "some listed ranges were unreadable"


def test_the_list_is_bounded_and_the_rest_counted():
    entries = [{"from": i * 10, "to": i * 10 + 5} for i in range(MAX_SHOWN_RANGES + 30)]
    data = damaged_data(_runtime(MAX_SHOWN_RANGES + 30, 250, entries))
    assert len(data.ranges) == MAX_SHOWN_RANGES and data.hidden_count == 30


def test_garbled_counts_read_as_zero_not_an_error():
    data = damaged_data({"commitLogDamagedRanges": "many", "commitLogDamagedBytes": "-5"})
    assert not data.any and data.byte_count == 0
