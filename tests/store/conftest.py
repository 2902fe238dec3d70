from typing import Any

import pytest

from broker.store.message_store import MessageStore
from broker.store.store_config import MessageStoreConfig


def small_config(**overrides) -> MessageStoreConfig:
    """Small segments so tests roll files over; long timers so nothing runs behind their back."""
    values: dict[str, Any] = {
        "mapped_file_size_commit_log": 256 * 1024,
        "mapped_file_size_consume_queue": 500 * 20,
        "max_hash_slot_num": 4096,
        "max_index_num": 20_000,
        "flush_interval_commit_log": 200,
        "clean_resource_interval": 3_600_000,
    }
    values.update(overrides)
    return MessageStoreConfig(**values)


@pytest.fixture
def open_store(tmp_path):
    """Factory: ``open_store(**config)`` starts a store in tmp_path; all are shut down after."""
    stores = []

    def factory(directory=None, **overrides):
        store = MessageStore(directory or tmp_path / "store", small_config(**overrides))
        store.start()
        stores.append(store)
        return store

    yield factory
    for store in stores:
        store.shutdown()
