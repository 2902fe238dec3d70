"""Parallel test processes (make test TEST_WORKERS=N) do not share what they listen on or queue in:
each draws free ports from a slice of its own, and each stack claims a Redis database of its own,
taken over when the process that claimed it is gone."""

import itertools
import os
import subprocess
import sys

import pytest

from broker.local_cluster import PORT_RANGE_VARIABLE, free_port, free_port_range, port_slice
from tests.redis_claims import CLAIM_KEY, DATABASES, _redis, claim_redis_db, release_redis_db


def test_port_slices_of_parallel_processes_do_not_overlap_and_free_port_keeps_to_its_own(monkeypatch):
    monkeypatch.delenv(PORT_RANGE_VARIABLE, raising=False)
    whole_low, whole_high = free_port_range()
    slices = [tuple(map(int, port_slice(index, 3).partition("@")[0].split("-"))) for index in range(3)]
    assert slices[0][0] == whole_low and slices[-1][1] <= whole_high
    assert all(left[1] <= right[0] for left, right in itertools.pairwise(slices))
    low, high = slices[1]
    monkeypatch.setenv(PORT_RANGE_VARIABLE, f"{low}-{high}")
    assert all(low <= free_port() < high for _ in range(50))
    # The slice's owner draws from its lower half; a process it starts, from the upper half.
    middle = (low + high) // 2
    monkeypatch.setenv(PORT_RANGE_VARIABLE, f"{low}-{high}@{os.getpid()}")
    assert free_port_range() == (low, middle)
    monkeypatch.setenv(PORT_RANGE_VARIABLE, f"{low}-{high}@{os.getpid() + 1}")
    assert free_port_range() == (middle, high)


def test_this_parallel_process_draws_from_its_own_slice(monkeypatch):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        pytest.skip("one process: no slice of its own")
    count = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    given = os.environ[PORT_RANGE_VARIABLE]
    monkeypatch.delenv(PORT_RANGE_VARIABLE)  # the slice is cut from the whole range
    assert given == port_slice(int(worker[2:]), count)


def _holder(db: int) -> str | None:
    registry = _redis(0)
    try:
        value = registry.get(CLAIM_KEY.format(db=db))
        return value.decode() if value is not None else None
    finally:
        registry.close()


def test_a_claimed_database_is_one_process_s_empties_and_is_given_back():
    first = claim_redis_db()
    try:
        _redis(first).set("left:by:the:stack", "1")
        second = claim_redis_db()
        try:
            assert second != first
            assert _holder(first) == _holder(second) and str(os.getpid()) in (_holder(first) or "")
        finally:
            release_redis_db(second)
    finally:
        release_redis_db(first)
    assert _holder(first) is None
    assert _redis(first).dbsize() == 0


def test_a_claim_of_a_process_that_is_gone_is_taken_over_and_its_leftovers_emptied():
    # A process that claims every database it can and dies without releasing them (a killed run).
    script = (
        "from tests.redis_claims import DATABASES, _redis, claim_redis_db\n"
        "claimed = []\n"
        "while True:\n"
        "    try:\n"
        "        claimed.append(claim_redis_db())\n"
        "    except RuntimeError:\n"
        "        break\n"
        "for db in claimed:\n"
        "    _redis(db).set('kombu:leftover', '1')\n"
        "print(' '.join(map(str, claimed)))\n"
    )
    run = [sys.executable, "-c", script]
    done = subprocess.run(run, capture_output=True, text=True, timeout=60, check=True)
    abandoned = [int(db) for db in done.stdout.split()]
    assert abandoned, "the dead process claimed nothing: every database was claimed by live processes"
    dead_owner = _holder(abandoned[0])
    taken: list[int] = []
    try:
        for _ in DATABASES:  # every claim this process can get (the live ones of others stay theirs)
            try:
                db = claim_redis_db()
            except RuntimeError:
                break
            taken.append(db)
            assert _redis(db).dbsize() == 0
        assert set(abandoned) & set(taken)
        assert all(_holder(db) != dead_owner for db in abandoned)
    finally:
        for db in taken:
            release_redis_db(db)
