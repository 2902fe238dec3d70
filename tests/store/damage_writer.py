"""Child process for the damaged-commit-log tests: fills a store with 1 KiB messages, waits for
the checkpoint to cover them, writes the acknowledged offsets to a file and waits to be killed.

The broker flushes the checkpoint every ``flushIntervalConsumeQueue`` (1 s by default); the child
waits until its flushed position reaches the log's end. After a SIGKILL everything written sits
in the page cache, so the store on disk is exactly what a crash leaves: an ``abort`` file.
"""

import json
import sys
import time
from pathlib import Path

from broker.store.checkpoint import StoreCheckpoint
from broker.store.message_store import MessageStore
from tests.store.conftest import small_config
from tests.store.damage_fixtures import GEOMETRY, fill


def _checkpointed(store_dir: str) -> int:
    """The flushed position in the checkpoint file (the store sets its own copy before writing)."""
    return StoreCheckpoint(Path(store_dir) / "checkpoint").physic_flushed_offset


def main(store_dir: str, offsets_file: str, segments: int) -> None:
    store = MessageStore(store_dir, small_config(**GEOMETRY))
    store.start()
    offsets = fill(store, segments)
    deadline = time.monotonic() + 10
    # The broker's own checkpoint flush (every second) reaches the log's end: the damage the
    # parent makes is then below the recovery point.
    while _checkpointed(store_dir) < store.max_physic_offset and time.monotonic() < deadline:
        time.sleep(0.05)
    with open(offsets_file, "w") as out:
        json.dump(offsets, out)
    covered = _checkpointed(store_dir) >= store.max_physic_offset
    print("ready" if covered else "checkpoint behind", flush=True)
    time.sleep(60)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
