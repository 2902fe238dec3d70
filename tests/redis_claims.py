"""Redis databases for test stacks, one per stack at a time.

A stack on Redis (Celery queues and results, the Channels layer) needs a database no other stack
uses: a worker of another stack sharing it (a parallel test process's) would take this stack's
jobs and fail them against its own PostgreSQL database. Databases 1-15 are handed out through
claims kept in database 0 (``tests:redis-claim:<db>`` holding the claimer's host and pid): a
claim is taken with SET NX, so two stacks starting at once cannot take the same database, and a
claim whose process is gone (a killed run) is taken over. A claimed database is emptied when taken
(what a killed run or a slow-dying worker left there goes) and again when released.
"""

from __future__ import annotations

import os
import random
import socket

REDIS_URL = "redis://127.0.0.1:6379/{db}"
DATABASES = range(1, 16)  # Redis' default `databases` is 16; 0 holds the claims
CLAIM_KEY = "tests:redis-claim:{db}"
# Compare-and-set: the claim moves to the new owner only if it still holds the dead owner's name.
_TAKE_OVER = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('set', KEYS[1], ARGV[2]) return 1 end return 0"
)
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


def _redis(db: int):
    import redis

    return redis.Redis.from_url(REDIS_URL.format(db=db), socket_timeout=5)


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _gone(holder: str) -> bool:
    """Whether the process named by a claim has ended (a claim from another host never is)."""
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def claim_redis_db() -> int:
    """A Redis database of this process alone until ``release_redis_db``, emptied."""
    owner = _owner()
    registry = _redis(0)
    try:
        for db in random.sample(DATABASES, len(DATABASES)):
            key = CLAIM_KEY.format(db=db)
            taken = registry.set(key, owner, nx=True)
            if not taken:
                holder = registry.get(key)
                if holder is not None and _gone(holder.decode()):
                    taken = registry.eval(_TAKE_OVER, 1, key, holder, owner)
            if taken:
                _flush(db)
                return db
    finally:
        registry.close()
    raise RuntimeError("every Redis test database (1-15) is claimed by a running process")


def release_redis_db(db: int) -> None:
    """Empty ``db`` and give up this process's claim on it."""
    _flush(db)
    registry = _redis(0)
    try:
        registry.eval(_RELEASE, 1, CLAIM_KEY.format(db=db), _owner())
    finally:
        registry.close()


def _flush(db: int) -> None:
    client = _redis(db)
    try:
        client.flushdb()
    finally:
        client.close()
