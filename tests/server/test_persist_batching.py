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
