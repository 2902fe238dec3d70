"""PersistBatching: a change is written at once, or once when the outermost batch ends."""

from __future__ import annotations

import pytest

from broker.server.persist_batching import PersistBatching


def test_a_change_outside_a_batch_is_written_at_once():
    writes = []
    batching = PersistBatching(lambda: writes.append(1))
    batching.changed()
    batching.changed()
    assert len(writes) == 2


def test_changes_in_nested_batches_are_written_once_at_the_outer_end():
    writes = []
    batching = PersistBatching(lambda: writes.append(1))
    with batching.batch():
        batching.changed()
        with batching.batch():
            batching.changed()
        assert writes == []
        batching.changed()
    assert len(writes) == 1
    with batching.batch():
        pass
    assert len(writes) == 1  # a batch without changes writes nothing


def test_a_failing_batch_still_writes_what_it_changed():
    writes = []
    batching = PersistBatching(lambda: writes.append(1))
    with pytest.raises(RuntimeError), batching.batch():
        batching.changed()
        raise RuntimeError("the request failed half-way")
    assert len(writes) == 1
    batching.changed()
    assert len(writes) == 2  # and later changes are written at once again


def test_changes_on_the_event_loop_are_written_once_soon():
    """Attack finding 2: each send-back for a new group made its group and retry topic, and each
    was written (and fsynced) at once: ~20 ms of blocked loop per group. On the loop, changes made
    in one turn are written once, on the next."""
    import asyncio

    writes = []
    batching = PersistBatching(lambda: writes.append(1))

    async def burst():
        for _ in range(100):
            batching.changed()
        written_in_the_turn = len(writes)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return written_in_the_turn

    assert asyncio.run(burst()) == 0
    assert len(writes) == 1
    with batching.batch():  # a batch inside the loop still writes at its end
        batching.changed()
    assert len(writes) == 2
