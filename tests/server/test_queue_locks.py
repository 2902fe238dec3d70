"""RebalanceLockManager: one client per queue and group, renewal, expiry, release."""

from broker.server.queue_locks import RebalanceLockManager


def test_locks_expire_unless_renewed():
    now = [0.0]
    locks = RebalanceLockManager(lock_max_live_ms=60_000, clock=lambda: now[0])
    q0, q1 = ("T", "b", 0), ("T", "b", 1)
    assert locks.try_lock_batch("g", [q0, q1], "a") == [q0, q1]
    assert locks.try_lock_batch("g", [q0], "b") == []
    assert locks.try_lock_batch("other-group", [q0], "b") == [q0]  # locks are per group
    now[0] = 50_000
    assert locks.try_lock_batch("g", [q0], "a") == [q0]  # renews q0 only
    now[0] = 70_000
    assert locks.holder("g", q1) is None  # expired
    assert locks.is_locked("g", q0, "a")
    assert locks.try_lock_batch("g", [q0, q1], "b") == [q1]
    locks.unlock_batch("g", [q0], "b")  # b does not hold q0: nothing happens
    assert locks.holder("g", q0) == "a"
    locks.unlock_batch("g", [q0], "a")
    assert locks.try_lock_batch("g", [q0], "b") == [q0]
