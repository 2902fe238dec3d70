"""bench/broker_path.py --instructions: the counts are compared with the recorded baseline and a
path costing more than its tolerance above the newest record is flagged (no speed is measured here)."""

import json

from bench import broker_path

BASELINE = {
    "tolerance": 0.03,
    "recorded": [
        {"tree": "old", "instructions_per_message": {"send_a": 150_000}},
        {"tree": "new", "instructions_per_message": {"send_a": 100_000, "send_b": 200_000}},
    ],
}


def test_a_path_above_the_tolerance_over_the_newest_record_is_flagged_and_one_within_it_is_not():
    counts = {"send_a": 103_500, "send_b": 205_000}  # +3.5 % and +2.5 % (send_a: -31 % on "old")
    assert broker_path.regressions(counts, BASELINE) == ["send_a"]
    lines = broker_path.compare_with_baseline(counts, BASELINE)
    flagged = [line for line in lines if "REGRESSION" in line]
    assert len(flagged) == 1 and flagged[0].startswith("send_a")
    assert any(line.startswith("send_b") and "+2.5%" in line for line in lines)
    assert lines[1].split()[:4] == ["send_a", "150,000", "100,000", "103,500"]


def test_a_path_the_baseline_lacks_is_shown_without_a_comparison():
    lines = broker_path.compare_with_baseline({"send_c": 50_000}, BASELINE)
    assert lines[-1].split() == ["send_c", "-", "-", "50,000"]
    assert broker_path.regressions({"send_c": 50_000}, BASELINE) == []


def test_the_committed_baseline_has_every_path_the_bench_counts():
    baseline = json.loads(broker_path.BASELINE.read_text())
    names = {name.removesuffix("_us") for name in broker_path.PATHS}
    assert baseline["recorded"][0]["tree"] == "933369f"  # the reference
    for entry in baseline["recorded"]:
        assert set(entry["instructions_per_message"]) == names, entry["tree"]
        assert all(count > 0 for count in entry["instructions_per_message"].values())
    assert 0 < baseline["tolerance"] < 0.2
